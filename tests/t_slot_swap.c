/* t_slot_swap: a slot's compare-and-swap that loses to a program store the
   program then undoes (a plthook-style hook saved and restored, which the
   docs allow: a program store to a slot is never overwritten). Found by
   review: the CAS lost, the re-read found the word bptrace expects again,
   and the writer went on to the code sites' 2-byte (x86-64; 4-byte
   aarch64) store: the slot held the high bits of one pointer and the low
   bits of the other, the call returned success, and the next call
   through the slot crashed. Test points make the interleaving exact:
   before the CAS the "program" stores another function; after the lost
   CAS it puts the expected word back. Claims, switching on and then off:
   the slot holds exactly the trampoline's entry (on), then exactly
   physics (off), and calls through it run and are counted.
   Two more ways a program's own doings met a slot's switch-off (found by
   review):
   - the program stored another function into a traced slot: the switch-off
     left the slot alone (right) but also left the breakpoint on, for good:
     bpt_unregister gave BPT_EBUSY forever. Now the switch-off says
     BPT_ENOTPATCHABLE, the slot keeps the program's function, and the
     breakpoint is off (the trampoline stays valid): unregister works;
   - the slot's page was PROT_NONE at the switch-off: it was taken for
     unmapped and forgotten, the trampoline left in the slot for good. Now
     the change is refused (BPT_EINVAL, nothing changed), and once the
     program gives access back a switch-off restores physics. */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>
#include <sys/mman.h>

#if defined(BPT_NATIVE)
typedef long (*sys_fn)(long, long);
static long physics(long a, long b) { return a + b; }
static long other(long a, long b) { return a - b; }
static sys_fn table[2] = { physics, physics };
static bpt_func *f;

static volatile int arm;
static uint64_t saved;
static void t_test_point(const char *where) {
    if (!arm) return;
    if (!strcmp(where, "slot_swap: before the CAS")) {   /* the program hooks the slot */
        saved = bpt__load_relaxed_u64((bpt__atomic_u64 *)(void *)&table[0]);
        bpt__store_relaxed_u64((bpt__atomic_u64 *)(void *)&table[0], (uint64_t)(uintptr_t)other);
    } else if (!strcmp(where, "slot_swap: the CAS lost")) {   /* and puts it back */
        bpt__store_relaxed_u64((bpt__atomic_u64 *)(void *)&table[0], saved);
        arm = 0;
    }
}

static uint64_t slot_word(void) { return bpt__load_relaxed_u64((bpt__atomic_u64 *)(void *)&table[0]); }
static long call_slot(long a, long b) {
    sys_fn fn = (sys_fn)(uintptr_t)slot_word();
    return fn(a, b);
}

/* The program stores another function into a traced slot. */
static void foreign_word(bpt_session s) {
    bpt_func *g;
    bpt__atomic_u64 *slot = (bpt__atomic_u64 *)(void *)&table[1];
    CHECK_RC(bpt_register_slot((void **)(void *)&table[1], "eng", "second", 2, &g), 0);
    CHECK_RC(bpt_trace_pattern(s, "eng:second/2", BPT_COUNT, NULL), 1);
    CHECK(bpt__load_relaxed_u64(slot) == g->bp_word, "traced: the slot holds the trampoline");
    bpt__store_relaxed_u64(slot, (uint64_t)(uintptr_t)other);   /* the program's store */
    CHECK_RC(bpt_trace_pattern(s, "eng:second/2", BPT_OFF, NULL), BPT_ENOTPATCHABLE);
    CHECK(bpt__load_relaxed_u64(slot) == (uint64_t)(uintptr_t)other, "the program's function left in the slot");
    CHECK_RC(bpt_unregister(g), 0);   /* before: BPT_EBUSY, for good */
}

/* The slot's page has no access at the switch-off. */
static void no_access(bpt_session s) {
    bpt_func *h;
    sys_fn *page = (sys_fn *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED, "mmap");
    if (page == MAP_FAILED) return;
    page[0] = physics;
    CHECK_RC(bpt_register_slot((void **)(void *)page, "eng", "third", 2, &h), 0);
    CHECK_RC(bpt_trace_pattern(s, "eng:third/2", BPT_COUNT, NULL), 1);
    CHECK(mprotect(page, 4096, PROT_NONE) == 0, "mprotect none");
    CHECK_RC(bpt_trace_pattern(s, "eng:third/2", BPT_OFF, NULL), BPT_EINVAL);   /* before: BPT_ENOTPATCHABLE, forgotten */
    CHECK(mprotect(page, 4096, PROT_READ | PROT_WRITE) == 0, "mprotect back");
    CHECK(bpt__load_relaxed_u64((bpt__atomic_u64 *)(void *)page) == h->bp_word, "still traced: the trampoline");
    CHECK_RC(bpt_trace_pattern(s, "eng:third/2", BPT_OFF, NULL), 1);
    CHECK(page[0] == physics, "off once access is back: physics again");
    CHECK_RC(bpt_unregister(h), 0);
    munmap(page, 4096);
}

int main(void) {
    bpt_session s;
    bpt_info in;
    CHECK_RC(bpt_register_slot((void **)(void *)&table[0], "eng", "physics", 2, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    arm = 1;
    CHECK_RC(bpt_trace_pattern(s, "eng:physics/2", BPT_COUNT, NULL), 1);
    CHECK(!arm, "the program's store and its undoing both ran inside the switch-on");
    CHECK(slot_word() == f->bp_word, "on: the slot holds the trampoline's entry 0x%llx, not 0x%llx (torn?)",
          (unsigned long long)f->bp_word, (unsigned long long)slot_word());
    if (slot_word() == f->bp_word) CHECK(call_slot(2, 3) == 5, "a call through the slot");
    memset(&in, 0, sizeof in);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &in), 0);
    CHECK(in.count == (slot_word() == f->bp_word ? 1u : 0u), "counted: %llu", (unsigned long long)in.count);
    arm = 1;
    CHECK_RC(bpt_trace_pattern(s, "eng:physics/2", BPT_OFF, NULL), 1);
    CHECK(!arm, "the program's store and its undoing both ran inside the switch-off");
    CHECK(slot_word() == (uint64_t)(uintptr_t)physics, "off: the slot holds physics again, not 0x%llx (torn?)",
          (unsigned long long)slot_word());
    if (slot_word() == (uint64_t)(uintptr_t)physics) CHECK(call_slot(2, 3) == 5, "a call through the slot, untraced");
    CHECK_RC(bpt_unregister(f), 0);
    foreign_word(s);
    no_access(s);
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
#else
static void t_test_point(const char *where) { (void)where; }
NATIVE_UNSUPPORTED_MAIN("pointer slots need native sites (their trampolines)")
#endif
