/* hit.c: what a breakpoint does when a thread reaches it.
   Pin, read the active index once, and do what the generation's shortcut
   says (>>shortcut, breakpoint.h): nothing; count for the one session that
   only counts; trace the call for the one session that only traces calls;
   run the kinds of the one session that is active; or walk
   the function's GenericBp list (one per session) and run each active
   kind of each session's active generation (kind_*.c: count, call trace,
   call_time, call_memory). Unpin. No lock, no wait: this
   is op_i_generic_breakpoint / erts_generic_breakpoint in beam_bp.c.
   A native entry whose generation only counts never gets here: the stub's
   count path (site_native.c) does the COUNT and NONE shortcuts' work first,
   with the integer registers alone, and leaves its rare cases to this. */
#include "internal.h"

/* The active generation index: 0 or 1. The commit (step 7, bp.c) flips it
   with a release store; a hit reads it once, with an acquire load [G2].
   Defined with the hit, ahead of the count path (site_native.c), which
   inlines its load. */
BPT__ASM_READ_DECL(bpt__atomic_u32 bpt__active_ix)
BPT__ASM_READ bpt__atomic_u32 bpt__active_ix;   /* read by the count route too */
BPT__HOT BPT__INTREGS unsigned bpt__active_ix_load(void) { return bpt__load_acquire_u32(&bpt__active_ix); }

/* One session's breakpoint g in generation ix: run each active kind, in
   the table's order (kind_*.c). */
BPT__HOT void bpt__breakpoint_run(bpt__hit *h, bpt__GenericBp *g, unsigned ix) {
    const bpt__GenericBpData *d = &g->data[ix];
    if (!d->flags) return;
#define BPT__KIND_HIT(NAME, name, flag) \
    if (d->flags & BPT__BPF_ACTIVE(BPT__KIX_##NAME)) bpt__kind_##name##_hit(h, g->session, d);
    BPT_KINDS(BPT__KIND_HIT)
#undef BPT__KIND_HIT
}

/* The general case: walk every session's breakpoint on h->f in generation
   ix and run each. Out of line, as the ONE shortcut's run below, so that
   the shortcuts' path through bpt__breakpoint stays small (no spills of
   their registers). */
BPT__NOINLINE void bpt__breakpoint_walk(bpt__hit *h, unsigned ix) {
    bpt__GenericBp *g;
    /* [G1] Acquire loads of the list pair with the release stores that
       link a GenericBp (steps 2 and 5, bp.c) and unlink one (step 11). */
    for (g = (bpt__GenericBp *)bpt__load_acquire_ptr(&h->f->gen_bp); g;
         g = (bpt__GenericBp *)bpt__load_acquire_ptr(&g->next))
        bpt__breakpoint_run(h, g, ix);
}

/* The ONE shortcut: the one session's breakpoint that step 3 found
   active in generation ix, with no walk of the list (>>shortcut). */
BPT__NOINLINE void bpt__breakpoint_one(bpt__hit *h, bpt__GenericBp *g, unsigned ix) {
    bpt__breakpoint_run(h, g, ix);
}

/* The CALL shortcut: the one session's breakpoint that step 3 found
   active in generation ix traces calls, and nothing else: the call kind
   alone, with no test of the other kinds (callgrind, bench_overhead: a
   call event 295 to 277 instructions, a call+return 657 to 638). Out of
   line, as the ONE shortcut's run. */
BPT__NOINLINE void bpt__breakpoint_call(bpt__hit *h, bpt__GenericBp *g, unsigned ix) {
    bpt__kind_call_hit(h, g->session, &g->data[ix]);
}

/* Run every session's breakpoint on h->f; gather in h who wants a return
   frame (the site pushes it). The caller then executes the original
   instruction. Returns 0 when the thread has no record (out of memory):
   untraced, never unsafe. */
BPT__HOT int bpt__breakpoint(bpt__hit *h) {
    unsigned ix;
    bpt_func *f = h->f;
    bpt__thread *rec = bpt__pin();
    h->rec = rec;
    h->nwant = 0;
    h->wanted = 0;
    if (!rec) return 0;
#if defined(BPT_NATIVE)
    if (f->kind == BPT__SITE_NATIVE && rec->shadow_depth[BPT__STACK_NATIVE]) bpt__native_settle(h);
#endif
    ix = bpt__active_ix_load();   /* [G2] once per hit: one generation throughout */
    switch (f->shortcut[ix].kind) {   /* published with ix [G2] */
    case BPT__SHORTCUT_NONE:
        break;
    case BPT__SHORTCUT_COUNT:
        bpt__kind_count_add(rec, f->shortcut[ix].data);
        break;
    case BPT__SHORTCUT_CALL:
    case BPT__SHORTCUT_CALL_PLAIN:   /* here, as CALL: the call path (site_native.c) declined it */
    case BPT__SHORTCUT_CALL_RETURN:
        bpt__breakpoint_call(h, (bpt__GenericBp *)f->shortcut[ix].data, ix);
        break;
    case BPT__SHORTCUT_ONE:
    case BPT__SHORTCUT_TIME:   /* here, as ONE: the time path (site_native.c) declined it */
        bpt__breakpoint_one(h, (bpt__GenericBp *)f->shortcut[ix].data, ix);
        break;
    default:
        bpt__breakpoint_walk(h, ix);
    }
    return 1;   /* still pinned: the site pushes its frame, then unpins */
}

bpt_vm_word bpt_vm_breakpoint(bpt_func *f, const void *frame, bpt_vm_token *token) {
    bpt__hit h;
    BPT_ASSERT(f && f->kind == BPT__SITE_VM);
    if (token) *token = 0;
    h.f = f;
    h.frame = frame;
    h.no_frame = token == NULL;   /* the VM keeps no frames: return trace of its calls is skipped */
    bpt__own_enter();   /* its calls into libc through traced slots are bptrace's own (site_native.c) */
    if (bpt__breakpoint(&h)) {
        if (h.nwant) bpt__vm_frame_push(&h, token);
        bpt__unpin(h.rec);
    }
    bpt__own_leave();
    return (bpt_vm_word)f->orig_word;   /* immutable while registered */
}
