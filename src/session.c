/* session.c: trace sessions' tracers, per-thread buffers and rate limits
   (OTP 27 trace sessions; LTTng-UST's sub-buffers; recon_trace's limits).

   A session sends each record either to a callback tracer, run in the
   traced thread, to the bptrace USDT probes (a USDT session, probes.c), or
   into the thread's own buffer in that session (its lane): a ring of
   chunks that the thread fills and a drainer empties.

   The producer (the traced thread) owns `head`, the chunk it writes, and its
   write position. It copies a record in with plain stores and publishes it
   with one release store of the chunk's fill [R2]. A full chunk is sealed by
   moving to the next one, published by a release store of `opened` [R2].
   The chunk it moves to is the oldest of the lane's, once it has been read
   (tail, [R3]). When it has not, the lane grows by a chunk, up to
   max_chunks (>>growth), as uftrace's record hands a thread a new buffer
   when its own are full. At the cap the record is dropped and counted. The
   place of the loss is marked in the stream at once, by a DROPPED record in
   the space each chunk keeps at its end, and the losses after it by
   DROPPED records ahead of the next record that fits, each in the context
   (thread and process) that lost them (>>losses). A flight recorder
   never grows: it takes the oldest unread chunk back and overwrites it.

   The consumer (one drainer at a time: drain_lock) owns `tail`, the chunk it
   reads, and its read position. The tail word has a BUSY bit: whoever sets
   it with a CAS owns the read position until it stores the word back
   (release [R3]). The drainer takes it for a read, and hands each chunk it
   has read to the end back at once, by a release store of the next
   chunk's number with the bit still set [R3]: a producer that finds its
   lane full at the cap looks at the tail again before it drops. A flight
   recorder's producer takes the bit to take a chunk back, and never waits
   for it: a busy tail that has not moved means the drainer is reading the
   oldest chunk, so the record is dropped instead. A traced thread never
   waits, in any case.

   Lanes are per thread record (bpt__thread.index), created on a thread's
   first record in the session, in a directory that grows without a limit
   on threads. A signal handler that hits a breakpoint while its own thread
   is inside bpt__session_send must not touch the lane (its record would go
   to the same position): it is dropped and counted. */
#include "internal.h"

enum {
    BPT__TAIL_BUSY = 1,           /* the tail word's owner bit; the chunk index is tail >> 1 */
    BPT__CTX_BYTES = (int)sizeof(bpt__rec) + 16,  /* a context record */
    BPT__DROP_BYTES = (int)sizeof(bpt__rec) + 8,  /* a DROPPED record */
    BPT__KEPT_BYTES = BPT__CTX_BYTES + BPT__DROP_BYTES,   /* kept at a chunk's end for a loss's mark */
    BPT__CHUNK_HEAD = 16          /* bytes in front of a chunk's records */
};

/* One chunk: its header, then chunk_bytes of records. */
typedef struct bpt__chunk {
    bpt__atomic_u32 fill;         /* bytes of whole records; release-stored after each [R2] */
    uint32_t nrec;                /* producer: produced records in it (not context or DROPPED) */
    uint64_t marked;              /* producer: the counts its DROPPED records carry */
} bpt__chunk;


BPT__SHARED struct bpt__sessions bpt__sessions;   /* session.h */

static bpt__lane *bpt__lane_at(bpt__session *s, uint32_t index);
static bpt__chunk *bpt__lane_chunk(const bpt__lane *lane, uint64_t i);
static void bpt__lane_rebuild(bpt__lane *lane, uint64_t next);

/* A fork child's copy of a lane holds the parent's records: they are the
   parent's to drain, not the child's. Mark everything in it read and start
   the counts at 0; the next record opens a chunk of its own (with the
   child's context). Only the forking thread runs, so no producer or drainer
   is mid-way. */
static void bpt__lane_forget(bpt__lane *lane) {
    uint64_t next = lane->cur ? lane->head + 1 : lane->head;
    if (lane->chunks) {   /* the next record opens chunk `next`, where the reader now starts */
        bpt__lane_rebuild(lane, next);
        lane->cur = NULL;
        lane->wp = lane->wend = NULL;   /* >>fits: no chunk */
        lane->head = next;
        lane->nunreported = 0;
        bpt__store_relaxed_u64(&lane->opened, next);   /* nothing open: nothing to read */
    }
    lane->rpos = lane->rrec = 0;
    lane->rmarked = 0;
    lane->unreported_overwritten = 0;
    bpt__store_relaxed_u64(&lane->tail, next << 1);
    bpt__store_relaxed_u64(&lane->written, 0);
    bpt__store_relaxed_u64(&lane->dropped, 0);
    bpt__store_relaxed_u64(&lane->overwritten, 0);
    bpt__store_relaxed_u64(&lane->delivered, 0);
    bpt__store_relaxed_u64(&lane->lost, 0);
    lane->lost_marked = 0;
    bpt__store_relaxed_u64(&lane->drained, 0);
}

/* In a fork child only the forking thread runs: a drain lock another thread
   held at the fork is free again, no drainer sleeps in bpt_session_wait,
   and the buffers start empty (the parent's records stay the parent's).
   A control client's session has lost its drainer (a server thread) for
   good: it becomes an orphan, whose lanes keep the chunks they have and
   drop (counted) what does not fit, instead of growing to max_chunks. */
BPT__PRIVATE void bpt__sessions_atfork_child(void) {
    int i;
    uint32_t k, n = bpt__threads_count();
    for (i = 0; i < BPT_MAX_SESSIONS; i++) {
        bpt__session *s = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[i]);
        bpt__store_relaxed_u32(&bpt__sessions.wake[i].sleepers, 0);
        if (!s) continue;
        pthread_mutex_init(&s->drain_lock, NULL);
        s->orphan = s->served;   /* read by its lanes' growth, in this thread only so far */
        bpt__store_relaxed_u64(&s->lost_laneless, 0);
        for (k = 0; k < n; k++) {
            bpt__lane *lane = bpt__lane_at(s, k);
            if (lane) bpt__lane_forget(lane);
        }
    }
}

/* The live session of handle `id`, or NULL. The caller is pinned or holds the permission. */
BPT__HOT bpt__session *bpt__session_lookup(uint64_t id) {
    uint32_t slot = bpt__session_slot(id);
    bpt__session *s;
    if (id == 0 || slot >= BPT_MAX_SESSIONS) return NULL;
    s = (bpt__session *)bpt__load_acquire_ptr(&bpt__sessions.slot[slot]);   /* [S1] */
    if (!s || s->id != id || bpt__load_relaxed_u32(&s->dead)) return NULL;   /* [S2] */
    return s;
}

/* >>lanes: finding and making a thread's lane */

/* The chunk of number i. The producer's own, or (the drainer) one of
   tail .. opened-1, whose slots stay put while it reads them. */
static bpt__chunk *bpt__lane_chunk(const bpt__lane *lane, uint64_t i) {
    return (bpt__chunk *)bpt__load_relaxed_ptr(&lane->slot[i % lane->cap]);
}

BPT__HOT BPT__INTREGS unsigned char *bpt__chunk_data(bpt__chunk *c) { return (unsigned char *)c + BPT__CHUNK_HEAD; }

static size_t bpt__chunk_stride(uint32_t chunk_bytes) { return BPT__CHUNK_HEAD + (size_t)chunk_bytes; }

/* The bytes in front of a lane's first chunk: the lane, then its slots. */
static size_t bpt__lane_head_bytes(uint32_t cap) {
    return (sizeof(bpt__lane) + (size_t)cap * sizeof(bpt__atomic_ptr) + 15) & ~(size_t)15;
}

