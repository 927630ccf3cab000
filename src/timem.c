/* timem.c: call_time and call_memory tables, as BEAM's
   BpTimemTrace in beam_bp.c.

   A breakpoint's time/memory data holds one hash table per thread slot,
   mapping process -> {calls, own time (ns), memory (bytes)}. A table is
   created on its thread's first charge and written only by that thread, so
   the hit and return paths update it with plain stores, no atomics, no
   lock. Every thread has its own: the first BPT_MAX_THREADS thread records
   find theirs in the breakpoint's data, the others in an array mapped for
   them [T3]. (BEAM's dirty schedulers share one table under a lock; a
   hit here never takes one.)

   Nobody else may read a table its owner may be writing. bpt_trace_info
   therefore collects in nine steps, C1-C9 (OTP 29's method; bpt__timem_collect):
     C1. allocate: give each breakpoint's staging half fresh, empty tables;
     C2. wait for thread progress;
     C3. switch: the protocol's commit (bpt__commit, bp.c) flips the active
         generation: charges now go to the fresh tables;
     C4. wait: no thread still charges the old ("real") tables: they are idle;
     C5. sum the idle real tables, with what earlier collections carried, into
         one merged table per breakpoint, and their `lost` counts likewise;
     C6. carry: the fresh tables keep the merged sums and the summed `lost`
         (carried, lost_carried: only the set path reads them);
     C7. consolidate: both halves point at the fresh tables (staging := active);
     C8. free the real tables (idle since C4);
     C9. the caller reports the merged sums and drops (bpt__timem_report)
         and releases the permission.
   OTP switches back to the real tables and merges the temporaries into
   them; here the fresh tables stay and carry the sums instead, which needs
   no second switch and never writes a table its owner may be writing.

   Every charge either lands in exactly one table, or is dropped and
   counted in exactly one `lost` (that of the tables it was for). A charge
   is dropped, rather than waited for or made unsafe, when it is a signal
   handler's nested in its thread's charge of the same tables [H1], when
   it is nested deeper than BPT__TIMEM_NEST charges, when there is no
   memory for its table (or for `more`), or when its thread record is
   past both arrays [T3]. Each table and each `lost` is summed exactly
   once, when it is idle (C5), and the sums go on in the next tables (C6):
   nothing is counted twice, and no drop is silent: bpt_trace_info
   reports the drops with the sums (bpt_info.lost_charges).

   call_time and call_memory are two kinds (two rows of BPT_KINDS, their
   hooks in kind_timem.c) that share these tables: one cell holds a
   process's calls, time and bytes. While both kinds are on, their data
   slots point at the same bpt__BpTimem, each holding a reference. */
#include "internal.h"

static size_t bpt__timem_table_bytes(uint32_t cap) {
    return sizeof(bpt__timem_table) + sizeof(bpt__timem_cell) * (cap - 1);
}

/* [T2] Idle first-size tables are kept on their owner thread's list
   (bpt__thread.timem_free) for its next first charge, rather than unmapped:
   every collection gives every thread fresh tables, and a map (a page
   fault on first touch) and an unmap (a TLB shootdown of every CPU the
   process runs on) per table and collection cost milliseconds and stalled
   the traced threads (PERFORMANCE.md). The list is a lock-free stack:
   pushes by the set path only (a collection freeing idle tables, under the
   permission; a table a hit grows out of is unmapped), pops by the owner
   and its nested signal handlers. A pop reads the head's next and CASes;
   the head cannot come back between the two (ABA). For it to come back, a
   handler nested between them must pop it (its thread's only other
   popper), put it in some breakpoint's tables, and the set path must then
   free those tables and push it. The set path frees tables only once no
   generation leads to them, after a thread progress wait that began then:
   C4's for a collection (C8 pushes); the commit's for a change that
   switches call_time off or restarts it, a session's destroy included
   (step 8's, or step 10's where step 8 defers it; steps 11 and 12 push,
   bp.c). The pop, and the handler's charge that found those
   tables reachable, run in one pinned section, which began before that
   wait did; the wait waits for the section to end [B1][B3], so the push
   comes after the pop's CAS. One wait suffices because the pop is pinned. */
