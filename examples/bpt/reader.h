/* reader.h: reading a bptrace program's data from outside, through its
   root record (bptrace.h, >>root), with nothing but a function that copies
   bytes from the target's address space. bpt.c gives it process_vm_readv;
   the fuzz target (tests/fuzz/fuzz_root.c) gives it a buffer. Nothing here
   follows an address without a read that can fail, trusts a size or an
   offset that bpt_root_check did not check, loops without a bound, or
   allocates for a length past its memory budget, so a corrupt or moving
   target gives an error, never a crash.

   Include bptrace.h (the public half is enough) before this file. */
#ifndef BPT_READER_H
#define BPT_READER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The errors of a read, beside bptrace's BPT_E* codes. */
enum {
    RD_OK = 0,
    RD_EFAULT = -100,     /* an address the target does not map (a corrupt pointer) */
    RD_EGONE = -101,      /* the target exited */
    RD_EPERM = -102,      /* the kernel refused to let us read it */
    RD_ETORN = -103,      /* the data kept changing while it was read */
    RD_ENOMEM = -104,
    RD_EBUDGET = -105     /* a length whose records would pass the walk's memory budget (corrupt?) */
};

typedef struct rd_target rd_target;
struct rd_target {
    /* Copy n bytes at addr in the target to buf: RD_OK, RD_EFAULT (nothing
       mapped there, or only part of it), RD_EGONE or RD_EPERM. */
    int (*read)(rd_target *t, uint64_t addr, void *buf, size_t n);
    void *user;
    uint64_t root_addr;
    bpt_root_record root;         /* checked with bpt_root_check */
    /* Budgets of one walk (a snapshot, the sessions, a stack), so that a
       corrupt target with a cycle or sizes the bounds below do not see
       still ends soon: rd_open sets 2^24 reads and 1 GiB unless set. */
    uint64_t reads_max, bytes_max;
    uint64_t reads_left, bytes_left;  /* what is left of them: none left refuses every read */
    /* The memory budget of one walk: bytes of the records it decodes
       (rd_func, rd_thread and its page addresses, rd_session, rd_pattern),
       charged before they are allocated (rd_charge), so that a corrupt
       length whose records all read is refused, not held (found by review:
       2M functions took 1 GB). rd_open sets RD_MEM_DEFAULT unless set; a
       walk's records are freed before the next walk of the same kind
       starts, but a caller that keeps one (bpt top: two snapshots) holds
       up to one budget for each. */
    uint64_t mem_max, mem_left;
    char what[200];               /* what the last failure was reading */
};

/* A field of a structure read into buf: width-agnostic, little-endian words. */
static uint64_t rd_field(const rd_target *t, const void *buf, int f) {
    uint64_t v = 0;
    uint32_t w = t->root.field_bytes[f];
    memcpy(&v, (const unsigned char *)buf + t->root.field_off[f], w < 8 ? w : 8);
    return v;
}
static const void *rd_field_ptr(const rd_target *t, const void *buf, int f) {
    return (const unsigned char *)buf + t->root.field_off[f];
}
static uint32_t rd_size(const rd_target *t, int s) { return t->root.struct_bytes[s]; }
static uint32_t rd_const(const rd_target *t, int c) { return t->root.consts[c]; }
static uint64_t rd_global(const rd_target *t, int g) { return t->root.global[g].u; }

static int rd_fail(rd_target *t, int rc, const char *what, uint64_t addr) {
    snprintf(t->what, sizeof t->what, "%s at 0x%llx", what, (unsigned long long)addr);
    return rc;
}

static int rd_bytes(rd_target *t, uint64_t addr, void *buf, size_t n, const char *what) {
    int rc;
    if (!addr) return rd_fail(t, RD_EFAULT, what, addr);
    if (!t->reads_left || t->bytes_left < n)
        return rd_fail(t, RD_EFAULT, "more data than any program holds (read budget spent) at", addr);
    t->reads_left--;
    t->bytes_left -= n;
    rc = t->read(t, addr, buf, n);
    return rc ? rd_fail(t, rc, what, addr) : 0;
}

static int rd_u64(rd_target *t, uint64_t addr, uint64_t *v, const char *what) {
    return rd_bytes(t, addr, v, 8, what);
}
static int rd_u32(rd_target *t, uint64_t addr, uint32_t *v, const char *what) {
    return rd_bytes(t, addr, v, 4, what);
}

/* A new walk: its budgets in full. */
static void rd_walk_begin(rd_target *t) {
    t->reads_left = t->reads_max;
    t->bytes_left = t->bytes_max;
    t->mem_left = t->mem_max;
}