/* A lane's own mapping: the lane, its slots, then its first chunks. */
static size_t bpt__lane_bytes(uint32_t chunks, uint32_t cap, uint32_t chunk_bytes) {
    return bpt__lane_head_bytes(cap) + chunks * bpt__chunk_stride(chunk_bytes);
}

/* Whether s keeps records in buffers: not when a callback tracer or the
   USDT probes take them as they come (their lanes hold only counters). */
static int bpt__session_buffered(const bpt__session *s) { return !s->tracer && !s->usdt; }

/* A thread's lane, made by its first record in the session: a hit, so the
   memory is mapped (BPT_HIT_MAP), never malloc'd (port.h says why). Its
   first chunks sit in the slots of numbers -chunks .. -1, so that the
   first record's chunk 0 is reached by the same rule as every other. */
static bpt__lane *bpt__lane_new(const bpt__session *s, uint64_t number) {
    int buffered = bpt__session_buffered(s);
    uint32_t n = buffered ? s->chunks : 0, cap = buffered ? s->max_chunks : 0, i;
    bpt__lane *lane = (bpt__lane *)BPT_HIT_MAP(bpt__lane_bytes(n, cap, s->chunk_bytes));
    unsigned char *first;
    if (!lane) return NULL;
    memset(lane, 0, sizeof *lane);
    lane->number = number;
    lane->chunks = n;
    lane->cap = cap;
    lane->chunk_bytes = s->chunk_bytes;
    lane->slot = (bpt__atomic_ptr *)(void *)(lane + 1);
    lane->anchor_span = bpt__clock_anchor_span();
    bpt__store_relaxed_u32(&lane->budget, n);
    first = (unsigned char *)lane + bpt__lane_head_bytes(cap);
    /* The other slots are read only after a chunk is put there (zero
       from the mapping until then): not touched, so a large cap costs
       address space alone. */
    for (i = 0; i < n; i++)
        bpt__store_relaxed_ptr(&lane->slot[cap - n + i], first + i * bpt__chunk_stride(s->chunk_bytes));
    return lane;
}

/* Unmap a lane and the chunks it grew. */
static void bpt__lane_free(bpt__lane *lane) {
    uint32_t i, nbatch = bpt__load_relaxed_u32(&lane->nbatch);
    for (i = 0; i < nbatch; i++)
        BPT_HIT_UNMAP(lane->batch[i], lane->batch_chunks[i] * bpt__chunk_stride(lane->chunk_bytes));
    BPT_HIT_UNMAP(lane, bpt__lane_bytes(lane->chunks, lane->cap, lane->chunk_bytes));
}

/* The directory entry of thread record `index`, its directory made on
   first use. Publication is a release CAS [R1] (a directory or lane is
   initialised before others see it), paired with the acquire loads here
   and in the readers. Only the overflow of a CAS race is freed. */
static bpt__atomic_ptr *bpt__lane_slot(bpt__session *s, uint32_t index, int make) {
    bpt__atomic_ptr *dir;
    if (index >= BPT__LANES_PER_DIR * BPT__LANE_DIRS) return NULL;
    dir = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&s->lane_dir[index / BPT__LANES_PER_DIR]);   /* [R1] */
    if (!dir && make) {
        bpt__atomic_ptr *fresh = (bpt__atomic_ptr *)BPT_HIT_MAP(BPT__LANES_PER_DIR * sizeof *fresh);
        int i;
        if (!fresh) return NULL;
        for (i = 0; i < BPT__LANES_PER_DIR; i++) bpt__store_relaxed_ptr(&fresh[i], NULL);
        if (bpt__cas_ptr(&s->lane_dir[index / BPT__LANES_PER_DIR], NULL, (void *)fresh)) {   /* [R1] */
            dir = fresh;
        } else {   /* a signal handler on this thread won (its send found no lane) */
            BPT_HIT_UNMAP((void *)fresh, BPT__LANES_PER_DIR * sizeof *fresh);
            dir = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&s->lane_dir[index / BPT__LANES_PER_DIR]);
        }
    }
    return dir ? &dir[index % BPT__LANES_PER_DIR] : NULL;
}

/* The calling thread's lane if it has one: two dependent loads. */
BPT__HOT BPT__INTREGS bpt__lane *bpt__lane_find(bpt__session *s, const bpt__thread *rec) {
    bpt__atomic_ptr *dir;
    if (BPT__LIKELY(rec->index < BPT__LANES_PER_DIR * BPT__LANE_DIRS &&
                    (dir = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&s->lane_dir[rec->index / BPT__LANES_PER_DIR])) != NULL))   /* [R1] */
        return (bpt__lane *)bpt__load_acquire_ptr(&dir[rec->index % BPT__LANES_PER_DIR]);   /* [R1] */
    return NULL;
}

/* The calling thread's lane, made on its first record in the session:
   the thread's documented first use, which allocates. */
static bpt__lane *bpt__lane_get(bpt__session *s, const bpt__thread *rec) {
    bpt__atomic_ptr *slot;
    bpt__lane *lane = bpt__lane_find(s, rec);
    if (lane) return lane;
    if (!(slot = bpt__lane_slot(s, rec->index, 1))) return NULL;
    if ((lane = (bpt__lane *)bpt__load_acquire_ptr(slot)) != NULL) return lane;   /* [R1] */
    BPT_TEST_POINT("lane_get: making the lane");   /* t_laneless_mark raises a signal here */
    if (!(lane = bpt__lane_new(s, rec->index))) return NULL;
    if (!bpt__cas_ptr(slot, NULL, lane)) {   /* [R1] a signal handler's send on this thread made it */
        bpt__lane_free(lane);
        lane = (bpt__lane *)bpt__load_acquire_ptr(slot);
    }
    return lane;
}

/* Every lane of s, in thread record order, for the readers. */
static bpt__lane *bpt__lane_at(bpt__session *s, uint32_t index) {
    bpt__atomic_ptr *slot = bpt__lane_slot(s, index, 0);
    return slot ? (bpt__lane *)bpt__load_acquire_ptr(slot) : NULL;   /* [R1] */
}

/* >>producer: a traced thread puts a record into its lane */

/* A DROPPED record (or another of one word) at p; returns the end. */
static unsigned char *bpt__put_small(unsigned char *p, unsigned type, uint32_t id, uint64_t ticks, uint64_t word) {
    bpt__rec r;
    r.ticks = ticks;
    r.type = (uint8_t)type;
    r.words = 1;
    r.info = 0;
    r.id = id;
    memcpy(p, &r, sizeof r);
    memcpy(p + sizeof r, &word, 8);
    return p + sizeof r + 8;
}

/* A context record at p: the thread and process of the records after it,
   and a new anchor (the counter in its ticks, CLOCK_MONOTONIC in its
   second word). Returns the end. */
static unsigned char *bpt__put_context(bpt__lane *lane, unsigned char *p, uint32_t tid, uint64_t process) {
    bpt__rec r;
    uint64_t ns;
    bpt__clock_anchor(&lane->anchor_tick, &ns);
    r.ticks = lane->anchor_tick;
    r.type = BPT__REC_CONTEXT;
    r.words = 2;
    r.info = 0;
    r.id = tid;
    memcpy(p, &r, sizeof r);
    memcpy(p + sizeof r, &process, 8);
    memcpy(p + sizeof r + 8, &ns, 8);
    return p + sizeof r + 16;
}

