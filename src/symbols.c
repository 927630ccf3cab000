/* symbols.c: which registered native function holds a code address, for
   the caller of a call message (hit.c) and for return_to (frames.c). ERTS
   answers the same question with beam_ranges.c (erts_lookup_function_info):
   the address ranges of the loaded code, sorted and searched by bisection,
   replaced as a whole when code is loaded or purged. Here the ranges are
   those of the registered native functions. This part knows nothing of the
   registry (funcs.c): it indexes the records it is given. */
#include "internal.h"

#if defined(BPT_NATIVE)
/* The address index: an address-sorted snapshot of the native records,
   replaced as a whole under the code modification permission and freed
   after a thread progress wait, so that pinned readers search it without
   a lock. */
typedef struct bpt__addr_entry {
    uintptr_t start, end;         /* [start, end): the function's code */
    const bpt_func *f;
} bpt__addr_entry;

struct bpt__addr_index {
    size_t n;
    bpt__addr_entry e[1];
};

static bpt__atomic_ptr bpt__addr_index_cur;   /* bpt__addr_index *, release-published */

/* Pinned. The registered native function whose code holds addr, or NULL
   for code bptrace does not know. Native records are never freed. */
BPT__PRIVATE const bpt_func *bpt__symbolize(uintptr_t addr) {
    const bpt__addr_index *ix = (const bpt__addr_index *)bpt__load_acquire_ptr(&bpt__addr_index_cur);   /* [I1] */
    size_t lo = 0, hi;
    if (!ix) return NULL;
    hi = ix->n;
    while (lo < hi) {   /* the first entry starting above addr */
        size_t mid = lo + (hi - lo) / 2;
        if (ix->e[mid].start <= addr) lo = mid + 1; else hi = mid;
    }
    if (lo == 0 || addr >= ix->e[lo - 1].end) return NULL;
    return ix->e[lo - 1].f;
}

/* The address index follows the native functions as they come and go
   (funcs.c registers and unregisters them), in two steps, both under the
   permission:

     A1. bpt__addr_index_alloc, before the registry changes: room for every
         native function there will be. Out of memory here fails the whole
         registration or unregistration with BPT_ENOMEM and changes nothing.
         (An index that stayed old would name an unregistered function as a
         caller: its record is retired, and a later registration may reuse
         it for another function.)
     A2. bpt__addr_index_publish, after the registry changed: fill, sort,
         publish with a release store, and free the old index after a
         thread progress wait, so no pinned reader still searches it. It
         cannot fail.

   A function's extent is its ELF symbol's size; a function registered by
   hand has none, so it extends to the next registered entry, at most
   64 KiB. */
static int bpt__addr_entry_cmp(const void *a, const void *b) {
    uintptr_t x = ((const bpt__addr_entry *)a)->start, y = ((const bpt__addr_entry *)b)->start;
    return x < y ? -1 : x > y;
}

/* A1: room for `n` entries. NULL after bpt__fail(BPT_ENOMEM). */
BPT__PRIVATE bpt__addr_index *bpt__addr_index_alloc(size_t n, const char *who) {
    bpt__addr_index *ix = (bpt__addr_index *)BPT_MALLOC(sizeof *ix + sizeof(bpt__addr_entry) * n);
    if (!ix) bpt__fail(BPT_ENOMEM, "%s: no memory for the address index of %lu native functions; "
                       "nothing changed", who, (unsigned long)n);
    return ix;
}

/* A2: ix came from A1 with room for every native function among
   funcs[0..nfuncs), the records now registered. */
BPT__PRIVATE void bpt__addr_index_publish(bpt__addr_index *ix, bpt_func *const *funcs, uint32_t nfuncs) {
    bpt__addr_index *old;
    size_t k;
    uint32_t i;
    ix->n = 0;
    for (i = 0; i < nfuncs; i++) {
        const bpt_func *f = funcs[i];
        if (f->kind != BPT__SITE_NATIVE) continue;
        ix->e[ix->n].start = (uintptr_t)f->fn;
        ix->e[ix->n].end = f->code_size ? (uintptr_t)f->fn + (uintptr_t)f->code_size : 0;
        ix->e[ix->n++].f = f;
    }
    if (ix->n > 1) qsort(ix->e, ix->n, sizeof ix->e[0], bpt__addr_entry_cmp);
    for (k = 0; k < ix->n; k++) {
        uintptr_t bound = ix->e[k].start + 65536;
        if (k + 1 < ix->n && ix->e[k + 1].start < bound) bound = ix->e[k + 1].start;
        if (!ix->e[k].end || ix->e[k].end > bound) ix->e[k].end = bound;
    }
    old = (bpt__addr_index *)bpt__load_relaxed_ptr(&bpt__addr_index_cur);
    bpt__store_release_ptr(&bpt__addr_index_cur, ix);   /* [I1] pairs with bpt__symbolize's acquire */
    if (old) {
        bpt_thread_progress_wait();
        BPT_FREE(old);
    }
}
#endif
