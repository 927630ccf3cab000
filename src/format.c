/* format.c: trace messages as text, off the hot path (the drainer's or the
   tracer callback's thread). dbg's line shapes, recon_trace's timestamps. */
#include "internal.h"

static int64_t bpt__realtime_offset_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC, once */
static pthread_once_t bpt__format_once = PTHREAD_ONCE_INIT;

/* Against CLOCK_MONOTONIC itself, which a message's ts_ns keeps to (its
   lane's anchor): not bpt__now_ns, the calibration's reading, which drifts
   from it with the process's age (t_clock: dbg's time). */
static void bpt__format_init(void) {
    struct timespec rt, mt;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    bpt__realtime_offset_ns = (int64_t)((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec) -
                              (int64_t)((uint64_t)mt.tv_sec * 1000000000u + (uint64_t)mt.tv_nsec);
}

/* Append to a bounded buffer, remembering the length it wanted (snprintf's contract). */
typedef struct bpt__buf { char *p; size_t size, len; } bpt__buf;

static void bpt__bprintf(bpt__buf *b, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(b->len < b->size ? b->p + b->len : NULL, b->len < b->size ? b->size - b->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
}

/* recon_trace's clock: local wall time, HH:MM:SS.microseconds. */
static void bpt__format_time(bpt__buf *b, uint64_t mono_ns) {
    /* Unsigned: a timestamp read from a file may be anything, and wraps
       rather than overflows. */
    uint64_t ns = mono_ns + (uint64_t)bpt__realtime_offset_ns;
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;
    if (!localtime_r(&secs, &tm)) memset(&tm, 0, sizeof tm);
    bpt__bprintf(b, "%02d:%02d:%02d.%06ld", tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ns % 1000000000u / 1000u));
}

/* One value, as its type says; i64 through the site's formatter if it has
   one. A STR value is an offset into m->str, where the hit copied it; it
   is printed up to its NUL or the end of str, whichever comes first (a
   message built by hand without the NUL was read past its end; found by
   review). */
static void bpt__format_value(bpt__buf *b, const bpt_msg *m, uint64_t v, int type) {
    char tmp[128];
    double d;
    switch (type) {
    case BPT_ARG_U64: bpt__bprintf(b, "%llu", (unsigned long long)v); break;
    case BPT_ARG_PTR: bpt__bprintf(b, "0x%llx", (unsigned long long)v); break;
    case BPT_ARG_STR:
        bpt__bprintf(b, "\"%.*s\"", v < sizeof m->str ? (int)(sizeof m->str - v) : 0, v < sizeof m->str ? m->str + v : "");
        break;
    case BPT_ARG_F64: memcpy(&d, &v, sizeof d); bpt__bprintf(b, "%g", d); break;
    default:
        if (m->format) {
            m->format(tmp, sizeof tmp, v);
            bpt__bprintf(b, "%s", tmp);
        } else {
            bpt__bprintf(b, "%lld", (long long)v);
        }
    }
}

int bpt_format_dbg(const bpt_msg *m, char *buf, size_t size) {
    bpt__buf b;
    int i;
    if (!m || (!buf && size)) return bpt__fail(BPT_EINVAL, "bpt_format_dbg: m or buf is NULL");
    pthread_once(&bpt__format_once, bpt__format_init);
    b.p = buf;
    b.size = size;
    b.len = 0;
    if (size) buf[0] = '\0';
    bpt__format_time(&b, m->ts_ns);
    bpt__bprintf(&b, " (<%llu>) ", (unsigned long long)m->process);
    switch (m->type) {
    case BPT_MSG_CALL:
        bpt__bprintf(&b, "call %s:%s(", m->module, m->name);
        for (i = 0; i < m->nargs; i++) {
            if (i) bpt__bprintf(&b, ",");
            bpt__format_value(&b, m, m->args[i], m->argtype[i]);
        }
        bpt__bprintf(&b, ")");
        if (m->nargs < m->arity) bpt__bprintf(&b, "/%d", m->arity);   /* args not shown */
        if (m->user) bpt__bprintf(&b, " (%s)", m->user);
        if (m->caller_module) bpt__bprintf(&b, " (caller %s:%s/%d)", m->caller_module, m->caller_name, m->caller_arity);
        else if (m->caller) bpt__bprintf(&b, " (caller 0x%llx)", (unsigned long long)m->caller);
        break;
    case BPT_MSG_RETURN_FROM:   /* dbg: returned from m:f/a -> value */
        bpt__bprintf(&b, "returned from %s:%s/%d -> ", m->module, m->name, m->arity);
        bpt__format_value(&b, m, m->value, m->value_type);
        break;
    case BPT_MSG_EXCEPTION_FROM:   /* dbg: exception_from m:f/a {class,value} */
        bpt__bprintf(&b, "exception_from %s:%s/%d {%s,", m->module, m->name, m->arity,
                     m->exception_class ? m->exception_class : "error");
        bpt__format_value(&b, m, m->value, BPT_ARG_I64);
        bpt__bprintf(&b, "}");
        break;
    case BPT_MSG_RETURN_TO:   /* dbg: returning to m:f/a */
        if (m->module) bpt__bprintf(&b, "returning to %s:%s/%d", m->module, m->name, m->arity);
        else if (m->caller) bpt__bprintf(&b, "returning to 0x%llx", (unsigned long long)m->caller);
        else bpt__bprintf(&b, "returning to undefined");
        break;
    case BPT_MSG_DROPPED:
        bpt__bprintf(&b, "dropped %llu messages (buffer full)", (unsigned long long)m->value);
        break;
    case BPT_MSG_LIMIT:
        bpt__bprintf(&b, "rate limit tripped (%llu messages): the session stopped tracing",
                     (unsigned long long)m->value);
        break;
    default:
        bpt__bprintf(&b, "unknown message type %u", (unsigned)m->type);
    }
    return (int)b.len;
}

/* >>profile: tprof's table. Largest value first; ties by name. Bytes
   are call_memory's net, signed (api_info.h): a function whose calls
   freed more than they allocated ranks last, and prints below zero (taken
   unsigned, -100 B ranked first as 18446744073709551516; found by review). */
static int bpt__profile_tie(const bpt_profile_row *x, const bpt_profile_row *y) {
    int c;
    if ((c = strcmp(x->module ? x->module : "", y->module ? y->module : "")) != 0) return c;
    if ((c = strcmp(x->name ? x->name : "", y->name ? y->name : "")) != 0) return c;
    return x->process < y->process ? -1 : x->process > y->process;
}
static int bpt__profile_cmp_time(const void *a, const void *b) {
    const bpt_profile_row *x = (const bpt_profile_row *)a, *y = (const bpt_profile_row *)b;
    if (x->value != y->value) return x->value < y->value ? 1 : -1;
    return bpt__profile_tie(x, y);
}
static int bpt__profile_cmp_bytes(const void *a, const void *b) {
    const bpt_profile_row *x = (const bpt_profile_row *)a, *y = (const bpt_profile_row *)b;
    int64_t xv = (int64_t)x->value, yv = (int64_t)y->value;
    if (xv != yv) return xv < yv ? 1 : -1;
    return bpt__profile_tie(x, y);
}

int bpt_format_profile(bpt_profile_row *rows, int n, int memory, char *buf, size_t size) {
    bpt__buf b;
    uint64_t total = 0, calls = 0;
    int i, procs = 0, width = 44;   /* the name column: as wide as the widest name */
    char fn[300];
    if ((!rows && n > 0) || n < 0 || (!buf && size))
        return bpt__fail(BPT_EINVAL, "bpt_format_profile: rows NULL with n %d, n < 0, or buf NULL", n);
    b.p = buf;
    b.size = size;
    b.len = 0;
    if (size) buf[0] = '\0';
    if (n > 1) qsort(rows, (size_t)n, sizeof *rows, memory ? bpt__profile_cmp_bytes : bpt__profile_cmp_time);
    for (i = 0; i < n; i++) {
        total += rows[i].value;   /* bytes: modulo 2^64, read back as int64_t */
        calls += rows[i].calls;
        procs |= rows[i].process != 0;
    }
    for (i = 0; i < n; i++) {
        int w = snprintf(fn, sizeof fn, "<%llu>  %s:%s/%d", (unsigned long long)rows[i].process,
                         rows[i].module ? rows[i].module : "?", rows[i].name ? rows[i].name : "?", rows[i].arity);
        if (!procs) w -= snprintf(fn, sizeof fn, "<%llu>  ", (unsigned long long)rows[i].process);
        if (w > width) width = w < (int)sizeof fn - 1 ? w : (int)sizeof fn - 1;
    }
    bpt__bprintf(&b, "%-*s %10s %12s %10s  [    %%]\n", width, procs ? "PROCESS  FUNCTION" : "FUNCTION", "CALLS",
                 memory ? "BYTES" : "TIME(us)", memory ? "PER CALL" : "PER CALL");
    for (i = 0; i < n; i++) {
        const bpt_profile_row *r = &rows[i];
        double v = memory ? (double)(int64_t)r->value : (double)r->value;
        double pct = total ? 100.0 * v / (memory ? (double)(int64_t)total : (double)total) : 0.0;
        if (procs) snprintf(fn, sizeof fn, "<%llu>  %s:%s/%d", (unsigned long long)r->process,
                            r->module ? r->module : "?", r->name ? r->name : "?", r->arity);
        else snprintf(fn, sizeof fn, "%s:%s/%d", r->module ? r->module : "?", r->name ? r->name : "?", r->arity);
        if (memory)
            bpt__bprintf(&b, "%-*s %10llu %12lld %10.1f  [%5.1f]\n", width, fn, (unsigned long long)r->calls,
                         (long long)(int64_t)r->value, r->calls ? v / (double)r->calls : 0.0, pct);
        else
            bpt__bprintf(&b, "%-*s %10llu %12.1f %10.2f  [%5.1f]\n", width, fn, (unsigned long long)r->calls,
                         (double)r->value / 1e3, r->calls ? (double)r->value / 1e3 / (double)r->calls : 0.0, pct);
    }
    if (memory)
        bpt__bprintf(&b, "%-*s %10llu %12lld %10s  [100.0]\n", width, "", (unsigned long long)calls,
                     (long long)(int64_t)total, "");
    else
        bpt__bprintf(&b, "%-*s %10llu %12.1f %10s  [100.0]\n", width, "", (unsigned long long)calls, (double)total / 1e3, "");
    return (int)b.len;
}

/* >>stacks: each thread's open calls, rebuilt from its call and return
   messages: what the Chrome writer nests its events by and the folded
   writer names its stacks by. A thread keeps its first BPT__STACK_KEPT
   calls; deeper calls are only counted (depth goes on), and each of their
   returns pops one count and matches nothing kept. A return matches the
   newest open call of its function (module, name and arity; by pointer, or
   by text when a message's names were copied); the calls above that one
   were unwound without a message (BPT_RETURN without BPT_EXCEPTION, a
   longjmp past untraced frames).
   A call whose return is not traced (bpt_msg.no_return) opens nothing:
   nothing would end it, and each such call left one more open call on the
   stack, so that past BPT__STACK_KEPT of them the stack kept none of the
   calls after, and a traced caller's return was taken for the newest
   call's (its E never written). The Chrome writer shows it as an instant
   event, the folded writer charges it nothing.
   A DROPPED message cuts its thread's stack (bpt__stack_cut): the lost
   messages may have returned any of the open calls and opened others, so
   what is kept no longer says where the thread is. The stack starts again
   empty; returns of calls opened before the cut then match nothing, and
   calls after it start at the root, never under a call from before it.
   A stack's time never goes back (bpt__stack_ts): a message stamped before
   the stack's newest (messages merged from several sources, a host's own
   stamps) counts as at that newest time, so that a return is never before
   its call: a negative span was charged as 2^64 ns by the folded writer,
   and made an E before its B, which breaks the nesting, in the Chrome one
   (found by review). */
enum { BPT__STACK_KEPT = 64 };

typedef struct bpt__call {
    const char *module, *name;
    int arity;
    uint64_t start_ns;             /* the call's ts */
    uint64_t child_ns;             /* time in its returned traced callees (folded) */
} bpt__call;

struct bpt__stack {
    uint32_t tid, depth;           /* depth counts calls beyond the kept ones too */
    uint64_t process;              /* the process its calls ran in: one stack per thread and process */
    uint64_t last_ns;              /* the time of its newest call, return or cut (bpt__stack_ts) */
    bpt__call *call;               /* the kept calls: room for `room`, grown by doubling up to
                                      BPT__STACK_KEPT as the stack deepens (a fixed 64 cost 2.6 KB
                                      a thread and process: 260 MB for a host's 100,000 processes
                                      of a call or two; found by review) */
    uint32_t room;
};

/* A writer's stacks, one per track (thread and process), found through a
   hash index: a lookup costs O(1) expected however many threads a trace
   has (a scan of them all made a trace of 60,000 threads take 12 s for
   one call each, quadratic; found by review). */
struct bpt__tracks {
    struct bpt__stack *v;          /* the stacks, in the order of their first messages */
    uint32_t n, cap;
    uint32_t *ix;                  /* open addressing: a stack's index in v + 1; 0: empty */
    uint32_t ixcap;                /* a power of two, at least twice n; or 0 */
    uint64_t seed;                 /* the hash's key: a file cannot pick threads that all collide */
    uint64_t probes;               /* index slots looked at, rehashing aside: what the lookups
                                      cost (t_format_stacks counts it) */
    uint64_t *named;               /* Chrome: the switched processes named (bpt__tracks_named);
                                      open addressing, 0: empty */
    uint32_t named_n, named_cap;   /* named_cap a power of two, at least twice named_n; or 0 */
};

/* The slot hash of (thread, process), keyed (registry.h): the thread is
   hashed under the key before it meets the process. Combined first
   (process * G + tid), pairs chosen to give one value all collided
   whatever the key: a trace file's context records name any thread and
   process, and 20,000 such tracks took 399,980,000 probes (found by
   review; t_format_stacks case 6). */
static uint32_t bpt__tracks_hash(const struct bpt__tracks *s, uint32_t tid, uint64_t process) {
    return (uint32_t)bpt__hash_u64(process ^ bpt__hash_u64(tid, s->seed), s->seed);
}

static void bpt__tracks_free(struct bpt__tracks *s) {
    uint32_t i;
    for (i = 0; i < s->n; i++) BPT_FREE(s->v[i].call);
    BPT_FREE(s->v);
    BPT_FREE(s->ix);
    BPT_FREE(s->named);
    s->v = NULL;
    s->ix = NULL;
    s->named = NULL;
    s->n = s->cap = s->ixcap = 0;
    s->named_n = s->named_cap = 0;
}

/* Room for one more stack: v and the index grown by doubling (the index
   rehashed, kept at most half full). 0, or -1 with s as it was. */
static int bpt__tracks_room(struct bpt__tracks *s) {
    uint32_t i, k;
    if (s->n == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 8;
        struct bpt__stack *v = (struct bpt__stack *)BPT_MALLOC(sizeof *v * cap);
        if (!v) return -1;
        if (s->n) memcpy(v, s->v, sizeof *v * s->n);
        BPT_FREE(s->v);
        s->v = v;
        s->cap = cap;
    }
    if ((s->n + 1) * 2 > s->ixcap) {
        uint32_t cap = s->ixcap ? s->ixcap * 2 : 16, mask = cap - 1;
        uint32_t *ix = (uint32_t *)BPT_MALLOC(sizeof *ix * cap);
        if (!ix) return -1;
        memset(ix, 0, sizeof *ix * cap);
        if (!s->ixcap) s->seed = bpt__hash_seed(s);   /* the first index: its key */
        for (i = 0; i < s->n; i++) {
            for (k = bpt__tracks_hash(s, s->v[i].tid, s->v[i].process) & mask; ix[k]; k = (k + 1) & mask) {}
            ix[k] = i + 1;
        }
        BPT_FREE(s->ix);
        s->ix = ix;
        s->ixcap = cap;
    }
    return 0;
}

/* The stack of m's thread and process, or, with create, a new empty one
   added (*created set to 1; the stacks may move). NULL when it is not
   there and create is 0, or when it cannot be allocated. One stack per
   thread and process: processes that a host switches on one thread
   (bpt_process_switch) each have a stack of their own, so one's calls
   never nest under another's (a thread's one stack gave paths that never
   ran, and B/E events of two processes interleaved on one track; found by
   review). */
static struct bpt__stack *bpt__stack_of(struct bpt__tracks *s, const bpt_msg *m, int create, int *created) {
    struct bpt__stack *t;
    uint32_t k, i, mask = s->ixcap - 1;
    *created = 0;
    if (s->ixcap)
        for (k = bpt__tracks_hash(s, m->thread, m->process) & mask; (i = s->ix[k]) != 0; k = (k + 1) & mask) {
            s->probes++;
            if (s->v[i - 1].tid == m->thread && s->v[i - 1].process == m->process) return &s->v[i - 1];
        }
    if (!create || bpt__tracks_room(s) < 0) return NULL;
    mask = s->ixcap - 1;
    for (k = bpt__tracks_hash(s, m->thread, m->process) & mask; s->ix[k]; k = (k + 1) & mask) s->probes++;
    s->ix[k] = s->n + 1;
    t = &s->v[s->n++];
    memset(t, 0, sizeof *t);
    t->tid = m->thread;
    t->process = m->process;
    *created = 1;
    return t;
}

/* The slot of process p in the set v of cap slots: p's, or the empty one
   where it goes. */
static uint32_t bpt__named_slot(const struct bpt__tracks *s, const uint64_t *v, uint32_t cap, uint64_t p) {
    uint32_t k, mask = cap - 1;
    for (k = (uint32_t)bpt__hash_u64(p, s->seed) & mask; v[k] && v[k] != p; k = (k + 1) & mask) {}
    return k;
}

/* Whether switched process p needs its process_name record: 1 the first
   time, which adds p to the set of the processes named, 0 after: each
   new track of p (each thread that ran it) wrote one, duplicate records.
   The set is kept at most half full under the index's keyed hash (the
   seed is set: a track exists), so a check costs O(1) expected, not a
   scan of the tracks. p is never 0 (bpt__stack_switched): 0 marks an
   empty slot. */
static int bpt__tracks_named(struct bpt__tracks *s, uint64_t p) {
    uint32_t i, k;
    if (s->named_cap) {
        k = bpt__named_slot(s, s->named, s->named_cap, p);
        if (s->named[k] == p) return 0;
    }
    if ((s->named_n + 1) * 2 > s->named_cap) {   /* grown by doubling, rehashed */
        uint32_t cap = s->named_cap ? s->named_cap * 2 : 16;
        uint64_t *v = (uint64_t *)BPT_MALLOC(sizeof *v * cap);
        if (!v) return 1;   /* no memory to remember p: a name written twice is better than none */
        memset(v, 0, sizeof *v * cap);
        for (i = 0; i < s->named_cap; i++)
            if (s->named[i]) v[bpt__named_slot(s, v, cap, s->named[i])] = s->named[i];
        BPT_FREE(s->named);
        s->named = v;
        s->named_cap = cap;
    }
    s->named[bpt__named_slot(s, s->named, s->named_cap, p)] = p;
    s->named_n++;
    return 1;
}

/* m's time on t: its ts, or t's newest time when m's is earlier (>>stacks:
   a stack's time never goes back); it becomes t's newest time. */
static uint64_t bpt__stack_ts(struct bpt__stack *t, const bpt_msg *m) {
    if (m->ts_ns > t->last_ns) t->last_ns = m->ts_ns;
    return t->last_ns;
}

/* Room in t for a kept call at t->depth: 0, or -1 (no memory, t as it was). */
static int bpt__stack_room(struct bpt__stack *t) {
    uint32_t room;
    bpt__call *call;
    if (t->depth >= BPT__STACK_KEPT || t->depth < t->room) return 0;
    room = t->room ? t->room * 2 : 4;
    if (room > BPT__STACK_KEPT) room = BPT__STACK_KEPT;
    if (!(call = (bpt__call *)BPT_MALLOC(sizeof *call * room))) return -1;
    if (t->depth) memcpy(call, t->call, sizeof *call * t->depth);
    BPT_FREE(t->call);
    t->call = call;
    t->room = room;
    return 0;
}

/* A call on t: kept if t is not deeper than it keeps, else only counted.
   0, or -1 when there is no room for it and no memory for more: nothing
   changed (the caller does not count the message). */
static int bpt__stack_push(struct bpt__stack *t, const bpt_msg *m) {
    uint64_t ts;
    if (bpt__stack_room(t) < 0) return -1;
    ts = bpt__stack_ts(t, m);
    if (t->depth < BPT__STACK_KEPT) {
        bpt__call *c = &t->call[t->depth];
        c->module = m->module;
        c->name = m->name;
        c->arity = m->arity;
        c->start_ns = ts;
        c->child_ns = 0;
    }
    t->depth++;
    return 0;
}

static int bpt__text_eq(const char *a, const char *b) {
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* A return on t: the index of the kept call it returns from, which the
   caller pops (with the calls above it) by setting t->depth to it; -1 when
   no open call of that function is kept (tracing began inside it: nothing
   changes); -2 when t is deeper than it keeps (the return is from the
   newest call, which was not kept: its count is popped here). Its time
   is t->last_ns after it (bpt__stack_ts). */
static int bpt__stack_return(struct bpt__stack *t, const bpt_msg *m) {
    int k;
    (void)bpt__stack_ts(t, m);
    if (t->depth > BPT__STACK_KEPT) {
        t->depth--;
        return -2;
    }
    for (k = (int)t->depth - 1; k >= 0; k--) {
        const bpt__call *c = &t->call[k];
        if (c->arity == m->arity && bpt__text_eq(c->name, m->name) && bpt__text_eq(c->module, m->module)) break;
    }
    return k;
}

/* A DROPPED message on t: forget its open calls (after the Chrome writer
   closed them). The cut is where the loss was announced, which is after it
   happened: the notice comes with the first message that found room. Its
   time is t->last_ns after it (bpt__stack_ts). */
static void bpt__stack_cut(struct bpt__stack *t, const bpt_msg *m) {
    t->depth = 0;
    (void)bpt__stack_ts(t, m);
}

/* >>chrome: Chrome Trace Event JSON. */

/* The length of the well-formed UTF-8 sequence at s (1..4), or 0 when the
   bytes there are not one (RFC 3629: no overlong form, no surrogate, at
   most U+10FFFF). */
static int bpt__utf8_len(const unsigned char *s) {
    int n, i;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) { n = 2; cp = s[0] & 0x1F; }
    else if (s[0] >= 0xE0 && s[0] <= 0xEF) { n = 3; cp = s[0] & 0x0F; }
    else if (s[0] >= 0xF0 && s[0] <= 0xF4) { n = 4; cp = s[0] & 0x07; }
    else return 0;
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;   /* also a NUL: a sequence cut short */
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return n;
}

/* ns as microseconds with 3 decimals, "-12.345", in buf (32 bytes):
   integer arithmetic, since printf's %f follows the program's LC_NUMERIC,
   and a decimal comma (setlocale(LC_ALL, "de_DE.UTF-8")) is not JSON
   (found by review). */
static const char *bpt__json_us(char buf[32], int64_t ns) {
    uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    snprintf(buf, 32, "%s%llu.%03llu", ns < 0 ? "-" : "", (unsigned long long)(a / 1000),
             (unsigned long long)(a % 1000));
    return buf;
}

/* The "pid" of a stack's track: the process id, or the bptrace process
   its calls ran in where a host switched processes (bpt_process_switch):
   each such process then shows as a process of its own, with a track per
   thread it ran on. */
static int bpt__stack_switched(const struct bpt__stack *t) {
    return t->process != 0 && t->process != t->tid;   /* 0, or the thread's id: the default process */
}
static long long bpt__chrome_pid(const struct bpt__stack *t) {
    return bpt__stack_switched(t) ? (long long)t->process : (long long)getpid();
}

/* Whether a write to out failed: its error indicator, which a failed
   write sets and nothing here clears. The calls' own results do not say
   it: a write that fills the buffer flushes it, and glibc's fprintf and
   fputc return success when that flush fails (the records in the buffer
   lost, the JSON torn, and bpt_chrome_close returned success; found by
   review). */
static int bpt__stream_failed(FILE *out) {
    return ferror(out) != 0;
}

int bpt_chrome_open(bpt_chrome *w, FILE *out) {
    if (!w || !out) return bpt__fail(BPT_EINVAL, "bpt_chrome_open: w and out must not be NULL");
    memset(w, 0, sizeof *w);
    w->out = out;
    if (fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out) < 0 || bpt__stream_failed(out)) w->err = 1;
    return w->err ? bpt__fail(BPT_EINVAL, "bpt_chrome_open: write failed: %s", strerror(errno)) : 0;
}

