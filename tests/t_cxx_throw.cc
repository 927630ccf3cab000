/* t_cxx_throw: C++ exceptions thrown through return-traced native frames
   (issue #17, item 6). tests/run builds it with g++, clang++ and
   aarch64-linux-gnu-g++ (under qemu), -O2. Before the unwinder hooks
   (unwind.c) every case below called std::terminate: the unwinder found the
   return trampoline where a return address should be.
   Claims, for functions traced with call, return_from and exception_from:
   1. a throw through three traced frames reaches main's catch; the three
      get exception_from "throw", newest first, before the next message;
   2. a catch inside a traced function: the frames below it get
      exception_from, and the catching function's return_from still comes,
      with its value (its return was traced again at the catch);
   3. a rethrow (`throw;`) from a traced function's catch, caught further up;
   4. destructors that call a traced function while the stack unwinds
      (cleanups, then _Unwind_Resume): their calls are traced and return;
   5. 2,000 throws through 20 traced frames each: the shadow stack never
      fills (frames_skipped stays 0), every frame's call is ended by exactly
      one exception_from, and call_time (another session) counts every call;
   6. 4 threads throwing at once through traced frames: exact counts;
   7. a traced function that catches what it threw itself, and one whose
      exception escapes a std::thread's function into the catch around it
      inside that thread;
   8. a destructor run by the unwind catches a throw of its own, then the
      first unwind goes on (_Unwind_Resume) through return-traced frames;
   9. a signal handler on a sigaltstack (heap) throws and catches while a
      return-traced call lives on the interrupted stack: that frame is left
      alone (on aarch64 the slot search ran from the sigaltstack up to the
      other stack, through unmapped memory: SIGSEGV), and returns;
   10. pthread_exit from a return-traced function: its forced unwind runs
      the destructor of an object in the thread's function, above the
      traced frame (the unwind stopped at the trampoline, and the
      destructor never ran). */
#ifndef T_IMPLEMENTATION_ELSEWHERE   /* tests/run's g++-c-impl: compiled as C, linked in */
#  define BPTRACE_IMPLEMENTATION
#endif
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <csignal>
#include <pthread.h>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#if defined(BPT_NATIVE)
struct oops : std::runtime_error {
    long v;
    explicit oops(long x) : std::runtime_error("oops"), v(x) {}
};

namespace game {
BPT_TRACEABLE __attribute__((noinline)) long leaf(long x) { return x + 1; }
static long (*volatile leaf_p)(long) = leaf;

BPT_TRACEABLE __attribute__((noinline)) long thrower(long x) {
    if (x >= 0) throw oops(x);
    return x;
}
static long (*volatile thrower_p)(long) = thrower;

BPT_TRACEABLE __attribute__((noinline)) long mid(long x) { return thrower_p(x) + 1; }
static long (*volatile mid_p)(long) = mid;

BPT_TRACEABLE __attribute__((noinline)) long outer(long x) { return mid_p(x) + 1; }
static long (*volatile outer_p)(long) = outer;

/* 2: catches what mid lets through. */
BPT_TRACEABLE __attribute__((noinline)) long catcher(long x) {
    try {
        return mid_p(x);
    } catch (const oops &e) {
        return 1000 + e.v;
    }
}
static long (*volatile catcher_p)(long) = catcher;

/* 3: catches, then rethrows. */
BPT_TRACEABLE __attribute__((noinline)) long rethrower(long x) {
    try {
        return mid_p(x);
    } catch (const oops &) {
        leaf_p(x);   /* a traced call inside the catch */
        throw;
    }
}
static long (*volatile rethrower_p)(long) = rethrower;

/* 4: a destructor that calls a traced function. */
struct guard {
    long x;
    ~guard() { leaf_p(x); }
};
BPT_TRACEABLE __attribute__((noinline)) long guarded(long x) {
    guard g{x};
    return mid_p(x) + g.x;
}
static long (*volatile guarded_p)(long) = guarded;

/* 8: a destructor that catches a throw of its own while the stack unwinds
   for another: the catch hooks the frames above it again, and the outer
   unwind must find them unhooked (at _Unwind_Resume). */
struct catching_guard {
    ~catching_guard() {
        try {
            thrower_p(1);
        } catch (const oops &) {
        }
    }
};
BPT_TRACEABLE __attribute__((noinline)) long nested(long x) {
    catching_guard g;
    return mid_p(x) + 1;
}
static long (*volatile nested_p)(long) = nested;

/* 9. */
static long alt_caught;
static void alt_handler(int) {
    try {
        throw oops(42);
    } catch (const oops &e) {
        alt_caught = e.v;
    }
}
BPT_TRACEABLE __attribute__((noinline)) long signalled(long x) {
    raise(SIGUSR1);
    return x + alt_caught;
}
static long (*volatile signalled_p)(long) = signalled;

/* 10. */
static int exit_guard_ran;
struct exit_guard {
    ~exit_guard() { exit_guard_ran = 1; }
};
BPT_TRACEABLE __attribute__((noinline)) long exiter(long x) {
    if (x) pthread_exit(nullptr);
    return x;
}
static long (*volatile exiter_p)(long) = exiter;
static void *exiting_thread(void *) {
    exit_guard g;
    exiter_p(1);
    return nullptr;
}

/* 5: n traced frames, then a throw. */
BPT_TRACEABLE __attribute__((noinline)) long deep(long n);
static long (*volatile deep_p)(long) = deep;
BPT_TRACEABLE __attribute__((noinline)) long deep(long n) { return n == 0 ? thrower_p(0) : deep_p(n - 1) + 1; }

/* 7: catches its own throw. */
BPT_TRACEABLE __attribute__((noinline)) long self_catch(long x) {
    try {
        if (x > 0) throw oops(x);
    } catch (const oops &e) {
        return e.v * 2;
    }
    return 0;
}
static long (*volatile self_catch_p)(long) = self_catch;
}   // namespace game

