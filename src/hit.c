/* hit.c: what a breakpoint does when a thread reaches it.
   Pin, read the active index once, walk the function's GenericBp list (one
   per session) and act on each session's active generation: count, evaluate
   the match spec, send a call message. Unpin. No lock, no wait: this is
   op_i_generic_breakpoint / erts_generic_breakpoint in beam_bp.c. */

/* The arguments of a hit, read from the site at most once. */
typedef struct bpt__hit_args {
    int n;                        /* -1 until read */
    uint64_t v[BPT_MAX_ARGS];
} bpt__hit_args;

static void bpt__read_args(const bpt_func *f, const void *frame, bpt__hit_args *a) {
    int i;
    a->n = 0;
    if (f->kind == BPT__SITE_VM && f->ops && f->ops->arg) {
        a->n = f->arity < BPT_MAX_ARGS ? f->arity : BPT_MAX_ARGS;
        for (i = 0; i < a->n; i++) a->v[i] = f->ops->arg(frame, i);
    }
}

/* Local call trace of one session: match spec, rate limit, message. */
static void bpt__hit_call_trace(bpt__thread *rec, const bpt_func *f, bpt__session *s,
                                const bpt__ms *ms, const void *frame, bpt__hit_args *a) {
    bpt_msg m;
    uint64_t now;
    /* A dead session's GenericBp lives until step 12 of its destroy; it must
       send nothing meanwhile. A tracer's own calls are not traced. */
    if (rec->in_tracer || bpt__load_relaxed_u32(&s->dead)) return;
    if (a->n < 0) bpt__read_args(f, frame, a);
    if (ms && ms->pred && !ms->pred(a->v, a->n, ms->user)) return;
    if (ms && (ms->actions & BPT_MS_SILENT)) return;
    now = bpt__now_ns();
    if (!bpt__session_admit(s, rec, now)) return;
    memset(&m, 0, sizeof m);
    m.type = BPT_MSG_CALL;
    m.nargs = (uint16_t)a->n;
    m.thread = rec->tid;
    m.process = rec->process;
    m.ts_ns = now;
    m.session = s->id;
    m.module = f->module;
    m.name = f->name;
    m.arity = f->arity;
    m.format = f->ops ? f->ops->format : NULL;
    m.user = ms ? ms->message : NULL;
    memcpy(m.args, a->v, sizeof m.args);
    bpt__session_send(s, rec, &m);
}

/* Run every session's breakpoint on f. The caller then executes the
   original instruction. */
static void bpt__breakpoint(bpt_func *f, const void *frame) {
    bpt__hit_args args;
    bpt__GenericBp *g;
    unsigned ix;
    bpt__thread *rec = bpt__pin();
    if (!rec) return;   /* no thread record (out of memory): untraced, never unsafe */
    args.n = -1;
    ix = bpt_active_bp_ix();   /* once per hit: one generation throughout */
    /* Acquire loads of the list pair with the release stores that link a
       GenericBp (steps 2 and 5) and unlink one (step 11). */
    for (g = (bpt__GenericBp *)bpt__load_acquire_ptr(&f->gen_bp); g;
         g = (bpt__GenericBp *)bpt__load_acquire_ptr(&g->next)) {
        const bpt__GenericBpData *d = &g->data[ix];
        if (!d->flags) continue;
        if (d->flags & BPT__BPF_COUNT_ACTIVE) bpt__fetch_add_u64(&d->count->value, 1);
        if (d->flags & BPT__BPF_LOCAL_TRACE) bpt__hit_call_trace(rec, f, g->session, d->local_ms, frame, &args);
    }
    bpt__unpin(rec);
}

bpt_vm_word bpt_vm_breakpoint(bpt_func *f, const void *frame) {
    BPT_ASSERT(f && f->kind == BPT__SITE_VM);
    bpt__breakpoint(f, frame);
    return f->orig_word;   /* immutable while registered */
}