/* s's characters inside a JSON string: quotes, backslashes and control
   characters escaped, well-formed UTF-8 kept, and any other byte (a name
   from a C++ symbol or a VM in another encoding) written as U+FFFD: JSON
   text must be UTF-8 (RFC 8259), and one bad byte made the whole trace
   unreadable (found by review). */
static void bpt__json_chars(FILE *out, const char *s) {
    while (s && *s) {
        const unsigned char *u = (const unsigned char *)s;
        int n = bpt__utf8_len(u);
        if (*u == '"' || *u == '\\') fprintf(out, "\\%c", *u);
        else if (*u < 0x20) fprintf(out, "\\u%04x", *u);
        else if (n) fwrite(s, 1, (size_t)n, out);
        else fputs("\\ufffd", out);
        s += n ? n : 1;
    }
}

/* One event on t's track; its name "module:function/arity" written whole
   (a fixed buffer cut long C++ names, sometimes inside a character). An
   instant event ("i") is the thread's own ("s":"t"). */
static void bpt__chrome_event(bpt_chrome *w, const char *ph, const struct bpt__stack *t, uint64_t ts_ns,
                              const char *module, const char *name, int arity) {
    char ts[32];
    fprintf(w->out, "%s{\"name\":\"", w->events ? "," : "");
    bpt__json_chars(w->out, module ? module : "?");
    fputc(':', w->out);
    bpt__json_chars(w->out, name ? name : "?");
    if (fprintf(w->out, "/%d\",\"cat\":\"bptrace\",\"ph\":\"%s\"%s,\"ts\":%s,\"pid\":%lld,\"tid\":%u}\n", arity, ph,
                ph[0] == 'i' ? ",\"s\":\"t\"" : "", bpt__json_us(ts, (int64_t)(ts_ns - w->base_ns)),
                bpt__chrome_pid(t), (unsigned)t->tid) < 0)
        w->err = 1;
    w->events++;
}