static bpt__timem_table *bpt__timem_table_pop(bpt__thread *rec) {
    bpt__timem_table *t;
    do {
        t = (bpt__timem_table *)bpt__load_acquire_ptr(&rec->timem_free);   /* [T2] pairs with the push's CAS
                                                                                (bpt__timem_table_push) */
        if (!t) return NULL;
    } while (!bpt__cas_ptr(&rec->timem_free, t, t->next_free));
    return t;
}

static void bpt__timem_table_push(bpt__timem_table *t) {
    bpt__thread *rec = t->owner;
    void *head;
    do {
        head = bpt__load_relaxed_ptr(&rec->timem_free);
        t->next_free = (bpt__timem_table *)head;
    } while (!bpt__cas_ptr(&rec->timem_free, head, t));   /* [T2] release: next_free before the head;
                                                             pairs with bpt__timem_table_pop's acquire */
}

/* An empty table of cap cells. On the hit path (rec: the charging thread)
   it is mapped, never malloc'd (a charge may come from a signal handler
   that interrupted malloc: BPT_HIT_MAP, port.h), or taken from the
   thread's idle tables; on the set path (rec NULL: a collection's sums)
   it comes from BPT_MALLOC. */
static bpt__timem_table *bpt__timem_table_new(uint32_t cap, bpt__thread *rec) {
    size_t bytes = bpt__timem_table_bytes(cap);
    bpt__timem_table *t = NULL;
    if (rec && cap == BPT__TIMEM_HIT_CAP) t = bpt__timem_table_pop(rec);
    if (!t) t = (bpt__timem_table *)(rec ? BPT_HIT_MAP(bytes) : BPT_MALLOC(bytes));
    if (!t) return NULL;
    memset(t, 0, bytes);
    t->cap = cap;
    t->owner = rec;
    return t;
}

/* Free a table: from the set path (hit = 0) a first-size table goes back
   to its owner's idle list [T2]; from the hit path (a table grown out of)
   or at another size, a mapped table is unmapped. */
static void bpt__timem_table_free(bpt__timem_table *t, int hit) {
    if (!t) return;
    if (t->owner && t->cap == BPT__TIMEM_HIT_CAP && !hit) bpt__timem_table_push(t);
    else if (t->owner) BPT_HIT_UNMAP(t, bpt__timem_table_bytes(t->cap));
    else BPT_FREE(t);
}

/* Where process's cell is in t, or the free cell where it would go:
   open addressing, linear probing (process 0 marks a free cell). The loop
   ends: a table is never more than half full (bpt__timem_cell_of). */
BPT__HOT BPT__INTREGS uint32_t bpt__timem_probe(const bpt__timem_table *t, uint64_t process) {
    uint32_t i = (uint32_t)((process * 0x9E3779B97F4A7C15ull) >> 40) & (t->cap - 1);
    while (t->cell[i].process != process && t->cell[i].process != 0) i = (i + 1) & (t->cap - 1);
    return i;
}

/* The cell of process in t, or NULL: nothing is claimed. */
BPT__HOT BPT__INTREGS bpt__timem_cell *bpt__timem_cell_find(bpt__timem_table *t, uint64_t process) {
    uint32_t i = bpt__timem_probe(t, process);
    return t->cell[i].process == process ? &t->cell[i] : NULL;
}

/* The cell of process in t, or a free one claimed for it; NULL if t is half full. */
static bpt__timem_cell *bpt__timem_cell_of(bpt__timem_table *t, uint64_t process) {
    uint32_t i = bpt__timem_probe(t, process);
    if (t->cell[i].process == process) return &t->cell[i];
    if ((t->used + 1) * 2 > t->cap) return NULL;
    t->used++;
    t->cell[i].process = process;
    return &t->cell[i];
}

/* a + b, call_memory's net bytes (bpt_account_memory's signed counts),
   modulo 2^64: a sum past int64_t's range wraps, as the uint64_t
   memory_bytes that reports it does (api_info.h), rather than being a
   signed overflow, undefined behaviour (UBSan stops at it; found by
   review). The same one add instruction as +: the charges' frames
   (frames.c), cells and collections sum with it. */
BPT__HOT BPT__INTREGS int64_t bpt__mem_add(int64_t a, int64_t b) {
    return (int64_t)((uint64_t)a + (uint64_t)b);   /* the conversion back: two's complement, as every
                                                      compiler bptrace supports defines it */
}

