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

#if defined(BPT_NATIVE)
typedef char bpt__args_fit[(int)BPT_MAX_ARGS >= (int)BPT__INT_ARG_REGS ? 1 : -1];   /* every register's word fits */

/* >>plain call: a CALL record's words for a native site's integer
   arguments, as the record format has them (>>tracefile in
   api_session.h): the types word (every type BPT_ARG_I64, no strings),
   then the first n = min(arity, BPT_MAX_ARGS) values. Every integer
   argument register is copied at once, a fixed-size copy (a loop of n was
   25 instructions for 2 arguments), and the record's length takes the
   first n; arguments past the registers (on the stack) read as 0. So it
   writes 1 + BPT_MAX_ARGS words at w (bpt__args_fit: every register's
   word fits). Returns the record's words: 1 + n, or 0 for a function of
   no argument. Integer registers only (>>intregs in port.h): the call
   path writes the record with it, in place. */
BPT__HOT BPT__INTREGS uint32_t bpt__call_args_plain(const bpt_func *f, const uint64_t *gpr, uint64_t *w) {
    int i, n = f->arity < BPT_MAX_ARGS ? f->arity : BPT_MAX_ARGS;
    if (n == 0) return 0;
    memcpy(w + 1, gpr, sizeof(uint64_t) * BPT__INT_ARG_REGS);
    /* A fixed count too (x86-64: 2, aarch64: none), not up to n: clang made
       that loop a call to memset, which the call path may not make. */
    for (i = BPT__INT_ARG_REGS; i < BPT_MAX_ARGS; i++) w[1 + i] = 0;
    w[0] = (uint64_t)n << 32;   /* every type BPT_ARG_I64 (0), no strings */
    return 1 + (uint32_t)n;
}

/* The call path's record (CALL_PLAIN, site_native.c), written in place at
   p, which has BPT__CALL_PLAIN_ROOM bytes: the header, then
   bpt__call_args_plain's words. The same record the call kind's hit
   sends for a call with no match spec. flags: BPT__REC_CALL_NO_RETURN, or
   0 when the return is traced (the call-return path). Returns its bytes. */
BPT__HOT BPT__INTREGS uint32_t bpt__call_rec_plain(unsigned char *p, const bpt_func *f, const uint64_t *gpr,
                                                   uint64_t ticks, uint16_t flags) {
    bpt__rec *h = (bpt__rec *)(void *)p;   /* chunk memory: 8-aligned, no declared type */
    uint32_t words = bpt__call_args_plain(f, gpr, (uint64_t *)(void *)(h + 1));
    h->ticks = ticks;
    h->type = BPT_MSG_CALL;
    h->words = (uint8_t)words;
    h->info = (uint16_t)((words ? words - 1 : 0) | flags);   /* the argument count, the flag */
    h->id = f->fid;
    return (uint32_t)sizeof *h + 8u * words;
}
#endif

/* A call record's arguments, as the match spec's argument spec says, or
   the first `arity` as i64: the types word, the values, then copied
   strings. VM sites read them through ops->arg; native sites from the
   stub's register frame (integer and floating-point registers counted
   separately, as the ABI assigns them). Returns the words used. */
static uint32_t bpt__call_args_spec(const bpt_func *f, const bpt__ms *ms, const void *frame, uint64_t *w);
BPT__HOT uint32_t bpt__call_args(const bpt_func *f, const bpt__ms *ms, const void *frame, uint64_t *w) {
#if defined(BPT_NATIVE)
    if (!(ms && ms->nspec) && f->kind == BPT__SITE_NATIVE)   /* the common case, inline */
        return bpt__call_args_plain(f, ((const bpt__regs *)frame)->gpr, w);
#endif
    return bpt__call_args_spec(f, ms, frame, w);
}

