/* t_native_midsled: a thread stopped inside the entry word while it changes.
   gcc compiles BPT_TRACEABLE's entry word as two one-byte NOPs, 90 90, so a
   thread may have executed the first and not yet the second when
   registration makes the word the one instruction 66 90 (site_x86_64.c,
   >>renop), and then when it becomes the breakpoint EB FC (jmp -4, to the
   bounce at fn-2). The thread then executes 90 (a NOP), or FC, which is
   CLD: harmless at a function entry, where the direction flag is clear
   (after an endbr64 the word is EB F8, and F8 is CLC, harmless where the
   flags are dead). This test makes that happen deterministically instead
   of hoping a race hits it: the thread sets the x86 trap flag right before
   the call; a SIGTRAP handler single-steps it until it stands at entry+1
   (the second NOP), then holds it there, blocked in read() inside the
   handler. The main thread registers the function and changes the entry
   word meanwhile, then releases it.

   Which states can a thread stopped at entry+1 meet? It got there by
   executing a single 90 at the entry, so the word was 90 90 when it
   fetched the entry: the function was not registered yet. A thread that
   fetches 66 90 or EB FC runs the whole word and never stands at entry+1
   (checked below: the step over a registered entry lands at entry+2, the
   step over the breakpoint at fn-2, the bounce to the call into the stub),
   and the stub's call returns to a jump to entry+2. So the reachable
   transitions are the ones that happen while it is held:
     90 90 -> 66 90 -> EB FC            it executes FC (CLD) and goes on at entry+2;
     90 90 -> 66 90 -> EB FC -> 66 90   it executes 90 (NOP), as if nothing happened;
     ... -> EB FC -> 66 90 -> EB FC     FC again.
   In each case the held call must return the right value and is not counted
   (it entered before the breakpoint), and the next call hits the breakpoint.
   Each scenario needs the compiled 90 90 again: the test unregisters the
   function and writes 90 90 back, as a freshly loaded copy would hold.
   A held thread is not pinned, so the protocol's waits do not wait for it;
   it has a thread record, so with BPT_NO_MEMBARRIER the SYNC_CORE fallback
   signals it inside its SIGTRAP handler, and it must still answer.

   Only gcc's build has 90 90 (detected at run time from the entry bytes).
   clang's entry word is the single instruction 66 90, so no thread can stop
   inside it: checked by stepping over it (the next stop is entry+2), as it
   is for gcc's once registered.
   aarch64's entry is one 4-byte NOP, D503201F: nothing to stand inside,
   checked as such. tcc has no native support: BPT_ENOTSUP, then a skip.

   The same stepping checks that the entry stub returns to the address its
   call pushed, where the CPU's return stack predicts it (issue 16: a stub
   that returned past it, to entry+2, cost 6.5 ns a hit in mispredictions;
   this check failed on that layout). On aarch64 the padding's word after
   the blr must branch on past the site for the same reason. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(BPT_NATIVE)
BPT_TRACEABLE long mid(long x) { return x * 7 + 3; }
static long (*volatile mid_p)(long) = mid;

static bpt_session sess;
static bpt_func *fmid;

/* The session's call_count of mid, or -1 when it has no count. */
static long count_of_mid(void) {
    bpt_info info;
    if (bpt_trace_info(sess, fmid, BPT_INFO_COUNT | BPT_INFO_FLAGS, &info) < 0) return -2;
    return info.flags & BPT_COUNT ? (long)info.count : -1;
}

#if defined(__x86_64__)
#include <ucontext.h>

enum { MODE_HOLD = 1, MODE_OBSERVE = 2, MODE_PATH = 3, MAX_STEPS = 64, MAX_PATH_STEPS = 20000 };
extern __attribute__((visibility("hidden"))) char bpt__x86_64_stub[];
#define IN_STUB(a) ((a) >= (uintptr_t)bpt__x86_64_stub && (a) < (uintptr_t)bpt__x86_64_stub + 512)
#define TF 0x100L

static uintptr_t site;            /* the entry word (fn, or fn+4 after endbr64) */
static unsigned char bp_disp;     /* the breakpoint's second byte: FC (plain), F8 (after endbr64) */
static int held_pipe[2], release_pipe[2];
/* Handler state: written by the stepped thread (before it sets TF, and in
   its own SIGTRAP handler), read by main after the handler wrote to the pipe. */
