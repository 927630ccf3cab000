/* bp.c: the set path. How a breakpoint change becomes visible to running
   threads without stopping any of them: the 13 steps of OTP's Tracing.md,
   as erts_set_trace_pattern and friends run them in beam_bp.c.

   Invariant between changes: for every GenericBp, data[active] and
   data[staging] are equal (step 11 makes them so). A change therefore only
   writes staging halves (step 3), flips the global index (step 7), and
   waits for thread progress wherever a reader could still see the past. */
#include "internal.h"

/* The active generation index (bpt__active_ix, hit.c) and its twin. */
unsigned bpt_active_bp_ix(void) { return bpt__active_ix_load(); }   /* [G2] */
unsigned bpt_staging_bp_ix(void) { return bpt__load_acquire_u32(&bpt__active_ix) ^ 1u; }

/* Only a switch-on makes breakpoints. BPT_PAUSE and BPT_RESTART change the
   counting kinds that are on and leave a function without them alone, as
   set_function_break in beam_bp.c inserts no breakpoint for either (cprof's
   pause and restart: "the matching functions that have call count
   breakpoints"). */
BPT__PRIVATE int bpt__op_enables(const bpt__op *op) { return op->how == 0; }

static bpt_observer_fn bpt__observer;
static void *bpt__observer_user;
/* Changes run so far: the one running is the step probes' change id.
   Written under the permission; read by anyone (pattern__done). */
static bpt__atomic_u64 bpt__change_seq;
/* The layout sequence count [L1] (api_root.h): odd while the permission is
   held, so an outside reader of the registry and the sessions can tell a
   torn read. Only the permission's holder writes it. */
BPT__SHARED bpt__atomic_u64 bpt__layout_seq;

BPT__PRIVATE uint64_t bpt__probe_change_id(void) { return bpt__load_relaxed_u64(&bpt__change_seq); }

static const char *const bpt__step_names[13] = {
    "seize permission", "allocate", "stage", "wait", "install", "wait", "commit",
    "wait", "uninstall", "wait", "consolidate", "wait and free", "release permission"
};

const char *bpt_protocol_step_name(int step) {
    return step >= 1 && step <= 13 ? bpt__step_names[step - 1] : NULL;
}

/* Report a step to the observer and to a tool attached to bptrace:step
   (the step, its name, the change's id, whether it had work, its ns), and
   start timing the next. */
static void bpt__step_done(int step, int did, uint64_t *t) {
    uint64_t now = bpt__now_ns();
    if (bpt__observer) bpt__observer(step, did, now - *t, bpt__observer_user);
    BPT_PROBE(bptrace, step, step, bpt__step_names[step - 1], bpt__load_relaxed_u64(&bpt__change_seq), did,
              now - *t);
    *t = bpt__now_ns();
}

/* Seize the code modification permission (step 1). Set-path calls from a
   tracer callback, a pinned section, or a callback run under the permission
   (an observer, a trace_info_each visitor) would wait for themselves. */
BPT__PRIVATE int bpt__set_path_allowed(const char *who) {
    bpt__thread *rec = bpt__thread_self();
    if (!rec) return bpt__fail(BPT_ENOMEM, "%s: no memory for the thread record", who);
    if (rec->in_tracer)
        return bpt__fail(BPT_EDEADLK, "%s: called from inside a tracer callback", who);
    if (rec->holds_permission)
        return bpt__fail(BPT_EDEADLK, "%s: called from a callback that runs under the code "
                         "modification permission (observer or trace_info_each visitor)", who);
    if (bpt__thread_pinned(rec))
        return bpt__fail(BPT_EDEADLK, "%s: called while pinned (bpt_thread_progress_pin)", who);
    return 0;
}

BPT__PRIVATE int bpt__permission_seize(const char *who) {
    bpt__thread *rec;
    int rc = bpt__set_path_allowed(who);
    if (rc < 0) return rc;
    rec = bpt__thread_self_or_null();
    bpt__block_begin(rec);   /* a managed thread stays offline while it holds the permission */
    pthread_mutex_lock(&bpt__code_mod_permission);
    bpt__own_enter();        /* its calls into libc (mprotect, malloc) are bptrace's own (site_native.c) */
#if defined(BPT_NATIVE)
    bpt__arch_prefetch_setup();   /* >>prefetch in port.h; a pthread_once, so after own_enter (t_imports_own) */
#endif
    rec->holds_permission = 1;
    /* [L1] writer, opening: the count goes odd before any change an outside
       reader could see (api_root.h); the fence orders it before them. */
    bpt__store_relaxed_u64(&bpt__layout_seq, bpt__load_relaxed_u64(&bpt__layout_seq) + 1);
    bpt__fence_seq_cst();
    return 0;
}

