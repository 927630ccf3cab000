/* bp.c: the set path. How a breakpoint change becomes visible to running
   threads without stopping any of them: the 13 steps of OTP's Tracing.md,
   as erts_set_trace_pattern and friends run them in beam_bp.c.

   Invariant between changes: for every GenericBp, data[active] and
   data[staging] are equal (step 11 makes them so). A change therefore only
   writes staging halves (step 3), flips the global index (step 7), and
   waits for thread progress wherever a reader could still see the past. */

/* What one bpt__protocol_run does to each affected function's breakpoint of
   one session: switch kinds on (how 0), off, pause or restart the count. */
typedef struct bpt__op {
    unsigned kinds;               /* BPT_CALL | BPT_COUNT */
    unsigned how;                 /* 0, BPT_OFF, BPT_PAUSE, BPT_RESTART */
    bpt__ms *ms;                  /* for BPT_CALL switched on; the op holds one reference */
} bpt__op;

/* One affected function, prepared at step 2. */
typedef struct bpt__change {
    bpt_func *f;
    bpt__GenericBp *g;            /* the session's breakpoint on f */
    bpt__BpCount *new_count;      /* allocated at step 2 if step 3 needs one */
    bpt__BpTimem *new_timem;      /* likewise: fresh call_time/call_memory tables */
    int fresh;                    /* g was allocated by this change */
} bpt__change;

static pthread_mutex_t bpt__code_mod_permission = PTHREAD_MUTEX_INITIALIZER;   /* declared in progress.c (fork) */
static bpt_observer_fn bpt__observer;
static void *bpt__observer_user;

static const char *const bpt__step_names[13] = {
    "seize permission", "allocate", "stage", "wait", "install", "wait", "commit",
    "wait", "uninstall", "wait", "consolidate", "wait and free", "release permission"
};

const char *bpt_protocol_step_name(int step) {
    return step >= 1 && step <= 13 ? bpt__step_names[step - 1] : NULL;
}


/* Report a step to the observer and start timing the next. */
static void bpt__step_done(int step, int did, uint64_t *t) {
    uint64_t now = bpt__now_ns();
    if (bpt__observer) bpt__observer(step, did, now - *t, bpt__observer_user);
    *t = bpt__now_ns();
}

/* Seize the code modification permission (step 1). Set-path calls from a
   tracer callback, a pinned section, or a callback run under the permission
   (an observer, a trace_info_each visitor) would wait for themselves. */
BPT__PRIVATE int bpt__permission_seize(const char *who) {
    bpt__thread *rec = bpt__thread_self();
    if (!rec) return bpt__fail(BPT_ENOMEM, "%s: no memory for the thread record", who);
    if (rec->in_tracer)
        return bpt__fail(BPT_EDEADLK, "%s: called from inside a tracer callback", who);
    if (rec->holds_permission)
        return bpt__fail(BPT_EDEADLK, "%s: called from a callback that runs under the code "
                         "modification permission (observer or trace_info_each visitor)", who);
    if (bpt__thread_pinned(rec))
        return bpt__fail(BPT_EDEADLK, "%s: called while pinned (bpt_thread_progress_pin)", who);
    bpt__block_begin(rec);   /* a managed thread stays offline while it holds the permission */
    pthread_mutex_lock(&bpt__code_mod_permission);
    rec->holds_permission = 1;
    return 0;
}

