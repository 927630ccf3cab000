/* fuzz_argspec: the match spec's argument spec, ret spec, message and
   actions, through bpt_trace_pattern, and the messages a call then sends
   (bpt_format_dbg with small buffers).

   Input: byte 0: flags (bit 0..3: BPT_RETURN, BPT_EXCEPTION, BPT_RETURN_TO,
   BPT_CALLER; bits 4..6: args, message, ret are NULL); byte 1: the match
   spec's actions; byte 2: a buffer size for bpt_format_dbg; then the args,
   message and ret texts separated by NUL bytes. The message is cut to 2
   bytes (every distinct message is interned for the life of the process).

   Checks: bpt_trace_pattern returns BPT_EFLAGS / BPT_EPATTERN exactly when
   the reference (fuzz_common.h, from the docs) says the actions, arg spec or
   ret spec are wrong, else 1. Then one call of vm:f/3 (a VM frame whose
   arguments all point at strings, so any type may read them) sends: nothing
   with BPT_MS_SILENT, else one call message with the spec's types and count
   (or the arity's i64s), string arguments copied as prefixes of the
   originals, the interned message; a token iff a return action is on, and
   after bpt_vm_return: return_from (RETURN, EXCEPTION) with the ret type,
   return_to (RETURN_TO). Every message formats the same into any buffer
   size: snprintf's contract, NUL-terminated prefix. The pattern is switched
   off again: nothing stays set or remembered. */
#define BPTRACE_IMPLEMENTATION
#include "../../bptrace.h"
#include "fuzz_common.h"

#define BP ((bpt_vm_word)0xB9B9B9u)
static const char *const strings[8] = {
    "", "a", "%s%n\"", "0123456789012345678901234567890123456789012345678901234567890123456789",
    "two words", "\xff\xfe", "\t\n", "last"
};
static uint64_t frame[8];
static uint64_t vm_arg(const void *fr, int i) {
    FUZZ_CHECK(i >= 0 && i < 8, "ops->arg asked for argument %d", i);
    return ((const uint64_t *)fr)[i];
}
static int fmt_hex(char *buf, size_t n, uint64_t v) { return snprintf(buf, n, "<%llx>", (unsigned long long)v); }
static bpt_vm_ops ops = { .arg = vm_arg, .format = fmt_hex };
static bpt_vm_word code[1] = { 0x100 };
/* Action bits the library accepts that this target does not model (added
   after it was written): probed at start and left out of the inputs. */
static unsigned unmodelled_actions;
static bpt_func *f;
static bpt_session S;

