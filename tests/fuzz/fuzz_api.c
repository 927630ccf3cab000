/* fuzz_api: random sequences of API calls, checked against a model.

   The input is a program: each operation is an opcode byte and its argument
   bytes (0 once the input runs out). Over small tables: 6 session handle
   slots (BPT_MAX_SESSIONS is 4 here, so the limit is reachable; destroyed
   handles stay in their slots, stale), 5 VM sites, 12 pattern texts (3 of
   them malformed). Operations: session create (valid and invalid descs,
   callback or buffer tracer, small buffers, rate limits) and destroy (incl.
   stale handles, double destroy); trace_pattern with random flags (incl.
   unknown bits and conflicting hows); register (also invalid arguments) and
   unregister; hits; trace_info and trace_info_each (incl. unknown 'what'
   bits); drain with a random max (incl. negative, and NULL out);
   session_stats; bpt_format_dbg of drained messages into small buffers;
   func_lookup and func_count.

   The fuzzer is one thread, so the model is exact: every return code, every
   call_count, which word each site holds (the breakpoint iff some live
   session has a breakpoint there), each session's remembered patterns
   (replayed on registration), and each thread buffer's contents record by
   record, chunk by chunk
   (calls, DROPPED notices, LIMIT), produced/delivered/dropped/limited
   counters. Any difference aborts. Every input ends by destroying every
   session and unregistering every site, which must succeed.

   FUZZ_API_TRACE=1 prints each operation and its result: run the target on
   a crash input with it to read what happened. corpus/api/crash-* are the
   inputs of bugs this target found (a ring of size 1 never drained; a
   remembered BPT_OFF of every kind deleted by a later partial BPT_OFF). */
#define BPT_MAX_SESSIONS 4
/* The model counts each buffer's bytes exactly. With the CPU's counter a
   thread renews its clock anchor (a 32-byte context record) after 1 ms of
   its records, at times the model cannot know: clock_gettime's anchors
   never age (clock.c). */
#define BPT_NO_CYCLE_CLOCK 1
#define BPTRACE_IMPLEMENTATION
#include "../../bptrace.h"
#include "fuzz_common.h"

#define BP ((bpt_vm_word)0xB9B9B9u)
enum { NSLOT = 6, NSITE = 5, NPAT = 12, QCAP = 32768 };

static const char *const pattern_text[NPAT] = {
    "vm:_/_", "vm:f0/_", "vm:f1/1", "vm:f*/_", "vm:f2/2", "_:f3/0", "vm:nomatch/_", "vm:f4/*",
    "vm:*/*", "vm:f", "", "vm:f0/256"
};
static const char *const site_name[NSITE] = { "f0", "f1", "f2", "f3", "f4" };
static const int site_arity[NSITE] = { 0, 1, 2, 0, 1 };

/* ---- the model ---- */
typedef struct mbp { int call, count, active; uint64_t value; } mbp;
typedef struct mentry { int pat; unsigned flags; } mentry;
typedef struct mmsg { int type; int site; uint64_t value; uint64_t chunk; } mmsg;
typedef struct mslot {
    bpt_session h;
    int used;                     /* h was returned by a create (alive or stale) */
    int alive;
    int callback;
    char name[64];
    uint32_t chunk_bytes, chunks; /* the buffer: chunks of chunk_bytes at first, */
    uint32_t budget, max_chunks;  /* chunks now, and the most it grows to */
    uint64_t head, tail;          /* the chunk written, the chunk read (counts) */
    uint32_t pos;                 /* bytes written into chunk head */
    int started;                  /* the first chunk is taken */
    uint64_t rate_max, window_count, limited;
    int tripped;
    uint64_t produced, delivered, dropped, unreported, callback_msgs;
    int lane;                     /* the lane exists (first send made it) */
    mmsg q[QCAP];
    uint32_t qhead, qlen;
    mbp bp[NSITE];
    mentry pats[512];             /* a program runs at most 400 operations */
    int npats;
} mslot;

static mslot slot[NSLOT];
static bpt_vm_word code[NSITE + 2];
static bpt_func *func[NSITE];
static int registered[NSITE];
static int alive_sessions;
static fuzz_mfa pat_mfa[NPAT];
static int pat_ok[NPAT];
static bpt_func fake_record;       /* never registered: ENOENT */
static uint64_t frame[4] = { 1, 2, 3, 4 };
static uint64_t vm_arg(const void *fr, int i) { return ((const uint64_t *)fr)[i & 3]; }
static const bpt_vm_ops ops = { .arg = vm_arg };

