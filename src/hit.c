/* hit.c: what a breakpoint does when a thread reaches it.
   Pin, read the active index once, walk the function's GenericBp list (one
   per session) and act on each session's active generation: count, evaluate
   the match spec, send a call message. Unpin. No lock, no wait: this is
   op_i_generic_breakpoint / erts_generic_breakpoint in beam_bp.c. */

#if defined(BPT_NATIVE)
/* A native call's arguments, from the stub's register frame: integer kinds
   take the next integer register, f64 the next floating-point one, as the
   SysV x86-64 and AAPCS64 ABIs assign simple arguments. */
static void bpt__native_args(const bpt__regs *r, const uint8_t *types, int n, uint64_t *out) {
    int i, gi = 0, fi = 0;
    for (i = 0; i < n; i++) {
        if (types[i] == BPT_ARG_F64) out[i] = fi < BPT__FP_ARG_REGS ? r->fp[fi++][0] : 0;
        else out[i] = gi < BPT__INT_ARG_REGS ? r->gpr[gi++] : 0;
    }
}
#endif

/* Fill a message's arguments: as the match spec's argument spec says, or
   the first `arity` as i64. VM sites read them through ops->arg; native
   sites from the stub's register frame (integer and floating-point
   registers counted separately, as the ABI assigns them). */
static void bpt__read_args(const bpt_func *f, const bpt__ms *ms, const void *frame, bpt_msg *m) {
    int i, n = ms && ms->nspec ? ms->nspec : (f->arity < BPT_MAX_ARGS ? f->arity : BPT_MAX_ARGS);
    size_t used = 0;
    if (ms && ms->nspec) memcpy(m->argtype, ms->spec, (size_t)n);
    if (f->kind == BPT__SITE_VM) {
        if (!f->ops || !f->ops->arg) n = 0;
        for (i = 0; i < n; i++) m->args[i] = f->ops->arg(frame, i);
    }
#if defined(BPT_NATIVE)
    else {
        bpt__native_args((const bpt__regs *)frame, m->argtype, n, m->args);
    }
#endif
    m->nargs = (uint16_t)n;
    /* Strings are copied now: the pointer means nothing once the call is
       over. Each takes its bytes and a NUL from m->str while room lasts;
       later ones point at the buffer's last byte, always a NUL. */
    for (i = 0; i < n; i++) {
        const char *str = (const char *)(uintptr_t)m->args[i];
        size_t len;
        if (m->argtype[i] != BPT_ARG_STR) continue;
        if (used >= sizeof m->str) { m->args[i] = sizeof m->str - 1; continue; }
        if (!str) str = "(null)";
        len = strnlen(str, sizeof m->str - used - 1);
        memcpy(m->str + used, str, len);
        m->str[used + len] = '\0';
        m->args[i] = used;
        used += len + 1;
    }
}

/* caller: the function the call returns to (native: its return address,
   symbolized; VM: what ops->caller says). */
static void bpt__hit_caller(const bpt__hit *h, bpt_msg *m) {
    const bpt_func *f = h->f;
    if (f->kind == BPT__SITE_VM) {
        bpt_func *c = f->ops && f->ops->caller ? f->ops->caller(h->frame) : NULL;
        if (c) { m->caller_module = c->module; m->caller_name = c->name; m->caller_arity = c->arity; }
    }
#if defined(BPT_NATIVE)
    else {
        m->caller = bpt__native_caller(h);
        if (!bpt__symbolize((uintptr_t)m->caller, &m->caller_module, &m->caller_name, &m->caller_arity))
            m->caller_module = m->caller_name = NULL;
    }
#endif
}

/* Local call trace of one session: match spec, rate limit, message, and
   the wish for a return frame (return_trace, exception_trace, return_to). */
