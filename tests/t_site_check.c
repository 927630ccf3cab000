/* t_site_check: BPT_TEST_WHOLE_PROGRAM
   The site writer checks a site's word before it stores, as Linux's
   ftrace_modify_code does: a site that something else changed behind
   bptrace's back (a debugger's breakpoint, another patcher) is left alone,
   the change says BPT_ENOTPATCHABLE naming it, and the other sites of the
   same change are written. Checked in both directions, on VM words (every
   compiler) and on native entries (where the compiler has them):
   - install over a changed word: refused, the foreign word kept, the other
     function traced; a change whose every site holds a foreign word writes
     nothing, and so does not wait for written words (its step 6 does not
     run: a writer that counted the sites it was given rather than those it
     wrote passed every other test, found by review);
   - with the word back, the same pattern installs;
   - uninstall over a changed word: refused, the foreign word kept (the
     function stays installed, so bpt_unregister says BPT_EBUSY), and once
     the breakpoint word is back the switch-off completes and the original
     word returns; bpt_unregister_module refuses such a function too
     (BPT_EBUSY; it forgot it, its entry left running the stub for good
     and refusing a new registration: found by review);
   - a refused uninstall leaves the word with no breakpoint of its session
     behind it; once another session traces the function, that session's
     switch-off again must keep the word for the other one (step 9 may skip
     the list walk only where no other session's breakpoint is on it: a
     mutant that skipped it wherever its own breakpoint was gone passed
     every other test, found by review);
   - the pattern memory after such a change, which committed the settings
     everywhere else: a function registered after an ON that said
     BPT_ENOTPATCHABLE is traced, and one registered after such an OFF is
     not (the OFF was left unremembered, so the ON it cancelled still traced
     new functions; found by review). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BP ((bpt_vm_word)0xB0B0)
#define FOREIGN ((bpt_vm_word)0xDEB6)   /* what "a debugger" writes */
static bpt_vm_word code[2] = { 0x100, 0x101 };

static int step_did[14];   /* the protocol observer's did, by step */
static void observer(int step, int did, uint64_t ns, void *user) {
    (void)ns; (void)user;
    if (step > 0 && step < 14) step_did[step] = did;
}

static void vm_sites(void) {
    bpt_func *f, *g;
    bpt_session s;
    CHECK_RC(bpt_register_vm(&code[0], BP, "vm", "f", 0, NULL, &f), 0);
    CHECK_RC(bpt_register_vm(&code[1], BP, "vm", "g", 0, NULL, &g), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);

    code[0] = FOREIGN;   /* behind bptrace's back */
    CHECK_RC(bpt_set_protocol_observer(observer, NULL), 0);
    CHECK_RC(bpt_trace_pattern(s, "vm:f/0", BPT_COUNT, NULL), BPT_ENOTPATCHABLE);
    CHECK_RC(bpt_set_protocol_observer(NULL, NULL), 0);
    CHECK(code[0] == FOREIGN && !step_did[5] && !step_did[6],
          "its only site foreign: nothing written (step 5 did %d), no wait for it (step 6 did %d)", step_did[5],
          step_did[6]);
    CHECK_RC(bpt_trace_pattern(s, "vm:_/_", BPT_COUNT, NULL), BPT_ENOTPATCHABLE);
    printf("install over a foreign word: %s\n", bpt_last_error());
    CHECK(strstr(bpt_last_error(), "vm:f/0") != NULL, "the error names the function: %s", bpt_last_error());
    CHECK(code[0] == FOREIGN, "the foreign word is kept: %#lx", (unsigned long)code[0]);
    CHECK(code[1] == BP, "the other site is installed: %#lx", (unsigned long)code[1]);

    code[0] = 0x100;     /* the debugger leaves */
    CHECK_RC(bpt_trace_pattern(s, "vm:_/_", BPT_COUNT, NULL), 2);
    CHECK(code[0] == BP && code[1] == BP, "both installed once the word is back");

    code[0] = FOREIGN;   /* changed while installed */
    CHECK_RC(bpt_trace_pattern(s, "vm:_/_", BPT_COUNT | BPT_OFF, NULL), BPT_ENOTPATCHABLE);
    CHECK(code[0] == FOREIGN, "uninstall keeps the foreign word: %#lx", (unsigned long)code[0]);
    CHECK(code[1] == 0x101, "the other site is restored: %#lx", (unsigned long)code[1]);
    CHECK_RC(bpt_unregister(f), BPT_EBUSY);   /* still counts as installed */

    code[0] = BP;        /* the breakpoint word is back: the switch-off can finish */
    CHECK_RC(bpt_trace_pattern(s, "vm:f/0", BPT_COUNT | BPT_OFF, NULL), 1);
    CHECK(code[0] == 0x100, "the original word is back: %#lx", (unsigned long)code[0]);
    CHECK_RC(bpt_unregister(f), 0);
    CHECK_RC(bpt_unregister(g), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
}

/* Is fn counted by s, its word the breakpoint's? */
static int counted(bpt_session s, bpt_func *fn, const bpt_vm_word *word) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, fn, BPT_INFO_FLAGS, &in), 0);
    CHECK(!!(in.flags & BPT_COUNT) == (*word == BP), "the word says what the flags say (0x%x, %#lx)", in.flags,
          (unsigned long)*word);
    return (in.flags & BPT_COUNT) != 0;
}

