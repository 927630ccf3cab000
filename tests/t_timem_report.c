/* t_timem_report: what bpt_trace_info reports of call_time / call_memory
   beyond the sums: which processes fill a short procs array, and the
   charges the tables dropped. VM sites only (every compiler, tcc too), one
   thread, no signals: call_memory's bytes (bpt_account_memory) are exact,
   so every expected value is too. Both parts failed before the fix (found
   by review).
   1. 16 processes (bpt_process_switch) each call one function and account
      1,000 bytes more than the one before. procs_cap 2 returns the two
      with the most memory, most first: it returned the first 2 cells of
      the hash table, sorted. Other caps, ties (the lower process id
      first) and a cap past nprocs are checked too.
   2. Charges nested in a charge of the same tables (the mark a signal
      handler would find, set by hand as t_time_path and t_timem_threads
      do) are dropped and counted in the tables' `lost` [H1]. bpt_info.
      lost_charges reports them, and keeps them across collections: every
      bpt_trace_info replaces the tables and used to throw `lost` away
      (nothing reported it either). A restart zeroes it with the sums.
   3. call_time paused beside call_memory counting: time_paused says 1,
      memory_paused 0, and the other way round (one flag for both said 0
      while call_time was paused).
   4. A process that freed more than it allocated (bpt_account_memory with
      a negative count) has the least memory, not the most: the rank
      compared memory_bytes unsigned, so -100 B (2^64 - 100) ranked first
      and pushed the process with the most bytes out of a short procs
      array (found by review).
   5. Net bytes past int64_t's range wrap modulo 2^64, as the unsigned
      memory_bytes that reports them does: the frame's sum (two accounts
      in one call), the cell's (a call charged onto one near the top) and
      a collection's (a carried sum and new bytes) were signed overflows,
      undefined behaviour, which the asan configuration's UBSan stops at
      (found by review). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <string.h>

static bpt_vm_word word_top = 0x100, word_tie = 0x101, word_lost = 0x102, word_other = 0x103, word_neg = 0x104,
                   word_huge = 0x105;
static bpt_func *f_top, *f_tie, *f_lost, *f_other, *f_neg, *f_huge;

/* One call of f, in the current process, that accounts bytes. */
static void call_vm(bpt_vm_word *w, bpt_func *f, int64_t bytes) {
    bpt_vm_token t = 0;
    if (BPT_VM_FETCH(w) == 0xBBBB) bpt_vm_breakpoint(f, NULL, &t);
    if (bytes) bpt_account_memory(bytes);
    bpt_vm_return(t, 0);
}

static bpt_info info_of(bpt_session s, bpt_func *f, unsigned what, bpt_info_process *procs, uint32_t cap) {
    bpt_info info;
    memset(&info, 0, sizeof info);
    info.procs = procs;
    info.procs_cap = cap;
    CHECK_RC(bpt_trace_info(s, f, what, &info), 0);
    return info;
}

static void print_procs(const char *what, const bpt_info *in, uint32_t n) {
    uint32_t i;
    printf("   %-34s nprocs %u:", what, in->nprocs);
    for (i = 0; i < n; i++)
        printf(" %llu (%llu B)", (unsigned long long)in->procs[i].process,
               (unsigned long long)in->procs[i].memory_bytes);
    printf("\n");
}

