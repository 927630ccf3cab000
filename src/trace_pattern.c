/* trace_pattern.c: bpt_trace_pattern, as erlang:trace_pattern/3 (and
   trace:function/4 in a session): match a pattern against the registered
   functions, switch their breakpoints through the protocol (bp.c), and
   remember the pattern, so that functions registered later get it too
   (funcs.c replays it). */
#include "internal.h"

/* A pattern to remember for functions registered later, or NULL (ENOMEM). */
static bpt__pattern_entry *bpt__pattern_entry_new(const bpt__mfa *mfa, unsigned flags, bpt__ms *ms) {
    bpt__pattern_entry *e = (bpt__pattern_entry *)BPT_MALLOC(sizeof *e);
    if (!e) return NULL;
    e->next = NULL;
    e->mfa = *mfa;
    e->flags = flags;
    e->ms = ms;
    bpt__ms_ref(ms);
    return e;
}

/* Keep e in the session's patterns (it is replayed, in order, on functions
   registered later). A BPT_OFF cancels the earlier entries with the same
   pattern whose kinds it switches off entirely, and is kept itself only if
   an entry remains that it could act on (one with a kind it switches off):
   so a pattern switched on and off again and again leaves nothing behind.
   Never fails: e was allocated before the protocol ran. */
static void bpt__remember_pattern(bpt__session *s, bpt__pattern_entry *e) {
    bpt__pattern_entry **pp = &s->patterns, *old;
    unsigned kinds = e->flags & BPT__KINDS;
    if ((e->flags & BPT__HOWS) == BPT_OFF) {
        int acts = 0;
        if (kinds == 0) kinds = BPT__KINDS;
        while ((old = *pp) != NULL) {
            unsigned okinds = old->flags & BPT__KINDS;
            int old_off = (old->flags & BPT__HOWS) == BPT_OFF;
            if (old_off && !okinds) okinds = BPT__KINDS;   /* BPT_OFF alone: every kind */
            if (memcmp(&old->mfa, &e->mfa, sizeof e->mfa) == 0 && (okinds & ~kinds) == 0) {
                *pp = old->next;
                bpt__pattern_entry_free(old);
            } else {
                acts |= !old_off && (okinds & kinds) != 0;   /* an entry this OFF switches off */
                pp = &old->next;
            }
        }
        if (!acts) { bpt__pattern_entry_free(e); return; }
    }
    while (*pp) pp = &(*pp)->next;
    *pp = e;
}

static int bpt__trace_pattern(bpt_session handle, const char *pattern, unsigned flags, const bpt_match *match,
                              uint64_t *change) {
    bpt__mfa mfa;
    bpt__session *s;
    bpt__op op;
    bpt__pattern_entry *entry;
    bpt_func **fs;
    uint64_t t = bpt__now_ns();
    int n = 0, rc;
    memset(&mfa, 0, sizeof mfa);
    if ((rc = bpt__pattern_parse(pattern, &mfa)) < 0 || (rc = bpt__flags_check(flags)) < 0) return rc;
    op = bpt__pattern_op(flags, NULL);
    if ((match || (flags & BPT__CALL_ACTIONS)) && (op.kinds & BPT_CALL) && op.how == 0 &&
        (rc = bpt__ms_new(match, flags & BPT__CALL_ACTIONS, &op.ms)) < 0)
        return rc;
    if ((rc = bpt__change_begin("bpt_trace_pattern", &t)) < 0) {
        bpt__ms_unref(op.ms);
        return rc;
    }
    *change = bpt__probe_change_id();
    s = bpt__session_lookup(handle.id);
    if (!s) {
        rc = bpt__fail(BPT_ESESSION, "bpt_trace_pattern: session %llu is not alive", (unsigned long long)handle.id);
        goto out;
    }
    fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len ? bpt__registry.len : 1));
    if (!fs) {
        rc = bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory to match '%s'", pattern);
        goto out;
    }
    n = bpt__registry_match(&mfa, fs);
#if defined(BPT_NATIVE)
    {   /* Return trace swaps return addresses: refused where the CPU checks them. */
        int i;
        for (i = 0; (flags & BPT__FRAME_ACTIONS) && op.how == 0 && i < n; i++)
            if (fs[i]->kind == BPT__SITE_NATIVE) {
                if ((rc = bpt__arch_native_usable("bpt_trace_pattern (return trace)")) < 0) {
                    BPT_FREE(fs);
                    goto out;
                }
                break;
            }
    }
#endif
    /* Everything that can fail is allocated before the protocol runs. The
       message's id last: a refused call must not use up an id. */
    if (op.ms && match && (rc = bpt__ms_message(op.ms, match->message)) < 0) {
        BPT_FREE(fs);
        goto out;
    }
    entry = bpt__pattern_entry_new(&mfa, flags, op.ms);
    if (!entry) rc = bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory to remember '%s'", pattern);
    else {
        /* Remembered when committed, even if some word could not be written
           (BPT_EPERM, BPT_ENOTPATCHABLE): the generations hold the new
           settings, and functions registered later must get them. An OFF
           left unremembered let the ON it cancels trace them (found by
           review; t_pattern_memory). */
        int committed;
        rc = bpt__protocol_run(s, fs, n, &op, &t, &committed);
        if (committed) bpt__remember_pattern(s, entry);
        else bpt__pattern_entry_free(entry);
    }
    BPT_FREE(fs);
    if (rc == 0) rc = n;
out:
    bpt__ms_unref(op.ms);
    bpt__change_end(&t);
    return rc;
}

/* bpt_trace_pattern, between the probes bptrace:pattern__start (the
   pattern, flags, session) and bptrace:pattern__done (the pattern, flags,
   the result: functions matched or a BPT_E* code, ns, and the id of the
   change its step probes carried, or 0 when no change began). */
int bpt_trace_pattern(bpt_session handle, const char *pattern, unsigned flags, const bpt_match *match) {
    uint64_t t = bpt__now_ns(), change = 0;
    int rc;
    BPT_PROBE(bptrace, pattern__start, pattern, flags, handle.id);
    rc = bpt__trace_pattern(handle, pattern, flags, match, &change);
    BPT_PROBE(bptrace, pattern__done, pattern, flags, rc, bpt__now_ns() - t, change);
    return rc;
}