/* Close t's kept calls down to depth d, newest first, at ts_ns. Calls
   deeper than the kept ones had no B event: they get no E either. */
static void bpt__chrome_close_to(bpt_chrome *w, struct bpt__stack *t, uint32_t d, uint64_t ts_ns) {
    if (t->depth > BPT__STACK_KEPT) t->depth = BPT__STACK_KEPT;
    while (t->depth > d) {
        const bpt__call *c = &t->call[--t->depth];
        bpt__chrome_event(w, "E", t, ts_ns, c->module, c->name, c->arity);
        w->closed++;
    }
}

/* A DROPPED message: close the thread's open calls at its ts (>>stacks: no
   later return may close them, which keeps every E after its own B), then
   mark the loss with a thread-scoped instant event, which Perfetto and
   speedscope show on the thread's track. */
static void bpt__chrome_dropped(bpt_chrome *w, struct bpt__stack *t, const bpt_msg *m) {
    char ts[32];
    uint64_t at = bpt__stack_ts(t, m);
    bpt__chrome_close_to(w, t, 0, at);
    bpt__stack_cut(t, m);
    fprintf(w->out, "%s{\"name\":\"dropped %llu\"", w->events ? "," : "", (unsigned long long)m->value);
    if (fprintf(w->out, ",\"cat\":\"bptrace\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%s,\"pid\":%lld,\"tid\":%u}\n",
                bpt__json_us(ts, (int64_t)(at - w->base_ns)), bpt__chrome_pid(t), (unsigned)t->tid) < 0)
        w->err = 1;
    w->events++;
}

