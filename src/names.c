/* names.c: the name table. A record names its function by a 32-bit id, not
   by pointers: 4 bytes instead of 24, and an id means the same in a file
   read by another process. An id is given once per distinct (module, name,
   arity, formatter) and its entry never changes or goes away, so a record
   outlives its function: a VM function may be unregistered and freed while
   its records wait in a buffer. Match spec messages get ids too (arity -1).
   Two native functions registered at once under one name (two static
   helpers of one module) get an id each: an id names one entry address
   (the USDT probes report it), and records of the two must not mix. A
   function registered again (a library loaded anew) takes its name's id
   back once the old one is unregistered.

   Entries live in pages that are never moved or freed. Writers (the set
   path) take the intern lock; readers (drainers, formatters) take nothing:
   an id is published by a release store of the count [N1], after its entry
   is written, and a reader that holds an id from a record got it, through
   the record's publication ([R2]), after that store. */
#include "internal.h"

#ifndef BPT__NAMES_PAGES   /* a test build may give fewer (t_names_limit) */
#  define BPT__NAMES_PAGES 4096   /* up to 4M names */
#endif
enum { BPT__NAMES_PAGE = 1024 };

static struct {
    bpt__atomic_ptr page[BPT__NAMES_PAGES];   /* bpt__name[BPT__NAMES_PAGE] */
    bpt__atomic_u32 count;                    /* ids 1..count are published [N1] */
    uint32_t *index;                          /* writers: open addressing, ids by key */
    uint32_t index_cap;                       /* a power of two, or 0 */
} bpt__names;

static uint32_t bpt__names_hash(const char *module, const char *name, int arity, bpt_format_fn format) {
    uintptr_t h = (uintptr_t)module * 31u + (uintptr_t)name;
    h = h * 31u + (uintptr_t)(unsigned)arity;
    h = h * 31u + (format ? 1u : 0u);   /* a function pointer does not convert to an integer in ISO C */
    return (uint32_t)(h ^ (h >> 17) ^ ((uint64_t)h >> 32));
}

static bpt__name *bpt__names_entry(uint32_t id) {
    bpt__name *page = (bpt__name *)bpt__load_relaxed_ptr(&bpt__names.page[(id - 1) / BPT__NAMES_PAGE]);
    return &page[(id - 1) % BPT__NAMES_PAGE];
}

/* Double the index (writers, under the lock). Returns 0 or BPT_ENOMEM. */
static int bpt__names_index_grow(void) {
    uint32_t cap = bpt__names.index_cap ? bpt__names.index_cap * 2 : 1024, i, n;
    uint32_t *ix = (uint32_t *)BPT_MALLOC(cap * sizeof *ix);
    if (!ix) return BPT_ENOMEM;
    memset(ix, 0, cap * sizeof *ix);
    n = bpt__load_relaxed_u32(&bpt__names.count);
    for (i = 1; i <= n; i++) {
        const bpt__name *e = bpt__names_entry(i);
        uint32_t k = bpt__names_hash(e->module, e->name, e->arity, e->format) & (cap - 1);
        while (ix[k]) k = (k + 1) & (cap - 1);
        ix[k] = i;
    }
    BPT_FREE(bpt__names.index);
    bpt__names.index = ix;
    bpt__names.index_cap = cap;
    return 0;
}

/* The id of (module, name, arity, format), given now if it has none.
   module and name are interned; addr, a native function's entry (NULL:
   none), becomes the entry's address, and the function holds the id until
   bpt__names_release: an id another native function holds is not reused
   (a new id is given). Returns 0 with *id, or BPT_ENOMEM or BPT_ELIMIT
   (every id is given: ids are never taken back); the caller's message
   says which (bpt__names_why). */