/* Add one cell's values into t (which has room). */
static void bpt__timem_cell_add(bpt__timem_table *t, const bpt__timem_cell *c) {
    bpt__timem_cell *d = bpt__timem_cell_of(t, c->process);
    d->calls += c->calls;
    d->time_ns += c->time_ns;
    d->mem = bpt__mem_add(d->mem, c->mem);
}

/* A hit's new table: t's cells in one twice as large (or a first one):
   NULL when out of memory. The caller frees t if it changed. */
static bpt__timem_table *bpt__timem_table_grow(bpt__timem_table *t, bpt__thread *rec) {
    bpt__timem_table *n = bpt__timem_table_new(t ? t->cap * 2 : (uint32_t)BPT__TIMEM_HIT_CAP, rec);
    uint32_t i;
    if (!n || !t) return n;
    for (i = 0; i < t->cap; i++)
        if (t->cell[i].process) bpt__timem_cell_add(n, &t->cell[i]);
    return n;
}

/* [T3] The tables of thread records past BPT_MAX_THREADS: an array of
   BPT__TIMEM_MORE table pointers, mapped by the first charge that needs
   it and published by CAS, as a session's lane directory is (session.c
   [R1]): two such threads, or a signal handler nested on one, may race to
   map it, and the loser unmaps its own. It is 512 KiB of address space,
   zero-filled, and memory only where touched: one page for every 512
   threads that charge. The set path reads it only while its tables are
   idle (C5, C8), and only the slots of thread records that exist. */
#define BPT__TIMEM_MORE_BYTES ((size_t)BPT__TIMEM_MORE * sizeof(bpt__atomic_ptr))

/* The slot of thread record `index`'s table in t: NULL past both arrays,
   or when `more` is not mapped (make = 0: the set path's look; make = 1:
   a charge maps it, NULL if that fails). */
static bpt__atomic_ptr *bpt__timem_slot(bpt__BpTimem *t, uint32_t index, int make) {
    bpt__atomic_ptr *more;
    if (index < BPT_MAX_THREADS) return &t->table[index];
    if (index - BPT_MAX_THREADS >= BPT__TIMEM_MORE) return NULL;
    more = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&t->more);   /* [T3] */
    if (!more && make) {
        bpt__atomic_ptr *fresh = (bpt__atomic_ptr *)BPT_HIT_MAP(BPT__TIMEM_MORE_BYTES);   /* zero-filled */
        if (!fresh) return NULL;
        if (bpt__cas_ptr(&t->more, NULL, (void *)fresh)) {   /* [T3] release: pairs with the acquire loads of `more` */
            more = fresh;
        } else {
            BPT_HIT_UNMAP((void *)fresh, BPT__TIMEM_MORE_BYTES);
            more = (bpt__atomic_ptr *)bpt__load_acquire_ptr(&t->more);
        }
    }
    return more ? &more[index - BPT_MAX_THREADS] : NULL;
}

/* [T1] A thread's table is published in its slot (t->table[index], or
   `more`'s [T3]) by its owner only, with a release store, when a charge
   makes or grows it (bpt__timem_charge_new); the set path loads a slot
   with an acquire load (bpt__timem_table_at: C5's sums, C8's frees and
   bpt__timem_free). The pair makes a table found through its slot whole:
   its cap, used, owner and cells written before the pointer. The set path
   reads only idle tables, after a wait the charge's pinned section held
   back ([B3] orders the owner's plain stores to the cells too); the pair
   is what makes the table found whole without that wait, as the root
   record's outside reader finds it (api_root.h). */

/* Thread record index k's table in t, or NULL (the set path, on idle
   tables [T1]). */
static bpt__timem_table *bpt__timem_table_at(const bpt__BpTimem *t, uint32_t k) {
    bpt__atomic_ptr *slot = bpt__timem_slot((bpt__BpTimem *)t, k, 0);
    return slot ? (bpt__timem_table *)bpt__load_acquire_ptr(slot) : NULL;   /* [T1] pairs with the release
                                                                             in bpt__timem_charge_new */
}

/* How many thread record indexes may hold a table of t: every index below
   it; none above, since records are made in index order. */
static uint32_t bpt__timem_slots(const bpt__BpTimem *t) {
    uint32_t n = bpt__threads_count();
    if (n > BPT_MAX_THREADS && !bpt__load_acquire_ptr((bpt__atomic_ptr *)&t->more)) n = BPT_MAX_THREADS;
    return n;
}