/* Has the drainer handed chunk next - budget back, tail t being the
   tail's word? It moves the tail while it reads, the BUSY bit set [R3]:
   a lane found full a moment ago may not be any more, so a producer at
   the cap asks again before it drops (bpt__lane_advance). */
static int bpt__lane_handed_back(bpt__lane *lane, uint64_t next, uint64_t t) {
    return next - (t >> 1) < bpt__load_relaxed_u32(&lane->budget);
}

/* A flight recorder takes back the oldest unread chunk, unless the drainer
   is reading it. Taking the tail's BUSY bit makes the read position ours
   [R3]: what was read of that chunk is not overwritten news, the rest is
   (its records, and the counts of its DROPPED records, not yet read).
   The drainer may have handed a chunk back since the caller found the
   lane full (while it reads, too): then nothing is taken back. Returns 1
   when chunk next - budget may be reused (handed back, or taken back), 0
   when the drainer holds the tail on it. */
static int bpt__lane_take_back(bpt__lane *lane, uint64_t next) {
    uint64_t t = bpt__load_acquire_u64(&lane->tail), lost;   /* [R3] */
    bpt__chunk *c;
    /* Handed back since the caller looked: the drainer's reads of it are
       over (the acquire above); the rest of the one it reads is unread
       news. (The BUSY bit alone was taken for "the drainer is reading the
       oldest chunk", and the record dropped: helper-45, t_drain_handback.) */
    if (bpt__lane_handed_back(lane, next, t)) return 1;
    if ((t & BPT__TAIL_BUSY) || !bpt__cas_u64(&lane->tail, t, t | BPT__TAIL_BUSY)) return 0;
    c = bpt__lane_chunk(lane, t >> 1);
    lost = c->nrec - lane->rrec;
    lane->unreported_overwritten += lost + c->marked - lane->rmarked;
    lane->rpos = lane->rrec = 0;
    lane->rmarked = 0;
    bpt__owner_inc_u64(&lane->overwritten, lost);
    bpt__store_release_u64(&lane->tail, ((t >> 1) + 1) << 1);   /* [R3] the read position, released */
    return 1;
}

/* >>growth: a lane whose drainer falls behind takes one more chunk, up to
   its cap, instead of dropping. Chunks come in batches that double (the
   first as many as the lane starts with), so a lane grown to n chunks made
   about log2(n / chunks) mappings, and a lane whose drainer keeps up never
   grows. A flight recorder's cap is its size. Returns the new chunk, or
   NULL at the cap or when no memory can be mapped (the record is dropped). */
static bpt__chunk *bpt__lane_grow(bpt__lane *lane) {
    uint32_t budget = bpt__load_relaxed_u32(&lane->budget);
    unsigned char *c;
    if (budget >= lane->cap) return NULL;
    if (!lane->spare_left) {
        uint32_t n = budget < lane->cap - budget ? budget : lane->cap - budget;
        void *b;
        uint32_t nbatch = bpt__load_relaxed_u32(&lane->nbatch);
        if (nbatch == BPT__GROW_BATCHES || !(b = BPT_HIT_MAP(n * bpt__chunk_stride(lane->chunk_bytes))))
            return NULL;
        lane->batch[nbatch] = b;
        lane->batch_chunks[nbatch] = n;
        bpt__store_release_u32(&lane->nbatch, nbatch + 1);   /* [R4] the batch, then its count */
        lane->spare = (unsigned char *)b;
        lane->spare_left = n;
    }
    c = lane->spare;
    lane->spare += bpt__chunk_stride(lane->chunk_bytes);
    lane->spare_left--;
    bpt__store_relaxed_u32(&lane->budget, budget + 1);
    BPT_TEST_POINT("lane_grow: a chunk counted, not yet in its slot");   /* t_fork_growth forks here */
    return (bpt__chunk *)(void *)c;
}

/* A fork child's lane, whose thread did not survive the fork and may have
   been anywhere in bpt__lane_advance (a chunk taken and not yet counted,
   or counted and not yet in its slot). Nothing in it is read again: put
   every chunk the lane has mapped, the first ones and every batch's, used
   or not, in the slots of numbers next - n .. next - 1, and let it hold
   all n. A batch counted in nbatch is complete there [R4]: a batch whose
   count the fork missed stays mapped, unused, until the session ends. */
static void bpt__lane_rebuild(bpt__lane *lane, uint64_t next) {
    uint32_t nbatch = bpt__load_acquire_u32(&lane->nbatch), n = lane->chunks, i, k;   /* [R4] */
    size_t stride = bpt__chunk_stride(lane->chunk_bytes);
    unsigned char *first = (unsigned char *)lane + bpt__lane_head_bytes(lane->cap);
    uint64_t at;
    for (i = 0; i < nbatch; i++) n += lane->batch_chunks[i];   /* never past cap: >>growth */
    at = next + lane->cap - n;   /* number next - n, kept positive for the % */
    for (k = 0; k < lane->chunks; k++) bpt__store_relaxed_ptr(&lane->slot[at++ % lane->cap], first + k * stride);
    for (i = 0; i < nbatch; i++)
        for (k = 0; k < lane->batch_chunks[i]; k++)
            bpt__store_relaxed_ptr(&lane->slot[at++ % lane->cap], (unsigned char *)lane->batch[i] + k * stride);
    bpt__store_relaxed_u32(&lane->budget, n);
    lane->spare_left = 0;
}

/* Seal the current chunk and open the next (>>lanes' ring rule): the oldest
   chunk if it has been read, else a new one (growth), else, in a flight
   recorder, the oldest taken back. Returns 0 when the buffer is full. With
   no current chunk (the lane's first record, or a fork child's) it opens
   chunk `head`, where the reader's tail already is. */
static int bpt__lane_advance(bpt__session *s, bpt__lane *lane) {
    int sealing = lane->cur != NULL;
    uint64_t next = sealing ? lane->head + 1 : lane->head;
    uint32_t budget = bpt__load_relaxed_u32(&lane->budget);
    bpt__chunk *c;
    /* [R3] acquire: the drainer's reads of chunks before tail are over. */
    if (bpt__lane_handed_back(lane, next, bpt__load_acquire_u64(&lane->tail))) {
        c = bpt__lane_chunk(lane, next + lane->cap - budget);   /* number next - budget, read */
    } else if (s->orphan || !(c = bpt__lane_grow(lane))) {   /* full, and at the cap (an orphan's: now) */
        BPT_TEST_POINT("lane_advance: full, a flight recorder takes a chunk back");
        if (!(s->flight_recorder ? bpt__lane_take_back(lane, next)
                                 : bpt__lane_handed_back(lane, next, bpt__load_acquire_u64(&lane->tail))))   /* [R3] */
            return 0;
        c = bpt__lane_chunk(lane, next + lane->cap - budget);   /* the one taken back, or one handed back since */
    }
    bpt__store_relaxed_u32(&c->fill, 0);   /* published by the release below */
    c->nrec = 0;
    c->marked = 0;
    bpt__store_relaxed_ptr(&lane->slot[next % lane->cap], c);   /* and this */
    lane->head = next;
    lane->cur = c;
    lane->wp = bpt__chunk_data(c);
    lane->wend = lane->wp + lane->chunk_bytes - BPT__KEPT_BYTES;
    bpt__store_release_u64(&lane->opened, next + 1);   /* [R2] the sealed chunk's last fill, and this one */
    if (sealing) bpt__session_wake(s);   /* a chunk was sealed: a sleeping drainer has work */
    return 1;
}

