/* t_protocol_steps: unit tests of the 13 steps, observed from inside.
   The protocol observer runs at the end of each step, under the permission,
   and looks at the GenericBp structures directly (this file includes the
   implementation). Allocation goes through BPT_MALLOC/BPT_FREE hooks that
   note when each block is freed, and a GenericBp given back to bptrace's
   free list (>>recycle in ptrset.c) is noted as freed. */
#include <stddef.h>   /* only compiler headers before bptrace.h: it sets _GNU_SOURCE */
static void *track_malloc(size_t n);
static void track_free(void *p);
static void track_given(void *p);
#define BPT_MALLOC(n) track_malloc(n)
#define BPT_FREE(p) track_free(p)
#define BPT__RECYCLE_NOTE(p) track_given(p)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <stdlib.h>

static void *watched;            /* a block whose free we wait for */
static int watched_freed_after_step = -1;
static uint64_t watched_freed_at_waits;
static int last_step;            /* the last step the observer saw end */

static void *track_malloc(size_t n) { return malloc(n); }
static void track_given(void *p) {
    if (p && p == watched) {
        bpt_progress_stats ps;
        bpt_thread_progress_stats(&ps);
        watched_freed_after_step = last_step;
        watched_freed_at_waits = ps.waits;
        watched = NULL;
    }
}
static void track_free(void *p) {
    track_given(p);
    free(p);
}

#define BP 0xB0B0u
static bpt_vm_word code[2] = { 0x1001, 0x2002 };
static bpt_func *f, *g_func;

/* What the observer records for each step of one run. */
static struct {
    int did[14];
    unsigned active_at[14];
    uint32_t active_flags[14], staging_flags[14];   /* of session A's breakpoint on f */
    bpt__GenericBp *head_at[14], *to_insert_at[14];
    bpt_vm_word word_at[14];
    uint64_t waits_at[14];
} obs;
static bpt__session *obs_session;

static void observer(int step, int did, uint64_t ns, void *user) {
    bpt__GenericBp *g;
    bpt_progress_stats ps;
    (void)ns; (void)user;
    last_step = step;
    obs.did[step] = did;
    obs.active_at[step] = bpt_active_bp_ix();
    g = obs_session ? bpt__find_bp(f, obs_session) : NULL;
    obs.active_flags[step] = g ? g->data[bpt_active_bp_ix()].flags : 0;
    obs.staging_flags[step] = g ? g->data[bpt_staging_bp_ix()].flags : 0;
    obs.head_at[step] = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp);
    obs.to_insert_at[step] = obs.head_at[step] ? obs.head_at[step]->to_insert : NULL;
    obs.word_at[step] = bpt_vm_word_at(f);
    bpt_thread_progress_stats(&ps);
    obs.waits_at[step] = ps.waits;
}

static void reset_obs(bpt_session s) {
    memset(&obs, 0, sizeof obs);
    obs_session = bpt__session_lookup(s.id);
}