static volatile int mode, steps;
static volatile uintptr_t prev_rip, after_site_rip, held_rip;
static volatile uintptr_t stub_pushed, stub_ret_to;   /* MODE_PATH: its call's return address; where its ret went */

static void say(char c) {
    while (write(held_pipe[1], &c, 1) < 0 && errno == EINTR) {}
}

/* SIGTRAP after each single-stepped instruction of the stepped thread. */
static void on_trap(int sig, siginfo_t *si, void *ucv) {
    ucontext_t *uc = (ucontext_t *)ucv;
    uintptr_t rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    int saved_errno = errno;
    char c;
    (void)sig; (void)si;
    if (prev_rip == site) after_site_rip = rip;
    if (mode == MODE_PATH) {
        /* The stub's first instruction: its return address is on top of the stack. */
        if (rip == (uintptr_t)bpt__x86_64_stub) stub_pushed = *(const uintptr_t *)(uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
        /* A ret (C3) in the stub that leaves it: the stub's own return. */
        if (IN_STUB(prev_rip) && !IN_STUB(rip) && code_byte((const void *)prev_rip, 0) == 0xC3) {
            stub_ret_to = rip;
            uc->uc_mcontext.gregs[REG_EFL] &= ~TF;
            say('P');
        } else if (++steps > MAX_PATH_STEPS) {
            uc->uc_mcontext.gregs[REG_EFL] &= ~TF;
            say('X');
        }
        prev_rip = rip;
        errno = saved_errno;
        return;
    }
    if (++steps > MAX_STEPS) {
        uc->uc_mcontext.gregs[REG_EFL] &= ~TF;
        say('X');                                 /* never got where it should */
    } else if (mode == MODE_HOLD && rip == site + 1) {
        uc->uc_mcontext.gregs[REG_EFL] &= ~TF;    /* no more steps after the release */
        held_rip = rip;
        say('H');
        while (read(release_pipe[0], &c, 1) < 0 && errno == EINTR) {}
    } else if (prev_rip == site) {
        uc->uc_mcontext.gregs[REG_EFL] &= ~TF;
        say(mode == MODE_OBSERVE ? 'J' : 'M');    /* stepped past the entry word (M: without stopping inside) */
    }
    prev_rip = rip;
    errno = saved_errno;
}

typedef struct job { int mode; long arg, result; } job;

/* The stepped thread: set TF, call mid through the volatile pointer. The
   lea keeps pushfq off the red zone. */
static void *stepped_call(void *arg) {
    job *j = (job *)arg;
    bpt_thread_progress_pin();    /* a thread record: the NO_MEMBARRIER fallback signals it */
    bpt_thread_progress_unpin();
    steps = 0;
    prev_rip = after_site_rip = held_rip = stub_pushed = stub_ret_to = 0;
    mode = j->mode;
    __asm__ volatile("lea -128(%%rsp), %%rsp\n\tpushfq\n\torq $0x100, (%%rsp)\n\tpopfq\n\tlea 128(%%rsp), %%rsp"
                     ::: "memory", "cc");
    j->result = mid_p(j->arg);
    return NULL;
}

static char wait_word(void) {
    char c = 0;
    while (read(held_pipe[0], &c, 1) < 0 && errno == EINTR) {}
    return c;
}
static void release(void) {
    char c = 'R';
    while (write(release_pipe[1], &c, 1) < 0 && errno == EINTR) {}
}

static void check_word(unsigned char b0, unsigned char b1, const char *when) {
    unsigned char x0 = code_byte((void *)site, 0), x1 = code_byte((void *)site, 1);
    printf("  entry word %s: %02x %02x\n", when, x0, x1);
    CHECK(x0 == b0 && x1 == b1, "entry word %s is %02x %02x, expected %02x %02x", when, x0, x1, b0, b1);
}

/* Start a stepped call and wait for its first report. */
static char start(pthread_t *t, job *j, int m, long arg) {
    j->mode = m;
    j->arg = arg;
    j->result = 0;
    CHECK_RC(pthread_create(t, NULL, stepped_call, j), 0);
    return wait_word();
}

static void finish(pthread_t t, job *j, const char *what) {
    pthread_join(t, NULL);
    CHECK(j->result == j->arg * 7 + 3, "%s: mid(%ld) returned %ld, expected %ld", what, j->arg, j->result,
          j->arg * 7 + 3);
    printf("  %s: mid(%ld) = %ld after %d single steps\n", what, j->arg, j->result, steps);
}

/* Unregister mid and write its compiled entry word, 90 90, back: the
   state of a freshly loaded copy, which a thread can stand inside. */
static void unregister_as_compiled(void) {
    uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), page = site & ~(ps - 1);   /* the word stays in one line */
    CHECK_RC(bpt_unregister(fmid), 0);
    fmid = NULL;
    CHECK_RC(mprotect((void *)page, ps, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
    ((volatile unsigned char *)site)[0] = 0x90;
    ((volatile unsigned char *)site)[1] = 0x90;
    CHECK_RC(mprotect((void *)page, ps, PROT_READ | PROT_EXEC), 0);
}

/* One held scenario (gcc): hold at site+1 of the unregistered function,
   register it (the word becomes 66 90), apply the changes (flags,
   0-terminated) with the expected word after each, release, check the
   call. */
static void held_scenario(const char *what, const unsigned *changes, long arg) {
    pthread_t t;
    job j;
    char c;
    int i;
    printf("%s\n", what);
    c = start(&t, &j, MODE_HOLD, arg);
    CHECK(c == 'H', "%s: the thread reports '%c', expected to be held at entry+1", what, c);
    if (c == 'H') {
        CHECK(held_rip == site + 1, "held at %p, entry+1 is %p", (void *)held_rip, (void *)(site + 1));
        check_word(0x90, 0x90, "while held");
        CHECK_RC(bpt_register_native((void *)mid, "mid", "mid", 1, &fmid), 0);
        check_word(0x66, 0x90, "after registration (thread held)");
        for (i = 0; changes[i]; i++) {
            int on = !(changes[i] & BPT_OFF);
            CHECK_RC(bpt_trace_pattern(sess, "mid:mid/1", changes[i], NULL), 1);
            check_word(on ? 0xEB : 0x66, on ? bp_disp : 0x90, on ? "after install (thread held)" : "after removal (thread held)");
        }
        printf("  releasing: it executes %02x at entry+1\n", code_byte((void *)site, 1));
        release();
    }
    finish(t, &j, what);
}

/* A step over the registered, untraced entry: one instruction, 66 90. */
static void step_over_registered(const char *what) {
    pthread_t t;
    job j;
    char c;
    printf("step over the registered, untraced entry (%s)\n", what);
    check_word(0x66, 0x90, "registered, untraced");
    c = start(&t, &j, MODE_OBSERVE, 11);
    CHECK(c == 'J', "observe: the thread reports '%c'", c);
    CHECK(after_site_rip == site + 2, "the step over 66 90 landed at entry%+ld, expected entry+2",
          (long)(after_site_rip - site));
    finish(t, &j, what);
}

static void x86_tests(void) {
    struct sigaction sa;
    pthread_t t;
    job j;
    char c;
    long n;
    bpt_progress_stats ps;
    static const unsigned install[] = { BPT_COUNT, 0 };
    static const unsigned install_remove[] = { BPT_COUNT, BPT_OFF, 0 };
    static const unsigned install_remove_install[] = { BPT_COUNT, BPT_OFF, BPT_COUNT, 0 };
    int gcc_sled;

    site = (uintptr_t)mid;
    if (code_byte(mid, 0) == 0xF3 && code_byte(mid, 1) == 0x0F && code_byte(mid, 2) == 0x1E && code_byte(mid, 3) == 0xFA)
        site += 4;   /* endbr64 first (-fcf-protection) */
    bp_disp = site == (uintptr_t)mid ? 0xFC : 0xF8;   /* jmp fn-2 from site+2 */
    gcc_sled = code_byte((void *)site, 0) == 0x90 && code_byte((void *)site, 1) == 0x90;
    printf("entry word of mid at %p: %02x %02x (%s)\n", (void *)site, code_byte((void *)site, 0),
           code_byte((void *)site, 1), gcc_sled ? "gcc: two one-byte NOPs" : "one two-byte instruction");

    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK_RC(sigaction(SIGTRAP, &sa, NULL), 0);
    CHECK_RC(pipe(held_pipe), 0);
    CHECK_RC(pipe(release_pipe), 0);
    CHECK_RC(bpt_session_create(NULL, &sess), 0);

    if (!gcc_sled) {
        /* clang: 66 90 is one instruction; a step over it lands at entry+2. */
        printf("not applicable: this compiler's entry word is the single instruction 66 90, so no thread can "
               "stand inside it; checking that instead\n");
        CHECK_RC(bpt_register_native((void *)mid, "mid", "mid", 1, &fmid), 0);
        step_over_registered("clang's 66 90");
    } else {
        /* 1. Unregistered: the step after the entry lands at entry+1 (between the NOPs). */
        printf("step over the unregistered entry\n");
        c = start(&t, &j, MODE_OBSERVE, 1);
        CHECK(c == 'J', "observe: the thread reports '%c'", c);
        CHECK(after_site_rip == site + 1, "the step over 90 landed at entry%+ld, expected entry+1",
              (long)(after_site_rip - site));
        finish(t, &j, "unregistered");

        /* 2. Held at entry+1 while it is registered and the breakpoint
           installed: it executes FC (CLD). */
        held_scenario("held at entry+1 while mid is registered and the breakpoint is installed", install, 2);
        n = count_of_mid();
        CHECK(n == 0, "the held call entered before the breakpoint: count %ld, expected 0", n);
        CHECK(mid_p(3) == 24, "a plain call after the release");
        n = count_of_mid();
        CHECK(n == 1, "the next call hits the breakpoint: count %ld, expected 1", n);
        printf("  count after the held call: 0; after one more call: %ld\n", n);
    }

    /* 3. With the breakpoint installed, a thread fetches the whole jump: the
       step after the entry lands at fn-2, the bounce to the call into the
       stub. So no thread can stand at entry+1 of the breakpoint. */
    if (!gcc_sled) CHECK_RC(bpt_trace_pattern(sess, "mid:mid/1", BPT_COUNT, NULL), 1);
    printf("step over the installed breakpoint\n");
    check_word(0xEB, bp_disp, "installed");
    n = count_of_mid();
    c = start(&t, &j, MODE_OBSERVE, 4);
    CHECK(c == 'J', "observe: the thread reports '%c'", c);
    CHECK(after_site_rip == (uintptr_t)mid - 2, "the step over the breakpoint landed at entry%+ld, expected fn-2",
          (long)(after_site_rip - site));
    finish(t, &j, "installed");
    CHECK(count_of_mid() == n + 1, "the stepped call through the breakpoint is counted: %ld -> %ld", n,
          count_of_mid());

    /* 3b. The stub returns where its call came from (fn-4), whose jump
       goes on at entry+2: the return stack predicts every hit. */
    printf("step through a hit until the stub returns\n");
    n = count_of_mid();
    c = start(&t, &j, MODE_PATH, 8);
    CHECK(c == 'P', "path: the thread reports '%c', expected the stub's return within %d steps", c, MAX_PATH_STEPS);
    finish(t, &j, "path");
    printf("  the stub's call pushed fn%+ld; its ret went to fn%+ld\n", (long)(stub_pushed - (uintptr_t)mid),
           (long)(stub_ret_to - (uintptr_t)mid));
    CHECK(stub_pushed == (uintptr_t)mid - 4, "the stub's call pushed fn%+ld, expected fn-4",
          (long)(stub_pushed - (uintptr_t)mid));
    CHECK(stub_ret_to == stub_pushed, "the stub returned to fn%+ld, not to the address its call pushed (fn%+ld): "
          "every hit would mispredict its return", (long)(stub_ret_to - (uintptr_t)mid),
          (long)(stub_pushed - (uintptr_t)mid));
    CHECK(count_of_mid() == n + 1, "the stepped call is counted: %ld -> %ld", n, count_of_mid());

    /* Remove it: back to the registered word, 66 90 for either compiler,
       which a step runs as one instruction. */
    CHECK_RC(bpt_trace_pattern(sess, "mid:mid/1", BPT_OFF, NULL), 1);
    check_word(0x66, 0x90, "removed");
    if (gcc_sled) step_over_registered("gcc's 90 90, registered");

    if (gcc_sled) {
        /* 4. Held while registered, installed and removed again: it executes 90 (NOP). */
        unregister_as_compiled();
        held_scenario("held at entry+1 while mid is registered, the breakpoint installed and removed",
                      install_remove, 5);
        CHECK(count_of_mid() == -1, "no count after the removal");

        /* 5. Installed, removed, installed again: FC once more. */
        unregister_as_compiled();
        held_scenario("held at entry+1 while mid is registered, the breakpoint installed, removed and installed",
                      install_remove_install, 6);
        n = count_of_mid();
        CHECK(n == 0, "the held call is not counted: %ld", n);
        CHECK(mid_p(7) == 52, "a plain call after the release");
        CHECK(count_of_mid() == 1, "the next call is counted: %ld", count_of_mid());
        CHECK_RC(bpt_trace_pattern(sess, "mid:mid/1", BPT_OFF, NULL), 1);
        check_word(0x66, 0x90, "at the end");
    }
    CHECK_RC(bpt_thread_progress_stats(&ps), 0);
    printf("thread progress: membarrier %d, sync_core %d (0: the held thread got the fallback signal "
           "inside its SIGTRAP handler), %llu waits\n", ps.membarrier, ps.sync_core, (unsigned long long)ps.waits);
    CHECK_RC(bpt_session_destroy(sess), 0);
    CHECK_RC(bpt_unregister(fmid), 0);
}
#endif /* __x86_64__ */

#if defined(__aarch64__)
static uint32_t code_word(const void *p) {
    return (uint32_t)code_byte(p, 0) | (uint32_t)code_byte(p, 1) << 8 | (uint32_t)code_byte(p, 2) << 16 |
           (uint32_t)code_byte(p, 3) << 24;
}

static void aarch64_tests(void) {
    const unsigned char *site = (const unsigned char *)mid;
    uint32_t w = code_word(site), first = w, bp;
    if (w == 0xD503245Fu || w == 0xD503233Fu) { site += 4; w = code_word(site); }   /* bti c / paciasp */
    printf("not applicable: aarch64's entry word is one 4-byte instruction (%08x at %p, first word %08x), "
           "written with one single-copy-atomic store, so no thread can stand inside it\n",
           (unsigned)w, (const void *)site, (unsigned)first);
    CHECK(w == 0xD503201Fu, "the entry word is %08x, expected the NOP D503201F", (unsigned)w);
    CHECK_RC(bpt_register_native((void *)mid, "mid", "mid", 1, &fmid), 0);
    CHECK_RC(bpt_session_create(NULL, &sess), 0);
    CHECK_RC(bpt_trace_pattern(sess, "mid:mid/1", BPT_COUNT, NULL), 1);
    bp = code_word(site);
    /* B to fn-16: imm26 = (fn - 16 - site) / 4. */
    printf("installed: %08x\n", (unsigned)bp);
    CHECK(bp == (0x14000000u | ((uint32_t)(((intptr_t)mid - 16 - (intptr_t)site) >> 2) & 0x03FFFFFFu)),
          "the breakpoint word %08x is not B fn-16", (unsigned)bp);
    /* The stub returns to fn-4 (its blr's link), which branches on to the
       word after the site: B imm26 = (site + 4 - (fn - 4)) / 4. */
    {
        const void *ret_jump = (const void *)((uintptr_t)mid - 4);   /* an address: not an offset into mid */
        CHECK(code_word(ret_jump) ==
                  (0x14000000u | ((uint32_t)(((intptr_t)site + 4 - ((intptr_t)mid - 4)) >> 2) & 0x03FFFFFFu)),
              "fn-4 holds %08x, expected B to the word after the site", (unsigned)code_word(ret_jump));
    }
    CHECK(mid_p(3) == 24 && count_of_mid() == 1, "a call through the breakpoint");
    CHECK_RC(bpt_trace_pattern(sess, "mid:mid/1", BPT_OFF, NULL), 1);
    CHECK(code_word(site) == 0xD503201Fu, "removed: %08x", (unsigned)code_word(site));
    CHECK(mid_p(4) == 31, "a call after the removal");
    CHECK_RC(bpt_session_destroy(sess), 0);
    CHECK_RC(bpt_unregister(fmid), 0);
}
#endif

int main(void) {
    alarm(120);   /* a stuck hold fails the test instead of hanging it */
#if defined(__x86_64__)
    x86_tests();
#else
    aarch64_tests();
#endif
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no entry word to stand inside")
#endif
