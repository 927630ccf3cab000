/* session.c: trace sessions, their tracers, message rings and rate limits
   (OTP 27 trace sessions; recon_trace's rate limits).

   A session sends each message either to a callback tracer, run in the
   traced thread, or to a per-thread lane: a single-producer single-consumer
   ring the traced thread writes and bpt_session_drain reads. A traced thread
   never waits for a tracer: a full ring drops the message and counts it.

   Lanes are per thread slot (bpt__thread.index), created on the slot's first
   message. Threads beyond BPT_MAX_THREADS share one overflow lane, taken with
   a try-lock: a thread that finds it busy drops its message, so even a signal
   handler that interrupts the lock's holder cannot deadlock. */
#include "internal.h"

typedef struct bpt__lane {
    /* producer side */
    bpt__atomic_u64 head;         /* next slot to write; release-stored after the write */
    bpt__atomic_u64 produced;     /* owner-written counters (bpt__owner_inc_u64) */
    bpt__atomic_u64 dropped;
    bpt__atomic_u64 delivered;    /* callback tracer deliveries */
    bpt__atomic_u64 lost;         /* messages dropped by a nested send (a signal handler
                                     interrupting its own thread's send) or a busy
                                     overflow lane: atomic, as the owner may be mid-update */
    uint64_t unreported_drops;    /* drops not yet announced by a DROPPED message */
    char pad[BPT__CACHE_LINE];
    /* consumer side */
    bpt__atomic_u64 tail;         /* next slot to read; release-stored after the read */
    bpt__atomic_u64 drained;
    uint64_t mask;                /* capacity - 1; capacity 0 for a callback session */
    bpt_msg slots[1];
} bpt__lane;

BPT__SHARED struct bpt__sessions bpt__sessions;   /* session.h */

/* In a fork child only the forking thread runs: a drain lock another thread
   held at the fork is free again. */
BPT__PRIVATE void bpt__sessions_atfork_child(void) {
    int i;
    for (i = 0; i < BPT_MAX_SESSIONS; i++) {
        bpt__session *s = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[i]);
        if (s) pthread_mutex_init(&s->drain_lock, NULL);
    }
}

/* The live session of handle `id`, or NULL. The caller is pinned or holds the permission. */
BPT__PRIVATE bpt__session *bpt__session_lookup(uint64_t id) {
    uint64_t slot = id & 0xffff;
    bpt__session *s;
    if (id == 0 || slot >= BPT_MAX_SESSIONS) return NULL;
    s = (bpt__session *)bpt__load_acquire_ptr(&bpt__sessions.slot[slot]);   /* [S1] */
    if (!s || s->id != id || bpt__load_relaxed_u32(&s->dead)) return NULL;   /* [S2] */
    return s;
}

static bpt__lane *bpt__lane_new(const bpt__session *s) {
    size_t cap = s->tracer ? 0 : s->ring_size;
    size_t size = sizeof(bpt__lane) + (cap ? cap - 1 : 0) * sizeof(bpt_msg);
    bpt__lane *lane = (bpt__lane *)BPT_MALLOC(size);
    if (!lane) return NULL;
    memset(lane, 0, sizeof *lane);
    lane->mask = cap ? cap - 1 : 0;
    return lane;
}

/* The lane of the calling thread's slot, created on first use. Publication
   is a release CAS [R1] (a new lane is fully initialised before others see
   it), paired with the acquire loads in drain, stats and here. */
static bpt__lane *bpt__lane_get(bpt__session *s, const bpt__thread *rec) {
    uint32_t ix = rec->index < BPT_MAX_THREADS ? rec->index : BPT_MAX_THREADS;
    bpt__lane *lane = (bpt__lane *)bpt__load_acquire_ptr(&s->lanes[ix]);   /* [R1] */
    if (lane) return lane;
    lane = bpt__lane_new(s);
    if (!lane) return NULL;
    if (!bpt__cas_ptr(&s->lanes[ix], NULL, lane)) {   /* [R1] */
        BPT_FREE(lane);   /* only the overflow slot has rival producers */
        lane = (bpt__lane *)bpt__load_acquire_ptr(&s->lanes[ix]);
    }
    return lane;
}

/* The header of every message bptrace makes, in one place: its type, the
   thread and process it happened in, when (ns), and the session it goes to
   (0: set per session later). The caller zeroed the message. */
BPT__PRIVATE void bpt__msg_header(bpt_msg *m, unsigned type, uint64_t thread, uint64_t process,
                                  uint64_t ts_ns, uint64_t session) {
    m->type = (uint16_t)type;
    m->thread = thread;
    m->process = process;
    m->ts_ns = ts_ns;
    m->session = session;
}

/* Write one message into a ring lane, announcing earlier drops first. The
   single producer owns head; tail is read with acquire [R3], pairing with
   the consumer's release store after it copied the slot out. */