static int trace_ops;             /* FUZZ_API_TRACE=1: print each operation (to read a crash) */
#define TRACE(...) do { if (trace_ops) fprintf(stderr, __VA_ARGS__); } while (0)
static const uint8_t *in;
static size_t in_left;
static unsigned next_byte(void) {
    if (!in_left) return 0;
    in_left--;
    return *in++;
}

/* Flag bits the model knows, and the bits the library rejects on their own
   (probed at start, so kinds and actions added later are left out rather
   than taken for unknown bits). */
#define MODEL_FLAGS (BPT_CALL | BPT_COUNT | BPT_OFF | BPT_PAUSE | BPT_RESTART)
static unsigned unknown_bits;
static unsigned unknown_what;      /* likewise for bpt_trace_info's 'what' (the model knows FLAGS, COUNT) */

static int has_bp(const mbp *b) { return b->call || b->count; }
static int site_traced(int k) {
    int s;
    for (s = 0; s < NSLOT; s++)
        if (slot[s].alive && has_bp(&slot[s].bp[k])) return 1;
    return 0;
}
static int matches(int p, int k) {
    return pat_ok[p] && fuzz_mfa_match(&pat_mfa[p], "vm", site_name[k], site_arity[k]);
}

/* The documented flag rules (bpt_trace_pattern's comment), for flags made of
   MODEL_FLAGS and unknown bits: unknown bits; two hows; PAUSE or RESTART
   with BPT_CALL or without a counting kind; no kind without BPT_OFF. */
static int flags_valid(unsigned flags) {
    unsigned kinds = flags & (BPT_CALL | BPT_COUNT), how = flags & (BPT_OFF | BPT_PAUSE | BPT_RESTART);
    if (flags & ~(unsigned)MODEL_FLAGS) return 0;
    if (how & (how - 1)) return 0;
    if ((how & (BPT_PAUSE | BPT_RESTART)) && kinds != BPT_COUNT) return 0;
    if (!kinds && how != BPT_OFF) return 0;
    return 1;
}

static void apply_op(mbp *b, unsigned flags) {
    unsigned kinds = flags & (BPT_CALL | BPT_COUNT), how = flags & (BPT_OFF | BPT_PAUSE | BPT_RESTART);
    if (how == BPT_OFF && !kinds) kinds = BPT_CALL | BPT_COUNT;
    switch (how) {
    case BPT_OFF:
        if (kinds & BPT_CALL) b->call = 0;
        if (kinds & BPT_COUNT) { b->count = 0; b->active = 0; b->value = 0; }
        break;
    case BPT_PAUSE:
        if (b->count) b->active = 0;
        break;
    case BPT_RESTART:   /* only a counting function: zeroed and counting */
        if (b->count) { b->value = 0; b->active = 1; }
        break;
    default:
        if (kinds & BPT_CALL) b->call = 1;
        if (kinds & BPT_COUNT) {   /* on, or on again (paused or not): from zero */
            b->count = 1;
            b->value = 0;
            b->active = 1;
        }
    }
}

static void remember(mslot *s, int p, unsigned flags) {
    unsigned kinds = flags & (BPT_CALL | BPT_COUNT);
    int i, j;
    if ((flags & (BPT_OFF | BPT_PAUSE | BPT_RESTART)) == BPT_OFF && (kinds == 0 || kinds == (BPT_CALL | BPT_COUNT))) {
        for (i = j = 0; i < s->npats; i++)
            if (memcmp(&pat_mfa[s->pats[i].pat], &pat_mfa[p], sizeof pat_mfa[p]) != 0) s->pats[j++] = s->pats[i];
        s->npats = j;
        if (!s->npats) return;
    }
    FUZZ_CHECK(s->npats < 512, "the model's pattern list is full");
    s->pats[s->npats++] = (mentry){ p, flags };
}

/* A message handed to a session (admitted): its buffer, exactly as a lane
   (session.c): records of 16 bytes and their words; a 32-byte context
   record (thread, process, clock anchor) opening each chunk; the last 56
   bytes of each chunk kept for the mark of a loss (a 24-byte DROPPED 1, at
   once, after a context record when the context changed: never here, one
   thread in one process); the losses after it marked, with their number,
   before the next record that fits (room for a context record, and a
   context and a DROPPED record for the losses); a chunk is taken only
   once the drainer has left the one it replaces, else the buffer grows by
   one up to max_chunks. */
enum { KEPT = 56 };
static void model_put(mslot *s, int type, int site, uint64_t value, uint32_t bytes) {
    FUZZ_CHECK(s->qlen + 1 <= QCAP, "the model's queue is full");
    s->q[(s->qhead + s->qlen++) % QCAP] = (mmsg){ type, site, value, s->head };
    s->pos += bytes;
}

