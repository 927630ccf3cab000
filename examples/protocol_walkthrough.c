/* protocol_walkthrough.c - the 13 steps of a live breakpoint change, one by one.

   WHAT IT DEMONSTRATES
       How bptrace (like BEAM's erts_set_trace_pattern, see OTP's
       erts/emulator/internal_doc/Tracing.md) changes breakpoints while other
       threads keep executing the very code it patches, with no lock on their
       side. It installs a protocol observer (bpt_set_protocol_observer) and
       prints every step of every change as it happens: its name, whether it
       ran or was skipped, how long it took, and why the step exists.

       The "program" is a minimal fake VM: four functions of one
       instruction word each, and 2 to 4 reader threads (one fewer than the
       CPUs) that execute them over and over. Executing a function means:
       load its word with BPT_VM_FETCH; if it is the breakpoint word, call
       bpt_vm_breakpoint() and continue with the word it returns. A reader checks that it always
       ends up with the function's original word, whatever moment it read.

       The changes, in order:
         1. session A: call trace and call_count on every function
         2. session B: call trace on one of them, which A already breaks on
            (B's breakpoint is linked behind A's, through to_insert)
         3. session A: change the call trace to add a match spec
            (only the staging half changes: no instruction word is written)
         4. session A: pause call_count, then 5. restart it
         6. session A: everything off (the word stays where B still traces)
         7. destroy session B, 8. destroy session A
       Between changes it prints how far each reader got, to show that no
       reader ever waited.

   BUILD (from the repository root)
       gcc   -std=c99 -Wall -Wextra -O2 -pthread examples/protocol_walkthrough.c -o walkthrough
       clang -std=c99 -Wall -Wextra -O2 -pthread examples/protocol_walkthrough.c -o walkthrough
       tcc   -Wall -pthread examples/protocol_walkthrough.c -o walkthrough

   RUN
       ./walkthrough
       Exits 0 when every reader always got the original words back and
       every word is the original again at the end. */

#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Why each step exists, indexed by step number (1..13). The step names
   themselves come from bpt_protocol_step_name(). */
static const char *const step_why[14] = {
    NULL,
    /* 1 */ "one change at a time; readers never take this lock",
    /* 2 */ "new GenericBps start disabled, original word saved: reaching one early is harmless",
    /* 3 */ "new settings go into the staging half, which no thread reads",
    /* 4 */ "every thread must see the new GenericBps before the instruction word sends them there",
    /* 5 */ "one aligned atomic store per word: a reader sees the old word or the new, never a mix",
    /* 6 */ "all threads run the new words before the commit: the switch is as atomic as it can be",
    /* 7 */ "flip the active index: all functions of the change switch settings at once",
    /* 8 */ "no thread may still read the old half before words are restored and it is overwritten",
    /* 9 */ "put the original word back where no session has anything active left",
    /* 10 */ "no thread may still be sent into a breakpoint by a word that step 9 removed",
    /* 11 */ "copy active into staging for the next change; unlink disabled GenericBps",
    /* 12 */ "readers may still walk the lists step 11 changed: free only after this wait",
    /* 13 */ "let the next change in; the caller gets the number of functions matched",
};

/* The fake VM: NFUNCS functions of one instruction word each. */
enum { NFUNCS = 4, ARITY = 2, MAX_READERS = 4, BREAKPOINT_WORD = 0xB0 };
static const char *const func_name[NFUNCS] = { "parse", "work", "reply", "log" };

/* The arguments of one "call", as the fake VM lays them out: the reader's
   round and the function's index. */
struct frame {
    uint64_t args[ARITY];
};

/* bpt_vm_ops.arg: how bptrace reads argument `index` of a call. */
static uint64_t frame_arg(const void *frame, int index)
{
    const struct frame *fr = frame;
    return index < ARITY ? fr->args[index] : 0;
}

static const bpt_vm_ops fake_vm_ops = { .arg = frame_arg };