/* Write a context record at the lane's wp: the records after it are
   thread tid's, in process. */
static void bpt__lane_context(bpt__lane *lane, uint32_t tid, uint64_t process) {
    lane->wp = bpt__put_context(lane, lane->wp, tid, process);
    lane->ctx_tid = tid;
    lane->ctx_process = process;
}

/* Count n records lost in the context of thread tid in process, to be
   marked in front of the next record that fits (>>losses). */
static void bpt__lane_unreported(bpt__lane *lane, uint32_t tid, uint64_t process, uint64_t n) {
    uint32_t i;
    for (i = 0; i < lane->nunreported; i++)
        if (lane->unreported[i].tid == tid && lane->unreported[i].process == process) break;
    if (i == lane->nunreported) {
        if (i == BPT__LOSS_CONTEXTS) {
            i--;   /* no slot left: the last context's count takes them */
        } else {
            lane->unreported[i].tid = tid;
            lane->unreported[i].process = process;
            lane->unreported[i].n = 0;
            lane->nunreported++;
        }
    }
    lane->unreported[i].n += n;
}

/* >>losses: a record is lost: the buffer is full. The first loss since
   the last record that fit is marked at once, with a DROPPED record of 1
   in the space every chunk keeps for it (BPT__KEPT_BYTES), after a context
   record when the chunk's records so far are another context's: the place
   of the loss is in the stream even if this thread never records again.
   The losses after it are counted by their context and marked, with a
   DROPPED record of their number in each context, in front of the next
   record that fits (bpt__lane_prepare). A context is a thread and its
   process: a thread record is reused after its thread exits (another
   thread then writes its lane), and bpt_process_switch changes the
   process, both possibly while the buffer is full. So every DROPPED record
   of a stream stands in the context that lost the records it counts, and
   those of a context add up to its losses, but the ones after its last
   record that fit. Past BPT__LOSS_CONTEXTS contexts losing records before
   one fits, the last one's count takes the rest: the sum stays exact. */
static void bpt__lane_lost(bpt__lane *lane, const bpt__thread *rec, uint64_t ticks) {
    bpt__owner_inc_u64(&lane->dropped, 1);
    if (lane->cur && lane->wp <= lane->wend) {   /* the kept space is free: this is the first */
        if (lane->ctx_tid != rec->tid || lane->ctx_process != rec->process)
            bpt__lane_context(lane, rec->tid, rec->process);
        lane->wp = bpt__put_small(lane->wp, BPT_MSG_DROPPED, 0, ticks, 1);
        lane->cur->marked += 1;
        /* [R2] pairs with the drainer's acquire of fill. */
        bpt__store_release_u32(&lane->cur->fill, (uint32_t)(lane->wp - bpt__chunk_data(lane->cur)));
        return;
    }
    bpt__lane_unreported(lane, rec->tid, rec->process, 1);
}

/* Is the lane's anchor too old for a record read at `ticks` (or younger
   than it: the counter went back)? Unsigned: both in one compare. */
BPT__HOT BPT__INTREGS int bpt__lane_anchor_stale(const bpt__lane *lane, uint64_t ticks) {
    return ticks - lane->anchor_tick > lane->anchor_span;
}

/* The rare cases before a record: a new chunk (the current one is full or
   there is none), which opens with a context record so that it can be read
   on its own; a context record where the thread or its process changed (a
   thread record is reused after its thread exits), or where the anchor is
   stale; the DROPPED records of losses since the last record that fit,
   each in the context that lost them (>>losses). Records that a signal
   handler's send lost while nested in this thread's (`lost`,
   bpt__session_send_nested) are counted here as losses of the thread's
   current context: marked at this record, the thread's first since that
   takes this way (a new chunk, a new context, or a stale anchor: within
   BPT__ANCHOR_US of its records). Returns 0 when the record must be
   dropped: the buffer is full. */
static int bpt__lane_prepare(bpt__session *s, bpt__lane *lane, const bpt__thread *rec, const bpt__rec *r,
                             uint32_t bytes) {
    uint64_t nested = bpt__load_relaxed_u64(&lane->lost) - lane->lost_marked;
    uint32_t i, room = bytes + BPT__CTX_BYTES;
    int fresh = 0;
    if (nested) {
        lane->lost_marked += nested;
        bpt__lane_unreported(lane, rec->tid, rec->process, nested);
    }
    room += lane->nunreported * BPT__KEPT_BYTES;   /* a context and a DROPPED record each */
    if (!lane->cur || lane->wp + room > lane->wend) {
        if (!bpt__lane_advance(s, lane)) {
            bpt__lane_lost(lane, rec, r->ticks);
            /* For a tool attached to bptrace:drop: the session, the thread,
               and the records this thread's buffer lost in all. */
            BPT_PROBE(bptrace, drop, s->id, rec->tid, bpt__load_relaxed_u64(&lane->dropped));
            return 0;
        }
        fresh = 1;   /* a chunk opens with a context record */
    }
    for (i = 0; i < lane->nunreported; i++) {
        const bpt__loss *u = &lane->unreported[i];
        if (fresh || lane->ctx_tid != u->tid || lane->ctx_process != u->process)
            bpt__lane_context(lane, u->tid, u->process);
        lane->wp = bpt__put_small(lane->wp, BPT_MSG_DROPPED, 0, r->ticks, u->n);
        lane->cur->marked += u->n;
        fresh = 0;
    }
    lane->nunreported = 0;
    if (fresh || lane->ctx_tid != rec->tid || lane->ctx_process != rec->process ||
        bpt__lane_anchor_stale(lane, r->ticks))
        bpt__lane_context(lane, rec->tid, rec->process);
    return 1;
}

/* >>fits: does a record of `bytes` go into the current chunk as it is:
   room, the same thread and process, an anchor young enough for its
   `ticks`? The compare of wp covers two more cases: no current chunk (wp
   and wend are then NULL: a lane starts zeroed, and a fork child's is
   reset so), and records lost since the last one that fit
   (bpt__lane_lost counts them in `unreported` only with no chunk, or once
   wp is past wend; bpt__lane_prepare, which counts a nested send's, marks
   them before it returns, or finds the record lost). Integers, not
   pointers: wp may be NULL. */
BPT__HOT BPT__INTREGS int bpt__lane_fits(const bpt__lane *lane, const bpt__thread *rec, uint64_t ticks,
                                         uint32_t bytes) {
    return BPT__LIKELY((uintptr_t)lane->wp + bytes <= (uintptr_t)lane->wend) &&
           BPT__LIKELY(lane->ctx_tid == rec->tid) && BPT__LIKELY(lane->ctx_process == rec->process) &&
           BPT__LIKELY(!bpt__lane_anchor_stale(lane, ticks));
}

/* The thread's lane in s, a session that buffers its records, if a record
   of at most `room` bytes read at `ticks` goes into its current chunk as
   it is (>>fits), else NULL: the common case of a send, for
   bpt__session_send and the call path (site_native.c), which then write
   the record at the lane's wp and publish it. Called with the thread's
   send marked (bpt__send_begin). */
BPT__HOT BPT__INTREGS bpt__lane *bpt__lane_room(bpt__session *s, const bpt__thread *rec, uint64_t ticks,
                                                uint32_t room) {
    bpt__lane *lane = bpt__lane_find(s, rec);
    if (BPT__LIKELY(lane != NULL) && BPT__LIKELY(bpt__lane_fits(lane, rec, ticks, room))) return lane;
    return NULL;
}

/* Publish the record of `bytes` just written at the lane's wp: move wp
   past it, count it, and release the chunk's new fill. */