static void model_lost(mslot *s) {
    s->dropped++;
    if (s->started && s->pos <= s->chunk_bytes - KEPT) model_put(s, BPT_MSG_DROPPED, -1, 1, 24);
    else s->unreported++;
}

/* The slow path before a record: a new chunk, the marks. 0: lost. */
static int model_prepare(mslot *s, uint32_t bytes) {
    int fresh = 0;
    if (!s->started || s->pos + bytes + 32 + (s->unreported ? KEPT : 0) > s->chunk_bytes - KEPT) {
        if (s->started && s->head + 1 - s->tail >= s->budget) {   /* full: grow, or lose it at the cap */
            if (s->budget == s->max_chunks) { model_lost(s); return 0; }
            s->budget++;
        }
        if (s->started) s->head++;
        s->started = 1;
        s->pos = 0;
        fresh = 1;
    }
    if (s->unreported) {
        if (fresh) s->pos += 32;   /* the context record */
        model_put(s, BPT_MSG_DROPPED, -1, s->unreported, 24);
        s->unreported = 0;
        fresh = 0;
    }
    if (fresh) s->pos += 32;
    return 1;
}

static void model_send(mslot *s, int type, int site, uint64_t value) {
    uint32_t bytes = type == BPT_MSG_CALL ? 16 + (site_arity[site] ? 8 + 8 * (uint32_t)site_arity[site] : 0) : 24;
    s->lane = 1;
    s->produced++;
    if (s->callback) { s->delivered++; return; }
    if ((!s->started || s->pos + bytes > s->chunk_bytes - KEPT || s->unreported) && !model_prepare(s, bytes)) return;
    model_put(s, type, site, value, bytes);
}

static void model_hit(int k) {
    int si;
    for (si = 0; si < NSLOT; si++) {
        mslot *s = &slot[si];
        mbp *b = &s->bp[k];
        if (!s->alive || !has_bp(b)) continue;
        if (b->count && b->active) b->value++;
        if (!b->call) continue;
        if (s->tripped) { s->limited++; continue; }
        if (s->rate_max) {
            uint64_t n = s->window_count++;
            if (n >= s->rate_max) {
                s->limited++;
                s->tripped = 1;
                model_send(s, BPT_MSG_LIMIT, -1, s->rate_max);
                continue;
            }
        }
        model_send(s, BPT_MSG_CALL, k, 0);
    }
}

/* ---- checks shared by the operations ---- */
static void check_words(void) {
    int k;
    for (k = 0; k < NSITE; k++) {
        bpt_vm_word want = registered[k] && site_traced(k) ? BP : (bpt_vm_word)(0x100 + k);
        FUZZ_CHECK(BPT_VM_FETCH(&code[k]) == want, "site %d holds 0x%lx, expected 0x%lx", k,
                   (unsigned long)code[k], (unsigned long)want);
        if (registered[k]) FUZZ_CHECK(bpt_vm_word_at(func[k]) == want, "bpt_vm_word_at(site %d)", k);
    }
}

static void check_format(const bpt_msg *m, size_t small) {
    char big[2048], buf[2048];
    int full = bpt_format_dbg(m, big, sizeof big), r;
    size_t n = small < sizeof buf ? small : sizeof buf - 1, len;
    FUZZ_CHECK(full > 0 && (size_t)full < sizeof big && strlen(big) == (size_t)full, "format_dbg: %d", full);
    memset(buf, 'Z', sizeof buf);
    r = bpt_format_dbg(m, n ? buf : NULL, n);
    FUZZ_CHECK(r == full, "format_dbg into %zu bytes returned %d, into 2048 %d", n, r, full);
    if (n) {
        len = strlen(buf);
        FUZZ_CHECK(len == (n - 1 < (size_t)full ? n - 1 : (size_t)full) && memcmp(buf, big, len) == 0,
                   "format_dbg into %zu bytes: '%s' vs '%s'", n, buf, big);
    }
    FUZZ_CHECK(buf[n] == 'Z', "format_dbg wrote past %zu bytes", n);
}

static void tracer(const bpt_msg *m, void *user) {
    mslot *s = (mslot *)user;
    FUZZ_CHECK(s >= slot && s < slot + NSLOT && s->alive, "a callback of a dead session");
    FUZZ_CHECK(m->type == BPT_MSG_CALL || m->type == BPT_MSG_LIMIT, "callback message type %d", m->type);
    FUZZ_CHECK(m->session == s->h.id, "callback message of session %llx in %llx",
               (unsigned long long)m->session, (unsigned long long)s->h.id);
    s->callback_msgs++;
    check_format(m, 7);
}

