/* kind_timem.c: the call_time and call_memory breakpoint kinds (BPT_TIME,
   BPT_MEMORY), as BEAM's ERTS_BPF_TIME_TRACE and ERTS_BPF_MEM_TRACE: a hit
   counts the call in its thread's table and asks for a return frame, which
   charges the call's own time and bytes when it ends (frames.c). The two
   kinds share their tables (timem.c); these hooks keep the invariant that
   while both are on, both data slots point at the same bpt__BpTimem. The
   hooks are the ones the kinds table (BPT_KINDS, api_pattern.h) names;
   breakpoint.h declares them. */
#include "internal.h"

/* Step 2: fresh tables where the change switches a kind of the pair on
   (again) or restarts it. A kind that is on starts from zero whether it is
   switched on again or restarted, as set_function_break in beam_bp.c
   resets its table for any operation but a pause; the pair's one table
   means the other kind starts from zero too. A kind switched on beside
   the other shares its tables and zeroes nothing; a restart of kinds that
   are all off changes nothing (bp.c). When one change names both kinds,
   the call_time row allocates for the pair. */
static int bpt__kind_timem_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    uint32_t on = staging ? staging->flags : 0, named = 0;
    *out = NULL;
    if (op->kinds & BPT_TIME) named |= BPT__BPF_ON(BPT__KIX_TIME);
    if (op->kinds & BPT_MEMORY) named |= BPT__BPF_ON(BPT__KIX_MEMORY);
    if (op->how == BPT_OFF || op->how == BPT_PAUSE) return 0;
    if (!(on & named)) {   /* each kind named is off */
        if (op->how == BPT_RESTART || (staging && bpt__timem_of(staging))) return 0;
    }
    if (!(*out = bpt__timem_new())) return BPT_ENOMEM;
    return 0;
}

BPT__PRIVATE int bpt__kind_time_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    return bpt__kind_timem_prepare(op, staging, out);
}

BPT__PRIVATE int bpt__kind_memory_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    if (op->kinds & BPT_TIME) { *out = NULL; return 0; }   /* the call_time row prepares for both */
    return bpt__kind_timem_prepare(op, staging, out);
}

BPT__PRIVATE void bpt__kind_time_ref(void *data) { bpt__timem_ref((bpt__BpTimem *)data); }
BPT__PRIVATE void bpt__kind_memory_ref(void *data) { bpt__timem_ref((bpt__BpTimem *)data); }
BPT__PRIVATE void bpt__kind_time_unref(void *data) { bpt__timem_unref((bpt__BpTimem *)data); }
BPT__PRIVATE void bpt__kind_memory_unref(void *data) { bpt__timem_unref((bpt__BpTimem *)data); }

/* Step 3 for kind k of the pair. `fresh` is step 2's tables, or NULL. On
   or restart with fresh tables, both kinds of the pair that are on move to
   them (as the one shared table they are: a restart of one zeroes the
   other's too), and k is switched on unless restarted; switched on
   without, k shares the other kind's tables. */
static void bpt__kind_timem_stage(bpt__GenericBpData *d, int k, const bpt__op *op, bpt__BpTimem *fresh) {
    uint32_t on = BPT__BPF_ON(k), active = BPT__BPF_ACTIVE(k);
    bpt__BpTimem *shared;
    switch (op->how) {
    case BPT_OFF:
        if (d->flags & on) bpt__timem_unref((bpt__BpTimem *)d->data[k]);
        d->flags &= ~(on | active);
        d->data[k] = NULL;
        break;
    case BPT_PAUSE:
        d->flags &= ~active;
        break;
    default: /* on, restart */
        if (fresh) {
            if (op->how != BPT_RESTART) d->flags |= on;   /* an off slot is NULL: point() fills it */
            bpt__timem_point(d, fresh);   /* each kind that is on: its own reference */
            bpt__timem_unref(fresh);      /* step 2's reference, now held by the slots */
            if (!(d->flags & on)) break;  /* restarted while off: stays off */
        } else if (!(d->flags & on)) {
            if (op->how == BPT_RESTART) break;   /* restart touches only kinds that are on */
            shared = bpt__timem_of(d);
            bpt__timem_ref(shared);
            d->data[k] = shared;
            d->flags |= on;
        }
        d->flags |= active;
    }
}

BPT__PRIVATE void bpt__kind_time_stage(bpt__GenericBpData *d, const bpt__op *op, void *fresh) {
    bpt__kind_timem_stage(d, BPT__KIX_TIME, op, (bpt__BpTimem *)fresh);
}

BPT__PRIVATE void bpt__kind_memory_stage(bpt__GenericBpData *d, const bpt__op *op, void *fresh) {
    bpt__kind_timem_stage(d, BPT__KIX_MEMORY, op, (bpt__BpTimem *)fresh);
}

/* The hit: count the call in this thread's table now (so a call still
   running is counted), once for the pair, and ask for a frame, which
   charges the time and memory when the call ends (frames.c). */
BPT__HOT void bpt__kind_time_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    bpt__timem_charge((bpt__BpTimem *)d->data[BPT__KIX_TIME], h->rec, h->rec->process, 1, 0, 0);
    bpt__hit_want_frame(h, s, BPT_TIME | (s->time_cpu ? BPT__FRAME_CPU : 0u), BPT_ARG_I64);
}

BPT__HOT void bpt__kind_memory_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    if (!(d->flags & BPT__BPF_TIME_ACTIVE))   /* else the call_time row counted the call */
        bpt__timem_charge((bpt__BpTimem *)d->data[BPT__KIX_MEMORY], h->rec, h->rec->process, 1, 0, 0);
    bpt__hit_want_frame(h, s, BPT_MEMORY | (s->time_cpu ? BPT__FRAME_CPU : 0u), BPT_ARG_I64);
}

static void bpt__kind_timem_info(const bpt__GenericBpData *d, unsigned what, unsigned flag, bpt_info *out) {
    if (what & BPT_INFO_FLAGS) {   /* each kind's own pause: one flag for both said "not paused" of
                                      call_time paused beside call_memory counting (found by review) */
        out->flags |= flag;
        if (flag == BPT_TIME) out->time_paused = !(d->flags & BPT__BPF_TIME_ACTIVE);
        else out->memory_paused = !(d->flags & BPT__BPF_MEM_ACTIVE);
    }
    /* The sums, the drops (lost_charges) and the processes ranking first:
       what the collection just carried (timem.c >>report). */
    if (what & (BPT_INFO_TIME | BPT_INFO_MEMORY)) bpt__timem_report(bpt__timem_of(d), out);
}

BPT__PRIVATE void bpt__kind_time_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    bpt__kind_timem_info(d, what, BPT_TIME, out);
}

BPT__PRIVATE void bpt__kind_memory_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    if (d->flags & BPT__BPF_TIME_TRACE) what &= ~(unsigned)(BPT_INFO_TIME | BPT_INFO_MEMORY);   /* summed once */
    bpt__kind_timem_info(d, what, BPT_MEMORY, out);
}