BPT__PRIVATE bpt__BpTimem *bpt__timem_new(void) {
    bpt__BpTimem *t = (bpt__BpTimem *)BPT_MALLOC(sizeof *t);
    if (!t) return NULL;
    memset(t, 0, sizeof *t);
    t->refc = 1;
    return t;
}

BPT__PRIVATE void bpt__timem_free(bpt__BpTimem *t) {
    uint32_t k, n = bpt__timem_slots(t);
    void *more = bpt__load_relaxed_ptr(&t->more);
    for (k = 0; k < n; k++) bpt__timem_table_free(bpt__timem_table_at(t, k), 0);
    if (more) BPT_HIT_UNMAP(more, BPT__TIMEM_MORE_BYTES);
    bpt__timem_table_free(t->carried, 0);
    if (t->prev) bpt__timem_free(t->prev);
    BPT_FREE(t);
}

BPT__PRIVATE void bpt__timem_ref(bpt__BpTimem *t) { t->refc++; }

BPT__PRIVATE void bpt__timem_unref(bpt__BpTimem *t) {
    if (t && --t->refc == 0) bpt__timem_free(t);
}

/* The tables of a generation with call_time or call_memory on, or NULL. */
BPT__PRIVATE bpt__BpTimem *bpt__timem_of(const bpt__GenericBpData *d) {
    if (d->flags & BPT__BPF_TIME_TRACE) return (bpt__BpTimem *)d->data[BPT__KIX_TIME];
    if (d->flags & BPT__BPF_MEM_TRACE) return (bpt__BpTimem *)d->data[BPT__KIX_MEMORY];
    return NULL;
}

/* Point every timem kind that is on in d at t, each with its own reference. */
BPT__PRIVATE void bpt__timem_point(bpt__GenericBpData *d, bpt__BpTimem *t) {
    static const int kix[2] = { BPT__KIX_TIME, BPT__KIX_MEMORY };
    int i;
    for (i = 0; i < 2; i++) {
        if (!(d->flags & BPT__BPF_ON(kix[i]))) continue;
        t->refc++;
        bpt__timem_unref((bpt__BpTimem *)d->data[kix[i]]);
        d->data[kix[i]] = t;
    }
}

/* Add to a cell (inline: the short paths make no call). */
BPT__HOT BPT__INTREGS void bpt__timem_cell_charge(bpt__timem_cell *c, uint64_t calls, uint64_t ns, int64_t mem) {
    c->calls += calls;
    c->time_ns += ns;
    c->mem = bpt__mem_add(c->mem, mem);
}

/* [H1] A thread marks the tables it charges while it charges them
   (rec->timem_charging, the first timem_depth), and a signal handler's
   charge nested in it, of the same tables, is dropped and counted in their
   `lost`: it would interleave with the owner's update (a lost add, a table
   grown and freed twice). One of other tables goes ahead, and marks them
   above: so a second handler, nested in the first's charge, finds the
   thread's tables marked too. bpt__timem_mark returns 0, marking nothing,
   when t is marked already or the marks are full (BPT__TIMEM_NEST
   charges deep); else 1 and *depth, for bpt__timem_unmark. The depth goes
   up before the slot is written: a handler nested between the two marks
   above it, and may find the slot's stale table (a drop, needless but
   safe); the interrupted charge has touched nothing yet. */
BPT__HOT BPT__INTREGS int bpt__timem_mark(bpt__thread *rec, bpt__BpTimem *t, uint32_t *depth) {
    uint32_t d = rec->timem_depth, i;
    if (BPT__UNLIKELY(d != 0)) {   /* nested: in a charge of t, or too deep? */
        if (d == BPT__TIMEM_NEST) return 0;
        for (i = 0; i < d; i++)
            if (rec->timem_charging[i] == (void *)t) return 0;
    }
    rec->timem_depth = d + 1;
    bpt__compiler_barrier();   /* [H1] the slot is ours before it is written */
    rec->timem_charging[d] = t;
    bpt__compiler_barrier();   /* [H1] marked before the table is touched */
    *depth = d;
    return 1;
}

BPT__HOT BPT__INTREGS void bpt__timem_unmark(bpt__thread *rec, uint32_t depth) {
    bpt__compiler_barrier();   /* [H1] the table is left before the mark goes */
    rec->timem_depth = depth;
}

