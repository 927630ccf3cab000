/* trace_info.c: bpt_trace_info and bpt_trace_info_each, as
   erlang:trace_info/2 on a function: its flags, call_count, call_time and
   call_memory in one session, read from the active generation of its
   breakpoint. Time and memory are summed first, by the nine-step
   collection of timem.c (OTP 29's method). */
#include "internal.h"

/* What bpt_trace_info reports of g (NULL: no breakpoint of the session). */
static int bpt__info_of(const bpt__GenericBp *g, unsigned what, bpt_info *out, bpt_info_process *procs, uint32_t cap) {
    unsigned ix = bpt_active_bp_ix();
    const bpt__GenericBpData *d;
    memset(out, 0, sizeof *out);
    out->procs = procs;
    out->procs_cap = cap;
    if (!g) return 0;
    d = &g->data[ix];
    /* Each kind that is on reports itself (kind_*.c), in the table's order. */
#define BPT__KIND_INFO(NAME, name, flag) \
    if (d->flags & BPT__BPF_ON(BPT__KIX_##NAME)) bpt__kind_##name##_info(d, what, out);
    BPT_KINDS(BPT__KIND_INFO)
#undef BPT__KIND_INFO
    return 1;
}

/* The session's breakpoints on the registered functions matching mfa (or f
   alone, which the caller found registered), and the nine-step collection
   when time or memory is asked for. On an error the outputs are NULL, NULL
   and 0. */
static int bpt__info_gather(const bpt__session *s, const bpt__mfa *mfa, const bpt_func *f, unsigned what,
                            bpt_func ***fs_out, bpt__GenericBp ***gs_out, int *n_out, const char *who) {
    bpt_func **fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len + 1));
    bpt__GenericBp **gs = (bpt__GenericBp **)BPT_MALLOC(sizeof *gs * (bpt__registry.len + 1));
    bpt__GenericBp **timed = (bpt__GenericBp **)BPT_MALLOC(sizeof *timed * (bpt__registry.len + 1));
    unsigned ix = bpt_active_bp_ix();
    int i, matched, n = 0, nt = 0, rc = 0;
    *fs_out = NULL;
    *gs_out = NULL;
    *n_out = 0;
    if (!fs || !gs || !timed) {
        BPT_FREE(fs); BPT_FREE(gs); BPT_FREE(timed);
        return bpt__fail(BPT_ENOMEM, "%s: no memory", who);
    }
    if (f) {
        fs[0] = bpt__registry.funcs[f->registry_ix];
        matched = 1;
    } else {
        matched = bpt__registry_match(mfa, fs);
    }
    for (i = 0; i < matched; i++) {   /* fs[0..n) keeps the matched functions with a breakpoint */
        bpt_func *fi = fs[i];
        bpt__GenericBp *g;
        if (!(g = bpt__find_bp(fi, s)) && !f) continue;
        fs[n] = fi;
        gs[n++] = g;
        if (g && (what & (BPT_INFO_TIME | BPT_INFO_MEMORY)) &&
            (g->data[ix].flags & BPT__BPF_TIMEM_ON))
            timed[nt++] = g;
    }
    if (nt) rc = bpt__timem_collect(timed, nt);
    BPT_FREE(timed);
    if (rc < 0) { BPT_FREE(fs); BPT_FREE(gs); return rc; }
    *fs_out = fs;
    *gs_out = gs;
    *n_out = n;
    return 0;
}

#define BPT__INFO_ALL (BPT_INFO_FLAGS | BPT_INFO_COUNT | BPT_INFO_TIME | BPT_INFO_MEMORY)

int bpt_trace_info(bpt_session handle, const bpt_func *f, unsigned what, bpt_info *out) {
    bpt__session *s;
    bpt_func **fs = NULL;
    bpt__GenericBp **gs = NULL;
    bpt_info_process *procs;
    uint32_t cap;
    int rc, n;
    if (!f || !out) return bpt__fail(BPT_EINVAL, "bpt_trace_info: f and out must not be NULL");
    if (what & ~(unsigned)BPT__INFO_ALL) return bpt__fail(BPT_EINVAL, "bpt_trace_info: unknown what bits 0x%x", what);
    procs = out->procs;
    cap = procs ? out->procs_cap : 0;
    if ((rc = bpt__permission_seize("bpt_trace_info")) < 0) return rc;
    if (!(s = bpt__session_lookup(handle.id)))
        rc = bpt__fail(BPT_ESESSION, "bpt_trace_info: session %llu is not alive", (unsigned long long)handle.id);
    else if (!bpt__ptrset_has(&bpt__registry.records, f))
        rc = bpt__fail(BPT_ENOENT, "bpt_trace_info: %p is not a registered function", (const void *)f);
    else if ((rc = bpt__info_gather(s, NULL, f, what, &fs, &gs, &n, "bpt_trace_info")) == 0)
        bpt__info_of(n ? gs[0] : NULL, what, out, procs, cap);
    bpt__permission_release();
    BPT_FREE(fs);
    BPT_FREE(gs);
    return rc;
}

int bpt_trace_info_each(bpt_session handle, const char *pattern, unsigned what, bpt_info_fn fn, void *user) {
    bpt__mfa mfa;
    bpt__session *s;
    bpt_func **fs = NULL;
    bpt__GenericBp **gs = NULL;
    bpt_info_process *procs = NULL;
    int rc, n = 0, i;
    if (!fn) return bpt__fail(BPT_EINVAL, "bpt_trace_info_each: fn is NULL");
    if (what & ~(unsigned)BPT__INFO_ALL) return bpt__fail(BPT_EINVAL, "bpt_trace_info_each: unknown what bits 0x%x", what);
    if ((rc = bpt__pattern_parse(pattern, &mfa)) < 0) return rc;
    if ((rc = bpt__permission_seize("bpt_trace_info_each")) < 0) return rc;
    if (!(s = bpt__session_lookup(handle.id))) {
        bpt__permission_release();
        return bpt__fail(BPT_ESESSION, "bpt_trace_info_each: session %llu is not alive", (unsigned long long)handle.id);
    }
    /* One collection for every function of the pattern. */
    if ((rc = bpt__info_gather(s, &mfa, NULL, what, &fs, &gs, &n, "bpt_trace_info_each")) < 0) {
        bpt__permission_release();
        return rc;
    }
    for (i = 0; i < n; i++) {
        bpt_info info;
        uint32_t cap = 0;
        if (what & (BPT_INFO_TIME | BPT_INFO_MEMORY)) {   /* room for every process of this function */
            unsigned ix = bpt_active_bp_ix();
            cap = bpt__timem_nprocs(bpt__timem_of(&gs[i]->data[ix]));
            BPT_FREE(procs);
            procs = cap ? (bpt_info_process *)BPT_MALLOC(sizeof *procs * cap) : NULL;
            if (cap && !procs) cap = 0;   /* totals still right; per process not shown */
        }
        bpt__info_of(gs[i], what, &info, procs, cap);
        fn(fs[i], fs[i]->module, fs[i]->name, fs[i]->arity, &info, user);
    }
    BPT_FREE(procs);
    bpt__permission_release();
    BPT_FREE(fs);
    BPT_FREE(gs);
    return n;
}