/* 512 MiB: a registry of a million functions (rd_func is about 500 bytes). */
#define RD_MEM_DEFAULT ((uint64_t)512 << 20)

/* Room for count more records of size bytes each, charged against the
   walk's memory budget before the caller allocates it: 0, or RD_EBUDGET
   with t->what naming the length (what, read at addr) that asked for it. */
static int rd_charge(rd_target *t, uint64_t count, uint64_t size, const char *what, uint64_t addr) {
    if (!size || count <= t->mem_left / size) {
        t->mem_left -= count * size;
        return 0;
    }
    snprintf(t->what, sizeof t->what, "%s at 0x%llx: %llu records of %llu bytes (%llu MiB), more than the "
             "%llu MiB left of the reader's memory budget of %llu MiB", what, (unsigned long long)addr,
             (unsigned long long)count, (unsigned long long)size, (unsigned long long)((count * size) >> 20),
             (unsigned long long)(t->mem_left >> 20), (unsigned long long)(t->mem_max >> 20));
    return RD_EBUDGET;
}

/* A NUL-terminated string of at most n - 1 bytes, read byte run by byte run
   so that a string near the end of a mapping still reads. */
static int rd_string(rd_target *t, uint64_t addr, char *out, size_t n, const char *what) {
    size_t got = 0;
    if (!addr) { snprintf(out, n, "?"); return 0; }
    while (got + 1 < n) {
        size_t step = n - 1 - got < 64 ? n - 1 - got : 64;
        int rc;
        if (!t->reads_left || t->bytes_left < step) return rd_fail(t, RD_EFAULT, what, addr + got);
        t->reads_left--;
        t->bytes_left -= step;
        rc = t->read(t, addr + got, out + got, step);
        if (rc && step > 1) { step = 1; rc = t->read(t, addr + got, out + got, 1); }
        if (rc) return rd_fail(t, rc, what, addr + got);
        if (memchr(out + got, 0, step)) return 0;
        got += step;
    }
    out[n - 1] = 0;
    return 0;
}

/* The root at addr, read and checked. */
static int rd_open(rd_target *t, uint64_t root_addr, char *why, size_t why_len) {
    int rc;
    if (!t->reads_max) t->reads_max = 1u << 24;
    if (!t->bytes_max) t->bytes_max = 1u << 30;
    if (!t->mem_max) t->mem_max = RD_MEM_DEFAULT;
    rd_walk_begin(t);
    rc = rd_bytes(t, root_addr, &t->root, sizeof t->root, "the root record");
    if (rc) { snprintf(why, why_len, "cannot read %s", t->what); return rc; }
    t->root_addr = root_addr;
    return bpt_root_check(&t->root, sizeof t->root, why, why_len);
}

/* ---- A snapshot of the registry, the sessions and the threads ---- */

/* Bounds no real program reaches: a thread record per lane (65536), the
   registry's 32-bit length, and 64 MiB of page addresses in all. */
enum { RD_MAX_FUNCS = 1 << 22, RD_MAX_THREADS = 1 << 16, RD_MAX_PATTERNS = 100000 };
#define RD_MAX_PAGE_ADDRS (8u << 20)

typedef struct rd_func {
    uint64_t addr;                /* the record's address (frames name it) */
    char module[128], name[160];
    int arity;
    uint32_t fid, kind, installed;
    uint64_t fn, code_size;       /* native: its code, [fn, fn + code_size) */
    unsigned flags;               /* the public flags of the kinds on, any session */
    unsigned paused;              /* of those, the paused ones */
    int counted;
    uint64_t count;
    int timed;                    /* call_time on: time_calls and time_ns hold its sums */
    int time_approx;              /* a table moved while read (its owner grew it): left out */
    uint64_t time_calls, time_ns;
    char sessions[128];           /* the names of the sessions that trace it */
} rd_func;

typedef struct rd_thread {
    uint64_t addr;
    uint32_t tid, in_use, index;
    uint64_t state;
    uint64_t shadow[2];
    uint32_t depth[2];
    uint64_t fiber;
    uint64_t *counts;             /* the COUNT_PAGES page addresses (NULL: unmapped) */
} rd_thread;

typedef struct rd_snapshot {
    uint64_t seq;
    int torn;                     /* the layout count moved in every try: may be inconsistent */
    uint64_t epoch, waits;
    uint32_t nrecords, active_ix;
    rd_thread *threads; uint32_t nthreads;
    rd_func *funcs; uint32_t nfuncs;
} rd_snapshot;

static void rd_snapshot_free(rd_snapshot *s) {
    uint32_t i;
    for (i = 0; i < s->nthreads; i++) free(s->threads[i].counts);
    free(s->threads);
    free(s->funcs);
    memset(s, 0, sizeof *s);
}

