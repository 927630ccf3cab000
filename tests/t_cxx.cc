/* t_cxx: the implementation compiled in a C++ file, as stb-style headers
   are (tests/run builds it with g++, clang++ and aarch64-linux-gnu-g++, the
   last under qemu). Claims, through native C++ functions in a namespace:
   - the atomics, thread-locals and entry stubs of a C++ build work: call
     and return trace give call, return_from with the value, in order, and
     call_count counts exactly (200,000 calls from 2 threads);
   - a C++ exception thrown through a call-traced function (no return
     frame: call trace only) reaches its catch, and the call was traced;
   - a match spec's predicate written as a C++ lambda (no capture) filters
     calls;
   - bpt_register_module names C++ functions demangled (the program has a
     C++ runtime: __cxa_demangle), a pattern with '::' in the function part
     matches them, bpt_func_lookup finds them by that name, and messages
     carry it. (Exceptions through return-traced frames: t_cxx_throw.cc.) */
#ifndef T_IMPLEMENTATION_ELSEWHERE   /* tests/run's g++-c-impl: compiled as C, linked in */
#  define BPTRACE_IMPLEMENTATION
#endif
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <cstring>
#include <stdexcept>
#include <thread>

#if defined(BPT_NATIVE)
namespace game {
BPT_TRACEABLE long step(long x) { return x * 2 + 1; }
BPT_TRACEABLE long guarded(long x) {
    if (x > 2) throw std::runtime_error("too big");
    return x;
}
template <typename T> BPT_TRACEABLE T twice(T x) { return x + x; }
template long twice<long>(long);
}   // namespace game
static long (*volatile twice_p)(long) = game::twice<long>;

static long (*volatile step_p)(long) = game::step;
static long (*volatile guarded_p)(long) = game::guarded;

/* Every message drained now, into m (at most max). */
static int drain(bpt_session s, bpt_msg *m, int max) {
    int n, k = 0;
    while (k < max && (n = bpt_session_drain(s, m + k, max - k)) > 0) k += n;
    return k;
}

int main() {
    bpt_session s;
    bpt_session_desc d = {};
    bpt_match odd = {};
    bpt_msg m[64];
    bpt_info info = {};
    bpt_func *step_f = native_reg((void *)game::step, "game", "step", 1);
    bpt_func *guarded_f = native_reg((void *)game::guarded, "game", "guarded", 1);
    int n, caught = 0;
    if (!step_f || !guarded_f) return CHECK_DONE();
    d.name = "cxx";
    CHECK_RC(bpt_session_create(&d, &s), 0);

    /* Call and return trace. */
    CHECK_RC(bpt_trace_pattern(s, "game:step/1", BPT_CALL | BPT_RETURN, nullptr), 1);
    CHECK(step_p(20) == 41, "the traced function's result");
    n = drain(s, m, 64);
    CHECK(n == 2, "2 messages, got %d", n);
    if (n == 2) {
        CHECK(m[0].type == BPT_MSG_CALL && m[0].nargs == 1 && m[0].args[0] == 20, "call game:step(20)");
        CHECK(m[1].type == BPT_MSG_RETURN_FROM && m[1].value == 41, "return_from game:step/1 -> 41");
        CHECK(m[0].ts_ns <= m[1].ts_ns, "in time order");
    }
    CHECK_RC(bpt_trace_pattern(s, "game:step/1", BPT_OFF, nullptr), 1);

    /* call_count from two std::threads. */
    CHECK_RC(bpt_trace_pattern(s, "game:step/1", BPT_COUNT, nullptr), 1);
    {
        long per = check_scale(100000);
        auto work = [per] { for (long i = 0; i < per; i++) step_p(i); };
        std::thread a(work), b(work);
        a.join();
        b.join();
        CHECK_RC(bpt_trace_info(s, step_f, BPT_INFO_COUNT, &info), 0);
        CHECK(info.count == (uint64_t)(2 * per), "call_count %llu, expected %ld", (unsigned long long)info.count,
              2 * per);
    }
    CHECK_RC(bpt_trace_pattern(s, "game:step/1", BPT_OFF, nullptr), 1);

    /* A throw through a call-traced function: the catch runs. */
    CHECK_RC(bpt_trace_pattern(s, "game:guarded/1", BPT_CALL, nullptr), 1);
    try {
        guarded_p(1);
        guarded_p(5);
    } catch (const std::runtime_error &e) {
        caught = 1;
    }
    CHECK(caught, "the exception reached its catch");
    n = drain(s, m, 64);
    CHECK(n == 2 && m[0].type == BPT_MSG_CALL && m[1].type == BPT_MSG_CALL && m[1].args[0] == 5,
          "both calls traced (%d messages)", n);
    CHECK_RC(bpt_trace_pattern(s, "game:guarded/1", BPT_OFF, nullptr), 1);

    /* A lambda as the match spec's predicate: odd arguments only. */
    odd.pred = [](const uint64_t *args, int nargs, void *) -> int { return nargs == 1 && (args[0] & 1); };
    CHECK_RC(bpt_trace_pattern(s, "game:step/1", BPT_CALL, &odd), 1);
    for (long i = 0; i < 10; i++) step_p(i);
    n = drain(s, m, 64);
    CHECK(n == 5, "5 odd calls of 10, got %d", n);
    CHECK_RC(bpt_trace_pattern(s, "game:step/1", BPT_OFF, nullptr), 1);

    /* Demangled names from the module scan. */
    {
        static char mod[128], name[128];
        bpt_func *tw = nullptr;
        CHECK(bpt_register_module(nullptr) >= 1, "bpt_register_module: %s", bpt_last_error());
        CHECK_RC(bpt_trace_pattern(s, "*:*game::twice<*/_", BPT_CALL, nullptr), 1);
        CHECK_RC(bpt_trace_info_each(s, "*:*game::twice<*/_", BPT_INFO_FLAGS,
                                     [](const bpt_func *, const char *mo, const char *na, int, const bpt_info *,
                                        void *) {
                                         snprintf(mod, sizeof mod, "%s", mo);
                                         snprintf(name, sizeof name, "%s", na);
                                     },
                                     nullptr),
                 1);
        CHECK(strcmp(name, "long game::twice<long>(long)") == 0, "registered as '%s'", name);
        CHECK_RC(bpt_func_lookup(mod, "long game::twice<long>(long)", 0, &tw), 0);
        CHECK(twice_p(21) == 42, "the traced template's result");
        n = drain(s, m, 64);
        CHECK(n == 1 && strcmp(m[0].name, "long game::twice<long>(long)") == 0, "the message names %s",
              n >= 1 ? m[0].name : "nothing");
        CHECK_RC(bpt_trace_pattern(s, "*:*game::twice<*/_", BPT_OFF, nullptr), 1);
    }

    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("C++ native functions traced")
#endif