BPT__PRIVATE void bpt__permission_release(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    /* [L1] writer, closing: even again, released after every change. */
    bpt__store_release_u64(&bpt__layout_seq, bpt__load_relaxed_u64(&bpt__layout_seq) + 1);
    rec->holds_permission = 0;
    bpt__own_leave();
    pthread_mutex_unlock(&bpt__code_mod_permission);
    bpt__block_end(rec);
}

int bpt_set_protocol_observer(bpt_observer_fn fn, void *user) {
    int rc = bpt__permission_seize("bpt_set_protocol_observer");
    if (rc < 0) return rc;
    bpt__observer = fn;
    bpt__observer_user = user;
    bpt__permission_release();
    return 0;
}

/* The session's breakpoint on f, or NULL. Under the permission. */
BPT__PRIVATE bpt__GenericBp *bpt__find_bp(const bpt_func *f, const bpt__session *s) {
    bpt__GenericBp *g;
    for (g = (bpt__GenericBp *)bpt__load_relaxed_ptr((bpt__atomic_ptr *)&f->gen_bp); g;
         g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&g->next))
        if (g->session == s) return g;
    return NULL;
}

/* >>kinds: the hooks of every kind, called in the table's order. */

/* Step 2 for one breakpoint: what each kind the op changes needs allocated.
   `staging` is NULL for a fresh breakpoint. Returns 0 or BPT_ENOMEM. */