BPT__PRIVATE int bpt__names_id(const char *module, const char *name, int arity, bpt_format_fn format,
                               const void *addr, uint32_t *id) {
    uint32_t k, n;
    bpt__name *page, *e;
    int rc = 0;
    bpt__progress_ensure_init();   /* registers the fork handlers that cover the lock */
    pthread_mutex_lock(&bpt__intern_lock);
    n = bpt__load_relaxed_u32(&bpt__names.count);
    if ((n + 1) * 2 > bpt__names.index_cap && bpt__names_index_grow() < 0) goto nomem;
    k = bpt__names_hash(module, name, arity, format) & (bpt__names.index_cap - 1);
    for (; bpt__names.index[k]; k = (k + 1) & (bpt__names.index_cap - 1)) {
        e = bpt__names_entry(bpt__names.index[k]);
        if (e->module != module || e->name != name || e->arity != arity || e->format != format) continue;
        if (addr && e->held && bpt__load_relaxed_u64(&e->addr) != (uint64_t)(uintptr_t)addr)
            continue;   /* another function's, registered: look on */
        *id = bpt__names.index[k];
        goto hold;
    }
    if (n == (uint32_t)BPT__NAMES_PAGE * BPT__NAMES_PAGES) {
        rc = BPT_ELIMIT;
        goto done;
    }
    page = (bpt__name *)bpt__load_relaxed_ptr(&bpt__names.page[n / BPT__NAMES_PAGE]);
    if (!page) {
        if (!(page = (bpt__name *)BPT_MALLOC(BPT__NAMES_PAGE * sizeof *page))) goto nomem;
        bpt__store_relaxed_ptr(&bpt__names.page[n / BPT__NAMES_PAGE], page);   /* published by [N1] */
    }
    e = &page[n % BPT__NAMES_PAGE];
    e->module = module;
    e->name = name;
    e->arity = arity;
    e->format = format;
    e->held = 0;
    bpt__store_relaxed_u64(&e->addr, 0);
    *id = n + 1;
    bpt__names.index[k] = *id;
    bpt__store_release_u32(&bpt__names.count, *id);   /* [N1] the entry, then its id */
hold:
    if (addr) {   /* registered (again), maybe elsewhere: a library loaded anew */
        bpt__store_relaxed_u64(&e->addr, (uint64_t)(uintptr_t)addr);
        e->held = 1;
    }
done:
    pthread_mutex_unlock(&bpt__intern_lock);
    return rc;
nomem:
    pthread_mutex_unlock(&bpt__intern_lock);
    return BPT_ENOMEM;
}

/* What a bpt__names_id failure means, for the caller's message. */
BPT__PRIVATE const char *bpt__names_why(int rc) {
    return rc == BPT_ELIMIT ? "the name table is full (every id given: distinct names of functions and "
                              "match spec messages, ever)" : "no memory";
}

/* The native function at addr no longer holds id (unregistered, or its
   registration failed): a function registered later under its name may
   take the id. Under the code modification permission. */
BPT__PRIVATE void bpt__names_release(uint32_t id, const void *addr) {
    bpt__name *e;
    pthread_mutex_lock(&bpt__intern_lock);
    if (id && id <= bpt__load_relaxed_u32(&bpt__names.count) &&
        bpt__load_relaxed_u64(&(e = bpt__names_entry(id))->addr) == (uint64_t)(uintptr_t)addr)
        e->held = 0;
    pthread_mutex_unlock(&bpt__intern_lock);
}

/* The entry of an id a record holds, or NULL for 0 or an id never given
   (a corrupt record). */
BPT__PRIVATE const bpt__name *bpt__names_get(uint32_t id) {
    if (id == 0 || id > bpt__load_acquire_u32(&bpt__names.count)) return NULL;   /* [N1] */
    return bpt__names_entry(id);
}

/* The entry address of id's function, read relaxed: a re-registration
   may store a new one meanwhile (either is an address the name had). */
BPT__PRIVATE uint64_t bpt__names_addr(uint32_t id) {
    if (id == 0 || id > bpt__load_acquire_u32(&bpt__names.count)) return 0;   /* [N1] */
    return bpt__load_relaxed_u64(&bpt__names_entry(id)->addr);
}

/* How many ids are given: a file writer writes the names up to it. */
BPT__PRIVATE uint32_t bpt__names_count(void) {
    return bpt__load_acquire_u32(&bpt__names.count);   /* [N1] */
}

/* The live table as a decoder's name source (bpt__decoder.name). */
BPT__PRIVATE const bpt__name *bpt__names_live(void *ctx, uint32_t id) {
    (void)ctx;
    return bpt__names_get(id);
}
