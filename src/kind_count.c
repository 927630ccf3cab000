/* kind_count.c: the call_count breakpoint kind (BPT_COUNT), as BEAM's
   BpCount in beam_bp.c, with its counter split by thread (DESIGN.md 10.1):
   no cache line is written by two threads on the hit path, and the hit has
   no locked or atomic read-modify-write. Its hooks are the ones the kinds
   table (BPT_KINDS, api_pattern.h) names; breakpoint.h declares them.

   Slots. Each BpCount owns a slot, a number below BPT__COUNT_SLOTS, taken
   under the code modification permission (step 2) and given back at its
   last unref. Every thread record holds pages of uint64 counters
   (progress.h): slot n is counter n of each record. A hit adds one to its
   own thread's counter, which no other thread writes; bpt_trace_info adds
   up every record's counter for the slot with relaxed loads, without
   stopping anyone. Records are never freed and keep their pages when a new
   thread reuses them, so an exited thread's counts stay in the sum; a fork
   child inherits records and pages (private mappings) and counts on from
   the parent's sums. Past BPT__COUNT_SLOTS (524,288) counted breakpoints
   at once, step 2 fails with BPT_ENOMEM.

   Storage. A page is mapped on the hit path, by its thread's first count in
   it: with mmap, not BPT_MALLOC, since a hit may run in a signal handler
   that interrupted malloc, or inside a traced malloc; not by the set path,
   which cannot know the threads that will hit (any thread may, at any
   time, and threads have no bound). The page is published with a CAS
   [P1], so a signal handler nested on the same thread that maps it first
   wins, and the interrupted hit unmaps its own and uses the winner's. When
   mmap fails, the hit adds to the breakpoint's shared `spill` counter with
   an atomic add instead: slower, still exact.

   The increment [H1]. A signal handler may hit a counted function on the
   thread whose increment it interrupted. On x86-64 the increment is one
   instruction (bpt__owner_inc1_u64, port.h), which a signal cannot split.
   Elsewhere (aarch64: ldr, add, str) the owner marks its record
   `counting` around the update, and a hit that finds the mark set is a
   handler nested in an update: it adds to `spill` atomically and touches
   no page, so neither add is lost.

   Exactness.
   - A reused slot starts from 0. Its previous BpCount gave it back at its
     last unref, which runs after a wait for thread progress: step 11 after
     the commit's wait (step 8's, or step 10's where step 8 defers it:
     >>deferred wait in bp.c), step 12 after its own (step 3's unref of a switch-off
     never is the last: the active generation still holds one). Every hit
     that could reach the old BpCount ended its pinned section before that
     wait returned [B3], and the permission orders the wait before the next
     prepare, which zeroes the slot's counter in every mapped page (below).
     A hit reaches the new BpCount only through the generation step 3
     staged, which step 7's commit publishes [G2] after the zeroing: its
     relaxed load of its counter sees 0 or a later value. A slot never
     taken before is 0 in every page (mmap zeroes).
   - BPT_RESTART, and BPT_COUNT on a function already counting (paused or
     not), store the current sum as `base`, which info subtracts, under
     the permission (info reads it under the permission too). A counter
     never goes back while its slot is taken, so the count is the calls
     since then: every call that completed before it happens before the
     change's loads, and is in base. Both zero the count, as
     set_function_break in beam_bp.c does for any operation on a counting
     breakpoint but a pause (erlang:trace_pattern's `true` and `restart`);
     BPT_RESTART leaves a function that is not counting alone (bp.c).
   - BPT_PAUSE clears ACTIVE: hits stop at the commit, the counters stay.
   - Off, then on again: the old BpCount gives its slot back; the new one
     takes a fresh or zeroed slot. */
#include "internal.h"

#define BPT__BPF_COUNT        BPT__BPF_ON(BPT__KIX_COUNT)
#define BPT__BPF_COUNT_ACTIVE BPT__BPF_ACTIVE(BPT__KIX_COUNT)
#define BPT__COUNT_PAGE_BYTES (BPT__COUNT_PAGE_SLOTS * sizeof(uint64_t))


/* The slots in use, one bit each, lowest free first, so that the slots in
   use stay in few pages. Under the code modification permission; a fork
   child inherits them consistent (the fork handlers hold it, locks.c). */
static struct {
    uint64_t used[BPT__COUNT_SLOTS / 64];
    uint32_t first;               /* no free bit in used[0..first) */
    uint32_t high;                /* every slot from here up was never taken */
} bpt__count_slots;

/* The index of the lowest 0 bit of a word that has one. A bit scan where
   the compiler has one: a switch of 10,000 functions takes 10,000 slots,
   and a loop over the bits was a fifth of its time. */
static uint32_t bpt__lowest_zero_bit(uint64_t used) {
#if defined(__GNUC__) && !defined(__TINYC__)
    return (uint32_t)__builtin_ctzll(~used);
#else
    uint32_t b = 0;
    while (used >> b & 1) b++;
    return b;
#endif
}