int bpt_chrome_write(bpt_chrome *w, const bpt_msg *m) {
    struct bpt__stack *t;
    int k, created, opens;
    if (!w || !m || !w->out) return bpt__fail(BPT_EINVAL, "bpt_chrome_write: w and m must not be NULL, w open");
    if (m->type != BPT_MSG_CALL && m->type != BPT_MSG_RETURN_FROM && m->type != BPT_MSG_EXCEPTION_FROM &&
        m->type != BPT_MSG_DROPPED)
        return 0;
    if (!w->events && !w->base_ns) w->base_ns = m->ts_ns;
    opens = m->type == BPT_MSG_CALL || m->type == BPT_MSG_DROPPED;   /* both write on the thread's track */
    if (!w->tracks && (w->tracks = (struct bpt__tracks *)BPT_MALLOC(sizeof *w->tracks)) != NULL)
        memset(w->tracks, 0, sizeof *w->tracks);
    t = w->tracks ? bpt__stack_of(w->tracks, m, opens, &created) : NULL;
    if (!t) {
        if (opens)
            return bpt__fail(BPT_ENOMEM, "bpt_chrome_write: no memory for thread %u's state", (unsigned)m->thread);
        w->unmatched++;                                    /* a return on a thread with no open call */
        return 0;
    }
    if (created) {   /* the track's names: a switched process names its own (bpt__chrome_pid), once */
        fprintf(w->out, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%lld,\"tid\":%u,\"args\":{\"name\":\"thread %u\"}}\n",
                w->events ? "," : "", bpt__chrome_pid(t), (unsigned)t->tid, (unsigned)t->tid);
        w->events++;
        if (bpt__stack_switched(t) && bpt__tracks_named(w->tracks, t->process)) {
            fprintf(w->out, ",{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%lld,\"args\":{\"name\":\"process %llu\"}}\n",
                    bpt__chrome_pid(t), (unsigned long long)t->process);
            w->events++;
        }
    }
    if (m->type == BPT_MSG_DROPPED) {
        bpt__chrome_dropped(w, t, m);
    } else if (m->type == BPT_MSG_CALL && m->no_return) {   /* nothing will end it: a moment (>>stacks) */
        bpt__chrome_event(w, "i", t, bpt__stack_ts(t, m), m->module, m->name, m->arity);
    } else if (m->type == BPT_MSG_CALL) {
        if (bpt__stack_push(t, m) < 0)
            return bpt__fail(BPT_ENOMEM, "bpt_chrome_write: no memory for thread %u's deeper stack", (unsigned)m->thread);
        if (t->depth <= BPT__STACK_KEPT)                   /* too deep: neither it nor its return is written */
            bpt__chrome_event(w, "B", t, t->last_ns, m->module, m->name, m->arity);
    } else if ((k = bpt__stack_return(t, m)) == -1) {
        w->unmatched++;                                    /* also the return of a call opened before a DROPPED */
    } else if (k >= 0) {
        bpt__chrome_close_to(w, t, (uint32_t)k + 1, t->last_ns);   /* calls above it, unwound without a message */
        t->depth = (uint32_t)k;
        bpt__chrome_event(w, "E", t, t->last_ns, m->module, m->name, m->arity);
    }
    if (bpt__stream_failed(w->out)) w->err = 1;
    return w->err ? bpt__fail(BPT_EINVAL, "bpt_chrome_write: write failed: %s", strerror(errno)) : 0;
}