static int rd_threads(rd_target *t, rd_snapshot *s) {
    uint64_t a;
    unsigned char *buf;
    uint32_t pages = rd_const(t, BPT_ROOT_C_COUNT_PAGES), i;
    int rc = rd_u64(t, rd_global(t, BPT_ROOT_G_THREADS), &a, "the thread list's head");
    if (rc) return rc;
    if (!(buf = (unsigned char *)malloc(rd_size(t, BPT_ROOT_S_THREAD)))) return RD_ENOMEM;
    while (a) {
        rd_thread *th;
        if (s->nthreads == RD_MAX_THREADS || (uint64_t)(s->nthreads + 1) * pages > RD_MAX_PAGE_ADDRS) {
            free(buf);
            return rd_fail(t, RD_EFAULT, "a thread list without an end", a);
        }
        if ((s->nthreads & (s->nthreads - 1)) == 0) {   /* grow at powers of two */
            rd_thread *g;
            if ((rc = rd_charge(t, s->nthreads ? s->nthreads : 1, sizeof *g, "the thread list", a))) { free(buf); return rc; }
            if (!(g = (rd_thread *)realloc(s->threads, sizeof *g * (s->nthreads ? 2 * s->nthreads : 1)))) {
                free(buf);
                return RD_ENOMEM;
            }
            s->threads = g;
        }
        if ((rc = rd_bytes(t, a, buf, rd_size(t, BPT_ROOT_S_THREAD), "a thread record"))) { free(buf); return rc; }
        th = &s->threads[s->nthreads];
        memset(th, 0, sizeof *th);
        if ((rc = rd_charge(t, pages, 8, "a thread's counter pages", a))) { free(buf); return rc; }
        if (!(th->counts = (uint64_t *)malloc(8ull * pages))) { free(buf); return RD_ENOMEM; }
        s->nthreads++;
        th->addr = a;
        th->tid = (uint32_t)rd_field(t, buf, BPT_ROOT_F_THREAD_TID);
        th->in_use = (uint32_t)rd_field(t, buf, BPT_ROOT_F_THREAD_IN_USE);
        th->index = (uint32_t)rd_field(t, buf, BPT_ROOT_F_THREAD_INDEX);
        th->state = rd_field(t, buf, BPT_ROOT_F_THREAD_STATE);
        th->fiber = rd_field(t, buf, BPT_ROOT_F_THREAD_FIBER);
        memcpy(th->shadow, rd_field_ptr(t, buf, BPT_ROOT_F_THREAD_SHADOW), 16);
        memcpy(th->depth, rd_field_ptr(t, buf, BPT_ROOT_F_THREAD_SHADOW_DEPTH), 8);
        for (i = 0; i < pages; i++)
            memcpy(&th->counts[i], (const unsigned char *)rd_field_ptr(t, buf, BPT_ROOT_F_THREAD_COUNTS) + 8 * i, 8);
        a = rd_field(t, buf, BPT_ROOT_F_THREAD_NEXT);
    }
    free(buf);
    return 0;
}

/* call_count's sum for a BpCount at addr: every thread's counter of its
   slot, plus the spill, minus the base (as bpt__count_sum, kind_count.c). */
static int rd_count(rd_target *t, const rd_snapshot *s, uint64_t addr, uint64_t *out) {
    unsigned char c[256];
    uint64_t sum, slot, per = rd_const(t, BPT_ROOT_C_COUNT_PAGE_SLOTS);
    uint32_t i;
    int rc;
    if (rd_size(t, BPT_ROOT_S_COUNT) > sizeof c) return rd_fail(t, RD_EFAULT, "a count record too large", addr);
    if ((rc = rd_bytes(t, addr, c, rd_size(t, BPT_ROOT_S_COUNT), "a call_count record"))) return rc;
    slot = rd_field(t, c, BPT_ROOT_F_COUNT_SLOT);
    if (slot / per >= rd_const(t, BPT_ROOT_C_COUNT_PAGES)) return rd_fail(t, RD_EFAULT, "a call_count slot out of range", addr);
    sum = rd_field(t, c, BPT_ROOT_F_COUNT_SPILL);
    for (i = 0; i < s->nthreads; i++) {
        uint64_t page = s->threads[i].counts[slot / per], v;
        if (!page) continue;
        if ((rc = rd_u64(t, page + 8 * (slot % per), &v, "a counter page"))) return rc;
        sum += v;
    }
    *out = sum - rd_field(t, c, BPT_ROOT_F_COUNT_BASE);
    return 0;
}

