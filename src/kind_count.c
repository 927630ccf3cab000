/* kind_count.c: the call_count breakpoint kind (BPT_COUNT), as BEAM's
   BpCount in beam_bp.c: one counter per breakpoint, shared by the two
   generations that count into it, incremented by every hit while active. Its
   hooks are the ones the kinds table (BPT_KINDS, api_pattern.h) names;
   breakpoint.h declares them. */
#include "internal.h"

#define BPT__BPF_COUNT        BPT__BPF_ON(BPT__KIX_COUNT)
#define BPT__BPF_COUNT_ACTIVE BPT__BPF_ACTIVE(BPT__KIX_COUNT)

/* Shared by the generations that count into it, freed when the last lets
   go (refc changes only under the code modification permission). */
typedef struct bpt__BpCount {
    bpt__atomic_u64 value;
    uint32_t refc;
} bpt__BpCount;

/* Step 2: a fresh counter when the change switches counting on where the
   staging generation has none. */
BPT__PRIVATE int bpt__kind_count_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    bpt__BpCount *bc;
    *out = NULL;
    if (!bpt__op_enables(op) || (staging && (staging->flags & BPT__BPF_COUNT))) return 0;
    if (!(bc = (bpt__BpCount *)BPT_MALLOC(sizeof *bc))) return BPT_ENOMEM;
    bpt__store_relaxed_u64(&bc->value, 0);
    bc->refc = 1;
    *out = bc;
    return 0;
}

BPT__PRIVATE void bpt__kind_count_ref(void *data) { ((bpt__BpCount *)data)->refc++; }

BPT__PRIVATE void bpt__kind_count_unref(void *data) {
    bpt__BpCount *c = (bpt__BpCount *)data;
    if (c && --c->refc == 0) BPT_FREE(c);
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
            d->data[BPT__KIX_COUNT] = fresh;
            d->flags |= BPT__BPF_COUNT;
        } else if (op->how == BPT_RESTART) {
            /* Shared with the active generation, as in BEAM: the reset is
               seen at once, the re-activation at the commit. */
            bpt__store_relaxed_u64(&((bpt__BpCount *)d->data[BPT__KIX_COUNT])->value, 0);
        }
        d->flags |= BPT__BPF_COUNT_ACTIVE;
    }
}

/* The hit: one atomic increment of the shared counter (a cache line that
   every thread calling the function writes). */
BPT__HOT void bpt__kind_count_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    (void)h; (void)s;
    bpt__fetch_add_u64(&((bpt__BpCount *)d->data[BPT__KIX_COUNT])->value, 1);
}

BPT__PRIVATE void bpt__kind_count_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    if (what & BPT_INFO_FLAGS) {
        out->flags |= BPT_COUNT;
        out->count_paused = !(d->flags & BPT__BPF_COUNT_ACTIVE);
    }
    if (what & BPT_INFO_COUNT)
        out->count = bpt__load_relaxed_u64(&((bpt__BpCount *)d->data[BPT__KIX_COUNT])->value);
}