struct fake_vm {
    bpt_vm_word code[NFUNCS];   /* the instruction words bptrace patches */
    bpt_vm_word orig[NFUNCS];   /* what they hold when no breakpoint is set */
    bpt_func *rec[NFUNCS];
};

/* A reader thread. It publishes its counters under a mutex every 1024
   calls (tcc has no <stdatomic.h>); that is also where it looks at its stop
   flag. Its fetches of code[] take no lock at all. */
struct reader {
    pthread_t thread;
    const struct fake_vm *vm;
    pthread_mutex_t lock;       /* guards the fields below */
    int stop;
    uint64_t calls, breakpoints, wrong;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    const struct fake_vm *vm = r->vm;
    uint64_t calls = 0, breakpoints = 0, wrong = 0, round = 0;
    for (;;) {
        int i, stop;
        for (i = 0; i < NFUNCS; i++) {
            /* The only load of code[] a VM may make: one relaxed atomic
               load, because bptrace stores to it concurrently. */
            bpt_vm_word w = BPT_VM_FETCH(&vm->code[i]);
            if (w == BREAKPOINT_WORD) {
                struct frame fr;
                fr.args[0] = round;
                fr.args[1] = (uint64_t)i;
                /* As BEAM's op_i_generic_breakpoint: run the active
                   generation of every session's breakpoint, get back the
                   word the breakpoint displaced. */
                w = bpt_vm_breakpoint(vm->rec[i], &fr, NULL);
                breakpoints++;
            }
            /* "Execute" w. A real VM would jump to it; here it must simply
               be the original word, whatever the reader's timing was. */
            if (w != vm->orig[i])
                wrong++;
            calls++;
        }
        round++;
        if (round % 256 != 0)
            continue;
        pthread_mutex_lock(&r->lock);
        r->calls = calls;
        r->breakpoints = breakpoints;
        r->wrong = wrong;
        stop = r->stop;
        pthread_mutex_unlock(&r->lock);
        if (stop)
            return NULL;
    }
}

/* ------------------------------------------------------------------------ */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}

/* The observer. bptrace calls it at the end of each step, from the thread
   running the change and under the code modification permission, so it may
   print but must not call set-path functions. */
struct walk {
    int steps_ran, steps_skipped;
    uint64_t waits_ns;          /* time spent in the thread progress waits */
};

static void observe(int step, int did, uint64_t ns, void *user)
{
    struct walk *w = user;
    const char *name = bpt_protocol_step_name(step);
    int is_wait = step == 4 || step == 6 || step == 8 || step == 10 || step == 12;
    if (did) {
        w->steps_ran++;
        if (is_wait)
            w->waits_ns += ns;
    } else {
        w->steps_skipped++;
    }
    printf("  %2d %-26s %-7s %9.1f us  %s\n", step, name ? name : "?", did ? "ran" : "skipped",
           ns / 1e3, step >= 1 && step <= 13 ? step_why[step] : "");
}

static uint64_t reader_calls(struct reader *r)
{
    uint64_t calls;
    pthread_mutex_lock(&r->lock);
    calls = r->calls;
    pthread_mutex_unlock(&r->lock);
    return calls;
}

/* Wait until every reader has moved past last_calls. A reader may be
   descheduled for a while on a busy machine (or crawl under a sanitizer);
   what must never happen is that one stays stuck. Returns 0 if one did. */
static int wait_for_readers(struct reader *rs, int n, const uint64_t *last_calls)
{
    int i, waited_ms;
    for (waited_ms = 0; waited_ms < 10000; waited_ms += 10) {
        for (i = 0; i < n; i++)
            if (reader_calls(&rs[i]) == last_calls[i])
                break;
        if (i == n)
            return 1;
        sleep_ms(10);
    }
    return 0;
}