static int drain(bpt_session s, bpt_msg *m, int max) {
    int n, k = 0;
    while (k < max && (n = bpt_session_drain(s, m + k, max - k)) > 0) k += n;
    return k;
}

static bpt_func *F_leaf, *F_thrower, *F_mid, *F_outer, *F_catcher, *F_rethrower, *F_guarded, *F_deep, *F_self,
    *F_nested, *F_signalled, *F_exiter;

/* The messages as one line: "call outer, call mid, ..., exc thrower, ret outer=5". */
static void describe(const bpt_msg *m, int n, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n && k < cap; i++) {
        const char *t = m[i].type == BPT_MSG_CALL ? "call" : m[i].type == BPT_MSG_RETURN_FROM ? "ret"
                      : m[i].type == BPT_MSG_EXCEPTION_FROM ? "exc" : "other";
        int w = m[i].type == BPT_MSG_RETURN_FROM
                    ? snprintf(out + k, cap - k, "%s%s %s=%lld", i ? ", " : "", t, m[i].name,
                               (long long)m[i].value)
                    : m[i].type == BPT_MSG_EXCEPTION_FROM && m[i].exception_class &&
                              strcmp(m[i].exception_class, "throw") != 0   /* a class but "throw": named */
                    ? snprintf(out + k, cap - k, "%s%s %s(%s)", i ? ", " : "", t, m[i].name, m[i].exception_class)
                    : snprintf(out + k, cap - k, "%s%s %s", i ? ", " : "", t, m[i].name);
        if (w < 0) break;
        k += (size_t)w;
    }
}

/* The messages drained now are `want`, or `or_want` (NULL: no other). */
static void expect2(bpt_session s, const char *want, const char *or_want, const char *what) {
    static bpt_msg m[256];
    char got[2048];
    int n = drain(s, m, 256);
    describe(m, n, got, sizeof got);
    CHECK(strcmp(got, want) == 0 || (or_want && strcmp(got, or_want) == 0), "%s:\n   got  %s\n   want %s%s%s",
          what, got, want, or_want ? "\n   or   " : "", or_want ? or_want : "");
}
static void expect(bpt_session s, const char *want, const char *what) { expect2(s, want, nullptr, what); }

static uint64_t info_of(bpt_session s, bpt_func *f, int what) {
    bpt_info info = {};
    CHECK_RC(bpt_trace_info(s, f, what, &info), 0);
    return what == BPT_INFO_COUNT ? info.count : info.calls;
}