BPT__HOT BPT__INTREGS void bpt__lane_publish(bpt__lane *lane, uint32_t bytes) {
    bpt__chunk *c = lane->cur;
    lane->wp += bytes;
    c->nrec++;
    bpt__owner_inc_u64(&lane->written, 1);
    /* [R2] pairs with the drainer's acquire of fill. */
    bpt__store_release_u32(&c->fill, (uint32_t)(lane->wp - bpt__chunk_data(c)));
}

/* Copy a record that fits (bpt__lane_fits) into the current chunk, and
   publish it: a copy of 16 to 40 bytes and one release store. */
BPT__HOT void bpt__lane_copy(bpt__lane *lane, const bpt__rec *r, uint32_t bytes) {
    unsigned char *p = lane->wp;
    /* Fixed-size copies (inlined), not one of variable size: gcc makes that
       a rep movsq, whose start-up was a quarter of this function's time for
       a call record of two arguments (3 words; perf, bench_overhead call). */
    memcpy(p, r, sizeof *r);
    switch (r->words) {
    case 0: break;
    case 1: memcpy(p + sizeof *r, r + 1, 8); break;
    case 2: memcpy(p + sizeof *r, r + 1, 16); break;
    case 3: memcpy(p + sizeof *r, r + 1, 24); break;
    case 4: memcpy(p + sizeof *r, r + 1, 32); break;
    default: memcpy(p + sizeof *r, r + 1, 8u * r->words);
    }
    bpt__lane_publish(lane, bytes);
}

/* Put one record into the lane: open a chunk, mark losses and contexts
   first where needed (bpt__lane_prepare), or drop it when the buffer is
   full. */
static void bpt__lane_put(bpt__session *s, bpt__lane *lane, const bpt__thread *rec, const bpt__rec *r) {
    uint32_t bytes = bpt__rec_bytes(r);
    if (!bpt__lane_fits(lane, rec, r->ticks, bytes) && !bpt__lane_prepare(s, lane, rec, r, bytes)) return;
    bpt__lane_copy(lane, r, bytes);
}

/* A callback tracer gets the record as a message, in the traced thread. */
static void bpt__tracer_call(bpt__session *s, bpt__lane *lane, bpt__thread *rec, const bpt__rec *r) {
    bpt__decoder d;
    bpt__stream st;
    bpt_msg m;
    bpt__decoder_live(&d, s->id);
    if (bpt__lane_anchor_stale(lane, r->ticks)) bpt__clock_anchor(&lane->anchor_tick, &lane->anchor_ns);
    bpt__stream_init(&st);
    st.tid = rec->tid;
    st.process = rec->process;
    st.anchored = 1;
    st.anchor_tick = lane->anchor_tick;
    st.anchor_ns = lane->anchor_ns;
    bpt__owner_inc_u64(&lane->written, 1);
    if (!bpt__rec_decode(&d, &st, r, &m)) return;
    rec->in_tracer++;
    s->tracer(&m, s->tracer_user);
    rec->in_tracer--;
    bpt__owner_inc_u64(&lane->delivered, 1);
}

/* A USDT session hands the record to its probe (probes.c), in the traced
   thread; the probe fires only while a tool is attached to it. */
static void bpt__usdt_call(bpt__session *s, bpt__lane *lane, bpt__thread *rec, const bpt__rec *r) {
    bpt__owner_inc_u64(&lane->written, 1);
    bpt__probe_event(s, rec, r);
    bpt__owner_inc_u64(&lane->delivered, 1);
}

/* A signal handler's send nested on its own thread's send: the lane may
   be mid-update, so the record is lost, and counted in the lane's `lost`,
   which the thread's next record marks (bpt__lane_prepare). With no lane
   yet (the interrupted send may be making it) the handler makes it: the
   interrupted send's CAS then finds it [R1] and frees its own, and the
   loss is marked as any other. Only with no memory for a lane is it
   counted in lost_laneless, unmarked (no stream to mark it in). */
BPT__NOINLINE void bpt__session_send_nested(bpt__session *s, const bpt__thread *rec) {
    bpt__lane *lane = bpt__lane_get(s, rec);
    if (lane)
        bpt__fetch_add_u64(&lane->lost, 1);
    else
        bpt__fetch_add_u64(&s->lost_laneless, 1);
}

/* Everything but a record that fits the thread's current chunk: the
   thread's first record in the session (its lane is made), a callback
   tracer, the USDT probes, a new chunk, a full buffer. Out of line, so
   that the common case below saves no registers for it. */
BPT__NOINLINE void bpt__session_send_slow(bpt__session *s, bpt__thread *rec, const bpt__rec *r) {
    bpt__lane *lane = bpt__lane_get(s, rec);
    if (!lane)   /* out of memory: the record is lost (counted), nothing else is */
        bpt__fetch_add_u64(&s->lost_laneless, 1);
    else if (s->tracer)
        bpt__tracer_call(s, lane, rec, r);
    else if (s->usdt)
        bpt__usdt_call(s, lane, rec, r);
    else
        bpt__lane_put(s, lane, rec, r);
}

/* [H1] A thread's send is marked while it touches its lane, so that a
   signal handler's send nested on it leaves the lane alone (its record is
   lost, and counted: bpt__session_send_nested). bpt__send_begin returns 0,
   marking nothing, when a send is open already. */
BPT__HOT BPT__INTREGS int bpt__send_begin(bpt__thread *rec) {
    if (BPT__UNLIKELY(rec->sending)) return 0;
    rec->sending = 1;
    bpt__compiler_barrier();   /* [H1] set before the lane is touched, as a signal handler sees it */
    return 1;
}
BPT__HOT BPT__INTREGS void bpt__send_end(bpt__thread *rec) {
    bpt__compiler_barrier();   /* [H1] cleared after the lane's last store */
    rec->sending = 0;
}

/* Hand one record to the session's tracer. Called pinned, from the hit
   path. The common case, inline: the thread's lane exists, the session
   buffers its records, and the record fits the current chunk. */
BPT__PRIVATE void bpt__session_send(bpt__session *s, bpt__thread *rec, const bpt__rec *r) {
    bpt__lane *lane;
    uint32_t bytes = bpt__rec_bytes(r);
    if (!bpt__send_begin(rec)) {   /* a signal handler nested on this thread's send */
        bpt__session_send_nested(s, rec);
        return;
    }
    if (BPT__LIKELY(s->buffered) && (lane = bpt__lane_room(s, rec, r->ticks, bytes)) != NULL)
        bpt__lane_copy(lane, r, bytes);
    else
        bpt__session_send_slow(s, rec, r);
    bpt__send_end(rec);
}

/* Count a message against the rate limit; returns the count before it.
   Without a window: one more of all. With one: one more in the current
   window. The windows are numbered from window_base, and the word holds
   the current one's number (its low 32 bits) and count (saturating), so
   that one CAS both moves to a later window, counting from 0, and counts:
   a message never counts in a window that is over, nor is wiped from the
   current one. (A CAS of the start, then a store of the count, let a
   message between the two add to the old count, or be wiped: found by
   review; t_rate_window.) Only a later number starts a window: a message
   whose number is behind (its core's clock a little behind another's, or
   read before another message moved the window on) counts in the current
   one, compared by the signed difference. */