static int bpt__kinds_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **prepared) {
#define BPT__KIND_PREPARE(NAME, name, flag) \
    if ((op->kinds & (flag)) && bpt__kind_##name##_prepare(op, staging, &prepared[BPT__KIX_##NAME]) < 0) \
        return BPT_ENOMEM;
    BPT_KINDS(BPT__KIND_PREPARE)
#undef BPT__KIND_PREPARE
    return 0;
}

/* Step 3 for one breakpoint: each kind the op changes writes the staging
   generation, taking what step 2 prepared for it. */
static void bpt__kinds_stage(bpt__GenericBpData *d, const bpt__op *op, void **prepared) {
#define BPT__KIND_STAGE(NAME, name, flag) \
    if (op->kinds & (flag)) bpt__kind_##name##_stage(d, op, prepared[BPT__KIX_##NAME]);
    BPT_KINDS(BPT__KIND_STAGE)
#undef BPT__KIND_STAGE
}

/* A second generation shares d's data (step 11), or d lets go of it
   (steps 11 and 12), kind by kind. */
static void bpt__kinds_ref(const bpt__GenericBpData *d) {
#define BPT__KIND_REF(NAME, name, flag) \
    if (d->flags & BPT__BPF_ON(BPT__KIX_##NAME)) bpt__kind_##name##_ref(d->data[BPT__KIX_##NAME]);
    BPT_KINDS(BPT__KIND_REF)
#undef BPT__KIND_REF
}

static void bpt__kinds_unref(const bpt__GenericBpData *d) {
#define BPT__KIND_UNREF(NAME, name, flag) \
    if (d->flags & BPT__BPF_ON(BPT__KIX_##NAME)) bpt__kind_##name##_unref(d->data[BPT__KIX_##NAME]);
    BPT_KINDS(BPT__KIND_UNREF)
#undef BPT__KIND_UNREF
}

static int bpt__kinds_prepared_any(void *const *prepared) {
    int k;
    for (k = 0; k < BPT__NKINDS; k++) if (prepared[k]) return 1;
    return 0;
}

/* What step 2 prepared and step 3 did not take (out of memory midway). */
static void bpt__kinds_discard(void **prepared) {
#define BPT__KIND_DISCARD(NAME, name, flag) \
    if (prepared[BPT__KIX_##NAME]) bpt__kind_##name##_unref(prepared[BPT__KIX_##NAME]);
    BPT_KINDS(BPT__KIND_DISCARD)
#undef BPT__KIND_DISCARD
}

/* >>steps: one function per step of the protocol, in order.

   >>working set: a change over many functions is bound by memory, not by
   instructions. Each step passes over every item, and each function's
   record and breakpoint span several cache lines: 10,000 of them (3.4 MB)
   do not fit in a core's L2, and a step that reads them all fetches them
   again (a change over 1,000 functions took 50 ns a function, over 10,000
   136 ns; bench/pattern_scale.c `steps`, BENCH_WORKERS=0). So what a later
   step needs to decide is noted in the item when it is learnt: step 5
   reads a function's record only to write its word or publish a parked
   breakpoint, and step 9 reads a function's list only where this
   session's breakpoint has no flag left and another session's may. Step 3
   links a fresh breakpoint, stages it and works out its function's
   shortcut in one pass. And the passes of steps 2, 3 and 11, and the
   writer's W2 and W3 (site_native.c), ask for the lines of the item
   BPT__SET_AHEAD places on while they work on this one (>>prefetch in
   port.h: for reading, or for writing where the pass stores): each
   item's lines are a few misses that depend on nothing the pass
   computes, and the processor alone overlaps only those of the next
   item or two. */

/* One affected function of a change. */
typedef struct bpt__change_item {
    bpt_func *f;
    bpt__GenericBp *g;            /* the session's breakpoint on f */
    void *prepared[BPT__NKINDS];  /* step 2's allocations, taken by step 3 */
    int fresh;                    /* g was allocated by step 2 and is not linked yet (step 3 links it) */
    /* What the later steps need to know of the item, noted where it is
       learnt, so that they pass over the items without reading f and g
       (>>working set above). */
    int parked;                   /* step 3 parked g in the head's to_insert: step 5 publishes it */
    int installs;                 /* step 3: step 5 writes f's breakpoint word */
    uint32_t staged;              /* step 3: g's staged flags, active from step 7 (0 when no g) */
    int alone;                    /* step 2: no other session's breakpoint is on f's list (one
                                     session per change, under the permission: it stays so) */
} bpt__change_item;

/* A change in flight: what the steps hand on to each other. */
typedef struct bpt__change {
    bpt__session *s;
    const bpt__op *op;
    bpt__change_item *items;
    int n;
    bpt_func **sites;             /* scratch for steps 5 and 9: the sites to write */
    bpt__sites_batch batch;       /* their pages, prepared at step 2 */
    int allocated;                /* step 2 allocated something */
    int installs;                 /* sites that step 5 writes (counted at step 3, then written) */
    int fresh;                    /* some of them have padding written since the last SYNC_CORE wait */
    int switched_off;             /* step 3: items whose staged flags are 0 (step 9 may restore their words) */
    int wait_deferred;            /* step 8 left its wait to step 10 */
    int uninstalls;               /* sites that step 9 wrote */
    int wrote_code;               /* step 5 or 9 wrote native code, not only VM words */
    bpt__GenericBp *to_free;      /* unlinked at step 11, freed at step 12 */
    int rc;                       /* a refusal at step 5 or 9 (BPT_EPERM): the change goes on */
} bpt__change;

/* GenericBps, recycled (>>recycle in ptrset.c). */
static bpt__recycle bpt__bp_blocks = { NULL, sizeof(bpt__GenericBp) };

static void bpt__change_free(bpt__change *c) {
    int i;
    for (i = 0; i < c->n; i++) {
        if (c->items[i].fresh) bpt__recycle_give(&bpt__bp_blocks, c->items[i].g);
        bpt__kinds_discard(c->items[i].prepared);
    }
    BPT_FREE(c->items);
    BPT_FREE(c->sites);
    bpt__sites_batch_free(&c->batch);
}

/* Step 1: seize the code modification permission. *t is when the caller
   was entered, so the time the observer sees for step 1 includes the wait
   for the permission. Returns 0, BPT_ENOMEM or BPT_EDEADLK. */
BPT__PRIVATE int bpt__change_begin(const char *who, uint64_t *t) {
    int rc = bpt__permission_seize(who);
    if (rc < 0) return rc;
    bpt__owner_inc_u64(&bpt__change_seq, 1);   /* one writer: the permission's holder */
    bpt__step_done(1, 1, t);
    return 0;
}

/* Step 2: allocate. Everything this change needs is allocated before
   anything shared is touched, so running out of memory changes nothing.
   Fresh breakpoints have both generations disabled (flags 0) and the
   original instruction saved; step 3 links them (bpt__link). The page
   arrays of steps 5 and 9 are sized by the native sites this pass counts
   (a pass of their own over 10,000 records' first lines took 27 us).
   Returns 0, BPT_ENOMEM, or a slot's refusal (bpt__sites_batch_prepare),
   with nothing changed. */
static int bpt__allocate(bpt__change *c, bpt__session *s, bpt_func **fs, int n, const bpt__op *op) {
    unsigned staging = bpt_staging_bp_ix();
    int i, rc, code = 0, slots = 0;
    memset(c, 0, sizeof *c);
    c->s = s;
    c->op = op;
    c->items = (bpt__change_item *)BPT_MALLOC(sizeof *c->items * (size_t)(n ? n : 1));
    c->sites = (bpt_func **)BPT_MALLOC(sizeof *c->sites * (size_t)(n ? n : 1));
    if (!c->items || !c->sites) {
        bpt__change_free(c);
        return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory for %d changes", n);
    }
    for (i = 0; i < n; i++) {
        bpt__change_item *it = &c->items[c->n];
        bpt__GenericBp *g;
        if (i + BPT__SET_AHEAD < n) BPT__PREFETCH_R(fs[i + BPT__SET_AHEAD]);   /* its first line: the list head */
        if (fs[i]->kind == BPT__SITE_NATIVE) {
            if (fs[i]->slot_prot) slots++;
            else code++;
        }
        g = bpt__find_bp(fs[i], s);
        /* Nothing to switch off, unless an earlier uninstall was refused
           (mprotect, or a site holding a foreign word) and left the word
           with no breakpoint behind it: step 9 tries again (g stays NULL). */
        if (!g && !bpt__op_enables(op) && !fs[i]->installed) continue;
        memset(it, 0, sizeof *it);
        it->f = fs[i];
        it->g = g;
        it->alone = bpt__load_relaxed_ptr(&fs[i]->gen_bp) == (void *)g && (!g || !bpt__load_relaxed_ptr(&g->next));
        c->n++;
        if (!g && !bpt__op_enables(op)) continue;
        if (!g) {
            if (!(g = (bpt__GenericBp *)bpt__recycle_take(&bpt__bp_blocks))) goto enomem;
            memset(g, 0, sizeof *g);
            g->orig_instr = fs[i]->orig_word;
            g->session = s;
            it->g = g;
            it->fresh = 1;
            c->allocated = 1;
        }
        if (bpt__kinds_prepare(op, it->fresh ? NULL : &g->data[staging], it->prepared) < 0) goto enomem;
        c->allocated |= bpt__kinds_prepared_any(it->prepared);
    }
    if ((rc = bpt__sites_batch_prepare(&c->batch, fs, n, code, slots, !bpt__op_enables(op))) < 0) {
        bpt__change_free(c);   /* with its reason */
        return rc;
    }
    return 0;
enomem:
    bpt__change_free(c);
    return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: out of memory allocating breakpoints; nothing changed");
}

/* May the count path finish a hit in a generation with this shortcut? */
static int bpt__shortcut_counts_only(uint32_t kind) {
    return kind == BPT__SHORTCUT_NONE || kind == BPT__SHORTCUT_COUNT;
}

/* The entry stubs' hint (bpt_func.path_hint, BPT__HINT_* in sites.h):
   may the count path finish a hit on f in either generation, or else the
   call path, the call-return path, the time path? Never for a slot: a
   slot reached from bptrace's own code is not traced (>>own calls in
   site_native.c), and the full path makes that check, so that the short
   paths of every other function do not.
   Stored only when it changes: every stub reads the hint's line, and a
   store, even of the same value, takes the line from each core that reads
   it. Storing it at both steps 3 and 11 of every change made switching
   10,000 counted functions off take 3.0 ms instead of 2.45 while a worker
   called them (bench/pattern_scale.c; PERFORMANCE.md, issue #16). */
static void bpt__path_hint_update(bpt_func *f) {
    uint32_t hint = BPT__HINT_FULL;
    if (f->slot_prot) {
        /* a slot: the full path */
    } else if (bpt__shortcut_counts_only(f->shortcut[0].kind) || bpt__shortcut_counts_only(f->shortcut[1].kind)) {
        hint = BPT__HINT_COUNT;
    } else if (f->shortcut[0].kind == BPT__SHORTCUT_CALL_PLAIN || f->shortcut[1].kind == BPT__SHORTCUT_CALL_PLAIN) {
        hint = BPT__HINT_CALL;
    } else if (f->shortcut[0].kind == BPT__SHORTCUT_CALL_RETURN || f->shortcut[1].kind == BPT__SHORTCUT_CALL_RETURN) {
        hint = BPT__HINT_CALL_RETURN;
    } else if (f->shortcut[0].kind == BPT__SHORTCUT_TIME || f->shortcut[1].kind == BPT__SHORTCUT_TIME) {
        hint = BPT__HINT_TIME;
    }
    if (f->path_hint != hint) f->path_hint = hint;
}

/* Which CALL does a call trace alone get (>>shortcut in breakpoint.h)?
   CALL_PLAIN when its record needs nothing but the function and its
   integer arguments, CALL_RETURN when that record and a return frame of
   one session (return_trace, exception_trace: nothing else), else CALL.
   The match spec's and the session's fields are fixed while the
   breakpoint holds them. */
static uint32_t bpt__call_shortcut(const bpt__GenericBp *g, const bpt__GenericBpData *d) {
    const bpt__ms *ms = (const bpt__ms *)d->data[BPT__KIX_CALL];
    const bpt__session *s = g->session;
    if (!s->buffered || s->rate_max || (ms && (ms->pred || ms->nspec || ms->message_id)))
        return BPT__SHORTCUT_CALL;
    if (!ms || !ms->actions) return BPT__SHORTCUT_CALL_PLAIN;
    return (ms->actions & ~(unsigned)(BPT_RETURN | BPT_EXCEPTION)) ? BPT__SHORTCUT_CALL : BPT__SHORTCUT_CALL_RETURN;
}

/* Step 3's summary of generation ix on f for the hit (>>shortcut in
   breakpoint.h): every session's breakpoint counts, the one a new session
   parked in the head's to_insert too, since step 5 links it before the
   commit. A paused kind (ON without ACTIVE) does nothing on a hit, so only
   the ACTIVE bits matter. */
static void bpt__shortcut_choose(bpt_func *f, unsigned ix) {
    bpt__GenericBp *head = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp), *g, *only_g = NULL;
    const bpt__GenericBpData *only = NULL;
    int active = 0;
    bpt__shortcut *sc = &f->shortcut[ix];
    for (g = head ? (head->to_insert ? head->to_insert : head) : NULL; g;
         g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&g->next))
        if (g->data[ix].flags & BPT__BPF_ACTIVE_ALL) {
            active++;
            only = &g->data[ix];
            only_g = g;
        }
    sc->data = NULL;
    sc->count_dir = sc->count_off = 0;
    if (active != 1) {
        sc->kind = active == 0 ? BPT__SHORTCUT_NONE : BPT__SHORTCUT_WALK;
    } else {
        unsigned kinds = only->flags & BPT__BPF_ACTIVE_ALL;   /* the one session's kinds */
        if (kinds == BPT__BPF_ACTIVE(BPT__KIX_COUNT)) {
            sc->kind = BPT__SHORTCUT_COUNT;
            sc->data = only->data[BPT__KIX_COUNT];
            sc->count_dir = ((const bpt__BpCount *)sc->data)->dir;
            sc->count_off = ((const bpt__BpCount *)sc->data)->off;
        } else {
            /* CALL, CALL_PLAIN, CALL_RETURN (call trace only), TIME
               (call_time only, by the wall clock) or ONE (any other mix):
               the GenericBp is linked, or parked in to_insert, which step
               5 links before the commit publishes this generation; freed
               only after step 12's wait, when no hit can read this
               shortcut any more. */
            if (kinds == BPT__BPF_ACTIVE(BPT__KIX_CALL)) sc->kind = bpt__call_shortcut(only_g, only);
            else if (kinds == BPT__BPF_ACTIVE(BPT__KIX_TIME) && !only_g->session->time_cpu)
                sc->kind = BPT__SHORTCUT_TIME;
            else sc->kind = BPT__SHORTCUT_ONE;
            sc->data = only_g;
        }
    }
    bpt__path_hint_update(f);
}

/* Step 3, first for a fresh breakpoint: link it. The first session on a
   function writes its list head [G1], which nobody reaches before step 5
   installs the word (or at once, where an earlier uninstall was refused
   and left the word in place: a hit then finds both generations' flags 0
   and does nothing, the store being a release); a later session's
   breakpoint is parked in the head's to_insert, already pointing at the
   head, for step 5 to publish. Linked here, in step 3's pass, not in a
   pass of step 2's own, as set_function_break in beam_bp.c allocates,
   links and stages a function's breakpoint at once: that pass read
   10,000 records' first lines again (55 us). Step 2 has allocated
   everything by then, and step 3 cannot fail, so nothing is linked that
   running out of memory would have to unlink. */
static void bpt__link(bpt__change_item *it) {
    bpt__GenericBp *head = (bpt__GenericBp *)bpt__load_relaxed_ptr(&it->f->gen_bp);
    if (!head) {
        bpt__store_release_ptr(&it->f->gen_bp, it->g);   /* [G1] */
    } else {
        bpt__store_relaxed_ptr(&it->g->next, head);
        head->to_insert = it->g;
        it->parked = 1;
    }
    it->fresh = 0;   /* linked: freed by steps 11 and 12 if left unused */
}

/* Steps 3 and 11 on item i: ask for the lines of the item BPT__SET_AHEAD
   places on (>>working set above): its breakpoint and its shortcuts, which
   both steps write, and its record's first line, which step 3 writes to
   link a fresh breakpoint and otherwise reads (the list head). */
static void bpt__item_prefetch(const bpt__change *c, int i) {
    const bpt__change_item *ahead;
    if (i + BPT__SET_AHEAD >= c->n) return;
    ahead = &c->items[i + BPT__SET_AHEAD];
    BPT__PREFETCH_W(ahead->g);
    BPT__PREFETCH_W(&ahead->f->shortcut[0]);
    if (ahead->fresh) BPT__PREFETCH_W(ahead->f);
    else BPT__PREFETCH_R(ahead->f);
}

/* Step 3: stage. Only staging generations change; running code reads the
   active ones; a breakpoint to be removed gets flags 0 here. Each item's
   function then gets its shortcut for the staging generation worked out
   anew, in the same pass (a second pass over 10,000 functions fetched
   their lines again: step 3 took 225 us where one takes 160). */
static int bpt__stage(bpt__change *c) {
    unsigned staging = bpt_staging_bp_ix();
    int i;
    for (i = 0; i < c->n; i++) {
        bpt__change_item *it = &c->items[i];
        bpt__item_prefetch(c, i);
        if (it->fresh) bpt__link(it);
        if (it->g) {   /* else only a word to restore (step 2) */
            bpt__kinds_stage(&it->g->data[staging], c->op, it->prepared);
            memset(it->prepared, 0, sizeof it->prepared);   /* owned by the breakpoint now */
            it->staged = it->g->data[staging].flags;
            if (!it->f->installed && it->staged) {
                it->installs = 1;
                c->installs++;
                c->fresh |= it->f->padding_fresh;
            }
        }
        c->switched_off += !it->staged;
        /* f's list is final for this generation (each item is another
           function): its summary now, while its lines are at hand. */
        bpt__shortcut_choose(it->f, staging);
    }
    return 1;
}

/* Step 4: wait for thread progress, so that every thread sees the new list
   heads (step 3) before an instruction word leads it there: a VM's fetch
   of the word is not an acquire load. Only when step 5 installs. Where a
   native function to install has padding written since the last
   SYNC_CORE wait (registration, bpt__native_prepare), the wait serializes
   every thread's instruction stream too: the installed word leads into
   that padding, new code that another core may hold stale (prefetched
   with the function before it), and only a context synchronizing event on
   that core makes the new bytes the ones it runs (ARM ARM B2.2.5; Intel
   SDM vol. 3, 9.1.3), as slots' trampolines get at their SL0. Found by
   review: with membarrier the plain wait's IPIs gave it in practice,
   without it nothing did. */
static int bpt__wait_staged(bpt__change *c) {
    int i;
    if (!c->installs) return 0;
    if (!c->fresh) {
        bpt_thread_progress_wait();
        return 1;
    }
    bpt_thread_progress_wait_sync_core();
    for (i = 0; i < c->n; i++)   /* stored where it changes: the line is the stubs' (breakpoint.h) */
        if (c->items[i].f->padding_fresh) c->items[i].f->padding_fresh = 0;
    return 1;
}

/* Step 5: install the breakpoint word, one aligned store per site, in one
   batch (each code page made writable once), and publish the parked
   breakpoints of further sessions: one release store each [G1], so the
   parked breakpoint is seen complete, its active generation disabled.
   A refused mprotect (BPT_EPERM), or a site that does not hold its
   original word (BPT_ENOTPATCHABLE, site_native.c), leaves those functions
   untraced; the settings commit anyway, so the state stays consistent, and
   the caller learns why. */
static int bpt__install(bpt__change *c) {
    int i, nsites = 0, published = 0, written, rc;
    for (i = 0; i < c->n; i++) {
        bpt_func *f = c->items[i].f;
        if (c->items[i].parked) {   /* only step 3 parks, and only step 5 publishes */
            bpt__GenericBp *head = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp);
            bpt__store_release_ptr(&f->gen_bp, head->to_insert);   /* [G1] */
            head->to_insert = NULL;
            published++;
        }
        if (c->items[i].installs) c->sites[nsites++] = f;   /* as step 3 found it */
    }
    if ((rc = bpt__sites_write(c->sites, nsites, 1, &c->wrote_code, &c->batch, &written)) < 0) c->rc = rc;
    c->installs = written;
    return written + published != 0;
}

/* The wait after writing site words (steps 6 and 10): a plain wait for VM
   words, which are data; after code writes, one that also serializes every
   thread's instruction stream (membarrier SYNC_CORE: progress.c). */
static void bpt__wait_after_write(int wrote_code) {
    if (wrote_code) bpt_thread_progress_wait_sync_core();
    else bpt_thread_progress_wait();
}

/* Step 6: wait, so that every thread runs the new words before the commit,
   making the switch as atomic as possible. */
static int bpt__wait_installed(bpt__change *c) {
    if (c->installs) bpt__wait_after_write(c->wrote_code);
    return c->installs != 0;
}

/* Step 7: commit. Flip the active index: the staging generation becomes the
   active one. The release store [G2] pairs with the acquire load of
   bpt_active_bp_ix() that every hit and return makes once (hit.c,
   frames.c), so a hit
   that reads the new index sees everything step 3 staged. The only store
   to the index: trace_info's collection switches with it too (C3,
   timem.c). Under the permission. */
BPT__PRIVATE void bpt__commit(void) {
    bpt__store_release_u32(&bpt__active_ix, bpt__load_relaxed_u32(&bpt__active_ix) ^ 1u);   /* [G2] */
}

/* Step 8: wait, so that no thread still reads the old generation: step 11
   overwrites it, and unrefs what it held (>>deferred wait). */
static int bpt__wait_committed(bpt__change *c) {
    if (c->switched_off) {
        c->wait_deferred = 1;
        return 0;
    }
    bpt_thread_progress_wait();
    return 1;
}

/* Step 9: uninstall: restore the original word where no session's active
   generation has any flag left (the OR over all sessions is 0). Where
   this session's breakpoint is alone on the list (step 2), its staged
   flags are that OR: switching 10,000 counted functions off, reading
   their lists took 60 us of step 9's 270 (bench/pattern_scale.c steps,
   no worker). A refused mprotect leaves the words: their breakpoints find
   no active flag and do nothing. */
static int bpt__uninstall(bpt__change *c) {
    unsigned active = bpt_active_bp_ix();
    int i, nsites = 0, written, rc;
    for (i = 0; i < c->n; i++) {
        bpt_func *f = c->items[i].f;
        bpt__GenericBp *g;
        uint32_t all = 0;
        if (c->items[i].staged) continue;   /* its own breakpoint's active flags: the word stays */
        if (!f->installed) continue;
        if (c->items[i].alone) {   /* the OR is this breakpoint's flags: 0 */
            c->sites[nsites++] = f;
            continue;
        }
        for (g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp); g;
             g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&g->next))
            all |= g->data[active].flags;
        if (!all) c->sites[nsites++] = f;
    }
    if ((rc = bpt__sites_write(c->sites, nsites, 0, &c->wrote_code, &c->batch, &written)) < 0) c->rc = rc;
    c->uninstalls = written;
    return written != 0;
}

/* Step 10: wait, so that no thread still runs a removed breakpoint word
   inside a pinned section. A thread that fetched the word before step 9 but
   pins only after this wait began is not covered: it is step 12's wait,
   and the hit's reading of the list head after its pin, that keep it off
   freed breakpoints (the model's no-step-12 mutant shows it). Also step
   8's wait, where step 8 deferred it, even if step 9 wrote nothing.
   >>deferred wait: Tracing.md waits at step 8 so that no word is restored
   while a thread still uses the old generation's enabled part of its
   breakpoint. Here nothing a hit does depends on the word once fetched:
   a native hit goes on through the padding and the stub, which stay, a
   slot's trampoline jumps to the target it holds itself, a VM runs the
   word bpt_vm_breakpoint returns, and step 9 reads only the new active
   generation's flags. What needs every thread off the old generation is
   step 11, which overwrites it and drops its references (the last one of
   a BpCount or a call_time table: kind_count.c, timem.c). So where step 9
   may restore words (some item's staged flags are 0), step 8 leaves its
   wait here, and one wait serves both: a switch-off of 10,000 counted
   functions with one worker waited twice, 55 and 15 us, and now once
   (bench/pattern_scale.c steps). Every wait after the commit still
   begins after it, and step 11 still runs after one. */
static int bpt__wait_uninstalled(bpt__change *c) {
    if (c->uninstalls) bpt__wait_after_write(c->wrote_code);
    else if (c->wait_deferred) bpt_thread_progress_wait();
    return c->uninstalls != 0 || c->wait_deferred;
}

/* Step 11: consolidate: make staging equal to active again, as
   consolidate_bp_data_session does, and unlink disabled breakpoints, one
   release store each [G1]. A thread walking the list may still stand on an
   unlinked breakpoint: it is freed only after step 12's wait. */
static int bpt__consolidate(bpt__change *c) {
    unsigned active = bpt_active_bp_ix();
    int i;
    for (i = 0; i < c->n; i++) {
        bpt__atomic_ptr *prev = &c->items[i].f->gen_bp;
        bpt__GenericBp *g;
        bpt_func *f = c->items[i].f;
        bpt__item_prefetch(c, i);   /* nothing is fresh by now: step 3 linked it */
        if (f->shortcut[active ^ 1].kind != f->shortcut[active].kind ||
            f->shortcut[active ^ 1].data != f->shortcut[active].data)   /* dir and off follow data */
            f->shortcut[active ^ 1] = f->shortcut[active];   /* only when it differs, as the hint */
        bpt__path_hint_update(f);
        for (g = (bpt__GenericBp *)bpt__load_relaxed_ptr(prev); g;
             g = (bpt__GenericBp *)bpt__load_relaxed_ptr(prev)) {
            if (g != c->items[i].g) { prev = &g->next; continue; }
            bpt__kinds_unref(&g->data[active ^ 1]);
            g->data[active ^ 1] = g->data[active];
            bpt__kinds_ref(&g->data[active]);
            if (g->data[active].flags == 0) {
                bpt__store_release_ptr(prev, bpt__load_relaxed_ptr(&g->next));   /* [G1] */
                g->next_to_free = c->to_free;
                c->to_free = g;
            }
            break;
        }
    }
    return 1;
}

/* Step 12: wait, because readers may still walk the lists that step 11
   changed; then free what it unlinked. */
static int bpt__free_unlinked(bpt__change *c) {
    int did = c->to_free != NULL;
    if (did) bpt_thread_progress_wait();
    while (c->to_free) {
        bpt__GenericBp *g = c->to_free;
        c->to_free = g->next_to_free;
        bpt__kinds_unref(&g->data[0]);
        bpt__kinds_unref(&g->data[1]);
        bpt__recycle_give(&bpt__bp_blocks, g);
    }
    return did;
}

/* Step 13: report the last step and release the permission. */
BPT__PRIVATE void bpt__change_end(uint64_t *t) {
    bpt__step_done(13, 1, t);
    bpt__permission_release();
}

/* Steps 2-12 for session s on functions fs[0..n), between the caller's
   bpt__change_begin (step 1) and bpt__change_end (step 13), each step
   reported to the observer with whether it had work. Stages with nothing
   to do are skipped. *committed (may be NULL) says which of two kinds an
   error is, which the caller cannot tell from its code: 0 when step 2
   refused (BPT_ENOMEM, a slot no longer mapped, no /proc/self/maps) and
   nothing changed; 1 when the change was committed (steps 3-12 ran, or
   there was nothing to change). Returns 0; step 2's refusal; or, committed,
   BPT_EPERM or BPT_ENOTPATCHABLE when a word could not be written (the
   settings changed, that word did not: see steps 5 and 9). A caller that
   acts on the outcome (forgets a session, remembers a pattern) must ask
   *committed, not the code. */
BPT__PRIVATE int bpt__protocol_run(bpt__session *s, bpt_func **fs, int n, const bpt__op *op, uint64_t *t,
                                   int *committed) {
    bpt__change c;
    int rc = bpt__allocate(&c, s, fs, n, op), step;
    if (committed) *committed = rc >= 0;
    if (rc < 0) return rc;
    bpt__step_done(2, c.allocated, t);
    if (c.n == 0) {   /* nothing to change */
        for (step = 3; step <= 12; step++) bpt__step_done(step, 0, t);
        bpt__change_free(&c);
        return 0;
    }
    bpt__step_done(3, bpt__stage(&c), t);
    bpt__step_done(4, bpt__wait_staged(&c), t);
    bpt__step_done(5, bpt__install(&c), t);
    bpt__step_done(6, bpt__wait_installed(&c), t);
    bpt__commit();
    bpt__step_done(7, 1, t);
    bpt__step_done(8, bpt__wait_committed(&c), t);
    bpt__step_done(9, bpt__uninstall(&c), t);
    bpt__step_done(10, bpt__wait_uninstalled(&c), t);
    bpt__step_done(11, bpt__consolidate(&c), t);
    bpt__step_done(12, bpt__free_unlinked(&c), t);
    bpt__change_free(&c);
    return c.rc;
}