static void bpt__lane_push(bpt__lane *lane, const bpt_msg *m) {
    uint64_t head = bpt__load_relaxed_u64(&lane->head);
    uint64_t tail = bpt__load_acquire_u64(&lane->tail);   /* [R3] */
    uint64_t need = lane->unreported_drops ? 2 : 1;
    bpt__owner_inc_u64(&lane->produced, 1);
    if (head - tail + need > lane->mask + 1) {
        lane->unreported_drops++;
        bpt__owner_inc_u64(&lane->dropped, 1);
        return;
    }
    if (need == 2) {
        bpt_msg *d = &lane->slots[head++ & lane->mask];
        memset(d, 0, sizeof *d);
        bpt__msg_header(d, BPT_MSG_DROPPED, m->thread, m->process, m->ts_ns, m->session);
        d->value = lane->unreported_drops;
        lane->unreported_drops = 0;
    }
    lane->slots[head & lane->mask] = *m;
    bpt__store_release_u64(&lane->head, head + 1);   /* [R2] pairs with drain's acquire of head */
}

/* Hand one message to the session's tracer. Called pinned, from the hit path.
   A signal handler that hits a breakpoint while its own thread is inside
   this function must not touch the lane (it would write the same ring slot
   and lose the interrupted message): its message is dropped and counted. */
BPT__PRIVATE void bpt__session_send(bpt__session *s, bpt__thread *rec, const bpt_msg *m) {
    bpt__lane *lane;
    int overflow = rec->index >= BPT_MAX_THREADS;
    if (rec->sending) {
        if ((lane = (bpt__lane *)bpt__load_acquire_ptr(&s->lanes[overflow ? BPT_MAX_THREADS : rec->index])) != NULL)   /* [R1] */
            bpt__fetch_add_u64(&lane->lost, 1);
        else   /* the interrupted send is making the lane */
            bpt__fetch_add_u64(&s->lost_laneless, 1);
        return;
    }
    rec->sending = 1;
    bpt__compiler_barrier();   /* [H1] set before the lane is touched, as a signal handler sees it */
    lane = bpt__lane_get(s, rec);
    if (!lane) {               /* out of memory: the message is lost (counted), nothing else is */
        bpt__fetch_add_u64(&s->lost_laneless, 1);
        goto done;
    }
    if (overflow && !bpt__cas_u32(&s->overflow_busy, 0, 1)) {   /* [R4] acquire: the last holder's writes */
        bpt__fetch_add_u64(&lane->lost, 1);
        goto done;
    }
    if (s->tracer) {
        bpt__owner_inc_u64(&lane->produced, 1);
        rec->in_tracer++;
        s->tracer(m, s->tracer_user);
        rec->in_tracer--;
        bpt__owner_inc_u64(&lane->delivered, 1);
    } else {
        bpt__lane_push(lane, m);
    }
    if (overflow) bpt__store_release_u32(&s->overflow_busy, 0);   /* [R4] */
done:
    bpt__compiler_barrier();   /* [H1] */
    rec->sending = 0;
}

/* recon_trace's rule: at most rate_max messages (per window, if one is set);
   past it the session stops tracing and says so once. Returns 1 to send. */
BPT__PRIVATE int bpt__session_admit(bpt__session *s, bpt__thread *rec, uint64_t now) {
    uint64_t n;
    if (bpt__load_relaxed_u32(&s->limit_tripped)) {
        bpt__fetch_add_u64(&s->limited, 1);
        return 0;
    }
    if (!s->rate_max) return 1;
    if (s->rate_window_ns) {
        uint64_t start = bpt__load_relaxed_u64(&s->window_start);
        if (now - start >= s->rate_window_ns && bpt__cas_u64(&s->window_start, start, now))
            bpt__store_relaxed_u64(&s->window_count, 0);
    }
    n = bpt__fetch_add_u64(&s->window_count, 1);
    if (n < s->rate_max) return 1;
    bpt__fetch_add_u64(&s->limited, 1);
    if (bpt__cas_u32(&s->limit_tripped, 0, 1)) {
        bpt_msg m;
        memset(&m, 0, sizeof m);
        bpt__msg_header(&m, BPT_MSG_LIMIT, rec->tid, rec->process, now, s->id);
        m.value = s->rate_max;
        bpt__session_send(s, rec, &m);
    }
    return 0;
}