int main(void) {
    bpt_session a, b;
    bpt__GenericBp *ga, *gb;
    bpt_info info;
    unsigned ix0;
    int step;

    CHECK_RC(bpt_register_vm(&code[0], BP, "unit", "f", 0, NULL, &f), 0);
    CHECK_RC(bpt_register_vm(&code[1], BP, "unit", "g", 0, NULL, &g_func), 0);
    CHECK_RC(bpt_session_create(NULL, &a), 0);
    CHECK_RC(bpt_session_create(NULL, &b), 0);
    CHECK_RC(bpt_set_protocol_observer(observer, NULL), 0);

    /* 1. Enable call_count on f in session A: every step runs. */
    reset_obs(a);
    ix0 = bpt_active_bp_ix();
    CHECK_RC(bpt_trace_pattern(a, "unit:f/0", BPT_COUNT, NULL), 1);
    for (step = 1; step <= 13; step++)
        CHECK(obs.did[step] == (step != 9 && step != 10 && step != 12), "enable: step %d did=%d", step, obs.did[step]);
    /* Step 2 allocates and touches nothing shared; step 3 links the head
       (as set_function_break in beam_bp.c) and writes only the staging half. */
    CHECK(obs.did[2] && obs.head_at[2] == NULL, "step 2: allocated, nothing linked yet (head %p)",
          (void *)obs.head_at[2]);
    CHECK(obs.head_at[3] != NULL && obs.active_flags[3] == 0 && obs.staging_flags[3] == (BPT__BPF_COUNT | BPT__BPF_COUNT_ACTIVE),
          "step 3: head linked %p, active %#x staging %#x", (void *)obs.head_at[3], obs.active_flags[3],
          obs.staging_flags[3]);
    CHECK(obs.word_at[4] == 0x1001 && obs.word_at[5] == BP, "step 5 installs the word: %#lx -> %#lx",
          (unsigned long)obs.word_at[4], (unsigned long)obs.word_at[5]);
    CHECK(obs.waits_at[4] == obs.waits_at[3] + 1, "step 4 waits");
    CHECK(obs.waits_at[6] == obs.waits_at[5] + 1, "step 6 waits");
    /* Step 7 flips the index, and only step 7. */
    CHECK(obs.active_at[6] == ix0 && obs.active_at[7] == (ix0 ^ 1), "step 7 commits: %u -> %u",
          obs.active_at[6], obs.active_at[7]);
    CHECK(obs.active_flags[7] == (BPT__BPF_COUNT | BPT__BPF_COUNT_ACTIVE), "after commit the active half counts");
    CHECK(obs.waits_at[8] == obs.waits_at[7] + 1, "step 8 waits");
    /* Step 11 consolidates: staging equals active again. */
    ga = bpt__find_bp(f, bpt__session_lookup(a.id));
    CHECK(ga && memcmp(&ga->data[0], &ga->data[1], sizeof ga->data[0]) == 0, "step 11: both halves equal");
    CHECK(obs.staging_flags[11] == obs.active_flags[11], "step 11: staging %#x == active %#x",
          obs.staging_flags[11], obs.active_flags[11]);

    /* 2. A second session on the same function: parked in to_insert at step 3,
       published by one store at step 5; no install and no wait before it. */
    reset_obs(a);
    CHECK_RC(bpt_trace_pattern(b, "unit:f/0", BPT_CALL, NULL), 1);
    gb = bpt__find_bp(f, bpt__session_lookup(b.id));
    CHECK(obs.head_at[2] == ga && obs.to_insert_at[2] == NULL, "step 2 parks nothing yet");
    CHECK(obs.head_at[3] == ga && obs.to_insert_at[3] == gb && gb && bpt__load_relaxed_ptr(&gb->next) == (void *)ga,
          "step 3 parks B's GenericBp in to_insert, pointing at A's");
    CHECK(obs.head_at[5] == gb && obs.to_insert_at[5] == NULL, "step 5 publishes it as the new head");
    CHECK(!obs.did[4] && obs.did[5] && !obs.did[6],
          "no wait around step 5: it publishes without writing a word (%d %d %d)", obs.did[4], obs.did[5], obs.did[6]);
    CHECK(obs.did[2], "step 2 allocated B's GenericBp");
    CHECK(!obs.did[9] && !obs.did[10] && !obs.did[12], "steps 9, 10, 12 skipped: nothing to remove");

    /* 3. Pause A's count: only A's generation changes; the word stays. */
    reset_obs(a);
    CHECK_RC(bpt_trace_pattern(a, "unit:f/0", BPT_COUNT | BPT_PAUSE, NULL), 1);
    CHECK(obs.staging_flags[3] == BPT__BPF_COUNT && obs.active_flags[3] == (BPT__BPF_COUNT | BPT__BPF_COUNT_ACTIVE),
          "pause staged: active %#x staging %#x", obs.active_flags[3], obs.staging_flags[3]);
    CHECK(!obs.did[2], "step 2 skipped: a pause allocates nothing");
    CHECK_RC(bpt_trace_info(a, f, BPT_INFO_FLAGS, &info), 0);
    CHECK(info.count_paused == 1 && info.flags == BPT_COUNT, "paused: flags %u paused %d", info.flags, info.count_paused);
    CHECK(bpt_vm_word_at(f) == BP, "still installed");
    CHECK(obs.did[8] && obs.waits_at[8] == obs.waits_at[7] + 1 && !obs.did[10],
          "a pause switches nothing off: step 8 waits, step 10 has nothing to do");

    /* 4. Remove A's breakpoint: B keeps the word installed (OR of flags != 0);
       A's GenericBp is unlinked at step 11 and freed only after step 12's wait. */
    reset_obs(a);
    watched = ga;
    CHECK_RC(bpt_trace_pattern(a, "unit:f/0", BPT_OFF, NULL), 1);
    CHECK(!obs.did[9] && bpt_vm_word_at(f) == BP, "step 9 keeps the word: session B still traces f");
    /* A's flags are staged 0, so step 9 might have restored the word: step
       8 leaves its wait to step 10 (>>deferred wait in bp.c), which must
       wait though step 9 wrote nothing, before step 11 overwrites the old
       generation. */
    CHECK(!obs.did[8] && obs.waits_at[9] == obs.waits_at[7], "step 8 defers its wait (%d, %llu waits since the commit)",
          obs.did[8], (unsigned long long)(obs.waits_at[9] - obs.waits_at[7]));
    CHECK(obs.did[10] && obs.waits_at[10] == obs.waits_at[7] + 1,
          "step 10 waits for step 8 though step 9 wrote nothing (%d, %llu waits since the commit)", obs.did[10],
          (unsigned long long)(obs.waits_at[10] - obs.waits_at[7]));
    CHECK(obs.did[12], "step 12 ran (something was unlinked)");
    CHECK(watched_freed_after_step == 11, "A's GenericBp freed during step 12 (after step %d)", watched_freed_after_step);
    CHECK(watched_freed_at_waits == obs.waits_at[11] + 1, "freed after step 12's wait (waits %llu, at step 11 %llu)",
          (unsigned long long)watched_freed_at_waits, (unsigned long long)obs.waits_at[11]);
    CHECK(bpt__load_relaxed_ptr(&f->gen_bp) == (void *)gb && bpt__load_relaxed_ptr(&gb->next) == NULL,
          "B's GenericBp is the only one left");

    /* 5. Remove B's: the OR of all active flags is 0, so step 9 restores the word. */
    obs_session = NULL;
    memset(&obs, 0, sizeof obs);
    watched = gb;
    CHECK_RC(bpt_trace_pattern(b, "unit:f/0", BPT_OFF | BPT_CALL, NULL), 1);
    CHECK(obs.did[9] && obs.did[10] && obs.word_at[8] == BP && obs.word_at[9] == 0x1001,
          "step 9 restores the original word, step 10 waits");
    CHECK(!obs.did[8] && obs.waits_at[10] == obs.waits_at[7] + 1,
          "one wait between the commit and step 11, step 10's, for steps 8 and 10 (%d, %llu)", obs.did[8],
          (unsigned long long)(obs.waits_at[10] - obs.waits_at[7]));
    CHECK(watched_freed_after_step == 11, "B's GenericBp freed in step 12");
    CHECK(bpt__load_relaxed_ptr(&f->gen_bp) == NULL, "no GenericBp left on f");

    /* 6. A pattern that matches nothing changes nothing: steps 2-12 are all skipped. */
    memset(&obs, 0, sizeof obs);
    CHECK_RC(bpt_trace_pattern(a, "unit:nothing/0", BPT_CALL, NULL), 0);
    for (step = 2; step <= 12; step++) CHECK(!obs.did[step], "empty change: step %d skipped", step);

    printf("protocol steps: enable, second session (to_insert), pause, remove (free after the last wait),"
           " uninstall, empty change: all checked\n");
    CHECK_RC(bpt_set_protocol_observer(NULL, NULL), 0);
    CHECK_RC(bpt_session_destroy(a), 0);
    CHECK_RC(bpt_session_destroy(b), 0);
    CHECK_RC(bpt_unregister(f), 0);
    CHECK_RC(bpt_unregister(g_func), 0);
    return CHECK_DONE();
}