/* ---- operations ---- */
static void op_create(void) {
    static const uint32_t sizes[8] = { 0, 4096, 4096, 8192, 2048, 4100, 1u << 25, 0 };
    static const uint32_t counts[4] = { 0, 2, 2, 3 };
    unsigned a = next_byte(), b = next_byte();
    bpt_session_desc d;
    bpt_session h = { 0xfeedull };
    char longname[80];
    int si, rc, einval, elimit;
    mslot *s;
    for (si = 0; si < NSLOT && slot[(a + si) % NSLOT].alive; si++) {}
    s = &slot[(a + si) % NSLOT];   /* a slot whose session is not alive (there are always 2) */
    memset(&d, 0, sizeof d);
    memset(longname, 'n', sizeof longname);
    longname[(b & 0x40) ? 64 : 63] = '\0';
    d.name = (b & 0x80) ? longname : (b & 0x20) ? "fuzz" : NULL;
    d.chunk_bytes = sizes[b & 7];
    d.chunks = (a & 0x40) ? ((a & 1) ? 65537 : 1) : counts[(a >> 4) & 3];
    d.tracer = (b & 8) ? tracer : NULL;
    d.tracer_user = s;
    d.rate_max = (b & 0x10) ? (a >> 4) % 4 : 0;
    d.rate_per_ms = (a & 8) ? 0xffffffffu : 0;   /* a window that never ends within a run */
    switch ((a >> 1) & 3) {   /* 0: the default (64 MiB of chunks); fixed; a little growth; too few */
    case 0: d.max_chunks = 0; break;
    case 1: d.max_chunks = d.chunks ? d.chunks : 16; break;
    case 2: d.max_chunks = (d.chunks ? d.chunks : 16) + 2; break;
    default: d.max_chunks = (d.chunks ? d.chunks : 16) - 1; break;
    }
    einval = (d.chunk_bytes && (d.chunk_bytes < 4096 || d.chunk_bytes > (1u << 24) ||
                                (d.chunk_bytes & (d.chunk_bytes - 1)))) ||
             (d.chunks && (d.chunks < 2 || d.chunks > 65536)) || (d.rate_per_ms && !d.rate_max) ||
             (d.max_chunks && (d.max_chunks < (d.chunks ? d.chunks : 16) || d.max_chunks > 65536));
    elimit = (d.name && strlen(d.name) > 63) || alive_sessions == BPT_MAX_SESSIONS;
    rc = bpt_session_create(&d, &h);
    TRACE("create slot %d chunks %u (max %u) x %u %s rate %llu/%u name %s -> %d\n", (int)(s - slot), d.chunks,
          d.max_chunks, d.chunk_bytes, d.tracer ? "callback" : "buffers", (unsigned long long)d.rate_max, d.rate_per_ms, d.name ? d.name : "NULL", rc);
    if (einval || elimit) {
        FUZZ_CHECK((einval && rc == BPT_EINVAL) || (elimit && rc == BPT_ELIMIT), "session_create returned %d "
                   "(einval %d elimit %d)", rc, einval, elimit);
        FUZZ_CHECK(h.id == 0xfeedull, "session_create wrote *out on failure");
        return;
    }
    FUZZ_CHECK(rc == 0, "session_create returned %d", rc);
    memset(s, 0, sizeof *s);
    s->h = h;
    s->used = s->alive = 1;
    s->callback = d.tracer != NULL;
    snprintf(s->name, sizeof s->name, "%s", d.name ? d.name : "session");
    s->chunk_bytes = d.chunk_bytes ? d.chunk_bytes : 16384;
    s->chunks = d.chunks ? d.chunks : 16;
    s->budget = s->chunks;
    s->max_chunks = d.max_chunks;
    if (!s->max_chunks) {   /* session.c's default: 64 MiB of chunks, chunks .. 65536 */
        s->max_chunks = (64u << 20) / s->chunk_bytes;
        if (s->max_chunks < s->chunks) s->max_chunks = s->chunks;
        if (s->max_chunks > 65536) s->max_chunks = 65536;
    }
    s->rate_max = d.rate_max;
    alive_sessions++;
    if (!(a & 0x80)) (void)bpt_session_create(NULL, NULL);   /* EINVAL, changes nothing */
}

static void op_destroy(void) {
    mslot *s = &slot[next_byte() % NSLOT];
    int rc = bpt_session_destroy(s->h);
    TRACE("destroy slot %d -> %d\n", (int)(s - slot), rc);
    if (!s->alive) {
        FUZZ_CHECK(rc == BPT_ESESSION, "destroy of a %s handle returned %d", s->used ? "stale" : "never created", rc);
        return;
    }
    FUZZ_CHECK(rc == 0, "session_destroy returned %d", rc);
    s->alive = 0;
    alive_sessions--;
}

