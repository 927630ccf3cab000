/* session_life.c: trace sessions are born and die, as OTP 27's
   trace:session_create/3 and trace:session_destroy/1. Creation publishes a
   session in a free slot under a weak id (a stale handle never matches);
   destruction switches off every breakpoint of the session through the
   protocol (bp.c), then unpublishes the session and frees it after a
   thread progress wait. */
#include "internal.h"

int bpt_session_create(const bpt_session_desc *desc, bpt_session *out) {
    return bpt__session_create(desc, out, 0);
}

/* served: 1 for a control client's session (control.c), marked before it
   is published, so that a fork at any moment finds it marked. */
BPT__PRIVATE int bpt__session_create(const bpt_session_desc *desc, bpt_session *out, int served) {
    static bpt_session_desc defaults;   /* all zero, never written (not const: C++ wants a const initialised) */
    const bpt_session_desc *d = desc ? desc : &defaults;
    bpt__session *s = NULL;
    uint32_t chunks = d->chunks ? d->chunks : 16;   /* bpt__session_alloc's default */
    int slot, rc;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_session_create: out is NULL");
    if (d->chunk_bytes && (d->chunk_bytes < 4096 || d->chunk_bytes > (1u << 24) || (d->chunk_bytes & (d->chunk_bytes - 1))))
        return bpt__fail(BPT_EINVAL, "bpt_session_create: chunk_bytes %u is not a power of two in 4096 .. 1<<24",
                         d->chunk_bytes);
    if (d->chunks && (d->chunks < 2 || d->chunks > 65536))
        return bpt__fail(BPT_EINVAL, "bpt_session_create: chunks %u is not in 2 .. 65536", d->chunks);
    if (d->max_chunks && (d->max_chunks < chunks || d->max_chunks > 65536))
        return bpt__fail(BPT_EINVAL, "bpt_session_create: max_chunks %u is not in chunks (%u) .. 65536",
                         d->max_chunks, chunks);
    if (d->flight_recorder && d->max_chunks && d->max_chunks != chunks)
        return bpt__fail(BPT_EINVAL, "bpt_session_create: a flight recorder does not grow: max_chunks %u is not "
                         "chunks (%u)", d->max_chunks, chunks);
    if (d->rate_per_ms && !d->rate_max)
        return bpt__fail(BPT_EINVAL, "bpt_session_create: rate_per_ms needs rate_max");
    if (d->rate_per_ms && d->rate_max > 0xffffffffu)   /* a window's count is 32 bits (session.c) */
        return bpt__fail(BPT_EINVAL, "bpt_session_create: rate_max %llu over 2^32 - 1 with rate_per_ms",
                         (unsigned long long)d->rate_max);
    if (d->name && strlen(d->name) > 63)
        return bpt__fail(BPT_ELIMIT, "bpt_session_create: the name is over 63 bytes");
    if (d->usdt && d->tracer)
        return bpt__fail(BPT_EINVAL, "bpt_session_create: usdt and a callback tracer exclude each other");
    if (d->usdt && !BPT_PROBES)
        return bpt__fail(BPT_ENOTSUP, "bpt_session_create: usdt: the USDT probes are compiled out here "
                         "(tcc, BPT_NO_PROBES, or not ELF on x86-64 or aarch64)");
    if ((rc = bpt__permission_seize("bpt_session_create")) < 0) return rc;
    for (slot = 0; slot < BPT_MAX_SESSIONS; slot++)
        if (!bpt__load_relaxed_ptr(&bpt__sessions.slot[slot])) break;
    if (slot == BPT_MAX_SESSIONS) {
        bpt__permission_release();
        return bpt__fail(BPT_ELIMIT, "bpt_session_create: %d sessions are alive (BPT_MAX_SESSIONS)", BPT_MAX_SESSIONS);
    }
    if ((rc = bpt__session_alloc(d, &s)) < 0) {
        bpt__permission_release();
        return rc;
    }
    s->served = served;
    /* Weak id: a per-slot generation, never 0, so a stale handle never matches. */
    s->id = (++bpt__sessions.generation[slot] << BPT__SESSION_SLOT_BITS) | (uint64_t)slot;
    bpt__store_release_ptr(&bpt__sessions.slot[slot], s);   /* [S1] pairs with bpt__session_lookup (session.c) */
    BPT_PROBE(bptrace, session__create, s->id, s->name, s->usdt);   /* under the permission: s is alive */
    bpt__permission_release();
    out->id = s->id;
    return 0;
}

/* Every registered function with a breakpoint of session s. Caller frees. */
static int bpt__funcs_of_session(const bpt__session *s, bpt_func ***out, int *n) {
    uint32_t i;
    *n = 0;
    *out = (bpt_func **)BPT_MALLOC(sizeof **out * (bpt__registry.len ? bpt__registry.len : 1));
    if (!*out) return BPT_ENOMEM;
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__find_bp(bpt__registry.funcs[i], s)) (*out)[(*n)++] = bpt__registry.funcs[i];
    return 0;
}

int bpt_session_destroy(bpt_session handle) {
    static const bpt__op off_all = { BPT__KINDS, BPT_OFF, NULL };
    bpt__session *s;
    bpt_func **fs;
    bpt__pattern_entry *e;
    uint64_t t = bpt__now_ns();
    int n, rc, committed;
    if ((rc = bpt__change_begin("bpt_session_destroy", &t)) < 0) return rc;
    s = bpt__session_lookup(handle.id);
    if (!s) {
        bpt__change_end(&t);
        return bpt__fail(BPT_ESESSION, "bpt_session_destroy: session %llu is not alive (destroyed twice?)",
                         (unsigned long long)handle.id);
    }
    if (bpt__funcs_of_session(s, &fs, &n) < 0) {
        bpt__change_end(&t);
        return bpt__fail(BPT_ENOMEM, "bpt_session_destroy: out of memory; the session is unchanged");
    }
    rc = bpt__protocol_run(s, fs, n, &off_all, &t, &committed);
    if (!committed) {
        /* Refused at step 2 (no memory, a traced slot no longer mapped):
           nothing changed, and its breakpoints are still linked on its
           functions, where every hit reads the session. Freeing it here
           was a use after free (found by review; t_sessions). */
        BPT_FREE(fs);
        bpt__change_end(&t);
        return rc;
    }
    /* BPT_EPERM, BPT_ENOTPATCHABLE: committed, the breakpoints are off and
       unlinked, only some words stay (they find no breakpoint): the
       session goes on to be destroyed. */
    BPT_FREE(fs);
    /* Announced once committed: a refused destroy changed nothing (it was
       announced before the protocol ran: found by review). */
    BPT_PROBE(bptrace, session__destroy, s->id, s->name);
    /* From here the session is gone for everyone: late hits see dead, and
       lookups by its weak id fail. */
    bpt__store_release_u32(&s->dead, 1);   /* [S2] */
    bpt__store_release_ptr(&bpt__sessions.slot[bpt__session_slot(s->id)], NULL);   /* [S1] */
    bpt__session_wake(s);   /* [W1] a drainer asleep in bpt_session_wait returns, and finds it gone */
    while ((e = s->patterns) != NULL) {
        s->patterns = e->next;
        bpt__pattern_entry_free(e);
    }
    bpt__change_end(&t);
    /* Drainers, stats readers and hits that found the session before it was
       unpublished are pinned: wait for them before freeing. */
    bpt_thread_progress_wait();
    bpt__session_free(s);
    return rc < 0 ? rc : 0;
}
