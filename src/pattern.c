/* pattern.c: trace patterns ("module:function/arity" with globs) and match
   specs, as erlang:trace_pattern/3 takes them. Set path only. */
#include "internal.h"

/* Copy one part of a pattern; '_' alone means any, as '*'. */
static int bpt__pattern_part(char *dst, const char *src, size_t len, const char *what, const char *text) {
    if (len == 0)
        return bpt__fail(BPT_EPATTERN, "'%s': the %s is empty", text, what);
    if (len > BPT__NAME_MAX)
        return bpt__fail(BPT_EPATTERN, "'%s': the %s is longer than %d bytes", text, what, BPT__NAME_MAX);
    if (len == 1 && src[0] == '_') { strcpy(dst, "*"); return 0; }
    memcpy(dst, src, len);
    dst[len] = '\0';
    return 0;
}

/* Parse "module:function/arity". Errors: BPT_EINVAL (NULL), BPT_EPATTERN,
   with bpt_last_error() saying which part is wrong. */
BPT__PRIVATE int bpt__pattern_parse(const char *text, bpt__mfa *out) {
    const char *colon, *slash, *a;
    int rc, arity = 0;
    if (!text) return bpt__fail(BPT_EINVAL, "the pattern is NULL");
    if (!*text) return bpt__fail(BPT_EPATTERN, "the pattern is empty (expected module:function/arity)");
    colon = strchr(text, ':');
    if (!colon) return bpt__fail(BPT_EPATTERN, "'%s' has no ':' (expected module:function/arity)", text);
    slash = strchr(colon + 1, '/');
    if (!slash) return bpt__fail(BPT_EPATTERN, "'%s' has no '/arity'", text);
    if (strchr(slash + 1, '/'))   /* a ':' after the first is the function's: "game::step(long)" */
        return bpt__fail(BPT_EPATTERN, "'%s' has more than one '/'", text);
    if ((rc = bpt__pattern_part(out->module, text, (size_t)(colon - text), "module", text)) < 0) return rc;
    if ((rc = bpt__pattern_part(out->function, colon + 1, (size_t)(slash - colon - 1), "function", text)) < 0) return rc;
    a = slash + 1;
    if ((a[0] == '_' || a[0] == '*') && a[1] == '\0') { out->arity = -1; return 0; }
    if (!*a) return bpt__fail(BPT_EPATTERN, "'%s': the arity is empty (use '_' for any)", text);
    for (; *a; a++) {
        if (*a < '0' || *a > '9' || arity > 255)
            return bpt__fail(BPT_EPATTERN, "'%s': the arity must be 0..255 or '_'", text);
        arity = arity * 10 + (*a - '0');
    }
    if (arity > 255) return bpt__fail(BPT_EPATTERN, "'%s': the arity must be 0..255 or '_'", text);
    out->arity = arity;
    return 0;
}

/* Glob match: '*' matches any run, everything else itself. Iterative, with
   one backtrack point: linear in practice, never recursive. A pattern that
   ends in '*' matches the rest of s at once: "*" and "prefix*" are the
   common patterns, and bpt_trace_pattern matches every registered name. */
BPT__PRIVATE int bpt__glob(const char *p, const char *s) {
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') {
            while (*p == '*') p++;
            if (!*p) return 1;   /* a trailing '*' takes the rest */
            star = p - 1;
            resume = s;
        } else if (*p == *s) { p++; s++; }
        else if (star) { p = star + 1; s = ++resume; }
        else return 0;
    }
    while (*p == '*') p++;
    return *p == '\0';
}

BPT__PRIVATE int bpt__mfa_match(const bpt__mfa *p, const char *module, const char *name, int arity) {
    return (p->arity < 0 || p->arity == arity) && bpt__glob(p->module, module) && bpt__glob(p->function, name);
}

BPT__PRIVATE int bpt__flags_check(unsigned flags) {
    unsigned how = flags & BPT__HOWS, kinds = flags & BPT__KINDS;
    if (flags & ~(BPT__KINDS | BPT__HOWS | BPT__CALL_ACTIONS))
        return bpt__fail(BPT_EFLAGS, "unknown flag bits 0x%x", flags & ~(BPT__KINDS | BPT__HOWS | BPT__CALL_ACTIONS));
    if ((flags & BPT__CALL_ACTIONS) && (!(kinds & BPT_CALL) || how != 0))
        return bpt__fail(BPT_EFLAGS, "BPT_RETURN, BPT_EXCEPTION, BPT_RETURN_TO and BPT_CALLER go with "
                         "BPT_CALL switched on (they are call-trace match spec actions)");
    if (how & (how - 1))
        return bpt__fail(BPT_EFLAGS, "at most one of BPT_OFF, BPT_PAUSE, BPT_RESTART");
    if ((how & (BPT_PAUSE | BPT_RESTART)) && (!kinds || (kinds & BPT_CALL)))
        return bpt__fail(BPT_EFLAGS, "BPT_PAUSE and BPT_RESTART apply to BPT_COUNT, BPT_TIME and BPT_MEMORY");
    if (!kinds && how != BPT_OFF)
        return bpt__fail(BPT_EFLAGS, "no kind given (BPT_CALL, BPT_COUNT, BPT_TIME, BPT_MEMORY)");
    return 0;
}