/* The word a refused uninstall left, then another session on the function. */
static void left_word_then_other_session(void) {
    static bpt_vm_word lw[1] = { 0x300 };
    bpt_func *f;
    bpt_session s1, s2;
    CHECK_RC(bpt_register_vm(&lw[0], BP, "lw", "f", 0, NULL, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s1), 0);
    CHECK_RC(bpt_session_create(NULL, &s2), 0);
    CHECK_RC(bpt_trace_pattern(s1, "lw:f/0", BPT_COUNT, NULL), 1);
    lw[0] = FOREIGN;
    CHECK_RC(bpt_trace_pattern(s1, "lw:f/0", BPT_COUNT | BPT_OFF, NULL), BPT_ENOTPATCHABLE);
    lw[0] = BP;   /* the word back: installed, and no breakpoint of s1's behind it */
    CHECK_RC(bpt_trace_pattern(s2, "lw:f/0", BPT_COUNT, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s1, "lw:f/0", BPT_COUNT | BPT_OFF, NULL), 1);   /* nothing of s1's left on f */
    CHECK(lw[0] == BP, "s1's switch-off kept the word s2 traces by: %#lx", (unsigned long)lw[0]);
    CHECK(counted(s2, f, &lw[0]), "s2 still counts f");
    CHECK_RC(bpt_trace_pattern(s2, "lw:f/0", BPT_COUNT | BPT_OFF, NULL), 1);
    CHECK(lw[0] == 0x300, "the original word is back: %#lx", (unsigned long)lw[0]);
    CHECK_RC(bpt_unregister(f), 0);
    CHECK_RC(bpt_session_destroy(s1), 0);
    CHECK_RC(bpt_session_destroy(s2), 0);
}