/* 1. The processes a short procs array gets. */
enum { NPROCS = 16 };
static void test_top(bpt_session s) {
    bpt_info_process procs[NPROCS + 4];
    bpt_info in;
    uint32_t caps[] = { 1, 2, 5, NPROCS, NPROCS + 4 }, k, i;
    uint64_t p;
    printf("1. the processes with the most memory, most first\n");
    /* Process p accounts p * 1000 bytes: process NPROCS ranks first. The
       ids are spread out, so the hash table's order is not the rank's. */
    for (p = 1; p <= NPROCS; p++) {
        bpt_process_switch(p * 7919);
        call_vm(&word_top, f_top, (int64_t)p * 1000);
    }
    bpt_process_switch(0);
    for (k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        uint32_t cap = caps[k], want = cap < NPROCS ? cap : NPROCS;
        char what[64];
        for (i = 0; i < NPROCS + 4; i++) procs[i].process = 0xdead;   /* untouched past what is filled */
        in = info_of(s, f_top, BPT_INFO_MEMORY, procs, cap);
        snprintf(what, sizeof what, "procs_cap %u:", cap);
        print_procs(what, &in, want);
        CHECK(in.nprocs == NPROCS && in.calls == NPROCS && in.memory_bytes == 1000ull * NPROCS * (NPROCS + 1) / 2,
              "cap %u: totals cover all 16 processes: nprocs %u, calls %llu, %llu bytes", cap, in.nprocs,
              (unsigned long long)in.calls, (unsigned long long)in.memory_bytes);
        for (i = 0; i < want; i++) {
            uint64_t rank = NPROCS - i;   /* the process that must be at procs[i] */
            CHECK(procs[i].process == rank * 7919 && procs[i].memory_bytes == rank * 1000 && procs[i].calls == 1,
                  "cap %u: procs[%u] is process %llu with %llu bytes and 1 call: got process %llu, %llu bytes, "
                  "%llu calls", cap, i, (unsigned long long)(rank * 7919), (unsigned long long)(rank * 1000),
                  (unsigned long long)procs[i].process, (unsigned long long)procs[i].memory_bytes,
                  (unsigned long long)procs[i].calls);
        }
        for (i = want; i < NPROCS + 4; i++)
            CHECK(procs[i].process == 0xdead, "cap %u: procs[%u] past the %u filled was written", cap, i, want);
    }

    /* Ties: 12 processes with the same bytes; the lowest ids rank first,
       whatever order they were charged in. */
    for (p = 12; p >= 1; p--) {
        bpt_process_switch(p * 104729);
        call_vm(&word_tie, f_tie, 500);
    }
    bpt_process_switch(0);
    in = info_of(s, f_tie, BPT_INFO_MEMORY, procs, 3);
    print_procs("ties, procs_cap 3:", &in, 3);
    for (i = 0; i < 3; i++)
        CHECK(procs[i].process == (i + 1) * 104729ull, "ties: procs[%u] is process %llu (the lower id first): "
              "got %llu", i, (i + 1) * 104729ull, (unsigned long long)procs[i].process);
}

/* 2. Dropped charges, reported and kept. */
static uint64_t lost_now(bpt_func *f) {   /* f's current tables' `lost`: read before a collection replaces them */
    unsigned ix = bpt_active_bp_ix();
    bpt__GenericBp *g = (bpt__GenericBp *)bpt__load_acquire_ptr(&f->gen_bp);
    bpt__BpTimem *tm = g ? bpt__timem_of(&g->data[ix]) : NULL;
    return tm ? bpt__load_relaxed_u64(&tm->lost) : 0;
}

/* n calls of f charged while the thread is marked as inside a charge of
   f's tables (as a signal handler nested there finds it): each call's
   count and its return's charge are dropped [H1]; one call of f_other,
   other tables, goes ahead. Returns the charges f's tables dropped. */
static uint64_t drop_calls(bpt_func *f, bpt_vm_word *w, int n) {
    bpt__thread *rec = bpt__thread_self_or_null();
    uint64_t before = lost_now(f);
    unsigned ix = bpt_active_bp_ix();
    bpt__GenericBp *g = (bpt__GenericBp *)bpt__load_acquire_ptr(&f->gen_bp);
    int i;
    CHECK(rec && g && bpt__timem_of(&g->data[ix]), "a thread record and f's tables");
    if (!rec || !g) return 0;
    rec->timem_charging[0] = bpt__timem_of(&g->data[ix]);
    rec->timem_depth = 1;
    for (i = 0; i < n; i++) call_vm(w, f, 10);
    call_vm(&word_other, f_other, 10);
    rec->timem_depth = 0;
    return lost_now(f) - before;
}