/* Take the lowest free slot: 0, or -1 when every slot is taken. */
static int bpt__count_slot_take(uint32_t *slot) {
    uint32_t w = bpt__count_slots.first, b;
    while (w < BPT__COUNT_SLOTS / 64 && bpt__count_slots.used[w] == ~(uint64_t)0) w++;
    bpt__count_slots.first = w;
    if (w == BPT__COUNT_SLOTS / 64) return -1;
    b = bpt__lowest_zero_bit(bpt__count_slots.used[w]);
    bpt__count_slots.used[w] |= (uint64_t)1 << b;
    *slot = w * 64 + b;
    return 0;
}

static void bpt__count_slot_give(uint32_t slot) {
    bpt__count_slots.used[slot / 64] &= ~((uint64_t)1 << (slot % 64));
    if (slot / 64 < bpt__count_slots.first) bpt__count_slots.first = slot / 64;
}

/* Where rec holds the pointer to the page of a slot: dir is its BpCount's
   (or a COUNT shortcut's copy of it), a byte offset into the record. */
BPT__HOT BPT__INTREGS bpt__atomic_ptr *bpt__count_dir(bpt__thread *rec, uintptr_t dir) {
    return (bpt__atomic_ptr *)(void *)((char *)rec + dir);
}

/* Every thread's counter of c's slot, plus the spill. Never blocks a hit. */
static uint64_t bpt__count_sum(bpt__BpCount *c) {
    uint64_t sum = bpt__load_relaxed_u64(&c->spill);
    bpt__thread *rec;
    for (rec = bpt__thread_records(); rec; rec = rec->next) {
        bpt__atomic_u64 *page = (bpt__atomic_u64 *)bpt__load_acquire_ptr(bpt__count_dir(rec, c->dir));   /* [P1] */
        if (page) sum += bpt__load_relaxed_u64(&page[c->off]);
    }
    return sum;
}

/* BpCounts, recycled (>>recycle in ptrset.c). */
static bpt__recycle bpt__count_blocks = { NULL, sizeof(bpt__BpCount) };

/* Step 2: a fresh counter when the change switches counting on where the
   staging generation has none. A slot used before is zeroed in every
   mapped page: no hit can reach it (see the top of this file). */
BPT__PRIVATE int bpt__kind_count_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    bpt__BpCount *bc;
    bpt__thread *rec;
    uint32_t slot;
    *out = NULL;
    if (!bpt__op_enables(op) || (staging && (staging->flags & BPT__BPF_COUNT))) return 0;
    if (!(bc = (bpt__BpCount *)bpt__recycle_take(&bpt__count_blocks))) return BPT_ENOMEM;
    if (bpt__count_slot_take(&slot) < 0) {   /* more than BPT__COUNT_SLOTS counted breakpoints */
        bpt__recycle_give(&bpt__count_blocks, bc);
        return BPT_ENOMEM;
    }
    bc->dir = offsetof(bpt__thread, counts) + slot / BPT__COUNT_PAGE_SLOTS * sizeof(bpt__atomic_ptr);
    bc->off = slot % BPT__COUNT_PAGE_SLOTS;
    bc->slot = slot;
    bc->refc = 1;
    bc->base = 0;
    bpt__store_relaxed_u64(&bc->spill, 0);
    if (slot < bpt__count_slots.high) {
        for (rec = bpt__thread_records(); rec; rec = rec->next) {
            bpt__atomic_u64 *page = (bpt__atomic_u64 *)bpt__load_acquire_ptr(bpt__count_dir(rec, bc->dir));   /* [P1] */
            if (page) bpt__store_relaxed_u64(&page[bc->off], 0);
        }
    } else {
        bpt__count_slots.high = slot + 1;
    }
    *out = bc;
    return 0;
}

BPT__PRIVATE void bpt__kind_count_ref(void *data) { ((bpt__BpCount *)data)->refc++; }

/* The last unref comes after a wait for thread progress (see the top of
   this file): no hit still counts into the slot it gives back. */
BPT__PRIVATE void bpt__kind_count_unref(void *data) {
    bpt__BpCount *c = (bpt__BpCount *)data;
    if (c && --c->refc == 0) {
        bpt__count_slot_give(c->slot);
        bpt__recycle_give(&bpt__count_blocks, c);
    }
}

/* Step 3: on, off, pause or restart. `fresh` is step 2's counter (its one
   reference moves here), or NULL. */