BPT__PRIVATE void bpt__permission_release(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    rec->holds_permission = 0;
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

static int bpt__op_enables(const bpt__op *op) { return op->how == 0 || op->how == BPT_RESTART; }

/* Does step 3 need a fresh BpCount for g? */
static int bpt__op_needs_count(const bpt__op *op, const bpt__GenericBp *g, unsigned staging) {
    return (op->kinds & BPT_COUNT) && bpt__op_enables(op) &&
           !(g && (g->data[staging].flags & BPT__BPF_COUNT));
}

/* Does step 3 need fresh time/memory tables for g? (RESTART zeroes both.) */
static int bpt__op_needs_timem(const bpt__op *op, const bpt__GenericBp *g, unsigned staging) {
    return (op->kinds & BPT__TIMEM) && bpt__op_enables(op) &&
           (op->how == BPT_RESTART || !(g && (g->data[staging].flags & (BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE))));
}

static void bpt__count_unref(bpt__BpCount *c) {
    if (c && --c->refc == 0) BPT_FREE(c);
}

/* Drop the references a generation holds (its pointers stay, now dangling). */
static void bpt__data_unref(bpt__GenericBpData *d) {
    if (d->flags & BPT__BPF_LOCAL_TRACE) bpt__ms_unref(d->local_ms);
    if (d->flags & BPT__BPF_COUNT) bpt__count_unref(d->count);
    if (d->flags & (BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE)) bpt__timem_unref(d->timem);
}

/* Step 3 for call_time and call_memory: the kind's two bits, on, off,
   paused; the tables go when neither kind is left. */
static void bpt__stage_timem(bpt__GenericBpData *d, const bpt__op *op, bpt__BpTimem *new_timem) {
    uint32_t bits = ((op->kinds & BPT_TIME) ? BPT__BPF_TIME_TRACE | BPT__BPF_TIME_ACTIVE : 0) |
                    ((op->kinds & BPT_MEMORY) ? BPT__BPF_MEM_TRACE | BPT__BPF_MEM_ACTIVE : 0);
    uint32_t active_bits = bits & (BPT__BPF_TIME_ACTIVE | BPT__BPF_MEM_ACTIVE);
    if (!bits) return;
    switch (op->how) {
    case BPT_OFF:
        d->flags &= ~bits;
        if (!(d->flags & (BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE)) && d->timem) {
            bpt__timem_unref(d->timem);
            d->timem = NULL;
        }
        break;
    case BPT_PAUSE:
        d->flags &= ~active_bits;
        break;
    default: /* on, restart */
        if (new_timem) {   /* its one reference moves here */
            if (d->flags & (BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE)) bpt__timem_unref(d->timem);
            d->timem = new_timem;
        }
        d->flags |= bits;
    }
}

/* Step 3 for one breakpoint: write the op into its staging generation. */
static void bpt__stage(bpt__GenericBpData *d, const bpt__op *op, bpt__BpCount *new_count) {
    if (op->kinds & BPT_CALL) {
        if (d->flags & BPT__BPF_LOCAL_TRACE) bpt__ms_unref(d->local_ms);
        d->flags &= ~(uint32_t)BPT__BPF_LOCAL_TRACE;
        d->local_ms = NULL;
        if (op->how == 0) {
            d->flags |= BPT__BPF_LOCAL_TRACE;
            d->local_ms = op->ms;
            bpt__ms_ref(op->ms);
        }
    }
    if (op->kinds & BPT_COUNT) {
        switch (op->how) {
        case BPT_OFF:
            if (d->flags & BPT__BPF_COUNT) bpt__count_unref(d->count);
            d->flags &= ~(uint32_t)(BPT__BPF_COUNT | BPT__BPF_COUNT_ACTIVE);
            d->count = NULL;
            break;
        case BPT_PAUSE:
            d->flags &= ~(uint32_t)BPT__BPF_COUNT_ACTIVE;
            break;
        default: /* on, restart */
            if (!(d->flags & BPT__BPF_COUNT)) {
                d->count = new_count;   /* its one reference moves here */
                d->flags |= BPT__BPF_COUNT;
            } else if (op->how == BPT_RESTART) {
                /* Shared with the active generation, as in BEAM: the reset
                   is seen at once, the re-activation at the commit. */
                bpt__store_relaxed_u64(&d->count->value, 0);
            }
            d->flags |= BPT__BPF_COUNT_ACTIVE;
        }
    }
}

/* Step 11 for one breakpoint: copy the active generation into the staging
   one, as consolidate_bp_data_session does. */
static void bpt__consolidate(bpt__GenericBp *g, unsigned active) {
    bpt__GenericBpData *src = &g->data[active], *dst = &g->data[active ^ 1];
    bpt__data_unref(dst);
    *dst = *src;
    if (dst->flags & BPT__BPF_LOCAL_TRACE) bpt__ms_ref(dst->local_ms);
    if (dst->flags & BPT__BPF_COUNT) dst->count->refc++;
    if (dst->flags & (BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE)) dst->timem->refc++;
}

/* The wait after writing site words (steps 6 and 10): a plain wait for VM
   words, which are data; after code writes, one that also serializes every
   thread's instruction stream (DESIGN §4.4). */
static void bpt__wait_after_write(int wrote_code) {
    if (wrote_code) bpt_thread_progress_wait_sync_core();
    else bpt_thread_progress_wait();
}

static void bpt__changes_free(bpt__change *c, int n) {
    int i;
    for (i = 0; i < n; i++) {
        if (c[i].fresh) BPT_FREE(c[i].g);
        BPT_FREE(c[i].new_count);
        if (c[i].new_timem) bpt__timem_unref(c[i].new_timem);
    }
    BPT_FREE(c);
}

/* Steps 2-12 for session s on functions fs[0..n). The caller holds the code
   modification permission (step 1) and releases it after (step 13).
   Returns 0, or BPT_ENOMEM with nothing changed. */
BPT__PRIVATE int bpt__protocol_run(bpt__session *s, bpt_func **fs, int n, const bpt__op *op, uint64_t *t) {
    unsigned active = bpt__load_relaxed_u32(&bpt__active_ix), staging = active ^ 1;
    bpt__change *c;
    bpt__GenericBp *to_free = NULL, *g;
    bpt_func **sites;
    bpt__sites_batch batch;
    int i, nc = 0, nsites = 0, allocated = 0, installs = 0, published = 0, uninstalls = 0, unlinked = 0;
    int wrote_code = 0, rc = 0;

    /* Step 2: allocate. Everything this change needs is allocated before
       anything shared is touched, so running out of memory changes nothing. */
    c = (bpt__change *)BPT_MALLOC(sizeof *c * (size_t)(n ? n : 1));
    sites = (bpt_func **)BPT_MALLOC(sizeof *sites * (size_t)(n ? n : 1));
    if (!c || !sites || bpt__sites_batch_prepare(&batch, fs, n) < 0) {
        BPT_FREE(c);
        BPT_FREE(sites);
        return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory for %d changes", n);
    }
    for (i = 0; i < n; i++) {
        g = bpt__find_bp(fs[i], s);
        if (!g && !bpt__op_enables(op)) continue;   /* nothing to switch off */
        c[nc].f = fs[i];
        c[nc].g = g;
        c[nc].fresh = 0;
        c[nc].new_count = NULL;
        c[nc].new_timem = NULL;
        nc++;
        if (!g) {
            g = (bpt__GenericBp *)BPT_MALLOC(sizeof *g);
            if (!g) goto enomem;
            memset(g, 0, sizeof *g);   /* both generations disabled: flags 0 */
            g->orig_instr = fs[i]->orig_word;
            g->session = s;
            c[nc - 1].g = g;
            c[nc - 1].fresh = 1;
            allocated++;
        }
        if (bpt__op_needs_count(op, c[nc - 1].fresh ? NULL : g, staging)) {
            bpt__BpCount *bc = (bpt__BpCount *)BPT_MALLOC(sizeof *bc);
            if (!bc) goto enomem;
            bpt__store_relaxed_u64(&bc->value, 0);
            bc->refc = 1;
            c[nc - 1].new_count = bc;
            allocated++;
        }
        if (bpt__op_needs_timem(op, c[nc - 1].fresh ? NULL : g, staging)) {
            if (!(c[nc - 1].new_timem = bpt__timem_new())) goto enomem;
            allocated++;
        }
    }
    if (nc == 0) {
        int step;
        BPT_FREE(c);
        BPT_FREE(sites);
        BPT_FREE(batch.pages);
        for (step = 2; step <= 12; step++) bpt__step_done(step, 0, t);   /* nothing to change */
        return 0;
    }
    /* Link the fresh breakpoints. The first session on a function writes its
       list head; nobody reaches it before step 5 installs the word. A later
       session's breakpoint is parked in the head's to_insert, already
       pointing at the head, and published at step 5 with one store. */
    for (i = 0; i < nc; i++) {
        bpt__GenericBp *head;
        if (!c[i].fresh) continue;
        head = (bpt__GenericBp *)bpt__load_relaxed_ptr(&c[i].f->gen_bp);
        if (!head) {
            bpt__store_release_ptr(&c[i].f->gen_bp, c[i].g);
        } else {
            bpt__store_relaxed_ptr(&c[i].g->next, head);
            head->to_insert = c[i].g;
        }
    }
    bpt__step_done(2, allocated != 0, t);

    /* Step 3: stage. Only staging generations change; running code reads the
       active ones. A breakpoint to be removed gets flags 0 here. */
    for (i = 0; i < nc; i++) {
        bpt__stage(&c[i].g->data[staging], op, c[i].new_count);
        bpt__stage_timem(&c[i].g->data[staging], op, c[i].new_timem);
        c[i].new_count = NULL;   /* owned by the breakpoint now, or never needed */
        c[i].new_timem = NULL;
        if (c[i].fresh) c[i].fresh = 0;   /* linked: freed by step 11/12 if unused */
        if (!c[i].f->installed && c[i].g->data[staging].flags) installs++;
    }
    bpt__step_done(3, 1, t);

    /* Step 4: wait for thread progress, so that every thread sees the new
       list heads (step 2) before an instruction word leads it there: a VM's
       fetch of the word is not an acquire load. Only when step 5 installs. */
    if (installs) bpt_thread_progress_wait();
    bpt__step_done(4, installs != 0, t);

    /* Step 5: install the breakpoint word, one aligned store per site, in one
       batch (each code page made writable once), and publish parked
       breakpoints of further sessions (one release store: the parked
       breakpoint is complete, and its active generation disabled). */
    for (i = 0; i < nc; i++) {
        bpt_func *f = c[i].f;
        bpt__GenericBp *head = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp);
        if (head->to_insert) {
            bpt__store_release_ptr(&f->gen_bp, head->to_insert);
            head->to_insert = NULL;
            published++;
        }
        if (!f->installed && c[i].g->data[staging].flags) sites[nsites++] = f;
    }
    installs = bpt__sites_write(sites, nsites, 1, &wrote_code, &batch);
    if (installs < 0) {
        /* mprotect refused: those functions stay untraced; the settings
           commit anyway, so the state stays consistent, and the caller
           learns why. */
        rc = installs;
        installs = 0;
    }
    bpt__step_done(5, installs + published != 0, t);

    /* Step 6: wait, so that every thread runs the new words before the
       commit, making the switch as atomic as possible. After writing code
       the wait also serializes every thread's instruction stream. */
    if (installs) bpt__wait_after_write(wrote_code);
    bpt__step_done(6, installs != 0, t);

    /* Step 7: commit. Flip the active index; the release pairs with the hit
       path's acquire load, so a hit that sees the new index sees step 3. */
    bpt__store_release_u32(&bpt__active_ix, staging);
    active = staging;
    staging = active ^ 1;
    bpt__step_done(7, 1, t);

    /* Step 8: wait, so no thread still reads the old generation: step 9 may
       remove words it relies on, and step 11 overwrites it. */
    bpt_thread_progress_wait();
    bpt__step_done(8, 1, t);

    /* Step 9: uninstall: restore the original word where no session's active
       generation has any flag left (the OR over all sessions is 0). */
    nsites = 0;
    for (i = 0; i < nc; i++) {
        bpt_func *f = c[i].f;
        uint32_t all = 0;
        if (!f->installed) continue;
        for (g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp); g;
             g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&g->next))
            all |= g->data[active].flags;
        if (!all) sites[nsites++] = f;
    }
    uninstalls = bpt__sites_write(sites, nsites, 0, &wrote_code, &batch);
    if (uninstalls < 0) {
        /* The words stay: their breakpoints find no active flag and do nothing. */
        rc = uninstalls;
        uninstalls = 0;
    }
    bpt__step_done(9, uninstalls != 0, t);

    /* Step 10: wait, so no thread still runs a removed breakpoint word
       inside a pinned section. A thread that fetched the word before step 9
       but pins only after this wait began is not covered: it is step 12's
       wait, and the hit's reading of the list head after its pin, that keep
       it off freed breakpoints (the model's no-step-12 mutant shows it). */
    if (uninstalls) bpt__wait_after_write(wrote_code);
    bpt__step_done(10, uninstalls != 0, t);

    /* Step 11: consolidate: make staging equal to active again, and unlink
       disabled breakpoints, one release store each. A thread walking the list
       may still stand on an unlinked breakpoint: it is freed only after 12. */
    for (i = 0; i < nc; i++) {
        bpt_func *f = c[i].f;
        bpt__atomic_ptr *prev = &f->gen_bp;
        for (g = (bpt__GenericBp *)bpt__load_relaxed_ptr(prev); g;
             g = (bpt__GenericBp *)bpt__load_relaxed_ptr(prev)) {
            if (g != c[i].g) { prev = &g->next; continue; }
            bpt__consolidate(g, active);
            if (g->data[active].flags == 0) {
                bpt__store_release_ptr(prev, bpt__load_relaxed_ptr(&g->next));
                g->next_to_free = to_free;
                to_free = g;
                unlinked++;
            }
            break;
        }
    }
    bpt__step_done(11, 1, t);

    /* Step 12: wait, because readers may still walk the lists step 11
       changed; then free what was unlinked. */
    if (unlinked) bpt_thread_progress_wait();
    while (to_free) {
        g = to_free;
        to_free = g->next_to_free;
        bpt__data_unref(&g->data[0]);
        bpt__data_unref(&g->data[1]);
        BPT_FREE(g);
    }
    bpt__step_done(12, unlinked != 0, t);
    BPT_FREE(c);
    BPT_FREE(sites);
    BPT_FREE(batch.pages);
    return rc;

enomem:
    bpt__changes_free(c, nc);
    BPT_FREE(sites);
    BPT_FREE(batch.pages);
    return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: out of memory allocating breakpoints; nothing changed");
}

/* Step 1: seize the code modification permission, and start timing the change. */
BPT__PRIVATE int bpt__change_begin(const char *who, uint64_t *t) {
    int rc = bpt__permission_seize(who);
    if (rc < 0) return rc;
    *t = bpt__now_ns();
    bpt__step_done(1, 1, t);
    return 0;
}
/* Step 13: report the last step and release the permission. */
BPT__PRIVATE void bpt__change_end(uint64_t *t) {
    bpt__step_done(13, 1, t);
    bpt__permission_release();
}