/* One call_time table's sums, every process (cells with process 0 are free). */
static int rd_timem_table(rd_target *t, uint64_t addr, uint64_t *calls, uint64_t *ns) {
    unsigned char hdr[256], cells[64 * 64];
    uint32_t csz = rd_size(t, BPT_ROOT_S_CELL), cap, i, j, per;
    uint64_t base;
    int rc;
    if (rd_size(t, BPT_ROOT_S_TABLE) > sizeof hdr || csz > 64) return rd_fail(t, RD_EFAULT, "a call_time table too large", addr);
    if ((rc = rd_bytes(t, addr, hdr, rd_size(t, BPT_ROOT_S_TABLE), "a call_time table"))) return rc;
    cap = (uint32_t)rd_field(t, hdr, BPT_ROOT_F_TABLE_CAP);
    if (!cap || cap > (1u << 20) || (cap & (cap - 1))) return rd_fail(t, RD_EFAULT, "a call_time table of a bad size", addr);
    base = addr + t->root.field_off[BPT_ROOT_F_TABLE_CELLS];
    per = (uint32_t)(sizeof cells / csz);
    for (i = 0; i < cap; i += per) {
        uint32_t n = cap - i < per ? cap - i : per;
        if ((rc = rd_bytes(t, base + (uint64_t)i * csz, cells, (size_t)n * csz, "call_time cells"))) return rc;
        for (j = 0; j < n; j++) {
            const unsigned char *c = cells + (size_t)j * csz;
            if (!rd_field(t, c, BPT_ROOT_F_CELL_PROCESS)) continue;
            *calls += rd_field(t, c, BPT_ROOT_F_CELL_CALLS);
            *ns += rd_field(t, c, BPT_ROOT_F_CELL_TIME);
        }
    }
    return 0;
}

/* One call_time table pointer, read again from its slot at slot_addr if
   the table fails to read (its owner may have grown out of it), else left
   out and the sums marked approximate. */
static int rd_timem_one(rd_target *t, uint64_t ta, uint64_t slot_addr, rd_func *f, uint64_t *calls, uint64_t *ns) {
    if (!ta || rd_timem_table(t, ta, calls, ns) == 0) return 0;
    if (slot_addr && rd_u64(t, slot_addr, &ta, "a call_time table") == 0 && (!ta || rd_timem_table(t, ta, calls, ns) == 0))
        return 0;
    f->time_approx = 1;
    return t->reads_left == 0 || t->bytes_left == 0 ? rd_fail(t, RD_EFAULT, "call_time's tables", slot_addr ? slot_addr : ta) : 0;
}

/* call_time's sums for a breakpoint's tables at addr, read while their
   owners write them: the carried sums of earlier collections, the tables
   of the first MAX_THREADS thread records, and those of the threads past
   them (TIMEM_MORE), each from its thread's slot. */
static int rd_timem(rd_target *t, const rd_snapshot *s, uint64_t addr, rd_func *f) {
    uint32_t n = rd_const(t, BPT_ROOT_C_MAX_THREADS), nmore = rd_const(t, BPT_ROOT_C_TIMEM_MORE), i;
    unsigned char *tm = (unsigned char *)malloc(rd_size(t, BPT_ROOT_S_TIMEM));
    uint64_t calls = 0, ns = 0, more, tables = addr + t->root.field_off[BPT_ROOT_F_TIMEM_TABLES];
    int rc;
    if (!tm) return RD_ENOMEM;
    if ((rc = rd_bytes(t, addr, tm, rd_size(t, BPT_ROOT_S_TIMEM), "call_time's tables"))) { free(tm); return rc; }
    rc = rd_timem_one(t, rd_field(t, tm, BPT_ROOT_F_TIMEM_CARRIED), 0, f, &calls, &ns);
    for (i = 0; i < n && !rc; i++) {
        uint64_t ta;
        memcpy(&ta, (const unsigned char *)rd_field_ptr(t, tm, BPT_ROOT_F_TIMEM_TABLES) + 8ull * i, 8);
        rc = rd_timem_one(t, ta, tables + 8ull * i, f, &calls, &ns);
    }
    more = rd_field(t, tm, BPT_ROOT_F_TIMEM_MORE);
    for (i = 0; more && i < s->nthreads && !rc; i++) {
        uint32_t k = s->threads[i].index;
        uint64_t ta;
        if (k < n || k - n >= nmore) continue;
        if ((rc = rd_u64(t, more + 8ull * (k - n), &ta, "a call_time table's slot"))) break;
        rc = rd_timem_one(t, ta, more + 8ull * (k - n), f, &calls, &ns);
    }
    free(tm);
    f->timed = 1;
    f->time_calls += calls;
    f->time_ns += ns;
    return rc;
}

