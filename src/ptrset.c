/* ptrset.c: the set path's containers: a set of pointers, and free lists
   of blocks of one size (>>recycle, at the end).
   A set of pointers: Open addressing with linear probing and
   backward-shift deletion: membership, insertion and removal in O(1), with
   no tombstones left behind. The registry (funcs.c) keeps two, to validate
   the bpt_func handles a caller passes in and to refuse a site registered
   twice. Not from OTP: ERTS only meets its own code pointers, while a C API
   must check the ones it is given. */
#include "internal.h"

static size_t bpt__ptr_hash(const void *p, size_t mask) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;
    return (size_t)x & mask;
}

static size_t bpt__ptrset_slot(const bpt__ptrset *set, const void *p) {
    size_t i = bpt__ptr_hash(p, set->cap - 1);
    while (set->keys[i] && set->keys[i] != p) i = (i + 1) & (set->cap - 1);
    return i;
}

BPT__PRIVATE int bpt__ptrset_has(const bpt__ptrset *set, const void *p) {
    return set->cap && set->keys[bpt__ptrset_slot(set, p)] == p;
}

/* Make room for `extra` more keys. Returns 0 or BPT_ENOMEM (set unchanged). */
BPT__PRIVATE int bpt__ptrset_reserve(bpt__ptrset *set, size_t extra) {
    const void **old = set->keys;
    size_t i, oldcap = set->cap, cap = oldcap ? oldcap : 64;
    if ((set->len + extra) * 2 <= set->cap) return 0;
    while ((set->len + extra) * 2 > cap) cap *= 2;
    set->keys = (const void **)BPT_MALLOC(cap * sizeof *set->keys);
    if (!set->keys) { set->keys = old; return BPT_ENOMEM; }
    memset(set->keys, 0, cap * sizeof *set->keys);
    set->cap = cap;
    for (i = 0; i < oldcap; i++)
        if (old[i]) set->keys[bpt__ptrset_slot(set, old[i])] = old[i];
    BPT_FREE(old);
    return 0;
}

BPT__PRIVATE void bpt__ptrset_add(bpt__ptrset *set, const void *p) {   /* after reserve */
    set->keys[bpt__ptrset_slot(set, p)] = p;
    set->len++;
}

BPT__PRIVATE void bpt__ptrset_remove(bpt__ptrset *set, const void *p) {
    size_t mask = set->cap - 1, i = bpt__ptrset_slot(set, p), j, home;
    if (set->keys[i] != p) return;
    set->keys[i] = NULL;
    set->len--;
    /* Shift back the rest of the cluster whose home is at or before the hole. */
    for (j = (i + 1) & mask; set->keys[j]; j = (j + 1) & mask) {
        home = bpt__ptr_hash(set->keys[j], mask);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            set->keys[i] = set->keys[j];
            set->keys[j] = NULL;
            i = j;
        }
    }
}

/* >>recycle: the set path's blocks of one size, kept for reuse instead of
   freed. Switching call_count off 10,000 functions frees 10,000 GenericBps
   and as many BpCounts at steps 11 and 12; switching it on again allocates
   as many at step 2. Through malloc, each such change also merged the
   freed chunks (malloc_consolidate) at its next large allocation: about a
   fifth of a change's time in bench/pattern_scale.c. A block given back
   goes on the list and the next take reuses it, so the list holds at most
   the peak number of breakpoints, and no block is ever handed back to
   BPT_FREE. As BEAM gives its breakpoint data an allocator type of its own
   (ERTS_ALC_T_BPD). Under the code modification permission: no lock. */
BPT__PRIVATE void *bpt__recycle_take(bpt__recycle *r) {
    void *p = r->head;
    if (!p) return BPT_MALLOC(r->size);
    memcpy(&r->head, p, sizeof r->head);
    return p;
}

#ifndef BPT__RECYCLE_NOTE   /* a test's hook: when a block is given back (t_protocol_steps) */
#  define BPT__RECYCLE_NOTE(p) ((void)0)
#endif
BPT__PRIVATE void bpt__recycle_give(bpt__recycle *r, void *p) {
    if (!p) return;
    BPT__RECYCLE_NOTE(p);
    memcpy(p, &r->head, sizeof r->head);
    r->head = p;
}