static void op_trace_pattern(void) {
    static const unsigned hows[4] = { 0, BPT_OFF, BPT_PAUSE, BPT_RESTART };
    mslot *s = &slot[next_byte() % NSLOT];
    int p = (int)(next_byte() % NPAT), rc, k, n = 0, bad_pattern, bad_flags;
    unsigned b = next_byte(), flags;
    if (b & 0x80) {   /* raw bits: the model's and unknown ones */
        flags = b | next_byte() << 8 | next_byte() << 16 | next_byte() << 24;
        flags &= MODEL_FLAGS | unknown_bits;
    } else {
        flags = (b & 3) | hows[(b >> 2) & 3] | ((b & 0x10) ? hows[(b >> 5) & 3] : 0);
    }
    bad_pattern = !pat_ok[p];
    bad_flags = !flags_valid(flags);
    rc = bpt_trace_pattern(s->h, pattern_text[p], flags, NULL);
    TRACE("trace_pattern slot %d '%s' 0x%x -> %d\n", (int)(s - slot), pattern_text[p], flags, rc);
    if (bad_pattern || bad_flags || !s->alive) {
        FUZZ_CHECK((bad_pattern && rc == BPT_EPATTERN) || (bad_flags && rc == BPT_EFLAGS) ||
                   (!s->alive && rc == BPT_ESESSION), "trace_pattern('%s', 0x%x) on a %s session returned %d",
                   pattern_text[p], flags, s->alive ? "live" : "dead", rc);
        FUZZ_CHECK(bpt_last_error()[0] != '\0', "no last error");
        return;
    }
    for (k = 0; k < NSITE; k++)
        if (registered[k] && matches(p, k)) { n++; apply_op(&s->bp[k], flags); }
    FUZZ_CHECK(rc == n, "trace_pattern('%s', 0x%x) returned %d, %d functions match", pattern_text[p], flags, rc, n);
    remember(s, p, flags);
}

static void op_register(void) {
    unsigned a = next_byte(), v = next_byte();
    int k = (int)(a % NSITE), rc, si, i;
    bpt_func *out = &fake_record;
    char longname[140];
    if (v & 0xf0) {   /* misuse: nothing changes */
        memset(longname, 'x', sizeof longname);
        longname[128] = '\0';
        switch (v >> 5) {
        case 0: rc = bpt_register_vm(&code[k], BP, "vm", site_name[k], 256, &ops, &out); break;
        case 1: rc = bpt_register_vm(&code[k], BP, NULL, site_name[k], 0, &ops, &out); break;
        case 2: rc = bpt_register_vm(&code[k], BP, "vm", longname, 0, &ops, &out);
            FUZZ_CHECK(rc == BPT_ELIMIT || (registered[k] && rc == BPT_EEXIST), "long name: %d", rc);
            FUZZ_CHECK(out == &fake_record, "*out written");
            return;
        case 3: code[NSITE] = BP;   /* the breakpoint word equals the first word */
            rc = bpt_register_vm(&code[NSITE], BP, "vm", "bp", 0, &ops, &out); break;
        case 4: rc = bpt_register_vm((bpt_vm_word *)((char *)&code[NSITE + 1] + 1), BP, "vm", "odd", 0, &ops, &out);
            break;
        case 5: rc = bpt_register_vm(&code[k], BP, "vm", site_name[k], -1, &ops, &out); break;
        case 6: rc = bpt_register_vm(&code[k], BP, "vm", site_name[k], 0, &ops, NULL); break;
        default: rc = bpt_register_vm(NULL, BP, "vm", site_name[k], 0, &ops, &out); break;
        }
        FUZZ_CHECK(rc == BPT_EINVAL || (registered[k] && rc == BPT_EEXIST && (v >> 5) != 3 && (v >> 5) != 4),
                   "register_vm misuse %u returned %d", v >> 5, rc);
        FUZZ_CHECK(out == &fake_record, "*out written on failure");
        return;
    }
    rc = bpt_register_vm(&code[k], BP, "vm", site_name[k], site_arity[k], &ops, &out);
    TRACE("register site %d -> %d\n", k, rc);
    if (registered[k]) {
        FUZZ_CHECK(rc == BPT_EEXIST && out == &fake_record, "register of a registered site returned %d", rc);
        return;
    }
    FUZZ_CHECK(rc == 0 && out != &fake_record && out, "register_vm returned %d", rc);
    func[k] = out;
    registered[k] = 1;
    for (si = 0; si < NSLOT; si++)   /* the remembered patterns, in order */
        if (slot[si].alive)
            for (i = 0; i < slot[si].npats; i++)
                if (matches(slot[si].pats[i].pat, k)) apply_op(&slot[si].bp[k], slot[si].pats[i].flags);
}