int bpt_chrome_close(bpt_chrome *w) {
    uint32_t i;
    if (!w || !w->out) return bpt__fail(BPT_EINVAL, "bpt_chrome_close: w is NULL or not open");
    if (w->tracks) {
        for (i = 0; i < w->tracks->n; i++) bpt__chrome_close_to(w, &w->tracks->v[i], 0, w->tracks->v[i].last_ns);
        bpt__tracks_free(w->tracks);
        BPT_FREE(w->tracks);
        w->tracks = NULL;
    }
    if (fputs("]}\n", w->out) < 0 || fflush(w->out) != 0 || bpt__stream_failed(w->out)) w->err = 1;
    w->out = NULL;
    return w->err ? bpt__fail(BPT_EINVAL, "bpt_chrome_close: a write failed") : (int)w->events;
}

/* >>folded: per-thread stacks (>>stacks) rebuilt from calls and returns;
   own time per stack in an open-addressing table keyed by the stack's text. */
typedef struct bpt__fold_entry { char *stack; uint64_t ns; } bpt__fold_entry;

struct bpt_folded {
    struct bpt__tracks tracks;    /* each thread's (and process's) open calls */
    bpt__fold_entry *e;
    size_t ecap, used;
    char *text;                   /* the stack being charged, "a;b;c" (bpt__fold_text); grown */
    size_t text_cap;
};