/* Build a session from its desc (validated by the caller). */
BPT__PRIVATE int bpt__session_alloc(const bpt_session_desc *d, bpt__session **out) {
    bpt__session *s = (bpt__session *)BPT_MALLOC(sizeof *s);
    uint32_t ring = d->ring_size ? d->ring_size : 1024;
    if (!s) return bpt__fail(BPT_ENOMEM, "bpt_session_create: no memory for the session");
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", d->name ? d->name : "session");
    s->tracer = d->tracer;
    s->tracer_user = d->tracer_user;
    /* At least 2: after a drop, the DROPPED notice and the next message
       need two slots, and a ring of one would drop everything from then on. */
    s->ring_size = 2;
    while (s->ring_size < ring) s->ring_size <<= 1;
    s->rate_max = d->rate_max;
    s->rate_window_ns = (uint64_t)d->rate_per_ms * 1000000u;
    bpt__store_relaxed_u64(&s->window_start, bpt__now_ns());
    pthread_mutex_init(&s->drain_lock, NULL);
    *out = s;
    return 0;
}

/* Free a session that no thread can reach any more (after a wait). */
BPT__PRIVATE void bpt__session_free(bpt__session *s) {
    int i;
    for (i = 0; i <= BPT_MAX_THREADS; i++)
        BPT_FREE(bpt__load_relaxed_ptr(&s->lanes[i]));
    pthread_mutex_destroy(&s->drain_lock);
    BPT_FREE(s);
}

/* Pin, then find the session of handle. Returns it, pinned (*rec), or NULL
   after bpt__fail (BPT_ENOMEM: no thread record; BPT_ESESSION), unpinned.
   Pinned, a concurrent destroy frees the session only after the caller
   unpins. */
static bpt__session *bpt__session_pin(bpt_session handle, const char *who, bpt__thread **rec, int *rc) {
    bpt__session *s;
    if (!(*rec = bpt__pin())) {
        *rc = bpt__fail(BPT_ENOMEM, "%s: no memory for the thread record", who);
        return NULL;
    }
    if (!(s = bpt__session_lookup(handle.id))) {
        bpt__unpin(*rec);
        *rc = bpt__fail(BPT_ESESSION, "%s: session %llu is not alive", who, (unsigned long long)handle.id);
    }
    return s;
}

int bpt_session_drain(bpt_session handle, bpt_msg *out, int max) {
    bpt__thread *rec;
    bpt__session *s;
    int n = 0, i, rc;
    if (max < 0 || (max > 0 && !out))
        return bpt__fail(BPT_EINVAL, "bpt_session_drain: out is NULL or max (%d) < 0", max);
    if (!(s = bpt__session_pin(handle, "bpt_session_drain", &rec, &rc))) return rc;
    pthread_mutex_lock(&s->drain_lock);
    for (i = 0; i <= BPT_MAX_THREADS && n < max; i++) {
        bpt__lane *lane = (bpt__lane *)bpt__load_acquire_ptr(&s->lanes[i]);   /* [R1] */
        uint64_t tail, head, drained;
        if (!lane || s->tracer) continue;   /* a callback session's lanes hold no ring */
        tail = bpt__load_relaxed_u64(&lane->tail);
        head = bpt__load_acquire_u64(&lane->head);   /* [R2] pairs with the producer's release of head */
        drained = bpt__load_relaxed_u64(&lane->drained);
        while (tail != head && n < max) {
            out[n] = lane->slots[tail++ & lane->mask];
            drained += out[n++].type != BPT_MSG_DROPPED;   /* notices are not produced messages */
        }
        bpt__store_release_u64(&lane->tail, tail);    /* [R3] pairs with the producer's acquire of tail */
        bpt__store_relaxed_u64(&lane->drained, drained);
    }
    pthread_mutex_unlock(&s->drain_lock);
    bpt__unpin(rec);
    return n;
}

int bpt_session_stats(bpt_session handle, bpt_session_counts *out) {
    bpt__thread *rec;
    bpt__session *s;
    int i, rc;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_session_stats: out is NULL");
    if (!(s = bpt__session_pin(handle, "bpt_session_stats", &rec, &rc))) return rc;
    memset(out, 0, sizeof *out);
    for (i = 0; i <= BPT_MAX_THREADS; i++) {
        bpt__lane *lane = (bpt__lane *)bpt__load_acquire_ptr(&s->lanes[i]);   /* [R1] */
        if (!lane) continue;
        out->produced += bpt__load_relaxed_u64(&lane->produced) + bpt__load_relaxed_u64(&lane->lost);
        out->dropped += bpt__load_relaxed_u64(&lane->dropped) + bpt__load_relaxed_u64(&lane->lost);
        out->delivered += bpt__load_relaxed_u64(&lane->delivered) + bpt__load_relaxed_u64(&lane->drained);
    }
    out->produced += bpt__load_relaxed_u64(&s->lost_laneless);
    out->dropped += bpt__load_relaxed_u64(&s->lost_laneless);
    out->limited = bpt__load_relaxed_u64(&s->limited);
    out->frames_skipped = bpt__load_relaxed_u64(&s->frames_skipped);
    out->limit_tripped = (int)bpt__load_relaxed_u32(&s->limit_tripped);
    memcpy(out->name, s->name, sizeof out->name);
    bpt__unpin(rec);
    return 0;
}