static void op_unregister(void) {
    unsigned a = next_byte();
    int k = (int)(a % NSITE), rc;
    if (a & 0x80) {
        FUZZ_CHECK(bpt_unregister(NULL) == BPT_EINVAL, "unregister(NULL)");
        return;
    }
    if (!registered[k]) {
        rc = bpt_unregister(&fake_record);
        FUZZ_CHECK(rc == BPT_ENOENT, "unregister of a record never registered returned %d", rc);
        return;
    }
    rc = bpt_unregister(func[k]);
    TRACE("unregister site %d -> %d\n", k, rc);
    if (site_traced(k)) {
        FUZZ_CHECK(rc == BPT_EBUSY, "unregister of a traced function returned %d", rc);
        return;
    }
    FUZZ_CHECK(rc == 0, "unregister returned %d", rc);
    registered[k] = 0;
    {   /* a session that has no breakpoint here keeps nothing for it */
        int si;
        for (si = 0; si < NSLOT; si++) memset(&slot[si].bp[k], 0, sizeof slot[si].bp[k]);
    }
}

static void op_hit(void) {
    unsigned b;
    int k = (int)(next_byte() % NSITE), times, t;
    b = next_byte();
    times = 1 + (int)(b % 4) + ((b & 0x40) ? 120 : 0);   /* bursts fill the smallest buffer */
    for (t = 0; t < times; t++) {
        bpt_vm_word w;
        if (!registered[k]) return;
        w = BPT_VM_FETCH(&code[k]);
        if (w == BP) {
            bpt_vm_token token = 7;
            w = bpt_vm_breakpoint(func[k], frame, (t & 1) ? &token : NULL);
            if (t & 1) FUZZ_CHECK(token == 0, "a token with no return trace");
            model_hit(k);
            TRACE("hit site %d\n", k);
        }
        FUZZ_CHECK(w == (bpt_vm_word)(0x100 + k), "site %d executed 0x%lx", k, (unsigned long)w);
    }
}

static void op_info(void) {
    mslot *s = &slot[next_byte() % NSLOT];
    unsigned a = next_byte(), what = a & 3;
    int k = (int)((a >> 2) % NSITE), rc, bad_what = 0;
    bpt_info info;
    const mbp *b;
    if (a & 0x80) { what |= (1u << (a & 31)) & (3u | unknown_what); bad_what = (what & unknown_what) != 0; }
    rc = bpt_trace_info(s->h, registered[k] ? func[k] : &fake_record, what, &info);
    if (bad_what || !s->alive || !registered[k]) {
        FUZZ_CHECK((bad_what && rc == BPT_EINVAL) || (!s->alive && rc == BPT_ESESSION) ||
                   (!registered[k] && rc == BPT_ENOENT), "trace_info returned %d", rc);
        return;
    }
    FUZZ_CHECK(rc == 0, "trace_info returned %d", rc);
    b = &s->bp[k];
    if (what & BPT_INFO_FLAGS) {
        unsigned want = (b->call ? BPT_CALL : 0u) | (b->count ? BPT_COUNT : 0u);
        FUZZ_CHECK(info.flags == want && info.count_paused == (b->count && !b->active),
                   "site %d: flags 0x%x paused %d, model 0x%x %d", k, info.flags, info.count_paused, want,
                   b->count && !b->active);
    }
    if (what & BPT_INFO_COUNT)
        FUZZ_CHECK(info.count == (b->count ? b->value : 0), "site %d: call_count %llu, model %llu", k,
                   (unsigned long long)info.count, (unsigned long long)(b->count ? b->value : 0));
    FUZZ_CHECK(bpt_trace_info(s->h, func[k], what, NULL) == BPT_EINVAL, "trace_info(out NULL)");
}

static int each_n;
static void each(const bpt_func *f, const char *m, const char *n, int a, const bpt_info *i, void *u) {
    (void)f; (void)m; (void)n; (void)a; (void)i; (void)u;
    each_n++;
}
static void op_info_each(void) {
    mslot *s = &slot[next_byte() % NSLOT];
    unsigned a = next_byte();
    int p = (int)(a % NPAT), rc, k, n = 0, bad_what = (a & 0x80) != 0;
    each_n = 0;
    rc = bpt_trace_info_each(s->h, pattern_text[p], bad_what ? unknown_what & -unknown_what : BPT_INFO_COUNT,
                             each, NULL);
    if (bad_what || !pat_ok[p] || !s->alive) {
        FUZZ_CHECK((bad_what && rc == BPT_EINVAL) || (!pat_ok[p] && rc == BPT_EPATTERN) ||
                   (!s->alive && rc == BPT_ESESSION), "trace_info_each returned %d", rc);
        FUZZ_CHECK(each_n == 0, "trace_info_each failed after calling fn");
        return;
    }
    for (k = 0; k < NSITE; k++) n += registered[k] && matches(p, k) && has_bp(&s->bp[k]);
    FUZZ_CHECK(rc == n && each_n == n, "trace_info_each('%s') returned %d (%d calls), model %d", pattern_text[p], rc,
               each_n, n);
}