/* The common case of a charge, with the integer registers alone and no
   call (the time path's count of a call, site_native.c; the timed
   return's own time, frames.c; and bpt__timem_charge below): the thread's
   table and the process's cell exist, and the charge can be marked [H1];
   add to the cell. Returns 1 when charged; 0 having changed nothing when
   the table or the cell is still to be made, the thread record is past
   BPT_MAX_THREADS (its table is in `more`), or this runs nested in a
   charge of t: bpt__timem_charge then does it, or counts it lost. The
   cell is looked up after the mark: a handler nested after the look would
   otherwise be free to grow the table and unmap the cell. */
BPT__HOT BPT__INTREGS int bpt__timem_charge_try(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                                uint64_t calls, uint64_t ns, int64_t mem) {
    bpt__timem_table *tab;
    bpt__timem_cell *c = NULL;
    uint32_t depth;
    if (rec->index >= BPT_MAX_THREADS || !bpt__timem_mark(rec, t, &depth)) return 0;
    tab = (bpt__timem_table *)bpt__load_relaxed_ptr(&t->table[rec->index]);
    if (BPT__LIKELY(tab != NULL) && BPT__LIKELY((c = bpt__timem_cell_find(tab, process)) != NULL))
        bpt__timem_cell_charge(c, calls, ns, mem);
    bpt__timem_unmark(rec, depth);
    return c != NULL;
}

/* What bpt__timem_charge_try leaves, out of line (its calls would make
   every charge save registers): marked [H1], make what is missing (the
   `more` slots, the thread's table, a cell for process, a table twice as
   large) and charge. Only the owner writes its table; a table that must
   grow is replaced (published with a release store) and the old one freed
   at once: nobody reads a table its owner may be writing (see above). A
   charge nested in a charge of t, one past BPT__TIMEM_NEST deep, or one
   with no memory for its table, is dropped and counted in `lost`. */
BPT__NOINLINE void bpt__timem_charge_new(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                         uint64_t calls, uint64_t ns, int64_t mem) {
    bpt__atomic_ptr *slot;
    bpt__timem_table *tab, *grown;
    bpt__timem_cell *c = NULL;
    uint32_t depth;
    if (!bpt__timem_mark(rec, t, &depth)) { bpt__fetch_add_u64(&t->lost, 1); return; }   /* [H1] */
    BPT_TEST_POINT("timem_charge_new: marked");   /* t_timem_nesting */
    if ((slot = bpt__timem_slot(t, rec->index, 1)) != NULL) {   /* NULL: no memory for `more`, or past it */
        tab = (bpt__timem_table *)bpt__load_relaxed_ptr(slot);
        while (!tab || !(c = bpt__timem_cell_of(tab, process))) {
            if (!(grown = bpt__timem_table_grow(tab, rec))) break;
            bpt__store_release_ptr(slot, grown);   /* [T1] pairs with bpt__timem_table_at's acquire */
            bpt__timem_table_free(tab, 1);
            tab = grown;
        }
    }
    if (c) bpt__timem_cell_charge(c, calls, ns, mem);
    else bpt__fetch_add_u64(&t->lost, 1);
    bpt__timem_unmark(rec, depth);
}

/* Charge one thread's calls, time and memory for process (the hit and
   return paths, pinned): the common case inline (bpt__timem_charge_try),
   the rest out of line (bpt__timem_charge_new). A signal handler's charge
   nested in one of the same tables is dropped and counted in `lost`
   (bpt__timem_mark) [H1]. */
BPT__HOT void bpt__timem_charge(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                uint64_t calls, uint64_t ns, int64_t mem) {
    if (BPT__LIKELY(bpt__timem_charge_try(t, rec, process, calls, ns, mem))) return;
    bpt__timem_charge_new(t, rec, process, calls, ns, mem);
}

/* >>report: call_time / call_memory of one breakpoint, from what the last
   collection carried (C6). The caller's procs gets the cap processes that
   rank first, in rank order, found in one pass over the carried cells with
   no allocation: procs[0..kept) is a heap whose root ranks last of those
   kept so far, so a cell that ranks before the root replaces it (n cells:
   O(n log cap)); the heap is then sorted in place, first rank first. */