int main() {
    bpt_session s, counts;
    bpt_session_desc d = {};
    bpt_session_counts st = {};
    const unsigned kinds = BPT_CALL | BPT_RETURN | BPT_EXCEPTION;
    long r = 0;
    F_leaf = native_reg((void *)game::leaf, "game", "leaf", 1);
    F_thrower = native_reg((void *)game::thrower, "game", "thrower", 1);
    F_mid = native_reg((void *)game::mid, "game", "mid", 1);
    F_outer = native_reg((void *)game::outer, "game", "outer", 1);
    F_catcher = native_reg((void *)game::catcher, "game", "catcher", 1);
    F_rethrower = native_reg((void *)game::rethrower, "game", "rethrower", 1);
    F_guarded = native_reg((void *)game::guarded, "game", "guarded", 1);
    F_deep = native_reg((void *)game::deep, "game", "deep", 1);
    F_self = native_reg((void *)game::self_catch, "game", "self_catch", 1);
    F_nested = native_reg((void *)game::nested, "game", "nested", 1);
    F_signalled = native_reg((void *)game::signalled, "game", "signalled", 1);
    F_exiter = native_reg((void *)game::exiter, "game", "exiter", 1);
    if (!F_leaf || !F_thrower || !F_mid || !F_outer || !F_catcher || !F_rethrower || !F_guarded || !F_deep ||
        !F_self || !F_nested || !F_signalled || !F_exiter)
        return CHECK_DONE();
    d.name = "cxx-throw";
    d.chunks = 64;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "game:*/_", kinds, nullptr), 12);

    /* 1. Through three traced frames to main's catch. */
    try {
        r = game::outer_p(5);
    } catch (const oops &e) {
        r = -e.v;
    }
    CHECK(r == -5, "main caught the exception (r = %ld)", r);
    CHECK(game::leaf_p(1) == 2, "a traced call after the catch");
    expect(s, "call outer, call mid, call thrower, exc thrower, exc mid, exc outer, call leaf, ret leaf=2",
           "1. a throw through three traced frames");

    /* 2. Caught inside a traced function, which then returns. */
    r = game::catcher_p(7);
    CHECK(r == 1007, "catcher returned %ld, want 1007", r);
    expect(s, "call catcher, call mid, call thrower, exc thrower, exc mid, ret catcher=1007",
           "2. a catch inside a traced function");

    /* 3. Rethrown from a traced catch, caught by main. */
    try {
        r = game::rethrower_p(3);
    } catch (const oops &e) {
        r = -e.v;
    }
    CHECK(r == -3, "main caught the rethrow (r = %ld)", r);
    CHECK(game::leaf_p(9) == 10, "a traced call after the rethrow's catch");
    expect(s,
           "call rethrower, call mid, call thrower, exc thrower, exc mid, call leaf, ret leaf=4, exc rethrower, "
           "call leaf, ret leaf=10",
           "3. a rethrow");

    /* 4. A destructor calls a traced function while the stack unwinds. */
    try {
        r = game::guarded_p(4);
    } catch (const oops &e) {
        r = -e.v;
    }
    CHECK(r == -4, "main caught it (r = %ld)", r);
    game::leaf_p(0);
    expect(s,
           "call guarded, call mid, call thrower, exc thrower, exc mid, call leaf, ret leaf=5, exc guarded, "
           "call leaf, ret leaf=1",
           "4. a traced call from a destructor during the unwind");

    /* 7a. A traced function catches its own throw. */
    r = game::self_catch_p(21);
    CHECK(r == 42, "self_catch returned %ld", r);
    expect(s, "call self_catch, ret self_catch=42", "7a. a traced function catches its own throw");

    /* 8. A destructor catches its own throw during another's unwind. */
    try {
        r = game::nested_p(8);
    } catch (const oops &e) {
        r = -e.v;
    }
    CHECK(r == -8, "main caught the first exception (r = %ld)", r);
    game::leaf_p(0);
    /* mid's frame ends when the destructor's call of thrower is made, or
       at its catch: which one depends on where the compiler put the
       destructor's frame (at or below mid's old place). */
    expect2(s,
            "call nested, call mid, call thrower, exc thrower, exc mid, call thrower, exc thrower, exc nested, "
            "call leaf, ret leaf=1",
            "call nested, call mid, call thrower, exc thrower, call thrower, exc thrower, exc mid, exc nested, "
            "call leaf, ret leaf=1",
            "8. a destructor's own catch during an unwind");

    /* 9. A throw and its catch in a handler on a sigaltstack. */
    {
        stack_t ss = {}, old = {};
        struct sigaction sa = {}, old_sa = {};
        ss.ss_sp = malloc(1 << 16);
        ss.ss_size = 1 << 16;
        CHECK(ss.ss_sp && sigaltstack(&ss, &old) == 0, "sigaltstack");
        sa.sa_handler = game::alt_handler;
        sa.sa_flags = SA_ONSTACK;
        sigaction(SIGUSR1, &sa, &old_sa);
        r = game::signalled_p(1);
        CHECK(r == 43, "signalled returned %ld, want 43", r);
        expect(s, "call signalled, ret signalled=43", "9. a throw caught in a handler on a sigaltstack");
        sigaction(SIGUSR1, &old_sa, nullptr);
        ss.ss_flags = SS_DISABLE;
        sigaltstack(&ss, nullptr);
        free(ss.ss_sp);
    }

    /* 10. pthread_exit through a return-traced frame. */
    {
        pthread_t t;
        CHECK_RC(pthread_create(&t, nullptr, game::exiting_thread, nullptr), 0);
        pthread_join(t, nullptr);
        CHECK(game::exit_guard_ran == 1, "the destructor above the traced frame ran");
        expect(s, "call exiter", "10. pthread_exit's forced unwind (the frame ends with its thread)");
    }

    /* 7b. A throw escapes a std::thread's traced function into a catch in that thread. */
    {
        long got = 0;
        std::thread t([&got] {
            try {
                got = game::outer_p(6);
            } catch (const oops &e) {
                got = -e.v;
            }
            game::leaf_p(got);
        });
        t.join();
        CHECK(got == -6, "the thread caught it (%ld)", got);
        expect(s, "call outer, call mid, call thrower, exc thrower, exc mid, exc outer, call leaf, ret leaf=-5",
               "7b. in a std::thread");
    }
    CHECK_RC(bpt_trace_pattern(s, "game:*/_", BPT_OFF, nullptr), 12);

    /* 5. 2,000 throws through 20 traced frames, with exception trace and
       call_time: nothing skipped, every frame ended, every call counted. */
    d.name = "cxx-throw-counts";
    CHECK_RC(bpt_session_create(&d, &counts), 0);
    CHECK_RC(bpt_trace_pattern(counts, "game:deep/1", BPT_TIME, nullptr), 1);
    CHECK_RC(bpt_trace_pattern(counts, "game:thrower/1", BPT_TIME, nullptr), 1);
    CHECK_RC(bpt_trace_pattern(s, "game:deep/1", kinds, nullptr), 1);
    {
        const long rounds = check_scale(2000), depth = 20;
        long caught = 0, calls = 0, excs = 0, others = 0;
        static bpt_msg m[4096];
        for (long i = 0; i < rounds; i++) {
            try {
                game::deep_p(depth - 1);
            } catch (const oops &) {
                caught++;
            }
            int n = drain(s, m, 4096);
            for (int k = 0; k < n; k++)
                (m[k].type == BPT_MSG_EXCEPTION_FROM ? excs : m[k].type == BPT_MSG_CALL ? calls : others)++;
        }
        CHECK(caught == rounds, "%ld of %ld throws caught", caught, rounds);
        CHECK(calls == rounds * depth && excs == rounds * depth && others == 0,
              "calls %ld, exception_from %ld (want %ld each), other messages %ld", calls, excs, rounds * depth, others);
        CHECK(info_of(counts, F_deep, BPT_INFO_TIME) == (uint64_t)(rounds * depth), "call_time counted %llu deep calls",
              (unsigned long long)info_of(counts, F_deep, BPT_INFO_TIME));
        CHECK(info_of(counts, F_thrower, BPT_INFO_TIME) == (uint64_t)rounds, "call_time counted %llu thrower calls",
              (unsigned long long)info_of(counts, F_thrower, BPT_INFO_TIME));
        CHECK_RC(bpt_session_stats(s, &st), 0);
        CHECK(st.frames_skipped == 0, "frames skipped: %llu", (unsigned long long)st.frames_skipped);
    }
    CHECK_RC(bpt_trace_pattern(s, "game:deep/1", BPT_OFF, nullptr), 1);

    /* 6. 4 threads throw at once through return-traced frames. */
    CHECK_RC(bpt_trace_pattern(counts, "game:*/_", BPT_OFF, nullptr), 12);
    CHECK_RC(bpt_trace_pattern(counts, "game:catcher/1", BPT_COUNT, nullptr), 1);
    CHECK_RC(bpt_trace_pattern(counts, "game:mid/1", BPT_CALL | BPT_RETURN | BPT_EXCEPTION, nullptr), 1);
    CHECK_RC(bpt_trace_pattern(counts, "game:thrower/1", BPT_CALL | BPT_RETURN | BPT_EXCEPTION | BPT_TIME, nullptr), 1);
    {
        const long per = check_scale(5000);
        std::vector<std::thread> ts;
        long bad[4] = {0, 0, 0, 0};
        for (int t = 0; t < 4; t++)
            ts.emplace_back([t, per, &bad] {
                for (long i = 0; i < per; i++)
                    if (game::catcher_p(i) != 1000 + i) bad[t]++;
            });
        for (auto &t : ts) t.join();
        CHECK(bad[0] + bad[1] + bad[2] + bad[3] == 0, "wrong results: %ld", bad[0] + bad[1] + bad[2] + bad[3]);
        CHECK(info_of(counts, F_catcher, BPT_INFO_COUNT) == (uint64_t)(4 * per), "call_count %llu, want %ld",
              (unsigned long long)info_of(counts, F_catcher, BPT_INFO_COUNT), 4 * per);
        CHECK(info_of(counts, F_thrower, BPT_INFO_TIME) == (uint64_t)(4 * per), "call_time calls %llu, want %ld",
              (unsigned long long)info_of(counts, F_thrower, BPT_INFO_TIME), 4 * per);
        CHECK_RC(bpt_session_stats(counts, &st), 0);
        CHECK(st.frames_skipped == 0, "frames skipped: %llu", (unsigned long long)st.frames_skipped);
    }
    CHECK_RC(bpt_session_destroy(counts), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("C++ exceptions through return-traced native frames")
#endif