int bpt_folded_new(bpt_folded **out) {
    bpt_folded *f;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_folded_new: out is NULL");
    if (!(f = (bpt_folded *)BPT_MALLOC(sizeof *f))) return bpt__fail(BPT_ENOMEM, "bpt_folded_new: no memory");
    memset(f, 0, sizeof *f);
    *out = f;
    return 0;
}

void bpt_folded_free(bpt_folded *f) {
    size_t i;
    if (!f) return;
    for (i = 0; i < f->ecap; i++) BPT_FREE(f->e[i].stack);
    BPT_FREE(f->e);
    bpt__tracks_free(&f->tracks);
    BPT_FREE(f->text);
    BPT_FREE(f);
}

static size_t bpt__fold_hash(const char *s) {
    size_t h = 1469598103934665603ull & (size_t)-1;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * (size_t)1099511628211ull;
    return h;
}

/* Add ns to the entry of stack (copied on first use). 0 or BPT_ENOMEM. */
static int bpt__fold_charge(bpt_folded *f, const char *stack, uint64_t ns) {
    size_t i;
    if ((f->used + 1) * 2 > f->ecap) {
        size_t cap = f->ecap ? f->ecap * 2 : 256, k;
        bpt__fold_entry *e = (bpt__fold_entry *)BPT_MALLOC(sizeof *e * cap);
        if (!e) return BPT_ENOMEM;
        memset(e, 0, sizeof *e * cap);
        for (k = 0; k < f->ecap; k++) {
            if (!f->e[k].stack) continue;
            for (i = bpt__fold_hash(f->e[k].stack) & (cap - 1); e[i].stack; i = (i + 1) & (cap - 1)) {}
            e[i] = f->e[k];
        }
        BPT_FREE(f->e);
        f->e = e;
        f->ecap = cap;
    }
    for (i = bpt__fold_hash(stack) & (f->ecap - 1); f->e[i].stack; i = (i + 1) & (f->ecap - 1))
        if (strcmp(f->e[i].stack, stack) == 0) { f->e[i].ns += ns; return 0; }
    if (!(f->e[i].stack = (char *)BPT_MALLOC(strlen(stack) + 1))) return BPT_ENOMEM;
    strcpy(f->e[i].stack, stack);
    f->e[i].ns = ns;
    f->used++;
    return 0;
}