/* 1 when a ranks before b: more time, then more memory, then the lower
   process id. A total order, since a table holds a process once: which
   processes are kept, and their order, depend on the sums alone, not on
   where the hash put them. Memory is a net count, compared signed (the
   cell's int64_t, carried in memory_bytes as its two's complement): a
   process that freed more than it allocated has less than none, and
   ranks after every one that allocated (compared unsigned, -100 B was
   2^64 - 100 and ranked first; found by review). */
static int bpt__proc_before(const bpt_info_process *a, const bpt_info_process *b) {
    int64_t am = (int64_t)a->memory_bytes, bm = (int64_t)b->memory_bytes;
    if (a->time_ns != b->time_ns) return a->time_ns > b->time_ns;
    if (am != bm) return am > bm;
    return a->process < b->process;
}

/* Restore the heap h[0..n) (every entry ranks at or after its children)
   below i, whose entry may rank before a child: move it down past every
   child that ranks after it, the later ranked child first. */
static void bpt__proc_sift_down(bpt_info_process *h, uint32_t n, uint32_t i) {
    bpt_info_process x = h[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bpt__proc_before(&h[c], &h[c + 1])) c++;   /* c: the child ranking last */
        if (!bpt__proc_before(&x, &h[c])) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* h[i] was just added to the heap h[0..i]: move it up past every parent
   that ranks before it. */
static void bpt__proc_sift_up(bpt_info_process *h, uint32_t i) {
    bpt_info_process x = h[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!bpt__proc_before(&h[parent], &x)) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = x;
}

BPT__PRIVATE void bpt__timem_report(const bpt__BpTimem *tm, bpt_info *out) {
    const bpt__timem_table *t = tm ? tm->carried : NULL;
    bpt_info_process *procs = out->procs;
    uint32_t i, n = 0, kept = 0, cap = procs ? out->procs_cap : 0;
    if (!tm) return;
    out->lost_charges += tm->lost_carried;   /* set path: C6 wrote it, under the same permission */
    if (!t) return;
    for (i = 0; i < t->cap; i++) {
        const bpt__timem_cell *c = &t->cell[i];
        bpt_info_process p;
        if (!c->process) continue;
        out->calls += c->calls;
        out->time_ns += c->time_ns;
        out->memory_bytes += (uint64_t)c->mem;
        n++;
        if (!cap) continue;
        p.process = c->process;
        p.calls = c->calls;
        p.time_ns = c->time_ns;
        p.memory_bytes = (uint64_t)c->mem;
        if (kept < cap) {                                   /* room: add it */
            procs[kept] = p;
            bpt__proc_sift_up(procs, kept++);
        } else if (bpt__proc_before(&p, &procs[0])) {       /* full: it beats the last kept */
            procs[0] = p;
            bpt__proc_sift_down(procs, kept, 0);
        }
    }
    out->nprocs = n;
    /* Sort the heap: the root, last in rank, goes to the end of what is
       left, so procs[0..kept) ends first rank first. */
    while (kept > 1) {
        bpt_info_process last = procs[0];
        procs[0] = procs[--kept];
        procs[kept] = last;
        bpt__proc_sift_down(procs, kept, 0);
    }
}

/* How many processes the last collection carried sums for (bpt_trace_info_each
   sizes its per-process array with it). */
BPT__PRIVATE uint32_t bpt__timem_nprocs(const bpt__BpTimem *tm) {
    return tm && tm->carried ? tm->carried->used : 0;
}

/* C5 for one breakpoint: its idle tables, what they carried and any
   unmerged older ones, summed into one new table (bpt__timem_merge; NULL
   when out of memory), and their drops into one count (bpt__timem_lost). */
static uint32_t bpt__timem_cells(const bpt__BpTimem *t) {
    uint32_t k, n = 0;
    for (; t; t = t->prev) {
        uint32_t slots = bpt__timem_slots(t);
        for (k = 0; k < slots; k++) {
            const bpt__timem_table *tab = bpt__timem_table_at(t, k);
            if (tab) n += tab->used;
        }
        if (t->carried) n += t->carried->used;
    }
    return n;
}

static void bpt__timem_table_add(bpt__timem_table *m, const bpt__timem_table *t) {
    uint32_t i;
    if (t) for (i = 0; i < t->cap; i++) if (t->cell[i].process) bpt__timem_cell_add(m, &t->cell[i]);
}

/* The drops of real and of its unmerged older tables, each with what its
   collection carried. Every charge of these tables ended before C4's wait
   did ([B3]: a charge runs pinned), so each `lost` is final: a relaxed
   load reads it whole. No thread adds to it any more, and it is summed
   here once: C7 and C8 free these tables once the sums are carried (or, out
   of memory, C6 keeps them whole in `prev`, and the next collection sums
   them, carrying nothing of them now). */
static uint64_t bpt__timem_lost(const bpt__BpTimem *real) {
    uint64_t n = 0;
    for (; real; real = real->prev)
        n += bpt__load_relaxed_u64((bpt__atomic_u64 *)&real->lost) + real->lost_carried;
    return n;
}

static bpt__timem_table *bpt__timem_merge(const bpt__BpTimem *real) {
    uint32_t cells = bpt__timem_cells(real), cap = 8, k;
    bpt__timem_table *m;
    while (cap < cells * 2 + 2) cap *= 2;
    if (!(m = bpt__timem_table_new(cap, NULL))) return NULL;
    for (; real; real = real->prev) {
        uint32_t slots = bpt__timem_slots(real);
        for (k = 0; k < slots; k++) bpt__timem_table_add(m, bpt__timem_table_at(real, k));
        bpt__timem_table_add(m, real->carried);
    }
    return m;
}

/* C1-C8 for the breakpoints gs[0..n), each with call_time or call_memory
   in its active half. Under the code modification permission; C9 is the
   caller's: it reads bpt__timem_of(&gs[i]->data[active])->carried and
   releases the permission. Returns 0, or BPT_ENOMEM: at C1 with nothing
   changed; at C5 with every charge kept (the idle tables that could not be
   merged are kept for the next collection). */
BPT__PRIVATE int bpt__timem_collect(bpt__GenericBp **gs, int n) {
    unsigned active = bpt_active_bp_ix(), staging = active ^ 1;
    bpt__BpTimem **fresh;
    int i, rc = 0;
    if (n == 0) return 0;
    /* C1. allocate: fresh tables in every staging half (which pointed at the
           same tables as the active half, the invariant between changes). */
    if (!(fresh = (bpt__BpTimem **)BPT_MALLOC(sizeof *fresh * (size_t)n)))
        return bpt__fail(BPT_ENOMEM, "bpt_trace_info: no memory for the collection; nothing changed");
    for (i = 0; i < n; i++) {
        if ((fresh[i] = bpt__timem_new()) == NULL) {
            while (i--) bpt__timem_free(fresh[i]);
            BPT_FREE(fresh);
            return bpt__fail(BPT_ENOMEM, "bpt_trace_info: no memory for the collection's tables; nothing changed");
        }
    }
    for (i = 0; i < n; i++) {
        bpt__timem_point(&gs[i]->data[staging], fresh[i]);
        bpt__timem_unref(fresh[i]);   /* the staging half's references hold it now */
    }
    /* C2. wait (the hit path reads a generation only after the index's
           acquire load, which C3's release covers; the wait is OTP's, and
           keeps the two switches of consecutive collections apart). */
    bpt_thread_progress_wait();
    /* C3. switch: charges go to the fresh tables ([G2], bp.c). */
    bpt__commit();
    /* C4. wait: no thread is still charging a real table. */
    bpt_thread_progress_wait();
    for (i = 0; i < n; i++) {
        bpt__BpTimem *real = bpt__timem_of(&gs[i]->data[active]);
        /* C5. sum the idle real tables. */
        bpt__timem_table *merged = bpt__timem_merge(real);
        /* C6. carry the sums and the drops in the fresh tables (or, out of
               memory, the real tables themselves, merged next time: fresh
               keeps them alive with one reference of its own, and carries
               none of their drops, which stay in them until then). The
               fresh `lost` is left alone: charges made since C3 add to it,
               and the next collection sums it. */
        if (merged) { fresh[i]->carried = merged; fresh[i]->lost_carried = bpt__timem_lost(real); }
        else { fresh[i]->prev = real; real->refc++; rc = BPT_ENOMEM; }
        /* C7 and C8. consolidate: staging := active; the real tables lose
           their last references, idle since C4, and are freed (unless C6
           kept them). */
        bpt__timem_point(&gs[i]->data[active], fresh[i]);
    }
    BPT_FREE(fresh);
    if (rc < 0)
        return bpt__fail(BPT_ENOMEM, "bpt_trace_info: no memory to sum call_time tables; every count is "
                         "kept and the next collection sums it");
    return 0;
}