/* The general case, out of line: an argument spec, or a VM site. */
static uint32_t bpt__call_args_spec(const bpt_func *f, const bpt__ms *ms, const void *frame, uint64_t *w) {
    int i, n = ms && ms->nspec ? ms->nspec : (f->arity < BPT_MAX_ARGS ? f->arity : BPT_MAX_ARGS);
    uint8_t types[BPT_MAX_ARGS];
    uint64_t *args = w + 1, typeword = 0;
    char *str;
    size_t used = 0;
    if (n == 0) return 0;
    if (ms && ms->nspec) memcpy(types, ms->spec, (size_t)n);
    else memset(types, BPT_ARG_I64, sizeof types);
    if (f->kind == BPT__SITE_VM) {
        if (!f->ops || !f->ops->arg) n = 0;
        for (i = 0; i < n; i++) args[i] = f->ops->arg(frame, i);
    }
#if defined(BPT_NATIVE)
    else {
        bpt__native_args((const bpt__regs *)frame, types, n, args);
    }
#endif
    if (n == 0) return 0;
    /* Strings are copied now: the pointer means nothing once the call is
       over. Each takes its bytes and a NUL while room lasts; later ones
       point at the area's last byte, always a NUL. */
    str = (char *)(args + n);
    for (i = 0; i < n; i++) {
        const char *p = (const char *)(uintptr_t)args[i];
        size_t len;
        typeword |= (uint64_t)types[i] << (4 * i);
        if (types[i] != BPT_ARG_STR) continue;
        if (used >= BPT_MSG_STR_BYTES - 1) { args[i] = BPT_MSG_STR_BYTES - 1; continue; }
        if (!p) p = "(null)";
        len = strnlen(p, BPT_MSG_STR_BYTES - used - 1);
        memcpy(str + used, p, len);
        str[used + len] = '\0';
        args[i] = used;
        used += len + 1;
    }
    if (used % 8) memset(str + used, 0, 8 - used % 8);   /* whole words: no stack bytes in a file */
    w[0] = typeword | (uint64_t)n << 32 | (uint64_t)used << 40;
    return 1 + (uint32_t)n + (uint32_t)(used + 7) / 8;
}

/* caller: where the call returns to, and the function that is (native: its
   return address, symbolized; VM: what ops->caller says). */
static void bpt__call_caller(const bpt__hit *h, uint64_t *w) {
    const bpt_func *f = h->f, *c = NULL;
    w[0] = 0;
    if (f->kind == BPT__SITE_VM) {
        c = f->ops && f->ops->caller ? f->ops->caller(h->frame) : NULL;
    }
#if defined(BPT_NATIVE)
    else {
        w[0] = bpt__native_caller(h);
        c = bpt__symbolize((uintptr_t)w[0]);
    }
#endif
    w[1] = c ? c->fid : 0;
}

/* Local call trace of one session: match spec, rate limit, record, and
   the wish for a return frame (return_trace, exception_trace, return_to). */
BPT__HOT void bpt__kind_call_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d) {
    const bpt__ms *ms = (const bpt__ms *)d->data[BPT__KIX_CALL];
    bpt__thread *rec = h->rec;
    const bpt_func *f = h->f;
    bpt__recbuf b;
    uint32_t words;
    /* A session is marked dead once its destroy's switch-off has committed
       (session_life.c): from then until the wait before it is freed, a hit
       that found its GenericBp before step 12 unlinked it must send
       nothing. A tracer's own calls are not traced. */
    if (rec->in_tracer || bpt__load_relaxed_u32(&s->dead)) return;   /* [S2] */
    words = bpt__call_args(f, ms, h->frame, b.w);
    b.h.info = (uint16_t)(words ? (b.w[0] >> 32) & 0xff : 0);
    if (ms && ms->pred && !ms->pred(b.w + 1, (int)b.h.info, ms->user)) return;
    if (ms && (ms->actions & BPT_MS_SILENT)) return;
    if (!bpt__session_admit(s, rec)) return;
    if (ms && (ms->actions & BPT_CALLER)) {
        bpt__call_caller(h, b.w + words);
        words += 2;
        b.h.info |= BPT__REC_CALL_CALLER;
    }
    if (ms && ms->message_id) {
        b.w[words++] = ms->message_id;
        b.h.info |= BPT__REC_CALL_USER;
    }
    if (!(ms && (ms->actions & (BPT_RETURN | BPT_EXCEPTION))) || !bpt__hit_frame_room(h, s))
        b.h.info |= BPT__REC_CALL_NO_RETURN;   /* no return_from will end it */
    b.h.ticks = bpt__now_ticks();
    b.h.type = BPT_MSG_CALL;
    b.h.words = (uint8_t)words;
    b.h.id = f->fid;
    bpt__session_send(s, rec, &b.h);
    if (ms && (ms->actions & (BPT_RETURN | BPT_EXCEPTION | BPT_RETURN_TO)))
        bpt__hit_want_frame(h, s, ms->actions, ms->rettype);
}