/* A char-array field copied out, NUL-terminated within n bytes. */
static void rd_copy_string(char *out, size_t n, const void *field, uint32_t width) {
    size_t w = width < n ? width : n;
    memcpy(out, field, w);
    out[w - 1] = 0;
}

/* A session's name: its name field alone, not the whole session. */
static int rd_session_name(rd_target *t, uint64_t addr, char *out, size_t n) {
    char name[4096];   /* bpt_root_check bounds a string field to 4096 bytes */
    uint32_t w = t->root.field_bytes[BPT_ROOT_F_SESSION_NAME];
    int rc = rd_bytes(t, addr ? addr + t->root.field_off[BPT_ROOT_F_SESSION_NAME] : 0, name, w, "a session's name");
    if (!rc) rd_copy_string(out, n, name, w);
    return rc;
}

/* One function's flags and count: its breakpoints, one per session. */
static int rd_func_bps(rd_target *t, const rd_snapshot *s, rd_func *f, uint64_t bp) {
    uint32_t bpsz = rd_size(t, BPT_ROOT_S_BP), dsz = rd_size(t, BPT_ROOT_S_BPDATA);
    uint32_t nk = rd_const(t, BPT_ROOT_C_NKINDS), k, n = 0;
    unsigned char *buf = (unsigned char *)malloc(bpsz);
    int rc = 0;
    if (!buf) return RD_ENOMEM;
    while (bp && !rc) {
        const unsigned char *d;
        uint32_t flags;
        char sname[80];
        if (n++ > rd_const(t, BPT_ROOT_C_MAX_SESSIONS)) { rc = rd_fail(t, RD_EFAULT, "a breakpoint list without an end", bp); break; }
        if ((rc = rd_bytes(t, bp, buf, bpsz, "a breakpoint"))) break;
        d = (const unsigned char *)rd_field_ptr(t, buf, BPT_ROOT_F_BP_DATA) + (size_t)(s->active_ix & 1) * dsz;
        flags = (uint32_t)rd_field(t, d, BPT_ROOT_F_BPDATA_FLAGS);
        for (k = 0; k < nk; k++) {
            if (!(flags & (1u << (2 * k)))) continue;
            f->flags |= t->root.kind_flag[k];
            if (!(flags & (2u << (2 * k)))) f->paused |= t->root.kind_flag[k];
            if (k == rd_const(t, BPT_ROOT_C_KIND_COUNT)) {
                uint64_t c, cnt;
                memcpy(&c, (const unsigned char *)rd_field_ptr(t, d, BPT_ROOT_F_BPDATA_DATA) + 8 * k, 8);
                if ((rc = rd_count(t, s, c, &cnt))) break;
                f->counted = 1;
                f->count += cnt;
            }
            if (k == rd_const(t, BPT_ROOT_C_KIND_TIME)) {
                uint64_t tm;
                memcpy(&tm, (const unsigned char *)rd_field_ptr(t, d, BPT_ROOT_F_BPDATA_DATA) + 8 * k, 8);
                if ((rc = rd_timem(t, s, tm, f))) break;
            }
        }
        if (!rc && !rd_session_name(t, rd_field(t, buf, BPT_ROOT_F_BP_SESSION), sname, sizeof sname)) {
            size_t l = strlen(f->sessions);
            snprintf(f->sessions + l, sizeof f->sessions - l, "%s%s", l ? "," : "", sname);
        }
        bp = rd_field(t, buf, BPT_ROOT_F_BP_NEXT);
    }
    free(buf);
    return rc;
}