static void test_lost(bpt_session s) {
    bpt_info in;
    uint64_t dropped, dropped2, lost1, lost2;
    printf("2. dropped charges: reported, and kept across collections\n");
    call_vm(&word_lost, f_lost, 100);   /* counted: the thread's table made */
    in = info_of(s, f_lost, BPT_INFO_MEMORY, NULL, 0);
    printf("   before any drop: calls %llu, %llu B, lost_charges %llu\n", (unsigned long long)in.calls,
           (unsigned long long)in.memory_bytes, (unsigned long long)in.lost_charges);
    CHECK(in.calls == 1 && in.memory_bytes == 100 && in.lost_charges == 0, "one call of 100 B, nothing dropped");

    dropped = drop_calls(f_lost, &word_lost, 3);
    printf("   3 calls nested in a charge of the same tables: %llu charges dropped (a call's count and its "
           "return's bytes each)\n", (unsigned long long)dropped);
    CHECK(dropped == 6, "3 calls: 6 charges dropped (3 counts, 3 returns): %llu", (unsigned long long)dropped);
    in = info_of(s, f_lost, BPT_INFO_MEMORY, NULL, 0);
    lost1 = in.lost_charges;
    printf("   collection 1: calls %llu, %llu B, lost_charges %llu\n", (unsigned long long)in.calls,
           (unsigned long long)in.memory_bytes, (unsigned long long)lost1);
    CHECK(in.calls == 1 && in.memory_bytes == 100, "the dropped calls are not in the sums");
    CHECK(lost1 == dropped, "lost_charges reports the %llu dropped charges: %llu", (unsigned long long)dropped,
          (unsigned long long)lost1);
    in = info_of(s, f_other, BPT_INFO_MEMORY, NULL, 0);
    CHECK(in.calls == 1 && in.lost_charges == 0, "other tables: their charge went ahead (calls %llu, lost %llu)",
          (unsigned long long)in.calls, (unsigned long long)in.lost_charges);

    in = info_of(s, f_lost, BPT_INFO_TIME, NULL, 0);
    printf("   collection 2 (BPT_INFO_TIME): lost_charges %llu\n", (unsigned long long)in.lost_charges);
    CHECK(in.lost_charges == lost1, "a second collection keeps lost_charges: %llu, not %llu",
          (unsigned long long)in.lost_charges, (unsigned long long)lost1);

    dropped2 = drop_calls(f_lost, &word_lost, 2);
    call_vm(&word_lost, f_lost, 100);
    in = info_of(s, f_lost, BPT_INFO_MEMORY | BPT_INFO_TIME, NULL, 0);
    lost2 = in.lost_charges;
    printf("   %llu more dropped, then collection 3: calls %llu, %llu B, lost_charges %llu\n",
           (unsigned long long)dropped2, (unsigned long long)in.calls, (unsigned long long)in.memory_bytes,
           (unsigned long long)lost2);
    CHECK(dropped2 == 4 && lost2 == lost1 + dropped2, "the new drops add to the carried ones, once: %llu + %llu "
          "= %llu", (unsigned long long)lost1, (unsigned long long)dropped2, (unsigned long long)lost2);
    CHECK(in.calls == 2 && in.memory_bytes == 200, "the sums carried too: calls %llu, %llu B",
          (unsigned long long)in.calls, (unsigned long long)in.memory_bytes);

    in = info_of(s, f_lost, BPT_INFO_FLAGS, NULL, 0);
    CHECK(in.lost_charges == 0, "not asked for (BPT_INFO_FLAGS alone): lost_charges stays 0: %llu",
          (unsigned long long)in.lost_charges);
    in = info_of(s, f_lost, BPT_INFO_MEMORY, NULL, 0);
    CHECK(in.lost_charges == lost2, "asking for flags alone collected nothing: lost_charges %llu",
          (unsigned long long)in.lost_charges);

    CHECK_RC(bpt_trace_pattern(s, "tr:lost/_", BPT_MEMORY | BPT_RESTART, NULL), 1);
    in = info_of(s, f_lost, BPT_INFO_MEMORY, NULL, 0);
    printf("   after a restart: calls %llu, lost_charges %llu\n", (unsigned long long)in.calls,
           (unsigned long long)in.lost_charges);
    CHECK(in.calls == 0 && in.lost_charges == 0, "a restart zeroes lost_charges with the sums");
}

/* 3. Each kind's own pause. */
static void test_paused(bpt_session s) {
    bpt_info in;
    CHECK_RC(bpt_trace_pattern(s, "tr:other/0", BPT_TIME | BPT_MEMORY, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "tr:other/0", BPT_TIME | BPT_PAUSE, NULL), 1);
    in = info_of(s, f_other, BPT_INFO_FLAGS, NULL, 0);
    printf("3. call_time paused, call_memory on: flags 0x%x, time_paused %d, memory_paused %d\n", in.flags,
           in.time_paused, in.memory_paused);
    CHECK(in.time_paused == 1 && in.memory_paused == 0, "call_time paused, call_memory counting");
    CHECK_RC(bpt_trace_pattern(s, "tr:other/0", BPT_TIME | BPT_RESTART, NULL), 1);
    CHECK_RC(bpt_trace_pattern(s, "tr:other/0", BPT_MEMORY | BPT_PAUSE, NULL), 1);
    in = info_of(s, f_other, BPT_INFO_FLAGS, NULL, 0);
    printf("   call_time on, call_memory paused: time_paused %d, memory_paused %d\n", in.time_paused,
           in.memory_paused);
    CHECK(in.time_paused == 0 && in.memory_paused == 1, "call_time counting, call_memory paused");
    CHECK_RC(bpt_trace_pattern(s, "tr:other/0", BPT_TIME | BPT_MEMORY | BPT_OFF, NULL), 1);
}