static uint64_t bpt__rate_count(bpt__session *s) {
    int64_t since;
    uint32_t at;
    uint64_t w;
    if (!s->rate_window_ns) return bpt__fetch_add_u64(&s->window, 1);
    since = (int64_t)(bpt__now_ns() - s->window_base);   /* < 0: this clock is behind the creator's */
    at = since > 0 ? (uint32_t)((uint64_t)since / s->rate_window_ns) : 0;
    for (w = bpt__load_relaxed_u64(&s->window);; w = bpt__load_relaxed_u64(&s->window)) {
        uint32_t cur = (uint32_t)(w >> 32), n = (uint32_t)w;
        if ((int32_t)(at - cur) > 0) {   /* a later window */
            cur = at;
            n = 0;
        }
        BPT_TEST_POINT("admit: window read, not yet counted");   /* t_rate_window */
        if (bpt__cas_u64(&s->window, w, (uint64_t)cur << 32 | (n + (n != UINT32_MAX)))) return n;
    }
}

/* recon_trace's rule: at most rate_max messages (per window, if one is set);
   past it the session stops tracing and says so once: the message whose
   count passed rate_max trips it. Returns 1 to send. */
static int bpt__session_admit_limited(bpt__session *s, bpt__thread *rec) {
    if (bpt__load_relaxed_u32(&s->limit_tripped)) {
        bpt__fetch_add_u64(&s->limited, 1);
        return 0;
    }
    if (bpt__rate_count(s) < s->rate_max) return 1;
    bpt__fetch_add_u64(&s->limited, 1);
    if (bpt__cas_u32(&s->limit_tripped, 0, 1)) {
        bpt__recbuf b;
        b.h.ticks = bpt__now_ticks();
        b.h.type = BPT_MSG_LIMIT;
        b.h.words = 1;
        b.h.info = 0;
        b.h.id = 0;
        b.w[0] = s->rate_max;
        bpt__session_send(s, rec, &b.h);
    }
    return 0;
}

/* The common case inline: no limit set. */
BPT__HOT int bpt__session_admit(bpt__session *s, bpt__thread *rec) {
    return s->rate_max ? bpt__session_admit_limited(s, rec) : 1;
}

/* >>wait: a drainer sleeps until a chunk is sealed (bpt_session_wait), as
   LTTng-UST's consumer wakes at a sub-buffer switch instead of polling.

   [W1] The producer counts the seal, then looks for sleepers; the drainer
   counts itself a sleeper, then looks for sealed chunks and sleeps only
   while the count is the one it read. Each side's store comes before its
   load, with a full fence between (Dekker's pattern): at least one of the
   two sees the other's store. Either the producer sees the sleeper and
   wakes it, or the drainer sees the sealed chunk (or futex_wait finds the
   count changed) and does not sleep. The seal costs a locked add and a
   fence once per chunk, and a futex wake only when a drainer sleeps.
   A destroy counts and wakes too, after it set dead [S2]: a drainer whose
   count (acquire) holds the destroy's sees dead, and does not sleep. The
   words are the slot's (bpt__sessions.wake), which outlive the session:
   the drainer sleeps unpinned, while a destroy may free the session. */
BPT__PRIVATE void bpt__session_wake(bpt__session *s) {
    bpt__wake_words *w = &bpt__sessions.wake[bpt__session_slot(s->id)];
    bpt__fetch_add_u32(&w->sealed, 1);
    bpt__fence_seq_cst();   /* [W1] the count before the look for sleepers */
    if (bpt__load_relaxed_u32(&w->sleepers)) bpt__futex_wake(&w->sealed, INT_MAX);
}

/* Does a lane of s hold a sealed chunk not yet read? */
static int bpt__session_sealed_waiting(bpt__session *s) {
    uint32_t i, n = bpt__threads_count();
    for (i = 0; i < n; i++) {
        bpt__lane *lane = bpt__lane_at(s, i);
        if (lane && lane->chunks &&   /* a chunk before the open one is unread */
            bpt__load_acquire_u64(&lane->opened) > (bpt__load_acquire_u64(&lane->tail) >> 1) + 1)   /* [R2] [R3] */
            return 1;
    }
    return 0;
}

int bpt_session_wait(bpt_session handle, uint32_t timeout_us) {
    bpt__thread *self = bpt__thread_self_or_null(), *rec;
    bpt__session *s;
    bpt__wake_words *w;
    uint32_t seen;
    int rc, ready, gone;
    if (self && self->in_tracer) return bpt__fail(BPT_EDEADLK, "bpt_session_wait: called from inside a tracer callback");
    if (bpt__thread_pinned(self))
        return bpt__fail(BPT_EDEADLK, "bpt_session_wait: called while pinned: no thread progress while it sleeps");
    if (!(s = bpt__session_pin(handle, "bpt_session_wait", &rec, &rc))) return rc;
    if (!bpt__session_buffered(s)) {
        bpt__unpin(rec);
        return bpt__fail(BPT_EINVAL, "bpt_session_wait: session %llu has a callback tracer or sends to "
                         "USDT probes: nothing to drain",
                         (unsigned long long)handle.id);
    }
    w = &bpt__sessions.wake[bpt__session_slot(s->id)];   /* the slot's: it outlives s */
    seen = bpt__load_acquire_u32(&w->sealed);   /* [W1] pairs with the destroy's count, after its dead */
    bpt__fetch_add_u32(&w->sleepers, 1);
    bpt__fence_seq_cst();   /* [W1] counted a sleeper before the look for sealed chunks */
    ready = bpt__session_sealed_waiting(s);
    gone = (int)bpt__load_relaxed_u32(&s->dead);   /* a destroy counted in seen: no sleep */
    /* Unpinned while asleep: a destroy may free s meanwhile. The sleep is
       on the slot's word, never freed, which the destroy counts and wakes;
       a wake from a later session of the slot is a spurious one. (It was
       s's own: a destroy in this gap freed it before the sleep, which read
       freed memory, and slept its whole timeout where a new session had
       zeroed it: found by review; t_session_wait_destroy.) */
    bpt__unpin(rec);
    BPT_TEST_POINT("wait: unpinned, not yet asleep");   /* t_session_wait_destroy destroys here */
    if (!ready && !gone && timeout_us) {
        bpt__block_begin(rec);
        bpt__futex_wait_us(&w->sealed, seen, timeout_us);
        bpt__block_end(rec);
    }
    bpt__fetch_add_u32(&w->sleepers, (uint32_t)-1);   /* whether or not s lives on */
    /* s again only if it is still the live session of handle. */
    if (!(s = bpt__session_pin(handle, "bpt_session_wait", &rec, &rc))) return rc;
    ready = ready || bpt__session_sealed_waiting(s);
    bpt__unpin(rec);
    return ready;
}

/* >>consumer: the drainer reads lanes */

/* A flight recorder's overwritten records (unreported_overwritten),
   announced with rd->gap where the reader resumes, in chunk c whose fill
   is `fill`: after the context record that opens c when the reader stands
   at its start (every chunk opens with one), so that the notice stands in
   the thread and process the stream resumes with, at that record's time,
   not in the decoding state of whatever was read last (nothing, at a
   drain's first read of a wrapped lane). Nothing yet when c is still
   empty. Returns 0 when the reader is full. */
static int bpt__lane_read_gap(bpt__lane *lane, bpt__lane_reader *rd, bpt__chunk *c, uint32_t fill) {
    const bpt__rec *r = (const bpt__rec *)(const void *)bpt__chunk_data(c);
    if (lane->rpos == 0) {
        uint32_t bytes;
        if (fill == 0) return 1;   /* c is opened, its first records not yet published: next time */
        if (r->type == BPT__REC_CONTEXT) {
            bytes = bpt__rec_bytes(r);
            if (rd->take(rd, lane, (const unsigned char *)r, bytes) < bytes) return 0;
            lane->rpos = bytes;
            lane->rctx = 0;
            lane->last_ticks = r->ticks;
        }
    }
    if (!rd->gap(rd, lane, lane->unreported_overwritten, lane->last_ticks)) return 0;
    lane->unreported_overwritten = 0;
    return 1;
}