static int rd_funcs(rd_target *t, rd_snapshot *s) {
    uint64_t arr;
    uint32_t n, i;
    unsigned char *buf;
    int rc;
    if ((rc = rd_u64(t, rd_global(t, BPT_ROOT_G_FUNCS), &arr, "the registry's array")) ||
        (rc = rd_u32(t, rd_global(t, BPT_ROOT_G_NFUNCS), &n, "the registry's length")))
        return rc;
    if (n > RD_MAX_FUNCS) return rd_fail(t, RD_EFAULT, "a registry of more than 4M functions", rd_global(t, BPT_ROOT_G_NFUNCS));
    if (!n) return 0;
    /* n records, charged before they are allocated: a corrupt n is refused
       here. Allocated at once, their pages are touched as records read. */
    if ((rc = rd_charge(t, n, sizeof *s->funcs, "the registry's length", rd_global(t, BPT_ROOT_G_NFUNCS)))) return rc;
    if (!(s->funcs = (rd_func *)malloc(sizeof *s->funcs * n))) return RD_ENOMEM;
    if (!(buf = (unsigned char *)malloc(rd_size(t, BPT_ROOT_S_FUNC)))) return RD_ENOMEM;
    for (i = 0; i < n; i++) {
        rd_func *f = &s->funcs[i];
        memset(f, 0, sizeof *f);
        if ((rc = rd_u64(t, arr + 8ull * i, &f->addr, "the registry's array")) ||
            (rc = rd_bytes(t, f->addr, buf, rd_size(t, BPT_ROOT_S_FUNC), "a function record")) ||
            (rc = rd_string(t, rd_field(t, buf, BPT_ROOT_F_FUNC_MODULE), f->module, sizeof f->module, "a module name")) ||
            (rc = rd_string(t, rd_field(t, buf, BPT_ROOT_F_FUNC_NAME), f->name, sizeof f->name, "a function name")))
            break;
        f->arity = (int)(int32_t)rd_field(t, buf, BPT_ROOT_F_FUNC_ARITY);
        f->fid = (uint32_t)rd_field(t, buf, BPT_ROOT_F_FUNC_FID);
        f->kind = (uint32_t)rd_field(t, buf, BPT_ROOT_F_FUNC_KIND);
        f->installed = (uint32_t)rd_field(t, buf, BPT_ROOT_F_FUNC_INSTALLED);
        f->fn = rd_field(t, buf, BPT_ROOT_F_FUNC_FN);
        f->code_size = rd_field(t, buf, BPT_ROOT_F_FUNC_CODE_SIZE);
        if ((rc = rd_func_bps(t, s, f, rd_field(t, buf, BPT_ROOT_F_FUNC_GEN_BP)))) break;
        s->nfuncs = i + 1;
    }
    free(buf);
    return rc;
}

/* A snapshot: read the layout count [L1], everything, the count again;
   again while it moved (up to tries times), then keep the last, marked torn. */
static int rd_snapshot_take(rd_target *t, rd_snapshot *s, int tries) {
    int rc = 0, i;
    for (i = 0; i < tries; i++) {
        uint64_t seq2;
        rd_walk_begin(t);
        rd_snapshot_free(s);
        if ((rc = rd_u64(t, rd_global(t, BPT_ROOT_G_SEQ), &s->seq, "the layout count"))) return rc;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);   /* [L1] reader: the count before the data */
        if ((rc = rd_u64(t, rd_global(t, BPT_ROOT_G_EPOCH), &s->epoch, "the epoch")) ||
            (rc = rd_u64(t, rd_global(t, BPT_ROOT_G_WAITS), &s->waits, "the waits")) ||
            (rc = rd_u32(t, rd_global(t, BPT_ROOT_G_NTHREADS), &s->nrecords, "the thread count")) ||
            (rc = rd_u32(t, rd_global(t, BPT_ROOT_G_ACTIVE_IX), &s->active_ix, "the active generation")) ||
            (rc = rd_threads(t, s)))
            return rc;
        rc = (s->seq & 1) ? RD_ETORN : rd_funcs(t, s);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);   /* [L1] reader: the data before the count */
        if (rd_u64(t, rd_global(t, BPT_ROOT_G_SEQ), &seq2, "the layout count")) return RD_EGONE;
        if (seq2 == s->seq && !(s->seq & 1)) { s->torn = 0; return rc; }
        s->torn = 1;   /* a free may explain a failed read: try again */
    }
    return rc == RD_ETORN ? 0 : rc;
}

static const rd_func *rd_func_at(const rd_snapshot *s, uint64_t addr) {
    uint32_t i;
    for (i = 0; i < s->nfuncs; i++)
        if (s->funcs[i].addr == addr) return &s->funcs[i];
    return NULL;
}

/* A thread's shadow stack (which 0: native, 1: VM): the function records
   of its frames, outermost first, in out[0..*n). The owner pushes and pops
   while we read: the depth is read before and after, and the frames read
   again while it moved (moved = 1 after tries). */
static int rd_stack(rd_target *t, const rd_thread *th, int which, uint64_t *out, uint32_t *n, uint32_t max,
                    int *moved) {
    uint32_t fsz = rd_size(t, BPT_ROOT_S_FRAME), d, d2, i, try_;
    unsigned char *buf;
    int rc = 0;
    *n = 0; *moved = 0;
    if (!th->shadow[which]) return 0;
    if (!(buf = (unsigned char *)malloc(fsz))) return RD_ENOMEM;
    rd_walk_begin(t);
    for (try_ = 0; try_ < 5; try_++) {
        uint64_t da = th->addr + t->root.field_off[BPT_ROOT_F_THREAD_SHADOW_DEPTH] + 4u * which;
        if ((rc = rd_u32(t, da, &d, "a shadow stack's depth"))) break;
        if (d > rd_const(t, BPT_ROOT_C_SHADOW_FRAMES)) { rc = rd_fail(t, RD_EFAULT, "a shadow stack deeper than its frames", da); break; }
        *n = 0;
        for (i = 0; i < d && *n < max; i++) {
            if ((rc = rd_bytes(t, th->shadow[which] + (uint64_t)fsz * i, buf, fsz, "a frame"))) break;
            if (rd_field(t, buf, BPT_ROOT_F_FRAME_GONE)) continue;
            out[(*n)++] = rd_field(t, buf, BPT_ROOT_F_FRAME_F);
        }
        if (rc || rd_u32(t, da, &d2, "a shadow stack's depth")) break;
        if (d2 == d) break;
        *moved = 1;
    }
    free(buf);
    return rc;
}

