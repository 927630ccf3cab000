/* fuzz_pattern: the trace pattern parser and matcher, through the public API.

   Input: the pattern text (bytes up to the first NUL). A fixed set of VM
   sites is registered once, with names chosen to catch glob mistakes
   ('*', '_', ':' and '/' inside names, an empty name, 127-byte names).
   For each input:
     - bpt_trace_pattern(S, text, BPT_OFF) on a session with no breakpoints
       returns what the reference parser (fuzz_common.h) says: BPT_EPATTERN,
       or the number of registered functions the pattern matches;
     - bpt_trace_info_each on a session that traces every function reports
       exactly the functions the reference matches;
     - when it parses, bpt_trace_pattern(C, text, BPT_COUNT) switches on
       exactly those (trace_info), and BPT_OFF with the same text switches
       them off again and forgets the pattern (a function registered after
       it gets nothing);
     - bpt_func_lookup with the text split at the first ':' and '/' finds a
       function iff one has exactly that module, name and arity. */
#define BPTRACE_IMPLEMENTATION
#include "../../bptrace.h"
#include "fuzz_common.h"

#define BP ((bpt_vm_word)0xB9B9B9u)
static const char *const names[][2] = {
    { "vm", "f" }, { "vm", "fib" }, { "vm", "fib_" }, { "vm", "_" }, { "vm", "*" }, { "vm", "" },
    { "m*x", "a_b" }, { "lists", "map" }, { "lists", "foldl" }, { "a:b", "c/d" }, { "_", "x" },
    { "LONG", NULL }, { NULL, "LONG" }, { "vm", "fi" }, { "vm", "ffib" }, { "fib", "vm" },
};
enum { NF = sizeof names / sizeof names[0] };
static const int arities[NF] = { 1, 0, 2, 1, 0, 3, 255, 2, 3, 1, 0, 7, 8, 1, 1, 1 };
static bpt_vm_word code[NF + 1];
static bpt_func *funcs[NF];
static const char *mods[NF], *fnames[NF];
static char longname[FUZZ_NAME_MAX + 1];
static bpt_session S_off, S_all, S_on;
static int reported[NF];

static void each(const bpt_func *f, const char *m, const char *n, int a, const bpt_info *i, void *u) {
    int k;
    (void)m; (void)n; (void)a; (void)u;
    FUZZ_CHECK(i->flags == BPT_COUNT, "trace_info_each: flags 0x%x", i->flags);
    for (k = 0; k < NF; k++)
        if (funcs[k] == f) { reported[k]++; return; }
    FUZZ_CHECK(0, "trace_info_each reported an unknown function %p", (const void *)f);
}