static void op_drain(void) {
    mslot *s = &slot[next_byte() % NSLOT];
    int max = (int)(int8_t)next_byte(), rc, i, null_out = max > 40;
    unsigned small = next_byte();
    bpt_msg out[64];
    if (max > 64) max = 64;
    rc = bpt_session_drain(s->h, null_out ? NULL : out, max);
    TRACE("drain slot %d max %d -> %d (model buffer %u)\n", (int)(s - slot), max, rc, s->qlen);
    if (max < 0 || (null_out && max > 0) || !s->alive) {
        FUZZ_CHECK(((max < 0 || null_out) && rc == BPT_EINVAL) || (!s->alive && rc == BPT_ESESSION),
                   "drain(max %d, out %s) returned %d", max, null_out ? "NULL" : "buf", rc);
        return;
    }
    {
        int want = s->callback ? 0 : (int)(s->qlen < (uint32_t)max ? s->qlen : (uint32_t)max);
        FUZZ_CHECK(rc == want, "drain(max %d) returned %d, the buffer holds %u", max, rc, s->qlen);
    }
    for (i = 0; i < rc; i++) {
        mmsg e = s->q[s->qhead];
        s->qhead = (s->qhead + 1) % QCAP;
        s->qlen--;
        FUZZ_CHECK(out[i].type == e.type, "drained message %d has type %d, model %d", i, out[i].type, e.type);
        FUZZ_CHECK(out[i].session == s->h.id, "drained message of session %llx", (unsigned long long)out[i].session);
        if (e.type == BPT_MSG_CALL)
            FUZZ_CHECK(out[i].name && strcmp(out[i].name, site_name[e.site]) == 0 && out[i].arity == site_arity[e.site]
                       && out[i].nargs == site_arity[e.site], "drained call of %s/%d, model %s/%d",
                       out[i].name ? out[i].name : "NULL", out[i].arity, site_name[e.site], site_arity[e.site]);
        else
            FUZZ_CHECK(out[i].value == e.value, "drained message %d (type %d) value %llu, model %llu", i, e.type,
                       (unsigned long long)out[i].value, (unsigned long long)e.value);
        if (e.type != BPT_MSG_DROPPED) s->delivered++;
        check_format(&out[i], small);
    }
    /* The drainer is left in the chunk of the first record it did not read,
       or in the chunk being written. A drain of max 0 reads nothing and
       leaves it where it was (the model moved it, and so missed a full
       buffer's growth: found when the fuzz compared chunk counts). */
    if (!s->callback && max > 0) s->tail = s->qlen ? s->q[s->qhead].chunk : s->head;
}

static void op_stats(void) {
    mslot *s = &slot[next_byte() % NSLOT];
    bpt_session_counts st;
    int rc = bpt_session_stats(s->h, &st);
    FUZZ_CHECK(bpt_session_stats(s->h, NULL) == BPT_EINVAL, "stats(NULL)");
    if (!s->alive) {
        FUZZ_CHECK(rc == BPT_ESESSION, "stats of a dead session returned %d", rc);
        return;
    }
    FUZZ_CHECK(rc == 0, "stats returned %d", rc);
    FUZZ_CHECK(st.produced == s->produced && st.delivered == s->delivered && st.dropped == s->dropped &&
               st.limited == s->limited && st.limit_tripped == s->tripped && strcmp(st.name, s->name) == 0,
               "stats produced %llu delivered %llu dropped %llu limited %llu tripped %d '%s'; model %llu %llu %llu "
               "%llu %d '%s'", (unsigned long long)st.produced, (unsigned long long)st.delivered,
               (unsigned long long)st.dropped, (unsigned long long)st.limited, st.limit_tripped, st.name,
               (unsigned long long)s->produced, (unsigned long long)s->delivered, (unsigned long long)s->dropped,
               (unsigned long long)s->limited, s->tripped, s->name);
    FUZZ_CHECK(st.delivered + st.dropped <= st.produced, "delivered + dropped > produced");
    FUZZ_CHECK(st.chunks == (s->lane && !s->callback ? s->budget : 0) &&
               st.buffer_bytes == st.chunks * s->chunk_bytes, "stats: %llu chunks (%llu bytes), model %u",
               (unsigned long long)st.chunks, (unsigned long long)st.buffer_bytes,
               s->lane && !s->callback ? s->budget : 0);
    if (s->callback)
        FUZZ_CHECK(s->callback_msgs == s->delivered && st.produced == st.delivered + st.dropped,
                   "callback: %llu calls, %llu delivered", (unsigned long long)s->callback_msgs,
                   (unsigned long long)s->delivered);
}

