/* probes.c: the USDT probes of a USDT session (OTP's dyntrace tracer: a
   session whose events go to probes, not to a buffer) and bpt_user_trace
   (dyntrace:p/1..8). The other bptrace probes stand in the parts whose
   events they mark (bp.c step, trace_pattern.c pattern__*, session_life.c
   session__*, progress.c progress__wait__*, session.c drop), each a
   BPT_PROBE; api_probes.h writes the sites. examples/bptrace.d lists them.

   A USDT session's events fire from one site per probe, so that the
   site's semaphore says whether a tool is attached to that probe: with
   none, the record is not even decoded. */
#include "internal.h"

#if BPT_PROBES
/* A site of 8 arguments: user_trace, OTP's shape (i4s4). Every other probe
   has at most 6, all that bpftrace (0.17, Debian 12) reads on x86-64. */
#  define BPT__SDT_FIRE8(p, n, a1, a2, a3, a4, a5, a6, a7, a8) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2 8@%3 8@%4 8@%5 8@%6 8@%7") :: BPT__SDT_ARG(a1), \
                         BPT__SDT_ARG(a2), BPT__SDT_ARG(a3), BPT__SDT_ARG(a4), BPT__SDT_ARG(a5), \
                         BPT__SDT_ARG(a6), BPT__SDT_ARG(a7), BPT__SDT_ARG(a8) : "memory")

/* The first argument of a decoded call as a probe word: a copied string's
   address (valid while the probe runs), the bits of a double, or the
   integer; 0 when the call has none. */
static uint64_t bpt__probe_arg0(const bpt_msg *m) {
    if (m->nargs == 0) return 0;
    if (m->argtype[0] == BPT_ARG_STR) return (uint64_t)(uintptr_t)(m->str + m->args[0]);
    return m->args[0];
}

/* The record as a message (names from the live table). 0: unreadable. */
static int bpt__probe_decode(const bpt__session *s, const bpt__thread *rec, const bpt__rec *r, bpt_msg *m) {
    bpt__decoder d;
    bpt__stream st;
    bpt__decoder_live(&d, s->id);
    bpt__stream_init(&st);   /* no anchor: ts_ns is not a probe argument */
    st.tid = rec->tid;
    st.process = rec->process;
    return bpt__rec_decode(&d, &st, r, m);
}
#endif

/* A USDT session's record, to its probe, if a tool is attached to it.
   Every event probe has six arguments: the thread, the function's entry
   address (0: a VM function), module, name, arity, and one word:
     call        the first argument (a string: its address; 0: none)
     return      the return value (as the match spec's ret type says; a
                 string: the address of its copy)
     exception   the exception_from message's value
     return_to   the return address (native; 0: VM)
   Other records (a rate limit's notice) have no probe. Pinned, in the
   traced thread. */
BPT__PRIVATE void bpt__probe_event(const bpt__session *s, const bpt__thread *rec, const bpt__rec *r) {
#if BPT_PROBES
    unsigned long on;
    bpt_msg m;
    uint64_t addr;
    switch (r->type) {   /* attached? (one load; nothing else is done while none is) */
    case BPT_MSG_CALL: BPT__SDT_SEM_LOAD(bptrace, call, on); break;
    case BPT_MSG_RETURN_FROM: BPT__SDT_SEM_LOAD(bptrace, return, on); break;
    case BPT_MSG_EXCEPTION_FROM: BPT__SDT_SEM_LOAD(bptrace, exception, on); break;
    case BPT_MSG_RETURN_TO: BPT__SDT_SEM_LOAD(bptrace, return_to, on); break;
    default: return;
    }
    if (!on) return;
    if (!bpt__probe_decode(s, rec, r, &m)) return;
    addr = bpt__names_addr(r->id);
    switch (r->type) {
    case BPT_MSG_CALL:
        BPT__SDT_FIRE6(bptrace, call, m.thread, addr, m.module, m.name, m.arity,
                       bpt__probe_arg0(&m));
        break;
    case BPT_MSG_RETURN_FROM:
        BPT__SDT_FIRE6(bptrace, return, m.thread, addr, m.module, m.name, m.arity,
                       m.value_type == BPT_ARG_STR ? (uint64_t)(uintptr_t)m.str : m.value);
        break;
    case BPT_MSG_EXCEPTION_FROM:
        BPT__SDT_FIRE6(bptrace, exception, m.thread, addr, m.module, m.name, m.arity,
                       m.value);
        break;
    default:   /* BPT_MSG_RETURN_TO */
        BPT__SDT_FIRE6(bptrace, return_to, m.thread, addr, m.module, m.name, m.arity,
                       m.caller);
        break;
    }
#else
    (void)s; (void)rec; (void)r;   /* no USDT session is ever created */
#endif
}

void bpt_user_trace(int64_t i1, int64_t i2, int64_t i3, int64_t i4,
                    const char *s1, const char *s2, const char *s3, const char *s4) {
#if BPT_PROBES
    unsigned long on;
    BPT__SDT_SEM_LOAD(bptrace, user_trace, on);
    if (on) BPT__SDT_FIRE8(bptrace, user_trace, i1, i2, i3, i4, s1, s2, s3, s4);
#else
    (void)i1; (void)i2; (void)i3; (void)i4; (void)s1; (void)s2; (void)s3; (void)s4;
#endif
}