/* ---- The sessions ---- */

typedef struct rd_pattern {
    char module[128], function[128];
    int arity;
    unsigned flags;
} rd_pattern;

typedef struct rd_session {
    uint64_t id;
    char name[64];
    const char *type;             /* "usdt", "callback", "flight recorder" or "buffered" */
    int dead;
    uint32_t lanes;
    uint64_t bytes, chunk_bytes, chunks, max_chunks;
    uint64_t written, dropped, overwritten, delivered, lost, drained;
    uint64_t laneless, limited, skipped;
    rd_pattern *patterns;
    uint32_t npatterns;
} rd_session;

static void rd_sessions_free(rd_session *ss, uint32_t n) {
    uint32_t i;
    for (i = 0; i < n; i++) free(ss[i].patterns);
    free(ss);
}

/* One session at sa: its counters summed over its lanes, its patterns. */
static int rd_session_at(rd_target *t, uint64_t sa, unsigned char *sb, unsigned char *lb, uint64_t *lanes, rd_session *o) {
    uint32_t j, k, per = rd_const(t, BPT_ROOT_C_LANES_PER_DIR);
    uint64_t pa;
    int rc;
    memset(o, 0, sizeof *o);
    if ((rc = rd_bytes(t, sa, sb, rd_size(t, BPT_ROOT_S_SESSION), "a session"))) return rc;
    o->id = rd_field(t, sb, BPT_ROOT_F_SESSION_ID);
    rd_copy_string(o->name, sizeof o->name, rd_field_ptr(t, sb, BPT_ROOT_F_SESSION_NAME),
                   t->root.field_bytes[BPT_ROOT_F_SESSION_NAME]);
    o->type = rd_field(t, sb, BPT_ROOT_F_SESSION_USDT) ? "usdt" : rd_field(t, sb, BPT_ROOT_F_SESSION_TRACER) ? "callback"
            : rd_field(t, sb, BPT_ROOT_F_SESSION_FLIGHT) ? "flight recorder" : "buffered";
    o->dead = rd_field(t, sb, BPT_ROOT_F_SESSION_DEAD) != 0;
    o->chunk_bytes = rd_field(t, sb, BPT_ROOT_F_SESSION_CHUNK_BYTES);
    o->chunks = rd_field(t, sb, BPT_ROOT_F_SESSION_CHUNKS);
    o->max_chunks = rd_field(t, sb, BPT_ROOT_F_SESSION_MAX_CHUNKS);
    o->laneless = rd_field(t, sb, BPT_ROOT_F_SESSION_LANELESS);
    o->limited = rd_field(t, sb, BPT_ROOT_F_SESSION_LIMITED);
    o->skipped = rd_field(t, sb, BPT_ROOT_F_SESSION_SKIPPED);
    for (j = 0; j < rd_const(t, BPT_ROOT_C_LANE_DIRS); j++) {
        uint64_t dir;
        memcpy(&dir, (const unsigned char *)rd_field_ptr(t, sb, BPT_ROOT_F_SESSION_LANE_DIR) + 8ull * j, 8);
        if (!dir) continue;
        if ((rc = rd_bytes(t, dir, lanes, 8ull * per, "a lane directory"))) return rc;
        for (k = 0; k < per; k++) {
            if (!lanes[k]) continue;
            if ((rc = rd_bytes(t, lanes[k], lb, rd_size(t, BPT_ROOT_S_LANE), "a lane"))) return rc;
            o->lanes++;
            o->written += rd_field(t, lb, BPT_ROOT_F_LANE_WRITTEN);
            o->dropped += rd_field(t, lb, BPT_ROOT_F_LANE_DROPPED);
            o->overwritten += rd_field(t, lb, BPT_ROOT_F_LANE_OVERWRITTEN);
            o->delivered += rd_field(t, lb, BPT_ROOT_F_LANE_DELIVERED);
            o->lost += rd_field(t, lb, BPT_ROOT_F_LANE_LOST);
            o->drained += rd_field(t, lb, BPT_ROOT_F_LANE_DRAINED);
            o->bytes += rd_field(t, lb, BPT_ROOT_F_LANE_BUDGET) * rd_field(t, lb, BPT_ROOT_F_LANE_CHUNK_BYTES);
        }
    }
    for (pa = rd_field(t, sb, BPT_ROOT_F_SESSION_PATTERNS); pa; pa = rd_field(t, lb, BPT_ROOT_F_PATTERN_NEXT)) {
        rd_pattern *p;
        if (o->npatterns == RD_MAX_PATTERNS) return rd_fail(t, RD_EFAULT, "a pattern list without an end", pa);
        if ((rc = rd_bytes(t, pa, lb, rd_size(t, BPT_ROOT_S_PATTERN), "a pattern"))) return rc;
        if ((o->npatterns & (o->npatterns - 1)) == 0) {   /* grow at powers of two */
            if ((rc = rd_charge(t, o->npatterns ? o->npatterns : 1, sizeof *p, "a session's patterns", pa))) return rc;
            p = (rd_pattern *)realloc(o->patterns, sizeof *p * (o->npatterns ? 2 * o->npatterns : 1));
            if (!p) return RD_ENOMEM;
            o->patterns = p;
        }
        p = &o->patterns[o->npatterns++];
        rd_copy_string(p->module, sizeof p->module, rd_field_ptr(t, lb, BPT_ROOT_F_PATTERN_MODULE),
                       t->root.field_bytes[BPT_ROOT_F_PATTERN_MODULE]);
        rd_copy_string(p->function, sizeof p->function, rd_field_ptr(t, lb, BPT_ROOT_F_PATTERN_FUNCTION),
                       t->root.field_bytes[BPT_ROOT_F_PATTERN_FUNCTION]);
        p->arity = (int)(int32_t)rd_field(t, lb, BPT_ROOT_F_PATTERN_ARITY);
        p->flags = (unsigned)rd_field(t, lb, BPT_ROOT_F_PATTERN_FLAGS);
    }
    return 0;
}