BPT__PRIVATE void bpt__kind_count_stage(bpt__GenericBpData *d, const bpt__op *op, void *fresh) {
    switch (op->how) {
    case BPT_OFF:
        if (d->flags & BPT__BPF_COUNT) bpt__kind_count_unref(d->data[BPT__KIX_COUNT]);
        d->flags &= ~(uint32_t)(BPT__BPF_COUNT | BPT__BPF_COUNT_ACTIVE);
        d->data[BPT__KIX_COUNT] = NULL;
        break;
    case BPT_PAUSE:
        d->flags &= ~(uint32_t)BPT__BPF_COUNT_ACTIVE;
        break;
    default: /* on, restart */
        if (!(d->flags & BPT__BPF_COUNT)) {
            if (!fresh) break;   /* a restart: it touches only counting functions */
            d->data[BPT__KIX_COUNT] = fresh;
            d->flags |= BPT__BPF_COUNT;
        } else {
            /* On again, or restarted: from zero. Shared with the active
               generation, as in BEAM: the reset is seen at once, the
               re-activation at the commit. */
            bpt__BpCount *c = (bpt__BpCount *)d->data[BPT__KIX_COUNT];
            c->base = bpt__count_sum(c);
        }
        d->flags |= BPT__BPF_COUNT_ACTIVE;
    }
}

/* A thread's first count in a page: map it (BPT_HIT_MAP) and publish it
   [P1]. NULL when the map is refused. */
static bpt__atomic_u64 *bpt__count_page_map(bpt__thread *rec, const bpt__BpCount *c) {
    bpt__atomic_ptr *dir = bpt__count_dir(rec, c->dir);
    void *p = BPT_HIT_MAP(BPT__COUNT_PAGE_BYTES);
    if (p && !bpt__cas_ptr(dir, NULL, p)) {   /* [P1] pairs with the readers' acquire loads */
        BPT_HIT_UNMAP(p, BPT__COUNT_PAGE_BYTES);   /* a handler nested on this thread mapped it first */
        p = bpt__load_relaxed_ptr(dir);
    }
    return (bpt__atomic_u64 *)p;
}

/* The hit: one more call on this thread's own counter, if the thread has
   mapped the counter's page. Only this thread (and handlers nested on it)
   writes the record's pages, so the owner reads its page pointer with a
   relaxed load. Returns 0, having counted nothing, when the page is not
   mapped yet. The count path of native entries (site_native.c) calls this
   alone, with the integer registers only (>>intregs in port.h); the
   others call bpt__kind_count_add. `dir` and `off` are the BpCount's
   (the count path passes its shortcut's copies); `count` is the BpCount,
   whose spill takes a count that a handler nested in this thread's own
   update makes. */
BPT__HOT BPT__INTREGS int bpt__kind_count_try_add(bpt__thread *rec, uintptr_t dir, uintptr_t off, void *count) {
    bpt__atomic_ptr *at = bpt__count_dir(rec, dir);
    bpt__atomic_u64 *page;
#if defined(BPT__SIGNAL_ATOMIC_INC)
    (void)count;
    if (BPT__UNLIKELY(!(page = (bpt__atomic_u64 *)bpt__load_relaxed_ptr(at)))) return 0;
    bpt__owner_inc1_u64(&page[off]);   /* [H1] one instruction: a handler cannot split it */
#else
    if (BPT__UNLIKELY(rec->counting)) {   /* [H1] a handler nested in this thread's update */
        bpt__fetch_add_u64(&((bpt__BpCount *)count)->spill, 1);
        return 1;
    }
    rec->counting = 1;
    bpt__compiler_barrier();   /* [H1] marked before the load: a handler from here on spills */
    page = (bpt__atomic_u64 *)bpt__load_relaxed_ptr(at);
    if (BPT__LIKELY(page != NULL)) bpt__owner_inc_u64(&page[off], 1);
    bpt__compiler_barrier();   /* [H1] stored before the mark is cleared */
    rec->counting = 0;
    if (!page) return 0;
#endif
    return 1;
}

/* The same, mapping the page on the thread's first count in it; a count
   that finds no page (the map refused) goes to the spill. The COUNT
   shortcut calls this directly (hit.c), the general walk through the
   kind's hook below. */
BPT__HOT void bpt__kind_count_add(bpt__thread *rec, void *count) {
    bpt__BpCount *c = (bpt__BpCount *)count;
    if (bpt__kind_count_try_add(rec, c->dir, c->off, count)) return;
    if (bpt__count_page_map(rec, c) == NULL || !bpt__kind_count_try_add(rec, c->dir, c->off, count))
        bpt__fetch_add_u64(&c->spill, 1);
}

BPT__HOT void bpt__kind_count_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    (void)s;
    bpt__kind_count_add(h->rec, d->data[BPT__KIX_COUNT]);
}

BPT__PRIVATE void bpt__kind_count_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    if (what & BPT_INFO_FLAGS) {
        out->flags |= BPT_COUNT;
        out->count_paused = !(d->flags & BPT__BPF_COUNT_ACTIVE);
    }
    if (what & BPT_INFO_COUNT) {
        bpt__BpCount *c = (bpt__BpCount *)d->data[BPT__KIX_COUNT];
        out->count = bpt__count_sum(c) - c->base;
    }
}