static void bpt__hit_call_trace(bpt__hit *h, bpt__session *s, const bpt__ms *ms) {
    bpt__thread *rec = h->rec;
    const bpt_func *f = h->f;
    const void *frame = h->frame;
    bpt_msg m;
    uint64_t now;
    /* A dead session's GenericBp lives until step 12 of its destroy; it must
       send nothing meanwhile. A tracer's own calls are not traced. */
    if (rec->in_tracer || bpt__load_relaxed_u32(&s->dead)) return;
    memset(&m, 0, sizeof m);
    bpt__read_args(f, ms, frame, &m);
    if (ms && ms->pred && !ms->pred(m.args, m.nargs, ms->user)) return;
    if (ms && (ms->actions & BPT_MS_SILENT)) return;
    now = bpt__now_ns();
    if (!bpt__session_admit(s, rec, now)) return;
    m.type = BPT_MSG_CALL;
    m.thread = rec->tid;
    m.process = rec->process;
    m.ts_ns = now;
    m.session = s->id;
    m.module = f->module;
    m.name = f->name;
    m.arity = f->arity;
    m.format = f->ops ? f->ops->format : NULL;
    m.user = ms ? ms->message : NULL;
    if (ms && (ms->actions & BPT_CALLER)) bpt__hit_caller(h, &m);
    bpt__session_send(s, rec, &m);
    if (ms && (ms->actions & (BPT_RETURN | BPT_EXCEPTION | BPT_RETURN_TO)))
        bpt__hit_want_frame(h, s, ms->actions, ms->rettype);
}

/* call_time / call_memory of one session: count the call in this thread's
   table now (so a call still running is counted), and ask for a frame,
   which charges the time and memory when the call ends (frames.c). */
static void bpt__hit_timem(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    unsigned kinds = ((d->flags & BPT__BPF_TIME_ACTIVE) ? BPT_TIME : 0u) |
                     ((d->flags & BPT__BPF_MEM_ACTIVE) ? BPT_MEMORY : 0u);
    bpt__timem_charge(d->timem, h->rec, h->rec->process, 1, 0, 0);
    bpt__hit_want_frame(h, s, kinds, BPT_ARG_I64);
}

/* Run every session's breakpoint on h->f; gather in h who wants a return
   frame (the site pushes it). The caller then executes the original
   instruction. Returns 0 when the thread has no record (out of memory):
   untraced, never unsafe. */
BPT__HOT int bpt__breakpoint(bpt__hit *h) {
    bpt__GenericBp *g;
    unsigned ix;
    bpt_func *f = h->f;
    bpt__thread *rec = bpt__pin();
    h->rec = rec;
    h->nwant = 0;
    if (!rec) return 0;
#if defined(BPT_NATIVE)
    if (f->kind == BPT__SITE_NATIVE && rec->shadow_depth[BPT__STACK_NATIVE]) bpt__native_settle(h);
#endif
    ix = bpt_active_bp_ix();   /* once per hit: one generation throughout */
    /* Acquire loads of the list pair with the release stores that link a
       GenericBp (steps 2 and 5) and unlink one (step 11). */
    for (g = (bpt__GenericBp *)bpt__load_acquire_ptr(&f->gen_bp); g;
         g = (bpt__GenericBp *)bpt__load_acquire_ptr(&g->next)) {
        const bpt__GenericBpData *d = &g->data[ix];
        if (!d->flags) continue;
        if (d->flags & BPT__BPF_COUNT_ACTIVE) bpt__fetch_add_u64(&d->count->value, 1);
        if (d->flags & BPT__BPF_LOCAL_TRACE) bpt__hit_call_trace(h, g->session, d->local_ms);
        if (d->flags & (BPT__BPF_TIME_ACTIVE | BPT__BPF_MEM_ACTIVE)) bpt__hit_timem(h, g->session, d);
    }
    return 1;   /* still pinned: the site pushes its frame, then unpins */
}

bpt_vm_word bpt_vm_breakpoint(bpt_func *f, const void *frame, bpt_vm_token *token) {
    bpt__hit h;
    BPT_ASSERT(f && f->kind == BPT__SITE_VM);
    if (token) *token = 0;
    h.f = f;
    h.frame = frame;
    if (bpt__breakpoint(&h)) {
        if (h.nwant) bpt__vm_frame_push(&h, bpt__now_ns(), token);
        bpt__unpin(h.rec);
    }
    return (bpt_vm_word)f->orig_word;   /* immutable while registered */
}