static void op_lookup(void) {
    unsigned a = next_byte();
    int k = (int)(a % NSITE), rc;
    bpt_func *f = NULL;
    rc = bpt_func_lookup("vm", site_name[k], (a & 0x80) ? site_arity[k] + 1 : site_arity[k], &f);
    if (registered[k] && !(a & 0x80)) FUZZ_CHECK(rc == 0 && f == func[k], "lookup of site %d returned %d", k, rc);
    else FUZZ_CHECK(rc == BPT_ENOENT, "lookup of an unregistered function returned %d", rc);
    rc = bpt_func_count();
    for (k = 0; k < NSITE; k++) rc -= registered[k];
    FUZZ_CHECK(rc == 0, "func_count is off by %d", rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    int k, si, ops_done = 0;
    if (!ready) {
        for (k = 0; k < NPAT; k++) {
            memset(&pat_mfa[k], 0, sizeof pat_mfa[k]);
            pat_ok[k] = fuzz_parse_pattern(pattern_text[k], &pat_mfa[k]);
        }
        {   /* which bits does the library reject? */
            bpt_session probe;
            unsigned bit;
            FUZZ_CHECK(bpt_session_create(NULL, &probe) == 0, "probe session");
            for (bit = 1; bit; bit <<= 1)
                if (!(bit & MODEL_FLAGS) &&
                    bpt_trace_pattern(probe, "vm:nomatch/_", bit | BPT_CALL, NULL) == BPT_EFLAGS &&
                    bpt_trace_pattern(probe, "vm:nomatch/_", bit | BPT_COUNT, NULL) == BPT_EFLAGS &&
                    bpt_trace_pattern(probe, "vm:nomatch/_", bit | BPT_OFF, NULL) == BPT_EFLAGS)
                    unknown_bits |= bit;
            {
                static bpt_vm_word word = 0x999;
                bpt_func *pf;
                bpt_info info;
                FUZZ_CHECK(bpt_register_vm(&word, BP, "probe", "probe", 0, &ops, &pf) == 0, "probe function");
                for (bit = 4; bit; bit <<= 1)
                    if (bpt_trace_info(probe, pf, bit, &info) == BPT_EINVAL) unknown_what |= bit;
                FUZZ_CHECK(bpt_unregister(pf) == 0, "probe function");
            }
            FUZZ_CHECK(bpt_session_destroy(probe) == 0, "probe session");
            FUZZ_CHECK((unknown_what & 0x80000000u) != 0, "'what' bit 31 is accepted");
            FUZZ_CHECK((unknown_bits & 0xfff80000u) == 0xfff80000u, "bits 19..31 are accepted: 0x%x", unknown_bits);
        }
        trace_ops = getenv("FUZZ_API_TRACE") != NULL;
        ready = 1;
    }
    memset(slot, 0, sizeof slot);
    memset(registered, 0, sizeof registered);
    alive_sessions = 0;
    for (k = 0; k < NSITE; k++) code[k] = (bpt_vm_word)(0x100 + k);
    in = data;
    in_left = size;
    while (in_left && ops_done++ < 400) {
        switch (next_byte() % 12) {
        case 0: op_create(); break;
        case 1: op_destroy(); break;
        case 2: case 3: op_trace_pattern(); break;
        case 4: op_register(); break;
        case 5: op_unregister(); break;
        case 6: case 7: op_hit(); break;
        case 8: op_info(); break;
        case 9: op_info_each(); break;
        case 10: op_drain(); break;
        default: if (next_byte() & 1) op_stats(); else op_lookup(); break;
        }
        check_words();
    }
    /* the end: everything can be taken down */
    for (si = 0; si < NSLOT; si++)
        if (slot[si].alive) {
            FUZZ_CHECK(bpt_session_destroy(slot[si].h) == 0, "final destroy: %s", bpt_last_error());
            slot[si].alive = 0;
        }
    check_words();
    for (k = 0; k < NSITE; k++)
        if (registered[k]) FUZZ_CHECK(bpt_unregister(func[k]) == 0, "final unregister: %s", bpt_last_error());
    FUZZ_CHECK(bpt_func_count() == 0, "functions left registered");
    return 0;
}