/* Print how far each reader got since the last report. */
static void report_readers(struct reader *rs, int n, uint64_t *last_calls, uint64_t *last_bps)
{
    int i;
    printf("  readers since the last report:");
    for (i = 0; i < n; i++) {
        uint64_t calls, bps;
        pthread_mutex_lock(&rs[i].lock);
        calls = rs[i].calls;
        bps = rs[i].breakpoints;
        pthread_mutex_unlock(&rs[i].lock);
        printf("%s %" PRIu64 " calls (%" PRIu64 " through the breakpoint)", i ? "," : "",
               calls - last_calls[i], bps - last_bps[i]);
        last_calls[i] = calls;
        last_bps[i] = bps;
    }
    printf("\n");
}

/* Show what a session's trace looks like: how many messages, and one line. */
static void drain_session(const char *label, bpt_session s)
{
    bpt_msg msgs[256];
    char line[256];
    bpt_session_counts st;
    long total = 0;
    int n, shown = 0;
    while ((n = bpt_session_drain(s, msgs, 256)) > 0) {
        int i;
        for (i = 0; i < n && !shown; i++) {
            if (msgs[i].type == BPT_MSG_CALL) {
                bpt_format_dbg(&msgs[i], line, sizeof line);
                printf("  session %s, e.g.: %s\n", label, line);
                shown = 1;
            }
        }
        total += n;
    }
    printf("  session %s: drained %ld messages", label, total);
    if (bpt_session_stats(s, &st) == 0 && st.dropped)
        printf("; %" PRIu64 " dropped so far on full buffers (a reader never waits for the tracer)",
               st.dropped);
    printf("\n");
}

static void print_counts(const bpt_func *f, const char *module, const char *name, int arity,
                         const bpt_info *info, void *user)
{
    (void)f;
    (void)user;
    printf("    %s:%s/%d call_count %" PRIu64 "%s\n", module, name, arity, info->count,
           info->count_paused ? " (paused)" : "");
}

/* Only trace calls whose first argument (the reader's round) is even. */
static int even_round(const uint64_t *args, int nargs, void *user)
{
    (void)user;
    return nargs > 0 && args[0] % 2 == 0;
}

struct change {
    const char *title;
    const char *call_text;      /* the call, as printed */
    const char *expect;         /* what to look for in the steps */
    int session;                /* 0: A, 1: B */
    const char *pattern;        /* NULL: destroy the session instead */
    unsigned flags;
    const bpt_match *match;
    int show_counts;            /* print A's call counts after the change */
};