static void pattern_memory(void) {
    static bpt_vm_word pm[4] = { 0x200, 0x201, 0x202, 0x203 };
    bpt_func *f, *g, *late1, *late2;
    bpt_session s;
    CHECK_RC(bpt_register_vm(&pm[0], BP, "pm", "f", 0, NULL, &f), 0);
    CHECK_RC(bpt_register_vm(&pm[1], BP, "pm", "g", 0, NULL, &g), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    pm[0] = FOREIGN;
    CHECK_RC(bpt_trace_pattern(s, "pm:_/_", BPT_COUNT, NULL), BPT_ENOTPATCHABLE);
    CHECK_RC(bpt_register_vm(&pm[2], BP, "pm", "late1", 0, NULL, &late1), 0);
    CHECK(counted(s, late1, &pm[2]), "registered after an ON that said BPT_ENOTPATCHABLE: counted");
    pm[0] = 0x200;   /* the debugger leaves f: the same ON succeeds */
    CHECK_RC(bpt_trace_pattern(s, "pm:_/_", BPT_COUNT, NULL), 3);
    pm[1] = FOREIGN;   /* g's breakpoint word, changed while installed */
    CHECK_RC(bpt_trace_pattern(s, "pm:_/_", BPT_COUNT | BPT_OFF, NULL), BPT_ENOTPATCHABLE);
    CHECK(!counted(s, late1, &pm[2]), "late1 switched off");
    CHECK_RC(bpt_register_vm(&pm[3], BP, "pm", "late2", 0, NULL, &late2), 0);
    CHECK(!counted(s, late2, &pm[3]), "registered after an OFF that said BPT_ENOTPATCHABLE: not counted");
    printf("pattern memory: a function registered after each refused word follows the committed settings\n");
    pm[1] = BP;   /* the switch-off of g can finish */
    CHECK_RC(bpt_trace_pattern(s, "pm:g/0", BPT_COUNT | BPT_OFF, NULL), 1);
    CHECK(pm[0] == 0x200 && pm[1] == 0x201, "the original words are back");
    CHECK_RC(bpt_unregister(f), 0);
    CHECK_RC(bpt_unregister(g), 0);
    CHECK_RC(bpt_unregister(late1), 0);
    CHECK_RC(bpt_unregister(late2), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
}

#if defined(BPT_NATIVE)
BPT_TRACEABLE int native_a(int x) { return x + 1; }
BPT_TRACEABLE int native_b(int x) { return x + 2; }

/* The entry word of a registered native function: where the protocol writes. */
static unsigned char *entry_word(void *fn) {
    unsigned char *p = (unsigned char *)fn;
#  if defined(__x86_64__)
    if (p[0] == 0xF3 && p[1] == 0x0F && p[2] == 0x1E && p[3] == 0xFA) p += 4;   /* endbr64 */
#  else
    if (*(volatile uint32_t *)p == 0xD503245Fu || *(volatile uint32_t *)p == 0xD503233Fu) p += 4;   /* bti c, paciasp */
#  endif
    return p;
}

/* Write n bytes into code, as a debugger does (and sync the icache). */
static void poke(unsigned char *at, const unsigned char *bytes, size_t n) {
    uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), page = (uintptr_t)at & ~(ps - 1);
    CHECK(mprotect((void *)page, ps * 2, PROT_READ | PROT_WRITE | PROT_EXEC) == 0, "mprotect RWX");
    memcpy(at, bytes, n);
    __builtin___clear_cache((char *)at, (char *)at + n);
    CHECK(mprotect((void *)page, ps * 2, PROT_READ | PROT_EXEC) == 0, "mprotect RX");
}

static void native_sites(void) {
    int (*volatile call_a)(int) = native_a, (*volatile call_b)(int) = native_b;
    unsigned char *wa = entry_word((void *)native_a), *wb = entry_word((void *)native_b);
    unsigned char orig_a[4], orig_b[4], now[4], foreign[4];
    size_t n;
    bpt_func *fa = native_reg((void *)native_a, "native", "a", 1), *fb = native_reg((void *)native_b, "native", "b", 1);
    bpt_session s;
    bpt_info info;
#  if defined(__x86_64__)
    n = 2;
    /* gcc's compiled NOP, 90 90: not the word registration leaves, 66 90 (>>renop). */
    foreign[0] = 0x90; foreign[1] = 0x90;
#  else
    n = 4;
    memcpy(foreign, "\x3f\x20\x03\xd5", 4);   /* hint #1 (yield): not the NOP bptrace expects */
#  endif
    if (!fa || !fb) return;
    memcpy(orig_a, wa, n);
    memcpy(orig_b, wb, n);
    CHECK_RC(bpt_session_create(NULL, &s), 0);

    poke(wa, foreign, n);
    CHECK_RC(bpt_trace_pattern(s, "native:_/_", BPT_COUNT, NULL), BPT_ENOTPATCHABLE);
    printf("install over a foreign entry: %s\n", bpt_last_error());
    CHECK(strstr(bpt_last_error(), "native:a/1") != NULL, "the error names the function: %s", bpt_last_error());
    code_bytes(wa, now, (int)n);
    CHECK(memcmp(now, foreign, n) == 0, "the foreign entry word is kept");
    code_bytes(wb, now, (int)n);
    CHECK(memcmp(now, orig_b, n) != 0, "the other entry is installed");
    CHECK(call_a(1) == 2 && call_b(1) == 3, "both still compute");
    CHECK_RC(bpt_trace_info(s, fb, BPT_INFO_COUNT, &info), 0);
    CHECK(info.count == 1, "b's call was counted: %llu", (unsigned long long)info.count);

    poke(wa, orig_a, n);
    CHECK_RC(bpt_trace_pattern(s, "native:_/_", BPT_COUNT, NULL), 2);
    code_bytes(wa, now, (int)n);
    CHECK(memcmp(now, orig_a, n) != 0, "a is installed once its word is back");
    CHECK(call_a(1) == 2, "a computes through its breakpoint");
    CHECK_RC(bpt_trace_pattern(s, "native:_/_", BPT_OFF, NULL), 2);
    code_bytes(wa, now, (int)n);
    CHECK(memcmp(now, orig_a, n) == 0, "a's entry is original again");
    code_bytes(wb, now, (int)n);
    CHECK(memcmp(now, orig_b, n) == 0, "b's entry is original again");

    {   /* Uninstall over a foreign word, then bpt_unregister_module. */
        unsigned char bp[4];
        bpt_func *still;
        CHECK_RC(bpt_trace_pattern(s, "native:a/1", BPT_COUNT, NULL), 1);
        code_bytes(wa, bp, (int)n);
        poke(wa, foreign, n);
        CHECK_RC(bpt_trace_pattern(s, "native:a/1", BPT_COUNT | BPT_OFF, NULL), BPT_ENOTPATCHABLE);
        CHECK_RC(bpt_unregister_module("native"), BPT_EBUSY);
        printf("unregister_module over a foreign word: %s\n", bpt_last_error());
        CHECK(bpt_func_lookup("native", "a", 1, &still) == 0 && still == fa && bpt_func_lookup("native", "b", 1, &still) == 0,
              "nothing unregistered");
        poke(wa, bp, n);   /* the debugger leaves */
        CHECK_RC(bpt_trace_pattern(s, "native:a/1", BPT_COUNT | BPT_OFF, NULL), 1);
        code_bytes(wa, now, (int)n);
        CHECK(memcmp(now, orig_a, n) == 0, "a's entry is original again");
        CHECK_RC(bpt_unregister_module("native"), 2);
    }
    CHECK_RC(bpt_session_destroy(s), 0);
}
#endif

int main(void) {
    vm_sites();
    left_word_then_other_session();
    pattern_memory();
#if defined(BPT_NATIVE)
    native_sites();
#else
    puts("native entries: not on this compiler (BPT_NATIVE undefined); the VM sites were checked");
#endif
    return CHECK_DONE();
}