/* A name's byte in a folded line: ';' separates frames and a line ends
   at '\n', so a name's own ';' is written ':' and its control bytes '?'
   (a VM's "m(Ljava/lang/String;)V" made two frames, and a name with a
   newline a line flamegraph.pl cannot read; found by review). */
static char bpt__fold_char(char c) {
    return c == ';' ? ':' : (unsigned char)c < 0x20 ? '?' : c;
}

/* The text of t's stack up to its kept call k, "a;b;c", in f->text (grown
   as it needs: names from a file may be 65,535 bytes each, and a fixed
   buffer cut deep stacks short, charging a leaf's time to a stack that
   never ran it; found by review). 0 or BPT_ENOMEM. */
static int bpt__fold_text(bpt_folded *f, const struct bpt__stack *t, int k) {
    size_t need = 1, len = 0;
    int i;
    for (i = 0; i <= k; i++) need += strlen(t->call[i].name ? t->call[i].name : "?") + 1;
    if (need > f->text_cap) {
        char *p = (char *)BPT_MALLOC(need);
        if (!p) return BPT_ENOMEM;
        BPT_FREE(f->text);
        f->text = p;
        f->text_cap = need;
    }
    for (i = 0; i <= k; i++) {
        const char *name = t->call[i].name ? t->call[i].name : "?";
        if (i) f->text[len++] = ';';
        while (*name) f->text[len++] = bpt__fold_char(*name++);
    }
    f->text[len] = '\0';
    return 0;
}