/* rd takes up the lane where another reader stopped (lane->rreader): a
   second trace file after the first (rotation, or a new writer after
   BPT_EIO), or a drain after a write, or a write after a drain. Past
   chunk c's start, the context record in effect (the thread, process and
   clock anchor of the records at rpos) went to the other reader's stream,
   and this one would read the records as thread 0, process 0, stamped
   from the calibration (found by review; t_tracefile_rotate). So rd gets
   a copy of it first: the last context record read in c, at rctx (every
   chunk opens with one, bpt__lane_prepare, so a read past c's start has
   read one). c stays put while the reader holds the tail's BUSY bit
   [R3]. At a chunk's start rd reads the chunk's own. Returns 0 when rd is
   full (nothing changed: the next read gives it again). */
static int bpt__lane_read_resume(bpt__lane *lane, bpt__lane_reader *rd, bpt__chunk *c) {
    if (lane->rreader != rd->id && lane->rpos > 0) {
        const bpt__rec *r = (const bpt__rec *)(const void *)(bpt__chunk_data(c) + lane->rctx);
        uint32_t bytes = bpt__rec_bytes(r);
        if (rd->take(rd, lane, (const unsigned char *)r, bytes) < bytes) return 0;
    }
    lane->rreader = rd->id;
    return 1;
}

/* Count n records read from lane, in the lane and in the reader. */
static void bpt__lane_read_count(bpt__lane *lane, bpt__lane_reader *rd, uint64_t n) {
    bpt__owner_inc_u64(&lane->drained, n);   /* one drainer at a time (drain_lock) */
    rd->records += n;
}

/* Read lane's undrained records: rd->take gets each run of whole records,
   in order, and says how many bytes of it it used (it may stop short: its
   room is full); rd->gap gets the records a flight recorder took back
   before the next run (bpt__lane_read_gap). Holds the tail's BUSY bit
   throughout; a flight recorder's producer that finds it busy, and not
   moved, drops rather than waits. Returns 0, or 1 when the reader is full.
   The read ends at the chunks opened when it began: a producer that
   writes as fast as the reader reads would otherwise keep it in this
   lane, and the other lanes, unread, would grow. And each chunk read to
   its end is handed back at once, by a release of the tail that keeps the
   BUSY bit [R3]: the producer reuses it while the read goes on. (The tail
   moved only when the read ended: a long read, e.g. of a lane that had
   grown while the drainer waited for a CPU, left the producer no chunk to
   reuse, so its lane grew by the whole read, every new chunk a page fault
   on the hot path: bench section 2's buffers grew to 47 MiB, and its run
   took 1.4x as long. t_drain_handback.) */
static int bpt__lane_read(bpt__lane *lane, bpt__lane_reader *rd) {
    uint64_t t = bpt__load_acquire_u64(&lane->tail), i, end, drained = 0;   /* [R3] */
    int full = 0;
    if ((t & BPT__TAIL_BUSY) || !bpt__cas_u64(&lane->tail, t, t | BPT__TAIL_BUSY))
        return 0;   /* a flight recorder is taking its oldest chunk back: next time */
    i = t >> 1;
    end = bpt__load_acquire_u64(&lane->opened);   /* [R2] first: a chunk sealed by then has its final fill */
    for (;;) {
        bpt__chunk *c;
        uint32_t fill;
        if (i >= end) break;   /* no chunk opened since the last read (or none yet) */
        c = bpt__lane_chunk(lane, i);
        fill = bpt__load_acquire_u32(&c->fill);   /* [R2] pairs with the producer's release */
        if ((lane->unreported_overwritten || lane->rpos < fill) && !bpt__lane_read_resume(lane, rd, c))
            goto out_full;   /* only with something to read: a lane with nothing new stays the other's */
        if (lane->unreported_overwritten && !bpt__lane_read_gap(lane, rd, c, fill)) goto out_full;
        if (lane->rpos < fill) {
            const unsigned char *p = bpt__chunk_data(c) + lane->rpos, *q;
            uint32_t used = rd->take(rd, lane, p, fill - lane->rpos);
            for (q = p; q < p + used; q += bpt__rec_bytes((const bpt__rec *)(const void *)q)) {
                const bpt__rec *r = (const bpt__rec *)(const void *)q;
                if (r->type == BPT_MSG_DROPPED) {   /* counted in c->marked: read, not overwritten news */
                    uint64_t n;
                    memcpy(&n, r + 1, 8);
                    lane->rmarked += n;
                } else if (r->type == BPT__REC_CONTEXT) {
                    lane->rctx = (uint32_t)(q - bpt__chunk_data(c));   /* in effect from here on */
                } else {
                    lane->rrec++;
                    drained++;
                }
                lane->last_ticks = r->ticks;
            }
            lane->rpos += used;
            if (lane->rpos < fill) goto out_full;
        }
        if (i + 1 >= end) break;   /* the last chunk opened when the read began: up to its fill */
        i++;
        lane->rpos = lane->rrec = 0;
        lane->rmarked = 0;
        bpt__lane_read_count(lane, rd, drained);
        drained = 0;
        bpt__store_release_u64(&lane->tail, i << 1 | BPT__TAIL_BUSY);   /* [R3] chunk i - 1 is read: reusable */
        BPT_TEST_POINT("lane_read: a chunk handed back, the read goes on");   /* t_drain_handback */
    }
    goto out;
out_full:
    full = 1;
out:
    bpt__lane_read_count(lane, rd, drained);
    bpt__store_release_u64(&lane->tail, i << 1);   /* [R3] pairs with the producer's acquire of tail */
    return full;
}

/* Every lane of s through rd, under the drain lock (the caller holds it),
   in turn: a read that fills rd stops in some lane, and the next read
   starts at the lane after it. Each read started at lane 0, so a thread
   whose records filled every read starved the others, whose buffers
   filled and dropped while the drainer kept up (found by review;
   t_drain_turns). */
BPT__PRIVATE void bpt__session_read(bpt__session *s, bpt__lane_reader *rd) {
    uint32_t k, n = bpt__threads_count(), start = s->read_next < n ? s->read_next : 0;
    if (!bpt__session_buffered(s)) return;   /* a callback or USDT session's lanes hold no records */
    for (k = 0; k < n; k++) {
        uint32_t i = start + k < n ? start + k : start + k - n;
        bpt__lane *lane = bpt__lane_at(s, i);
        if (lane && bpt__lane_read(lane, rd)) {
            s->read_next = i + 1;   /* its rest comes after the other lanes' */
            return;
        }
    }
}

BPT__PRIVATE uint64_t bpt__lane_number(const bpt__lane *lane) { return lane->number; }
BPT__PRIVATE bpt__stream *bpt__lane_stream(bpt__lane *lane) { return &lane->stream; }

/* A lane's cap: desc's max_chunks, or by default what 64 MiB holds
   (never fewer than it starts with, never more than 65536); a flight
   recorder's buffer does not grow. */
static uint32_t bpt__session_max_chunks(const bpt_session_desc *d, uint32_t chunks, uint32_t chunk_bytes) {
    uint32_t grown = (64u << 20) / chunk_bytes;
    if (d->flight_recorder) return chunks;
    if (d->max_chunks) return d->max_chunks;
    return grown < chunks ? chunks : grown > 65536 ? 65536 : grown;
}