/* Parse a list of types, "i64,ptr,str,f64": an argument spec (uftrace -A)
   or a ret spec (uftrace -R), which `what` names in the error message.
   Returns the count or BPT_EPATTERN. */
BPT__PRIVATE int bpt__argspec_parse(const char *what, const char *text, uint8_t *types) {
    static const char *const names[] = { "i64", "u64", "ptr", "str", "f64" };
    const char *p = text;
    int n = 0, k;
    while (*p) {
        size_t len = strcspn(p, ",");
        for (k = 0; k < 5; k++)
            if (len == 3 && strncmp(p, names[k], 3) == 0) break;
        if (k == 5)
            return bpt__fail(BPT_EPATTERN, "%s '%s': '%.*s' is not one of i64, u64, ptr, str, f64",
                             what, text, (int)len, p);
        if (n == BPT_MAX_ARGS)
            return bpt__fail(BPT_EPATTERN, "%s '%s': more than %d types", what, text, BPT_MAX_ARGS);
        types[n++] = (uint8_t)k;
        p += len;
        if (*p == ',' && *++p == '\0')
            return bpt__fail(BPT_EPATTERN, "%s '%s' ends with ','", what, text);
    }
    return n;
}

/* A new match spec with one reference in *out: m (NULL: match every call)
   plus the actions `extra` (BPT_RETURN & co. given as pattern flags),
   without its message yet (bpt__ms_message).
   Returns 0, BPT_EPATTERN (a bad argument or ret spec), BPT_EFLAGS (unknown
   action bits) or BPT_ENOMEM. */
BPT__PRIVATE int bpt__ms_new(const bpt_match *m, unsigned extra, bpt__ms **out) {
    static bpt_match none;   /* all zero, never written (not const: C++ wants a const initialised) */
    uint8_t spec[BPT_MAX_ARGS], ret[BPT_MAX_ARGS];
    int nspec, nret = 0;
    bpt__ms *ms;
    if (!m) m = &none;
    if (m->actions & ~(unsigned)(BPT_MS_SILENT | BPT__CALL_ACTIONS))
        return bpt__fail(BPT_EFLAGS, "bpt_match.actions: unknown bits 0x%x",
                         m->actions & ~(unsigned)(BPT_MS_SILENT | BPT__CALL_ACTIONS));
    nspec = m->args ? bpt__argspec_parse("argument spec", m->args, spec) : 0;
    if (nspec < 0) return nspec;
    if (m->ret && (nret = bpt__argspec_parse("ret spec", m->ret, ret)) != 1)
        return nret < 0 ? nret : bpt__fail(BPT_EPATTERN, "ret spec '%s': give exactly one type", m->ret);
    if (!(ms = (bpt__ms *)BPT_MALLOC(sizeof *ms)))
        return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory for the match spec");
    ms->pred = m->pred;
    ms->user = m->user;
    ms->actions = m->actions | extra;
    ms->rettype = nret ? ret[0] : (uint8_t)BPT_ARG_I64;
    ms->message = NULL;
    ms->message_id = 0;
    ms->nspec = nspec;
    memcpy(ms->spec, spec, sizeof spec);
    ms->refc = 1;
    *out = ms;
    return 0;
}

/* Give ms its message (NULL: none) and the message's name id. Called once
   every check that can refuse the call has passed: an id is never given
   back. Returns 0, BPT_ENOMEM or BPT_ELIMIT (the name table is full). */
BPT__PRIVATE int bpt__ms_message(bpt__ms *ms, const char *message) {
    int rc;
    if (!message) return 0;
    if (!(ms->message = bpt__intern(message)))
        return bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory for the match spec's message");
    if ((rc = bpt__names_id(NULL, ms->message, -1, NULL, NULL, &ms->message_id)) < 0)
        return bpt__fail(rc, "bpt_trace_pattern: the match spec's message '%s': %s", message, bpt__names_why(rc));
    return 0;
}

BPT__PRIVATE void bpt__ms_ref(bpt__ms *ms) { if (ms) ms->refc++; }

BPT__PRIVATE void bpt__ms_unref(bpt__ms *ms) {
    if (ms && --ms->refc == 0) BPT_FREE(ms);
}

BPT__PRIVATE void bpt__pattern_entry_free(bpt__pattern_entry *e) {
    bpt__ms_unref(e->ms);
    BPT_FREE(e);
}