int main(void)
{
    struct fake_vm vm;
    struct reader rs[MAX_READERS];
    struct walk walk;
    bpt_session sess[2];
    uint64_t last_calls[MAX_READERS] = { 0 }, last_bps[MAX_READERS] = { 0 };
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    /* A reader preempted inside a hit holds every wait up until the
       scheduler runs it again (milliseconds); leave a CPU for this thread
       so that the waits below show what they cost, not the scheduler. */
    int nreaders = ncpu - 1 < 2 ? 2 : ncpu - 1 > MAX_READERS ? MAX_READERS : (int)(ncpu - 1);
    bpt_match even = { .pred = even_round, .message = "even round" };   /* designated: bpt_match may grow */
    int i, c, failed = 0, nregistered = 0, nstarted = 0, alive[2] = { 0, 0 };
    const struct change changes[] = {
        { "session A: call trace and call_count on every function",
          "bpt_trace_pattern(A, \"demo:_/_\", BPT_CALL | BPT_COUNT, NULL)",
          "new GenericBps (2), staged (3), words written (5) between two waits, commit (7); "
          "nothing to restore or free, so 9, 10 and 12 are skipped",
          0, "demo:_/_", BPT_CALL | BPT_COUNT, NULL, 1 },
        { "session B: call trace on demo:work/2 as well",
          "bpt_trace_pattern(B, \"demo:work/2\", BPT_CALL, NULL)",
          "work already has A's GenericBp and the breakpoint word: B's is parked in to_insert (2) "
          "and published with one pointer store at 5; no word is written, so 4 to 6 count as skipped",
          1, "demo:work/2", BPT_CALL, NULL, 0 },
        { "session A: change the call trace, adding a match spec",
          "bpt_trace_pattern(A, \"demo:_/_\", BPT_CALL, &even)",
          "only the staging half changes (3) and is committed (7): no word to write or restore",
          0, "demo:_/_", BPT_CALL, &even, 0 },
        { "session A: pause call_count",
          "bpt_trace_pattern(A, \"demo:_/_\", BPT_COUNT | BPT_PAUSE, NULL)",
          "a settings change like the last one; the counts below stay frozen",
          0, "demo:_/_", BPT_COUNT | BPT_PAUSE, NULL, 1 },
        { "session A: restart call_count",
          "bpt_trace_pattern(A, \"demo:_/_\", BPT_COUNT | BPT_RESTART, NULL)",
          "counters are set to zero and count again",
          0, "demo:_/_", BPT_COUNT | BPT_RESTART, NULL, 1 },
        { "session A: everything off",
          "bpt_trace_pattern(A, \"demo:_/_\", BPT_OFF, NULL)",
          "A's breakpoints are staged disabled, committed, and three words restored (9); "
          "work keeps the breakpoint word for B; A's GenericBps are unlinked (11) and freed (12)",
          0, "demo:_/_", BPT_OFF, NULL, 0 },
        { "destroy session B",
          "bpt_session_destroy(B)",
          "the same steps clear B's last breakpoint: work gets its original word back (9)",
          1, NULL, 0, NULL, 0 },
        { "destroy session A",
          "bpt_session_destroy(A)",
          "A has no breakpoints left: there is nothing to stage, write or restore",
          0, NULL, 0, NULL, 0 },
    };
    const int nchanges = (int)(sizeof changes / sizeof changes[0]);

    /* The fake VM's "opcodes": any words that differ from the breakpoint word. */
    for (i = 0; i < NFUNCS; i++) {
        vm.orig[i] = 0x1000 + (bpt_vm_word)i;
        vm.code[i] = vm.orig[i];
    }
    for (i = 0; i < NFUNCS; i++, nregistered++) {
        if (bpt_register_vm(&vm.code[i], BREAKPOINT_WORD, "demo", func_name[i], ARITY,
                            &fake_vm_ops, &vm.rec[i]) != 0) {
            fprintf(stderr, "bpt_register_vm(%s): %s\n", func_name[i], bpt_last_error());
            failed = 1;
            goto cleanup;
        }
    }
    for (i = 0; i < 2; i++) {
        bpt_session_desc desc;
        memset(&desc, 0, sizeof desc);
        desc.name = i ? "B" : "A";
        desc.max_chunks = 16;   /* the default 16 chunks a thread, fixed: workers outrun the drains */
        if (bpt_session_create(&desc, &sess[i]) != 0) {
            fprintf(stderr, "bpt_session_create(%s): %s\n", desc.name, bpt_last_error());
            failed = 1;
            goto cleanup;
        }
        alive[i] = 1;
    }
    for (; nstarted < nreaders; nstarted++) {
        struct reader *r = &rs[nstarted];
        memset(r, 0, sizeof *r);
        r->vm = &vm;
        pthread_mutex_init(&r->lock, NULL);
        if (pthread_create(&r->thread, NULL, reader_main, r) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            pthread_mutex_destroy(&r->lock);
            failed = 1;
            goto cleanup;
        }
    }
    memset(&walk, 0, sizeof walk);
    bpt_set_protocol_observer(observe, &walk);

    printf("%d functions demo:{parse,work,reply,log}/2, %d reader threads executing them nonstop.\n"
           "Each change below is one bpt_trace_pattern or bpt_session_destroy call; the steps are\n"
           "numbered as in OTP's Tracing.md. 'skipped' means the step had nothing to do.\n",
           NFUNCS, nreaders);
    sleep_ms(50);
    printf("\n");
    report_readers(rs, nstarted, last_calls, last_bps);

    for (c = 0; c < nchanges; c++) {
        const struct change *ch = &changes[c];
        uint64_t t0, ns;
        int rc;
        printf("\n== %d/%d  %s\n   %s\n   expect: %s\n", c + 1, nchanges, ch->title, ch->call_text,
               ch->expect);
        memset(&walk, 0, sizeof walk);
        t0 = now_ns();
        if (ch->pattern) {
            rc = bpt_trace_pattern(sess[ch->session], ch->pattern, ch->flags, ch->match);
        } else {
            rc = bpt_session_destroy(sess[ch->session]);
            alive[ch->session] = 0;
        }
        ns = now_ns() - t0;
        if (rc < 0) {
            fprintf(stderr, "  failed: %s (%s)\n", bpt_strerror(rc), bpt_last_error());
            failed = 1;
            break;
        }
        printf("  -> returned %d in %.1f us: %d steps ran, %d skipped, %.1f us of it in thread progress waits\n",
               rc, ns / 1e3, walk.steps_ran, walk.steps_skipped, walk.waits_ns / 1e3);
        printf("  active generation: %u (staging: %u)\n", bpt_active_bp_ix(), bpt_staging_bp_ix());
        printf("  words now:");
        for (i = 0; i < NFUNCS; i++)
            printf(" %s=%s", func_name[i], bpt_vm_word_at(vm.rec[i]) == BREAKPOINT_WORD ? "breakpoint" : "original");
        printf("\n");

        /* Let the readers run under the new settings for a while. Counts
           are read twice, to show them growing, or frozen while paused. */
        if (ch->show_counts) {
            printf("  call counts in session A, right after the change:\n");
            bpt_trace_info_each(sess[0], "demo:_/_", BPT_INFO_COUNT, print_counts, NULL);
        }
        sleep_ms(50);
        if (ch->show_counts) {
            printf("  ... and 50 ms later:\n");
            bpt_trace_info_each(sess[0], "demo:_/_", BPT_INFO_COUNT, print_counts, NULL);
        }
        for (i = 0; i < 2; i++) {
            if (alive[i])
                drain_session(i ? "B" : "A", sess[i]);
        }
        if (!wait_for_readers(rs, nstarted, last_calls)) {
            fprintf(stderr, "  a reader made no progress for 10 s\n");
            failed = 1;
        }
        report_readers(rs, nstarted, last_calls, last_bps);
    }

    /* Every session is gone: every word must be the original again. */
    for (i = 0; i < NFUNCS; i++) {
        if (BPT_VM_FETCH(&vm.code[i]) != vm.orig[i] || bpt_vm_word_at(vm.rec[i]) != vm.orig[i]) {
            fprintf(stderr, "demo:%s: word not restored\n", func_name[i]);
            failed = 1;
        }
    }
    bpt_set_protocol_observer(NULL, NULL);

cleanup:
    for (i = 0; i < nstarted; i++) {
        pthread_mutex_lock(&rs[i].lock);
        rs[i].stop = 1;
        pthread_mutex_unlock(&rs[i].lock);
    }
    for (i = 0; i < nstarted; i++) {
        pthread_join(rs[i].thread, NULL);
        if (rs[i].wrong) {
            fprintf(stderr, "reader %d got a wrong word %" PRIu64 " times\n", i, rs[i].wrong);
            failed = 1;
        }
        pthread_mutex_destroy(&rs[i].lock);
    }
    for (i = 0; i < 2; i++)
        if (alive[i])
            bpt_session_destroy(sess[i]);
    for (i = 0; i < nregistered; i++) {
        if (bpt_unregister(vm.rec[i]) != 0) {
            fprintf(stderr, "bpt_unregister(%s): %s\n", func_name[i], bpt_last_error());
            failed = 1;
        }
    }
    printf("\n%s\n", failed ? "FAILED" : "ok: the readers never stopped and never saw a wrong word");
    return failed;
}