static void check_format(const bpt_msg *m, size_t small) {
    static char big[4096], buf[4096];
    size_t sizes[6], i;
    int full = bpt_format_dbg(m, big, sizeof big);
    FUZZ_CHECK(full > 0 && (size_t)full < sizeof big && strlen(big) == (size_t)full,
               "bpt_format_dbg into 4096 bytes returned %d, strlen %zu", full, strlen(big));
    sizes[0] = 0; sizes[1] = 1; sizes[2] = 2; sizes[3] = small; sizes[4] = (size_t)full; sizes[5] = (size_t)full + 1;
    for (i = 0; i < 6; i++) {
        size_t n = sizes[i] < sizeof buf ? sizes[i] : sizeof buf;
        int r;
        memset(buf, 'Z', sizeof buf);
        r = bpt_format_dbg(m, n ? buf : NULL, n);
        FUZZ_CHECK(r == full, "bpt_format_dbg into %zu bytes returned %d, not %d", n, r, full);
        if (n) {
            size_t len = strlen(buf);
            FUZZ_CHECK(len == (n - 1 < (size_t)full ? n - 1 : (size_t)full) && memcmp(buf, big, len) == 0,
                       "bpt_format_dbg into %zu bytes: '%s' is not the prefix of '%s'", n, buf, big);
        }
        FUZZ_CHECK(buf[n] == 'Z' || n == sizeof buf, "bpt_format_dbg wrote past %zu bytes", n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    bpt_match ms;
    bpt_msg m[16];
    bpt_info info;
    bpt_vm_token token = 0;
    uint8_t types[8];
    char *fields[3] = { NULL, NULL, NULL }, message[3];
    unsigned flags = BPT_CALL, actions, want_return, want_return_to;
    const unsigned known_actions = BPT_MS_SILENT | BPT_RETURN | BPT_EXCEPTION | BPT_RETURN_TO | BPT_CALLER;
    size_t small, pos;
    int rc, expect, nspec, ret_ok, nret = -1, i, k, n, calls = 0, returns = 0, returns_to = 0;
    if (!ready) {
        for (i = 0; i < 8; i++) frame[i] = (uint64_t)(uintptr_t)strings[i];
        if (bpt_register_vm(&code[0], BP, "vm", "f", 3, &ops, &f) != 0 || bpt_session_create(NULL, &S) != 0) abort();
        for (i = 0; i < 8; i++) {
            memset(&ms, 0, sizeof ms);
            ms.actions = 1u << i;
            if (!(ms.actions & known_actions) && bpt_trace_pattern(S, "vm:f/3", BPT_CALL, &ms) == 1) {
                unmodelled_actions |= ms.actions;
                FUZZ_CHECK(bpt_trace_pattern(S, "vm:f/3", BPT_OFF, NULL) == 1, "probe off");
            }
        }
        ready = 1;
    }
    if (size < 3) return 0;
    if (data[0] & 1) flags |= BPT_RETURN;
    if (data[0] & 2) flags |= BPT_EXCEPTION;
    if (data[0] & 4) flags |= BPT_RETURN_TO;
    if (data[0] & 8) flags |= BPT_CALLER;
    actions = data[1] & ~unmodelled_actions;
    small = data[2];
    /* the fields: NUL-separated within the input (fuzz_strndup stops at the first) */
    for (pos = 3, k = 0; k < 3 && pos <= size; k++) {
        size_t len = 0;
        while (pos + len < size && data[pos + len]) len++;
        fields[k] = fuzz_strndup(data + pos, len);
        pos += len + 1;
    }
    memset(&ms, 0, sizeof ms);
    ms.actions = actions;
    ms.args = data[0] & 16 ? NULL : fields[0];
    if (!(data[0] & 32) && fields[1]) {
        snprintf(message, sizeof message, "%s", fields[1]);
        ms.message = message;
    }
    ms.ret = data[0] & 64 ? NULL : fields[2];

    /* the reference */
    nspec = ms.args ? fuzz_parse_argspec(ms.args, types) : 0;
    if (ms.ret) {
        uint8_t rt[8];
        nret = fuzz_parse_argspec(ms.ret, rt);
        ret_ok = nret == 1;
        nret = ret_ok ? rt[0] : -1;
    } else {
        ret_ok = 1;
        nret = BPT_ARG_I64;
    }
    rc = bpt_trace_pattern(S, "vm:f/3", flags, &ms);
    if (actions & ~known_actions) {
        FUZZ_CHECK(rc == BPT_EFLAGS || ((nspec < 0 || !ret_ok) && rc == BPT_EPATTERN),
                   "actions 0x%x (unknown bits) gave %d", actions, rc);
        expect = rc;
    } else if (nspec < 0 || !ret_ok) {
        FUZZ_CHECK(rc == BPT_EPATTERN, "args '%s' ret '%s' gave %d, the reference says malformed",
                   ms.args ? ms.args : "(null)", ms.ret ? ms.ret : "(null)", rc);
        expect = rc;
    } else {
        FUZZ_CHECK(rc == 1, "args '%s' ret '%s' actions 0x%x flags 0x%x gave %d, expected 1",
                   ms.args ? ms.args : "(null)", ms.ret ? ms.ret : "(null)", actions, flags, rc);
        expect = 1;
    }
    if (expect < 0) {
        FUZZ_CHECK(bpt_last_error()[0] != '\0', "no last error for %d", rc);
        FUZZ_CHECK(bpt_trace_info(S, f, BPT_INFO_FLAGS, &info) == 0 && info.flags == 0,
                   "a rejected pattern set flags 0x%x", info.flags);
        FUZZ_CHECK(bpt_vm_word_at(f) == code[0] && code[0] == 0x100, "a rejected pattern installed a breakpoint");
        goto out;
    }

    /* one call, its return */
    {
        bpt_vm_word w = BPT_VM_FETCH(&code[0]);
        FUZZ_CHECK(w == BP, "vm:f/3 is traced but its word is 0x%lx", (unsigned long)w);
        w = bpt_vm_breakpoint(f, frame, &token);
        FUZZ_CHECK(w == 0x100, "bpt_vm_breakpoint returned 0x%lx", (unsigned long)w);
        if (token) bpt_vm_return(token, (uint64_t)(uintptr_t)strings[3]);
    }
    want_return = !(actions & BPT_MS_SILENT) && ((flags | actions) & (BPT_RETURN | BPT_EXCEPTION));
    want_return_to = !(actions & BPT_MS_SILENT) && ((flags | actions) & BPT_RETURN_TO);
    FUZZ_CHECK((token != 0) == (want_return || want_return_to), "token %llx with flags 0x%x actions 0x%x",
               (unsigned long long)token, flags, actions);
    n = bpt_session_drain(S, m, 16);
    FUZZ_CHECK(n >= 0 && n <= 3, "drained %d messages", n);
    for (i = 0; i < n; i++) {
        const bpt_msg *x = &m[i];
        if (x->type == BPT_MSG_RETURN_TO)   /* names the caller: unknown here (ops->caller is NULL) */
            FUZZ_CHECK(x->module == NULL, "return_to names %s with no ops->caller", x->module);
        else
            FUZZ_CHECK(x->module && strcmp(x->module, "vm") == 0 && x->name && strcmp(x->name, "f") == 0 &&
                       x->arity == 3, "message %d (type %d) names %s:%s/%d", i, x->type,
                       x->module ? x->module : "NULL", x->name ? x->name : "NULL", x->arity);
        if (x->type == BPT_MSG_CALL) {
            int want_n = nspec > 0 ? nspec : 3;
            calls++;
            FUZZ_CHECK(x->nargs == want_n, "call message with %d arguments, expected %d", x->nargs, want_n);
            for (k = 0; k < x->nargs && k < 8; k++) {
                int t = nspec > 0 ? types[k] : BPT_ARG_I64;
                FUZZ_CHECK(x->argtype[k] == t, "argument %d has type %d, expected %d", k, x->argtype[k], t);
                if (t == BPT_ARG_STR) {
                    const char *copy;
                    FUZZ_CHECK(x->args[k] < sizeof x->str, "string argument %d at offset %llu", k,
                               (unsigned long long)x->args[k]);
                    copy = x->str + x->args[k];
                    FUZZ_CHECK(memchr(copy, '\0', sizeof x->str - x->args[k]) != NULL,
                               "string argument %d is not NUL-terminated in str[]", k);
                    FUZZ_CHECK(strncmp(copy, strings[k], strlen(copy)) == 0,
                               "string argument %d '%s' is not a prefix of '%s'", k, copy, strings[k]);
                } else {
                    FUZZ_CHECK(x->args[k] == frame[k], "argument %d is %llx, expected %llx", k,
                               (unsigned long long)x->args[k], (unsigned long long)frame[k]);
                }
            }
            FUZZ_CHECK(ms.message ? x->user && strcmp(x->user, ms.message) == 0 : x->user == NULL,
                       "the call message's user text '%s', expected '%s'", x->user ? x->user : "NULL",
                       ms.message ? ms.message : "NULL");
        } else if (x->type == BPT_MSG_RETURN_FROM) {
            returns++;
            FUZZ_CHECK(x->value_type == nret, "return_from with value type %d, expected %d", x->value_type, nret);
        } else if (x->type == BPT_MSG_RETURN_TO) {
            returns_to++;
        } else {
            FUZZ_CHECK(0, "unexpected message type %d", x->type);
        }
        check_format(x, small);
    }
    FUZZ_CHECK(calls == !(actions & BPT_MS_SILENT), "%d call messages with actions 0x%x", calls, actions);
    FUZZ_CHECK(returns == (int)!!want_return && returns_to == (int)!!want_return_to,
               "%d return_from, %d return_to messages; flags 0x%x actions 0x%x", returns, returns_to, flags, actions);
    FUZZ_CHECK(bpt_trace_pattern(S, "vm:f/3", BPT_OFF, NULL) == 1, "off");
    FUZZ_CHECK(bpt_trace_info(S, f, BPT_INFO_FLAGS, &info) == 0 && info.flags == 0, "off left flags 0x%x",
               info.flags);
    FUZZ_CHECK(BPT_VM_FETCH(&code[0]) == 0x100, "off left the breakpoint word");
out:
    for (k = 0; k < 3; k++) free(fields[k]);
    return 0;
}
