/* t_nested_hits: the two states a signal handler's hit can interrupt on its
   own thread, set up by hand so that each guard is tested every run, not
   by the luck of t_hostile's timing (issue #17, item 4). White box: the
   test includes the implementation and edits the thread's record.
   - A frame being pushed (reserved, not yet filled) holds a previous
     frame's stack pointer. A nested call that settled dead frames by it
     ended it, and the interrupted function's return then found no frame
     (an abort). Marked as being filled, it stays: checked with a stale
     stack pointer below every live one.
   - A charge of call_time tables that the thread is already updating is
     dropped and counted (lost), not interleaved with the update; a charge
     of other tables (another function) goes ahead. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>

#if defined(BPT_NATIVE)
BPT_TRACEABLE int64_t g(int64_t x) { return x + 1; }
BPT_TRACEABLE int64_t f(int64_t x) { return x * 3; }
static int64_t (*volatile p_g)(int64_t) = g, (*volatile p_f)(int64_t) = f;

/* A frame reserved at the top of the native shadow stack and not filled:
   its stack pointer is `stale`. */
static void fake_reserved_frame(bpt__thread *rec, uintptr_t stale) {
    uint32_t d = rec->shadow_depth[BPT__STACK_NATIVE];
    bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][d];
    memset(fr, 0, sizeof *fr);
    fr->sp = stale;
    rec->shadow_filling[BPT__STACK_NATIVE] = d + 1;
    rec->shadow_depth[BPT__STACK_NATIVE] = d + 1;
}

static bpt__BpTimem *timem_of(bpt_func *fn) {
    bpt__GenericBp *gb = (bpt__GenericBp *)bpt__load_acquire_ptr(&fn->gen_bp);
    return gb ? bpt__timem_of(&gb->data[bpt_active_bp_ix()]) : NULL;
}

static uint64_t time_calls(bpt_session s, bpt_func *fn) {
    bpt_info in;
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, fn, BPT_INFO_TIME, &in), 0);
    return in.calls;
}

int main(void) {
    bpt_func *fg = native_reg((void *)g, "n", "g", 1), *ff = native_reg((void *)f, "n", "f", 1);
    bpt_session s;
    bpt__thread *rec;
    bpt__BpTimem *tf;
    uint32_t d;
    uint64_t lost0;
    if (!fg || !ff) return CHECK_DONE();
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "n:_/_", BPT_CALL | BPT_RETURN | BPT_TIME, NULL), 2);
    CHECK(p_g(1) == 2, "g(1)");   /* the thread's record and shadow stack exist from here */
    rec = bpt__thread_self_or_null();
    CHECK(rec && rec->shadow[BPT__STACK_NATIVE], "a shadow stack");
    if (!rec || !rec->shadow[BPT__STACK_NATIVE]) return CHECK_DONE();

    /* 1. A frame being filled survives a nested call's settle. */
    d = rec->shadow_depth[BPT__STACK_NATIVE];
    fake_reserved_frame(rec, (uintptr_t)1);   /* a stale stack pointer below every live frame */
    CHECK(p_g(2) == 3, "g(2) with a frame being pushed under it");
    CHECK(rec->shadow_depth[BPT__STACK_NATIVE] == d + 1, "the frame being filled was ended by a nested "
          "call (depth %u, expected %u)", rec->shadow_depth[BPT__STACK_NATIVE], d + 1);
    rec->shadow_depth[BPT__STACK_NATIVE] = d;   /* the interrupted push would go on; here, undo it */
    rec->shadow_filling[BPT__STACK_NATIVE] = 0;

    /* 2. A charge nested in an update of the same tables is dropped and counted. */
    CHECK_RC(bpt_trace_pattern(s, "n:_/_", BPT_CALL | BPT_OFF, NULL), 2);   /* call_time stays */
    (void)time_calls(s, ff);   /* a collection: fresh tables */
    tf = timem_of(ff);
    CHECK(tf != NULL, "f's call_time tables");
    if (!tf) return CHECK_DONE();
    p_f(1);   /* f's table for this thread exists */
    lost0 = bpt__load_relaxed_u64(&tf->lost);
    rec->timem_charging[0] = tf;   /* as if interrupted inside a charge of f's tables */
    rec->timem_depth = 1;
    p_f(2);
    p_g(3);
    rec->timem_depth = 0;
    CHECK(bpt__load_relaxed_u64(&tf->lost) - lost0 == 2, "f's call and return charges, nested in an update of "
          "f's tables, were dropped: %llu lost", (unsigned long long)(bpt__load_relaxed_u64(&tf->lost) - lost0));
    CHECK(time_calls(s, ff) == 1, "f: 1 call charged (the nested one dropped), not %llu",
          (unsigned long long)time_calls(s, ff));
    CHECK(time_calls(s, fg) == 3, "g: the nested charge of other tables went ahead: 3 calls, not %llu",
          (unsigned long long)time_calls(s, fg));
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("a frame being pushed, and a call_time update, under a nested hit")
#endif
