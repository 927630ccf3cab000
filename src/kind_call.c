/* kind_call.c: the local call trace breakpoint kind (BPT_CALL), as
   erts_generic_breakpoint's ERTS_BPF_LOCAL_TRACE branch in beam_bp.c: on
   each call, evaluate the session's match spec over the arguments, send a
   call message, and ask for a return frame when the match spec's actions
   want return_from, exception_from or return_to (frames.c). Its data is the
   match spec (NULL: match every call). Its hooks are the ones the kinds
   table (BPT_KINDS, api_pattern.h) names; breakpoint.h declares them. */
#include "internal.h"

#define BPT__BPF_LOCAL_TRACE BPT__BPF_ON(BPT__KIX_CALL)

/* Step 2: nothing to allocate: the op holds a reference to its match spec. */
BPT__PRIVATE int bpt__kind_call_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out) {
    (void)op; (void)staging;
    *out = NULL;
    return 0;
}

BPT__PRIVATE void bpt__kind_call_ref(void *data) { bpt__ms_ref((bpt__ms *)data); }
BPT__PRIVATE void bpt__kind_call_unref(void *data) { bpt__ms_unref((bpt__ms *)data); }

/* Step 3: replace the match spec (on), or clear it (off). Call trace has
   no pause: ON and ACTIVE go together. */
BPT__PRIVATE void bpt__kind_call_stage(bpt__GenericBpData *d, const bpt__op *op, void *unused) {
    (void)unused;
    if (d->flags & BPT__BPF_LOCAL_TRACE) bpt__ms_unref((bpt__ms *)d->data[BPT__KIX_CALL]);
    d->flags &= ~(uint32_t)(BPT__BPF_LOCAL_TRACE | BPT__BPF_ACTIVE(BPT__KIX_CALL));
    d->data[BPT__KIX_CALL] = NULL;
    if (op->how == 0) {
        d->flags |= BPT__BPF_LOCAL_TRACE | BPT__BPF_ACTIVE(BPT__KIX_CALL);
        d->data[BPT__KIX_CALL] = op->ms;
        bpt__ms_ref(op->ms);
    }
}

BPT__PRIVATE void bpt__kind_call_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out) {
    const bpt__ms *ms = (const bpt__ms *)d->data[BPT__KIX_CALL];
    if (!(what & BPT_INFO_FLAGS)) return;
    out->flags |= BPT_CALL;
    if (ms) out->flags |= ms->actions & BPT__CALL_ACTIONS;
}

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
BPT__HOT void bpt__kind_call_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    const bpt__ms *ms = (const bpt__ms *)d->data[BPT__KIX_CALL];
    bpt__thread *rec = h->rec;
    const bpt_func *f = h->f;
    const void *frame = h->frame;
    bpt_msg m;
    uint64_t now;
    /* A dead session's GenericBp lives until step 12 of its destroy; it must
       send nothing meanwhile. A tracer's own calls are not traced. */
    if (rec->in_tracer || bpt__load_relaxed_u32(&s->dead)) return;   /* [S2] */
    memset(&m, 0, sizeof m);
    bpt__read_args(f, ms, frame, &m);
    if (ms && ms->pred && !ms->pred(m.args, m.nargs, ms->user)) return;
    if (ms && (ms->actions & BPT_MS_SILENT)) return;
    now = bpt__now_ns();
    if (!bpt__session_admit(s, rec, now)) return;
    bpt__msg_header(&m, BPT_MSG_CALL, rec->tid, rec->process, now, s->id);
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