/* Every live session, read between two reads of the layout count [L1]
   (again while it moved, up to tries times; *torn = 1 if it always did). */
static int rd_sessions(rd_target *t, rd_session **out, uint32_t *n, int *torn, int tries) {
    uint32_t max = rd_const(t, BPT_ROOT_C_MAX_SESSIONS), i;
    uint32_t lsz = rd_size(t, BPT_ROOT_S_LANE) > rd_size(t, BPT_ROOT_S_PATTERN) ? rd_size(t, BPT_ROOT_S_LANE)
                                                                                 : rd_size(t, BPT_ROOT_S_PATTERN);
    unsigned char *sb = (unsigned char *)malloc(rd_size(t, BPT_ROOT_S_SESSION)), *lb = (unsigned char *)malloc(lsz);
    uint64_t *lanes = (uint64_t *)malloc(8ull * rd_const(t, BPT_ROOT_C_LANES_PER_DIR));
    int rc = 0, try_;
    *out = NULL; *n = 0; *torn = 0;
    if (!sb || !lb || !lanes) { rc = RD_ENOMEM; goto out; }
    for (try_ = 0; try_ < tries; try_++) {
        uint64_t seq, seq2, sa;
        rd_walk_begin(t);
        rd_sessions_free(*out, *n);
        *out = NULL; *n = 0;
        if ((rc = rd_u64(t, rd_global(t, BPT_ROOT_G_SEQ), &seq, "the layout count"))) goto out;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);   /* [L1] reader: the count before the data */
        if ((rc = rd_charge(t, max, sizeof **out, "the session table", rd_global(t, BPT_ROOT_G_SESSIONS)))) goto out;
        if (!(*out = (rd_session *)calloc(max, sizeof **out))) { rc = RD_ENOMEM; goto out; }
        for (i = 0; i < max && !rc; i++) {
            if ((rc = rd_u64(t, rd_global(t, BPT_ROOT_G_SESSIONS) + 8ull * i, &sa, "the session table"))) break;
            if (!sa) continue;
            rc = rd_session_at(t, sa, sb, lb, lanes, &(*out)[*n]);
            (*n)++;   /* counted even when it failed: its patterns are freed */
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);   /* [L1] reader: the data before the count */
        if (rd_u64(t, rd_global(t, BPT_ROOT_G_SEQ), &seq2, "the layout count")) { rc = RD_EGONE; goto out; }
        if (seq2 == seq && !(seq & 1)) { *torn = 0; goto out; }
        *torn = 1;
    }
out:
    if (rc) { rd_sessions_free(*out, *n); *out = NULL; *n = 0; }
    free(sb); free(lb); free(lanes);
    return rc;
}

#endif /* BPT_READER_H */