static void setup(void) {
    int k;
    memset(longname, 'L', FUZZ_NAME_MAX);
    for (k = 0; k < NF; k++) {
        mods[k] = names[k][0] ? names[k][0] : longname;
        fnames[k] = names[k][1] ? names[k][1] : longname;
        code[k] = (bpt_vm_word)(0x100 + k);
        FUZZ_CHECK(bpt_register_vm(&code[k], BP, mods[k], fnames[k], arities[k], NULL, &funcs[k]) == 0,
                   "register %d", k);
    }
    FUZZ_CHECK(bpt_session_create(NULL, &S_off) == 0, "session");
    FUZZ_CHECK(bpt_session_create(NULL, &S_all) == 0, "session");
    FUZZ_CHECK(bpt_session_create(NULL, &S_on) == 0, "session");
    FUZZ_CHECK(bpt_trace_pattern(S_all, "_:_/_", BPT_COUNT, NULL) == NF, "all");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    char *text, *colon, *slash;
    fuzz_mfa ref;
    bpt_func *late = NULL, *lk = NULL;
    bpt_info info;
    int k, rc, ok, n = 0;
    if (!ready) { setup(); ready = 1; }
    text = fuzz_strndup(data, size);
    ok = fuzz_parse_pattern(text, &ref);
    for (k = 0; k < NF; k++) n += ok && fuzz_mfa_match(&ref, mods[k], fnames[k], arities[k]);

    rc = bpt_trace_pattern(S_off, text, BPT_OFF, NULL);
    FUZZ_CHECK(rc == (ok ? n : BPT_EPATTERN), "trace_pattern('%s', OFF) returned %d, reference %s %d", text, rc,
               ok ? "matches" : "says malformed", ok ? n : BPT_EPATTERN);
    if (rc == BPT_EPATTERN) FUZZ_CHECK(bpt_last_error()[0] != '\0', "no last error");

    memset(reported, 0, sizeof reported);
    rc = bpt_trace_info_each(S_all, text, BPT_INFO_FLAGS, each, NULL);
    FUZZ_CHECK(rc == (ok ? n : BPT_EPATTERN), "trace_info_each('%s') returned %d, expected %d", text, rc,
               ok ? n : BPT_EPATTERN);
    for (k = 0; k < NF; k++)
        FUZZ_CHECK(reported[k] == (ok && fuzz_mfa_match(&ref, mods[k], fnames[k], arities[k])),
                   "trace_info_each('%s'): %s:%s/%d reported %d times", text, mods[k], fnames[k], arities[k],
                   reported[k]);

    if (ok) {
        rc = bpt_trace_pattern(S_on, text, BPT_COUNT, NULL);
        FUZZ_CHECK(rc == n, "trace_pattern('%s', COUNT) returned %d, expected %d", text, rc, n);
        for (k = 0; k < NF; k++) {
            int want = fuzz_mfa_match(&ref, mods[k], fnames[k], arities[k]);
            FUZZ_CHECK(bpt_trace_info(S_on, funcs[k], BPT_INFO_FLAGS, &info) == 0, "trace_info");
            FUZZ_CHECK(info.flags == (want ? (unsigned)BPT_COUNT : 0u), "'%s': %s:%s/%d has flags 0x%x, matched %d",
                       text, mods[k], fnames[k], arities[k], info.flags, want);
            FUZZ_CHECK(bpt_vm_word_at(funcs[k]) == BP, "'%s': word of %s:%s/%d (S_all traces it)", text, mods[k],
                       fnames[k], arities[k]);
        }
        rc = bpt_trace_pattern(S_on, text, BPT_OFF, NULL);
        FUZZ_CHECK(rc == n, "trace_pattern('%s', OFF) returned %d, expected %d", text, rc, n);
        for (k = 0; k < NF; k++) {
            FUZZ_CHECK(bpt_trace_info(S_on, funcs[k], BPT_INFO_FLAGS, &info) == 0 && info.flags == 0,
                       "'%s' OFF left flags 0x%x on %s:%s", text, info.flags, mods[k], fnames[k]);
            FUZZ_CHECK(bpt_vm_word_at(funcs[k]) == BP, "'%s' OFF: S_all's breakpoint word is gone", text);
        }
        /* forgotten: a late registration that the pattern matches gets nothing from S_on */
        code[NF] = 0x999;
        FUZZ_CHECK(bpt_register_vm(&code[NF], BP, "vm", "fib", 1, NULL, &late) == 0, "late");
        FUZZ_CHECK(bpt_trace_info(S_on, late, BPT_INFO_FLAGS, &info) == 0 && info.flags == 0,
                   "'%s': BPT_OFF did not forget the pattern (flags 0x%x)", text, info.flags);
        /* S_all traces it: the same text with BPT_OFF empties S_all's remembered patterns */
        FUZZ_CHECK(bpt_trace_pattern(S_all, "_:_/_", BPT_OFF, NULL) == NF + 1, "late off");
        FUZZ_CHECK(bpt_unregister(late) == 0, "late unregister: %s", bpt_last_error());
        FUZZ_CHECK(bpt_trace_pattern(S_all, "_:_/_", BPT_COUNT, NULL) == NF, "all again");
    }

    /* bpt_func_lookup(module, name, arity): exact */
    colon = strchr(text, ':');
    if (colon) {
        int arity, want = -1;
        *colon = '\0';
        slash = strchr(colon + 1, '/');
        if (slash) *slash = '\0';
        arity = slash ? atoi(slash + 1) : 0;
        for (k = 0; k < NF; k++)
            if (strcmp(mods[k], text) == 0 && strcmp(fnames[k], colon + 1) == 0 && arities[k] == arity) want = k;
        rc = bpt_func_lookup(text, colon + 1, arity, &lk);
        FUZZ_CHECK(want >= 0 ? rc == 0 && lk == funcs[want] : rc == BPT_ENOENT,
                   "func_lookup('%s', '%s', %d) returned %d, expected function %d", text, colon + 1, arity, rc, want);
    }
    free(text);
    return 0;
}