/* The time of t's kept call k's traced callees that returned: its own
   child_ns, and that of the calls above it, which are unwound without a
   message with it (>>stacks). Their own time is k's; their callees' was
   charged to their own stacks already, and is not charged again as k's
   (found by review: it was, and a stack's lines summed to more than its
   span). */
static uint64_t bpt__fold_child_ns(const struct bpt__stack *t, int k) {
    uint64_t ns = 0;
    uint32_t j, top = t->depth < BPT__STACK_KEPT ? t->depth : (uint32_t)BPT__STACK_KEPT;
    for (j = (uint32_t)k; j < top; j++) ns += t->call[j].child_ns;
    return ns;
}

/* A return on t that matches its kept call k: k's own time charged to its
   stack, its span added to its caller's callees; then k and the calls
   above it popped. On BPT_ENOMEM nothing changed but t's time: the
   message is not counted, and a retry counts it. */
static int bpt__fold_return(bpt_folded *f, struct bpt__stack *t, int k) {
    uint64_t elapsed = t->last_ns - t->call[k].start_ns;   /* >= 0: a stack's time never goes back */
    uint64_t child = bpt__fold_child_ns(t, k);
    if (bpt__fold_text(f, t, k) < 0 || bpt__fold_charge(f, f->text, elapsed > child ? elapsed - child : 0) < 0)
        return BPT_ENOMEM;
    t->depth = (uint32_t)k;
    if (k > 0) t->call[k - 1].child_ns += elapsed;
    return 0;
}

int bpt_folded_add(bpt_folded *f, const bpt_msg *m) {
    struct bpt__stack *t;
    int k, created;
    if (!f || !m) return bpt__fail(BPT_EINVAL, "bpt_folded_add: f and m must not be NULL");
    if (m->type != BPT_MSG_CALL && m->type != BPT_MSG_RETURN_FROM && m->type != BPT_MSG_EXCEPTION_FROM &&
        m->type != BPT_MSG_DROPPED)
        return 0;
    if (m->type == BPT_MSG_CALL && m->no_return) return 0;   /* nothing will end it: no time to charge (>>stacks) */
    t = bpt__stack_of(&f->tracks, m, m->type == BPT_MSG_CALL, &created);
    if (!t) {
        if (m->type == BPT_MSG_CALL)
            return bpt__fail(BPT_ENOMEM, "bpt_folded_add: no memory for thread %u's stack", (unsigned)m->thread);
        return 0;                                   /* a return or a drop on a thread with no open call */
    }
    if (m->type == BPT_MSG_CALL) {
        if (bpt__stack_push(t, m) < 0)
            return bpt__fail(BPT_ENOMEM, "bpt_folded_add: no memory for thread %u's deeper stack", (unsigned)m->thread);
        return 0;
    }
    if (m->type == BPT_MSG_DROPPED) {               /* the open calls' time is unknown: none is charged */
        bpt__stack_cut(t, m);
        return 0;
    }
    if ((k = bpt__stack_return(t, m)) < 0) return 0;   /* not kept, or began before tracing or a drop */
    if (bpt__fold_return(f, t, k) < 0) return bpt__fail(BPT_ENOMEM, "bpt_folded_add: no memory for a new stack");
    return 0;
}

static int bpt__fold_cmp(const void *a, const void *b) {
    const bpt__fold_entry *x = *(const bpt__fold_entry *const *)a, *y = *(const bpt__fold_entry *const *)b;
    if (x->ns != y->ns) return x->ns < y->ns ? 1 : -1;
    return strcmp(x->stack, y->stack);
}

int bpt_folded_write(bpt_folded *f, FILE *out) {
    bpt__fold_entry **v;
    size_t i, n = 0;
    int err = 0;
    if (!f || !out) return bpt__fail(BPT_EINVAL, "bpt_folded_write: f and out must not be NULL");
    if (!f->used) return 0;
    if (!(v = (bpt__fold_entry **)BPT_MALLOC(sizeof *v * f->used))) return bpt__fail(BPT_ENOMEM, "bpt_folded_write: no memory");
    for (i = 0; i < f->ecap; i++) if (f->e[i].stack) v[n++] = &f->e[i];
    qsort(v, n, sizeof *v, bpt__fold_cmp);
    for (i = 0; i < n; i++)
        if (fprintf(out, "%s %llu\n", v[i]->stack, (unsigned long long)((v[i]->ns + 500) / 1000)) < 0) err = 1;
    if (bpt__stream_failed(out)) err = 1;
    BPT_FREE(v);
    return err ? bpt__fail(BPT_EINVAL, "bpt_folded_write: write failed") : (int)n;
}