/* Build a session from its desc (validated by the caller). */
BPT__PRIVATE int bpt__session_alloc(const bpt_session_desc *d, bpt__session **out) {
    bpt__session *s = (bpt__session *)BPT_MALLOC(sizeof *s);
    int i;
    if (!s) return bpt__fail(BPT_ENOMEM, "bpt_session_create: no memory for the session");
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", d->name ? d->name : "session");
    s->tracer = d->tracer;
    s->tracer_user = d->tracer_user;
    s->usdt = d->usdt != 0;
    s->buffered = !s->tracer && !s->usdt;
    s->chunk_bytes = d->chunk_bytes ? d->chunk_bytes : 16384;
    s->chunks = d->chunks ? d->chunks : 16;
    s->flight_recorder = d->flight_recorder != 0;
    s->max_chunks = bpt__session_max_chunks(d, s->chunks, s->chunk_bytes);
    s->time_cpu = d->time_cpu != 0;
    s->rate_max = d->rate_max;
    s->rate_window_ns = (uint64_t)d->rate_per_ms * 1000000u;
    for (i = 0; i < BPT__LANE_DIRS; i++) bpt__store_relaxed_ptr(&s->lane_dir[i], NULL);
    s->window_base = bpt__now_ns();
    pthread_mutex_init(&s->drain_lock, NULL);
    *out = s;
    return 0;
}

/* Free a session that no thread can reach any more (after a wait). */
BPT__PRIVATE void bpt__session_free(bpt__session *s) {
    int i, k;
    for (i = 0; i < BPT__LANE_DIRS; i++) {
        bpt__atomic_ptr *dir = (bpt__atomic_ptr *)bpt__load_relaxed_ptr(&s->lane_dir[i]);
        if (!dir) continue;
        for (k = 0; k < BPT__LANES_PER_DIR; k++) {
            bpt__lane *lane = (bpt__lane *)bpt__load_relaxed_ptr(&dir[k]);
            if (lane) bpt__lane_free(lane);
        }
        BPT_HIT_UNMAP((void *)dir, BPT__LANES_PER_DIR * sizeof *dir);
    }
    pthread_mutex_destroy(&s->drain_lock);
    BPT_FREE(s);
}

/* Pin, then find the session of handle. Returns it, pinned (*rec), or NULL
   after bpt__fail (BPT_ENOMEM: no thread record; BPT_ESESSION), unpinned.
   Pinned, a concurrent destroy frees the session only after the caller
   unpins. */
BPT__PRIVATE bpt__session *bpt__session_pin(bpt_session handle, const char *who, bpt__thread **rec, int *rc) {
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

/* The drain's reader: decode records into the caller's messages. */
typedef struct bpt__drain_reader {
    bpt__lane_reader rd;
    bpt__decoder dec;
    bpt_msg *out;
    int n, max;
} bpt__drain_reader;

static uint32_t bpt__drain_take(bpt__lane_reader *rd, bpt__lane *lane, const unsigned char *p, uint32_t bytes) {
    bpt__drain_reader *dr = (bpt__drain_reader *)(void *)rd;
    uint32_t used = 0;
    while (used < bytes) {
        const bpt__rec *r = (const bpt__rec *)(const void *)(p + used);
        if (r->type != BPT__REC_CONTEXT && dr->n == dr->max) break;
        dr->n += bpt__rec_decode(&dr->dec, bpt__lane_stream(lane), r, &dr->out[dr->n]);
        used += bpt__rec_bytes(r);
    }
    return used;
}

static int bpt__drain_gap(bpt__lane_reader *rd, bpt__lane *lane, uint64_t count, uint64_t ticks) {
    bpt__drain_reader *dr = (bpt__drain_reader *)(void *)rd;
    bpt__stream *st = bpt__lane_stream(lane);
    bpt_msg *m;
    if (dr->n == dr->max) return 0;
    m = &dr->out[dr->n++];
    memset(m, 0, sizeof *m);
    bpt__msg_header(m, BPT_MSG_DROPPED, st->tid, st->process, bpt__stream_ns(&dr->dec, st, ticks), dr->dec.session);
    m->value = count;
    return 1;
}

int bpt_session_drain(bpt_session handle, bpt_msg *out, int max) {
    bpt__drain_reader dr;
    bpt__thread *rec;
    bpt__session *s;
    int rc;
    if (max < 0 || (max > 0 && !out))
        return bpt__fail(BPT_EINVAL, "bpt_session_drain: out is NULL or max (%d) < 0", max);
    if (!(s = bpt__session_pin(handle, "bpt_session_drain", &rec, &rc))) return rc;
    dr.rd.take = bpt__drain_take;
    dr.rd.gap = bpt__drain_gap;
    dr.rd.records = 0;
    dr.rd.id = BPT__READER_DRAIN;   /* every drain decodes into the lanes' own streams */
    bpt__decoder_live(&dr.dec, s->id);
    dr.out = out;
    dr.n = 0;
    dr.max = max;
    pthread_mutex_lock(&s->drain_lock);
    if (max > 0) bpt__session_read(s, &dr.rd);
    pthread_mutex_unlock(&s->drain_lock);
    bpt__unpin(rec);
    return dr.n;
}

int bpt_session_stats(bpt_session handle, bpt_session_counts *out) {
    bpt__thread *rec;
    bpt__session *s;
    uint32_t i, n;
    uint64_t written = 0, overwritten = 0, drained = 0, chunks = 0;
    int rc;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_session_stats: out is NULL");
    if (!(s = bpt__session_pin(handle, "bpt_session_stats", &rec, &rc))) return rc;
    memset(out, 0, sizeof *out);
    n = bpt__threads_count();
    for (i = 0; i < n; i++) {
        bpt__lane *lane = bpt__lane_at(s, i);
        uint64_t lost;
        if (!lane) continue;
        /* What was read first, then what was taken back, then what was
           written: each record of the first two is in the third, so pending
           stays whole while threads trace (on x86-64 exactly; elsewhere the
           loads may pass each other, hence the guard below). */
        drained += bpt__load_acquire_u64(&lane->drained) + bpt__load_acquire_u64(&lane->delivered);
        overwritten += bpt__load_acquire_u64(&lane->overwritten);
        written += bpt__load_acquire_u64(&lane->written);
        lost = bpt__load_relaxed_u64(&lane->dropped) + bpt__load_relaxed_u64(&lane->lost);
        chunks += bpt__load_relaxed_u32(&lane->budget);
        out->produced += lost;
        out->dropped += lost;
        out->threads++;
    }
    out->produced += written + bpt__load_relaxed_u64(&s->lost_laneless);
    out->dropped += overwritten + bpt__load_relaxed_u64(&s->lost_laneless);
    out->overwritten = overwritten;
    out->chunks = chunks;
    out->buffer_bytes = chunks * s->chunk_bytes;
    out->delivered = drained;
    /* Read while threads trace, the counters are not one snapshot: pending
       is what the others leave, never below 0. */
    out->pending = written > overwritten + drained ? written - overwritten - drained : 0;
    out->limited = bpt__load_relaxed_u64(&s->limited);
    out->frames_skipped = bpt__load_relaxed_u64(&s->frames_skipped);
    out->limit_tripped = (int)bpt__load_relaxed_u32(&s->limit_tripped);
    memcpy(out->name, s->name, sizeof out->name);
    bpt__unpin(rec);
    return 0;
}