/* 4. Net bytes below zero rank last. */
static void test_negative(bpt_session s) {
    bpt_info_process procs[3];
    bpt_info in;
    static const struct { uint64_t process; int64_t bytes; } acct[3] = { { 3001, 1000 }, { 3002, -100 },
                                                                        { 3003, 10 } };
    uint32_t i;
    for (i = 0; i < 3; i++) {
        bpt_process_switch(acct[i].process);
        call_vm(&word_neg, f_neg, acct[i].bytes);
    }
    bpt_process_switch(0);
    in = info_of(s, f_neg, BPT_INFO_MEMORY, procs, 2);
    printf("4. net bytes below zero: total %lld B;", (long long)(int64_t)in.memory_bytes);
    for (i = 0; i < 2; i++)
        printf(" %llu (%lld B)", (unsigned long long)procs[i].process, (long long)(int64_t)procs[i].memory_bytes);
    printf("\n");
    CHECK(in.nprocs == 3 && (int64_t)in.memory_bytes == 910, "3 processes, 910 B net: nprocs %u, %lld B",
          in.nprocs, (long long)(int64_t)in.memory_bytes);
    CHECK(procs[0].process == 3001 && procs[1].process == 3003,
          "procs_cap 2: the processes with +1000 B and +10 B, not the one at -100 B: got %llu, %llu",
          (unsigned long long)procs[0].process, (unsigned long long)procs[1].process);
    CHECK((int64_t)procs[1].memory_bytes == 10, "procs[1]: 10 B, got %lld", (long long)(int64_t)procs[1].memory_bytes);
}

/* 5. Sums past int64_t's range. */
static void test_huge(bpt_session s) {
    bpt_info in;
    printf("5. net bytes past int64_t's range wrap\n");
    call_vm(&word_huge, f_huge, INT64_MAX);       /* a cell at the top */
    in = info_of(s, f_huge, BPT_INFO_MEMORY, NULL, 0);
    CHECK((int64_t)in.memory_bytes == INT64_MAX, "one call: INT64_MAX B, got %lld", (long long)(int64_t)in.memory_bytes);
    call_vm(&word_huge, f_huge, 1);               /* carried INT64_MAX + a new cell's 1: the collection's sum */
    in = info_of(s, f_huge, BPT_INFO_MEMORY, NULL, 0);
    printf("   INT64_MAX + 1 across a collection: %lld B\n", (long long)(int64_t)in.memory_bytes);
    CHECK(in.memory_bytes == (uint64_t)1 << 63, "INT64_MAX + 1 wraps to INT64_MIN: got %lld",
          (long long)(int64_t)in.memory_bytes);
    {   /* two accounts in one call: the frame's sum */
        bpt_vm_token t = 0;
        if (BPT_VM_FETCH(&word_huge) == 0xBBBB) bpt_vm_breakpoint(f_huge, NULL, &t);
        bpt_account_memory(INT64_MAX);
        bpt_account_memory(INT64_MAX);
        bpt_vm_return(t, 0);
    }
    call_vm(&word_huge, f_huge, INT64_MAX);       /* the cell near the top: -2 + INT64_MAX */
    call_vm(&word_huge, f_huge, 3);               /* then the cell's sum passes it */
    in = info_of(s, f_huge, BPT_INFO_MEMORY, NULL, 0);
    printf("   then 2 * INT64_MAX in one call, INT64_MAX, 3: %lld B over %llu calls\n",
           (long long)(int64_t)in.memory_bytes, (unsigned long long)in.calls);
    CHECK(in.calls == 5 && in.memory_bytes == 0, "2^64 B in all wraps to 0: %llu calls, %lld B",
          (unsigned long long)in.calls, (long long)(int64_t)in.memory_bytes);
}

int main(void) {
    bpt_session s;
    CHECK_RC(bpt_register_vm(&word_top, 0xBBBB, "tr", "top", 0, NULL, &f_top), 0);
    CHECK_RC(bpt_register_vm(&word_tie, 0xBBBB, "tr", "tie", 0, NULL, &f_tie), 0);
    CHECK_RC(bpt_register_vm(&word_lost, 0xBBBB, "tr", "lost", 0, NULL, &f_lost), 0);
    CHECK_RC(bpt_register_vm(&word_other, 0xBBBB, "tr", "other", 0, NULL, &f_other), 0);
    CHECK_RC(bpt_register_vm(&word_neg, 0xBBBB, "tr", "neg", 0, NULL, &f_neg), 0);
    CHECK_RC(bpt_register_vm(&word_huge, 0xBBBB, "tr", "huge", 0, NULL, &f_huge), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    /* call_memory alone: no time is charged, so the rank is the bytes'. */
    CHECK_RC(bpt_trace_pattern(s, "tr:_/_", BPT_MEMORY, NULL), 6);
    test_top(s);
    test_lost(s);
    test_paused(s);
    test_negative(s);
    test_huge(s);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
