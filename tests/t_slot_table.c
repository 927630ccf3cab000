/* t_slot_table: BPT_TEST_CONCURRENCY
   Function-pointer slots (bpt_register_slot, #21): an engine's table of
   systems built by hand, one table in writable data and one const (in a
   read-only mapping, made writable only while a slot is written).
   - call_count is exact through both tables, on the full path (a slot's
     path_hint is 0: the count path makes no own-call check); switched on and off 4000
     times while 4 threads call through them, every call returns right, and
     the count is exact again after;
   - call trace shows the arguments and return_from the value, read from the
     registers as at a native entry;
   - call_time counts the calls, call_memory the bytes; a call through a
     slot that leaves by longjmp gives exception_from;
   - after everything is off, every slot holds the function again, and the
     const table's page is read-only again;
   - a table's page sealed read-only by the program after registration, then
     opened again: each switch writes it and leaves it as it found it (a
     protection remembered from registration faulted, and took write access
     back);
   - a table whose page is unmapped while traced (its module unloaded
     without bpt_unregister_module): a change that may switch it on says
     BPT_EINVAL and changes nothing; a switch-off, and bpt_session_destroy,
     forget it without a write (BPT_ENOTPATCHABLE once its word is to go),
     and the session's other function is switched off with it. Found by
     review: the switch-off refused too, and destroy then freed a session
     still linked on its functions (a use after free at their next hit);
   - one change over a native entry, a slot and a VM word: each is written
     and counted, and each gets its word back (the site writer checks code
     and VM sites in one pass and swaps slots in another: a writer whose
     slot pass dropped the native entries passed every other test, found
     by review);
   - a change over a native entry and a slot whose page the system refuses
     to make writable: BPT_EPERM, nothing written, the code page
     read+execute again by the end of step 5;
   - a switch-on refused after step 2 allocated (a slot mapped PROT_NONE):
     nothing linked or parked, no counter slot kept, three times over;
   - refusals: NULL, misaligned, outside any mapping, a shared mapping, a
     slot holding data, a slot in code, twice; and BPT_ENOTSUP where there
     are no native sites (tcc). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>

typedef long (*system_fn)(long, long);

/* Not BPT_TRACEABLE: slots need nothing of the function. noinline, so that
   calls through the tables stay calls. */
__attribute__((noinline)) static long physics(long a, long b) { return a * 10 + b; }
__attribute__((noinline)) static long render(long a, long b) { return a - b; }
#if defined(BPT_NATIVE)
#include <setjmp.h>
static jmp_buf out_of_system;
/* A system that leaves by longjmp (exception_from), or accounts memory. */
__attribute__((noinline)) static long jumper(long a, long b) {
    if (a) longjmp(out_of_system, 1);
    bpt_account_memory(b);
    return b;
}
static system_fn systems_jump[1] = { jumper };
static system_fn *volatile table_jump = systems_jump;
#endif

static system_fn systems[2] = { physics, render };                 /* writable data */
static system_fn const systems_ro[2] = { physics, render };        /* .rodata */
static system_fn *volatile table_rw = systems;
static system_fn const *volatile table_ro = systems_ro;

/* A slot that bptrace switches while others call through it is loaded
   with a relaxed atomic load, as bpt_register_slot asks (the same
   instruction as a plain load; a data race in C11 terms without it). */
#if defined(__TINYC__)
#  define LOAD_SLOT(p) (*(p))
#else
#  define LOAD_SLOT(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#endif
static long call_rw(int i, long a, long b) { return LOAD_SLOT(&table_rw[i])(a, b); }
static long call_ro(int i, long a, long b) { return LOAD_SLOT(&table_ro[i])(a, b); }

#if defined(BPT_NATIVE)
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The protection of the mapping holding p, from /proc/self/maps ("r--p"). */
static void maps_perms(const void *p, char out[5]) {
    char line[512];
    FILE *fp = fopen("/proc/self/maps", "r");
    strcpy(out, "????");
    if (!fp) return;
    while (fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
            memcpy(out, perms, 4);
            out[4] = '\0';
            break;
        }
    }
    fclose(fp);
}

/* A table in a page of its own, traced by two sessions together with a VM
   function, then unmapped. */
static void unmapped_table(void) {
    static bpt_vm_word vmw = 0x300;
    const bpt_vm_word bp = 0x3B3B;
    system_fn *page = (system_fn *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bpt_func *vf = NULL, *sf = NULL;
    bpt_session s1, s2;
    int rc;
    CHECK(page != MAP_FAILED, "mmap");
    if (page == MAP_FAILED) return;
    page[0] = physics;
    CHECK_RC(bpt_register_vm(&vmw, bp, "gone", "vm", 0, NULL, &vf), 0);
    CHECK_RC(bpt_register_slot((void **)(void *)page, "gone", "physics", 2, &sf), 0);
    CHECK_RC(bpt_session_create(NULL, &s1), 0);
    CHECK_RC(bpt_session_create(NULL, &s2), 0);
    CHECK_RC(bpt_trace_pattern(s1, "gone:_/_", BPT_CALL, NULL), 2);
    CHECK_RC(bpt_trace_pattern(s2, "gone:_/_", BPT_CALL, NULL), 2);
    munmap((void *)page, 4096);   /* its module unloaded, say */
    CHECK_RC(bpt_trace_pattern(s1, "gone:_/_", BPT_COUNT, NULL), BPT_EINVAL);
    printf("unmapped table, a switch-on: %s\n", bpt_last_error());
    CHECK_RC(bpt_trace_pattern(s1, "gone:_/_", BPT_CALL | BPT_OFF, NULL), 2);   /* s2 keeps the slot's word */
    rc = bpt_session_destroy(s2);   /* the slot's last breakpoint: its word is to go */
    printf("unmapped table, the last session destroyed: %d: %s\n", rc, bpt_last_error());
    CHECK(rc == BPT_ENOTPATCHABLE && strstr(bpt_last_error(), "no longer mapped") != NULL,
          "destroy forgets the slot, and says so (%d)", rc);
    CHECK(vmw == 0x300 && !bpt__load_relaxed_ptr(&vf->gen_bp) && !sf->installed && !bpt__load_relaxed_ptr(&sf->gen_bp),
          "both functions switched off, no breakpoint left on them");
    CHECK_RC(bpt_trace_pattern(s2, "gone:_/_", BPT_COUNT, NULL), BPT_ESESSION);
    CHECK_RC(bpt_unregister(sf), 0);
    CHECK_RC(bpt_unregister(vf), 0);
    CHECK_RC(bpt_session_destroy(s1), 0);
}

static uint64_t count_of(bpt_session s, bpt_func *f) {
    bpt_info info;
    memset(&info, 0, sizeof info);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &info), 0);
    return info.count;
}

#if defined(BPT_NATIVE)
/* One change over the three kinds of site. */
BPT_TRACEABLE long mixed_entry(long a) { return a + 1; }
static long (*volatile mixed_entry_ptr)(long) = mixed_entry;   /* called as the program would */
static system_fn systems_mix[1] = { render };
static system_fn *volatile table_mix = systems_mix;
__attribute__((noinline)) static void mixed_change(void) {
    static bpt_vm_word vm_word = 0x700;
    unsigned char entry[6], now[6];
    bpt_func *fn, *fs, *fv;
    bpt_session s;
    int i;
    long r = 0;
    code_bytes((const void *)mixed_entry, entry, 6);
    entry_as_registered(entry);
    fn = native_reg((void *)mixed_entry, "mix", "entry", 1);
    CHECK_RC(bpt_register_slot((void **)(void *)&systems_mix[0], "mix", "render", 2, &fs), 0);
    CHECK_RC(bpt_register_vm(&vm_word, 0xB0B0, "mix", "vm", 0, NULL, &fv), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "mix:_/_", BPT_COUNT, NULL), 3);
    CHECK(fn && fn->installed && fs->installed && fv->installed && systems_mix[0] != render && vm_word == 0xB0B0,
          "one change installed all three (entry %d, slot %d, vm %d)", fn ? fn->installed : -1, fs->installed,
          fv->installed);
    for (i = 0; i < 3; i++) r += mixed_entry_ptr(i);
    for (i = 0; i < 2; i++) r += LOAD_SLOT(&table_mix[0])(5, i);
    CHECK(r == 6 + 9, "the calls returned right (%ld)", r);
    if (fn) CHECK(count_of(s, fn) == 3, "the entry counted %llu of 3", (unsigned long long)count_of(s, fn));
    CHECK(count_of(s, fs) == 2, "the slot counted %llu of 2", (unsigned long long)count_of(s, fs));
    CHECK_RC(bpt_trace_pattern(s, "mix:_/_", BPT_OFF, NULL), 3);
    code_bytes((const void *)mixed_entry, now, 6);
    CHECK(memcmp(entry, now, 6) == 0 && systems_mix[0] == render && vm_word == 0x700,
          "one change gave each its word back (entry %s, slot %s, vm %#lx)", memcmp(entry, now, 6) ? "not" : "yes",
          systems_mix[0] == render ? "yes" : "not", (unsigned long)vm_word);
    CHECK_RC(bpt_session_destroy(s), 0);
    if (fn) CHECK_RC(bpt_unregister(fn), 0);
    CHECK_RC(bpt_unregister(fs), 0);
    CHECK_RC(bpt_unregister(fv), 0);
}

/* A switch-on refused after step 2 allocated (a slot mapped PROT_NONE,
   which step 2 finds once its pass has allocated breakpoints and counters
   for every function): BPT_EINVAL, and nothing kept: no breakpoint linked
   or parked, no counter slot taken, no word written, three times over;
   then it works once access is back. Found by review of e0e285d, which
   moved the slots' check after the allocations: a refusal that freed only
   the change's arrays kept a counter slot per function at each try. */
static int count_slots_used(void) {
    int i, n = 0;
    for (i = 0; i < (int)(BPT__COUNT_SLOTS / 64); i++) n += __builtin_popcountll(bpt__count_slots.used[i]);
    return n;
}

static void refused_after_allocation(void) {
    static bpt_vm_word words[4] = { 0x1000, 0x1001, 0x1002, 0x1003 };
    static const char *const names[4] = { "a", "b", "c", "d" };
    system_fn *page = (system_fn *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    bpt_func *slot, *vm[4];
    bpt_session s, s2;
    int i, before, round;
    CHECK(page != MAP_FAILED, "mmap");
    if (page == MAP_FAILED) return;
    page[0] = physics;
    CHECK_RC(bpt_register_slot((void **)(void *)page, "refusal", "slot", 2, &slot), 0);
    for (i = 0; i < 4; i++) CHECK_RC(bpt_register_vm(&words[i], 0x9000, "refusal", names[i], 0, NULL, &vm[i]), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_session_create(NULL, &s2), 0);
    CHECK_RC(bpt_trace_pattern(s2, "refusal:b/0", BPT_COUNT, NULL), 1);   /* s's breakpoint on b would be parked */
    before = count_slots_used();
    CHECK(mprotect(page, 4096, PROT_NONE) == 0, "mprotect(PROT_NONE)");
    for (round = 0; round < 3; round++) {
        CHECK_RC(bpt_trace_pattern(s, "refusal:_/_", BPT_COUNT | BPT_CALL, NULL), BPT_EINVAL);
        CHECK(count_slots_used() == before, "try %d: %d counter slots taken, %d before", round, count_slots_used(),
              before);
        CHECK(!bpt__load_relaxed_ptr(&vm[0]->gen_bp) && !bpt__load_relaxed_ptr(&slot->gen_bp) &&
              !((bpt__GenericBp *)bpt__load_relaxed_ptr(&vm[1]->gen_bp))->to_insert,
              "try %d: nothing linked, nothing parked", round);
        CHECK(words[0] == 0x1000 && words[2] == 0x1002 && words[1] == 0x9000, "try %d: no word written", round);
    }
    printf("a switch-on refused after allocating: %s\n", bpt_last_error());
    CHECK(mprotect(page, 4096, PROT_READ | PROT_WRITE) == 0, "mprotect back");
    CHECK_RC(bpt_trace_pattern(s, "refusal:_/_", BPT_COUNT, NULL), 5);
    CHECK_RC(bpt_trace_pattern(s, "refusal:_/_", BPT_OFF, NULL), 5);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_session_destroy(s2), 0);
    CHECK(count_slots_used() == before - 1, "every counter slot given back (%d, %d before s2's)", count_slots_used(),
          before);
    CHECK_RC(bpt_unregister(slot), 0);
    for (i = 0; i < 4; i++) CHECK_RC(bpt_unregister(vm[i]), 0);
    munmap((void *)page, 4096);
}

/* One change over a native entry and a slot in a read-only table whose
   page the system refuses to make writable: BPT_EPERM, nothing written,
   and the entry's code page, opened first, read+execute again at the end
   of step 5 (a writer that returned without closing the code pages passed
   every other test, review of 436c59d, its mutant m3h: step 9's pass,
   which tries the refused sites again, closed the page later, so only the
   protocol observer at step 5 sees it). The refusal comes from this
   mprotect, which bptrace's calls reach before libc's (the program's own
   definition); every other call goes through to the system. */
static uintptr_t refuse_page;   /* mprotect(+PROT_WRITE) of this page fails with EACCES */
static char perms_at_step5[5];
static void perms_observer(int step, int did, uint64_t ns, void *user) {
    (void)did; (void)ns;
    if (step == 5) maps_perms(user, perms_at_step5);
}
int mprotect(void *addr, size_t len, int prot) {
    if (refuse_page && (uintptr_t)addr == refuse_page && (prot & PROT_WRITE)) {
        errno = EACCES;
        return -1;
    }
    return (int)syscall(SYS_mprotect, addr, len, prot);
}
BPT_TRACEABLE long refused_entry(long a) { return a + 2; }
static long (*volatile refused_entry_ptr)(long) = refused_entry;
static system_fn const systems_refused[1] = { physics };   /* .rodata */

__attribute__((noinline)) static void refused_slot_page(void) {
    unsigned char entry[6], now[6];
    char perms[5];
    bpt_func *fn, *fs;
    bpt_session s;
    int rc;
    code_bytes((const void *)refused_entry, entry, 6);
    entry_as_registered(entry);
    fn = native_reg((void *)refused_entry, "refused", "entry", 1);
    if (!fn) return;   /* said by native_reg */
    CHECK_RC(bpt_register_slot((void **)(void *)&systems_refused[0], "refused", "physics", 2, &fs), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    refuse_page = (uintptr_t)&systems_refused[0] & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
    strcpy(perms_at_step5, "none");
    CHECK_RC(bpt_set_protocol_observer(perms_observer, (void *)refused_entry), 0);
    rc = bpt_trace_pattern(s, "refused:_/_", BPT_COUNT, NULL);
    printf("a slot's page refused: %d: %s\n", rc, bpt_last_error());
    CHECK_RC(bpt_set_protocol_observer(NULL, NULL), 0);
    refuse_page = 0;
    CHECK(rc == BPT_EPERM && strstr(bpt_last_error(), "slot's page refused") != NULL,
          "the change says the slot's page was refused (%d)", rc);
    code_bytes((const void *)refused_entry, now, 6);
    maps_perms((const void *)refused_entry, perms);
    CHECK(memcmp(entry, now, 6) == 0 && systems_refused[0] == physics && !fn->installed && !fs->installed,
          "nothing written (entry %s, slot %s)", memcmp(entry, now, 6) ? "changed" : "kept",
          systems_refused[0] == physics ? "kept" : "changed");
    CHECK(strcmp(perms_at_step5, "r-xp") == 0 && strcmp(perms, "r-xp") == 0, "the entry's code page is %s at the "
          "end of step 5 and %s after the change: read+execute, not left writable", perms_at_step5, perms);
    CHECK(refused_entry_ptr(1) == 3 && LOAD_SLOT(&systems_refused[0])(1, 2) == 12, "both still run");
    CHECK_RC(bpt_trace_pattern(s, "refused:_/_", BPT_OFF, NULL), 2);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(fn), 0);
    CHECK_RC(bpt_unregister(fs), 0);
}
#endif

/* Four threads calling through both tables while the trace flips. */
static int stop_callers;                      /* atomic */
static long wrong_results;                    /* atomic */
static void *caller(void *arg) {
    long k = (long)(intptr_t)arg, n = 0;
    while (!__atomic_load_n(&stop_callers, __ATOMIC_RELAXED)) {
        if (call_rw(0, k, 1) != k * 10 + 1 || call_ro(1, k, 1) != k - 1)
            __atomic_fetch_add(&wrong_results, 1, __ATOMIC_RELAXED);
        n++;
    }
    return (void *)(intptr_t)n;
}

int main(void) {
    bpt_session s;
    bpt_func *f_rw = NULL, *f_ro = NULL, *f_render = NULL, *dup = NULL;
    bpt_msg m[16];
    char perms_before[5], perms_after[5], line[256];
    static long not_code = 42;
    void *unmapped;
    int i, n;
    long sum = 0;

    /* Refusals first: each with its code, nothing registered. */
    CHECK_RC(bpt_register_slot(NULL, "engine", "x", 2, &f_rw), BPT_EINVAL);
    CHECK_RC(bpt_register_slot((void **)(void *)((char *)systems + 1), "engine", "x", 2, &f_rw), BPT_EINVAL);
    unmapped = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(unmapped != MAP_FAILED, "mmap");
    munmap(unmapped, 4096);
    CHECK_RC(bpt_register_slot((void **)unmapped, "engine", "x", 2, &f_rw), BPT_EINVAL);
    printf("outside any mapping: %s\n", bpt_last_error());
    {
        static void *holds_data;
        holds_data = &not_code;
        CHECK_RC(bpt_register_slot(&holds_data, "engine", "x", 2, &f_rw), BPT_EINVAL);
        printf("data, not code: %s\n", bpt_last_error());
    }
    CHECK_RC(bpt_register_slot((void **)(void *)(((uintptr_t)physics + 7) & ~(uintptr_t)7), "engine", "x", 2, &f_rw),
             BPT_ENOTPATCHABLE);
    printf("in code: %s\n", bpt_last_error());
    {
        system_fn *shared = (system_fn *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CHECK(shared != MAP_FAILED, "mmap shared");
        if (shared != MAP_FAILED) {
            shared[0] = physics;
            CHECK_RC(bpt_register_slot((void **)(void *)shared, "engine", "x", 2, &f_rw), BPT_EINVAL);
            printf("shared mapping: %s\n", bpt_last_error());
            munmap((void *)shared, 4096);
        }
    }
    CHECK_RC(bpt_func_count(), 0);

    /* A table the program seals after filling it, and opens again. */
    {
        system_fn *page = (system_fn *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        bpt_func *f_page = NULL;
        char p1[5], p2[5];
        CHECK(page != MAP_FAILED, "mmap");
        if (page != MAP_FAILED) {
            page[0] = physics;
            CHECK_RC(bpt_register_slot((void **)(void *)page, "sealed", "physics", 2, &f_page), 0);
            CHECK_RC(bpt_session_create(NULL, &s), 0);
            mprotect((void *)page, 4096, PROT_READ);   /* sealed after registration */
            CHECK_RC(bpt_trace_pattern(s, "sealed:_/_", BPT_COUNT, NULL), 1);
            maps_perms(page, p1);
            CHECK(__atomic_load_n(&page[0], __ATOMIC_RELAXED)(3, 4) == 34 && count_of(s, f_page) == 1, "sealed, traced");
            mprotect((void *)page, 4096, PROT_READ | PROT_WRITE);   /* opened again */
            CHECK_RC(bpt_trace_pattern(s, "sealed:_/_", BPT_OFF, NULL), 1);
            maps_perms(page, p2);
            page[1] = render;   /* the program writes its page: still writable */
            printf("sealed page after the switch on: %s; opened page after the switch off: %s\n", p1, p2);
            CHECK(strcmp(p1, "r--p") == 0 && strcmp(p2, "rw-p") == 0, "each switch left the page as it found it");
            CHECK(page[0] == physics, "restored");
            CHECK_RC(bpt_session_destroy(s), 0);
            CHECK_RC(bpt_unregister(f_page), 0);
        }
    }

    unmapped_table();

    maps_perms(&systems_ro[0], perms_before);
    CHECK_RC(bpt_register_slot((void **)(void *)&systems[0], "engine", "physics", 2, &f_rw), 0);
    CHECK_RC(bpt_register_slot((void **)(void *)&systems_ro[0], "engine_ro", "physics", 2, &f_ro), 0);
    CHECK_RC(bpt_register_slot((void **)(void *)&systems_ro[1], "engine_ro", "render", 2, &f_render), 0);
    CHECK_RC(bpt_register_slot((void **)(void *)&systems[0], "engine", "again", 2, &dup), BPT_EEXIST);
    printf("const table's page: %s\n", perms_before);
    CHECK(perms_before[1] == '-', "the const table is read-only (%s)", perms_before);

    /* call_count, exact through both tables. */
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "_:physics/2", BPT_COUNT, NULL), 2);
    CHECK(systems[0] != physics, "the slot points at its trampoline while traced");
    /* A slot's hits take the full path, which leaves bptrace's own calls
       through it untraced (>>own calls): the count path does not check. */
    CHECK(f_rw->path_hint == 0 && f_ro->path_hint == 0, "a slot's path_hint is 0 (%u %u)", f_rw->path_hint,
          f_ro->path_hint);
    for (i = 0; i < 1000; i++) sum += call_rw(0, i, 1) + call_ro(0, i, 2) + call_ro(1, i, 1);
    CHECK(count_of(s, f_rw) == 1000 && count_of(s, f_ro) == 1000, "counts %llu %llu, expected 1000 each",
          (unsigned long long)count_of(s, f_rw), (unsigned long long)count_of(s, f_ro));
    CHECK(count_of(s, f_render) == 0, "render not counted");
    CHECK_RC(bpt_trace_pattern(s, "_:physics/2", BPT_OFF, NULL), 2);

    /* Call trace with arguments, return_from with the value. */
    {
        bpt_match ms;
        memset(&ms, 0, sizeof ms);
        ms.ret = "i64";
        CHECK_RC(bpt_trace_pattern(s, "engine_ro:render/2", BPT_CALL | BPT_RETURN, &ms), 1);
        CHECK(call_ro(1, 50, 8) == 42, "render through the traced slot");
        n = bpt_session_drain(s, m, 16);
        for (i = 0; i < n; i++) {
            bpt_format_dbg(&m[i], line, sizeof line);
            printf("  %s\n", line);
        }
        CHECK(n == 2 && m[0].type == BPT_MSG_CALL && m[0].nargs == 2 && m[0].args[0] == 50 && m[0].args[1] == 8 &&
              strcmp(m[0].name, "render") == 0 && m[1].type == BPT_MSG_RETURN_FROM && m[1].value == 42,
              "call render(50, 8) and return_from 42: %d messages", n);
        CHECK_RC(bpt_trace_pattern(s, "engine_ro:render/2", BPT_OFF, NULL), 1);
    }

    /* call_time. */
    {
        bpt_info info;
        CHECK_RC(bpt_trace_pattern(s, "engine:physics/2", BPT_TIME, NULL), 1);
        for (i = 0; i < 100; i++) sum += call_rw(0, i, 0);
        memset(&info, 0, sizeof info);
        CHECK_RC(bpt_trace_info(s, f_rw, BPT_INFO_TIME, &info), 0);
        CHECK(info.calls == 100 && info.time_ns > 0, "call_time: %llu calls, %llu ns",
              (unsigned long long)info.calls, (unsigned long long)info.time_ns);
        CHECK_RC(bpt_trace_pattern(s, "engine:physics/2", BPT_OFF, NULL), 1);
    }

    /* Switched on and off under 4 calling threads; exact in steady windows. */
    {
        pthread_t t[4];
        long flips = check_scale(4000), calls = 0, r;
        for (i = 0; i < 4; i++) pthread_create(&t[i], NULL, caller, (void *)(intptr_t)(i + 1));
        for (r = 0; r < flips; r++) {
            CHECK_RC(bpt_trace_pattern(s, "_:_/2", BPT_COUNT, NULL), 3);
            CHECK_RC(bpt_trace_pattern(s, "_:_/2", BPT_OFF, NULL), 3);
        }
        __atomic_store_n(&stop_callers, 1, __ATOMIC_RELAXED);
        for (i = 0; i < 4; i++) {
            void *ret;
            pthread_join(t[i], &ret);
            calls += (long)(intptr_t)ret;
        }
        printf("%ld flips of 3 slots under 4 threads: %ld calls, %ld wrong results\n", flips, calls, wrong_results);
        CHECK(wrong_results == 0, "every call through a switching slot returned right");
        CHECK_RC(bpt_trace_pattern(s, "_:_/2", BPT_COUNT, NULL), 3);
        for (i = 0; i < 500; i++) sum += call_ro(1, i, 0);
        CHECK(count_of(s, f_render) == 500, "after the flips, exact: %llu", (unsigned long long)count_of(s, f_render));
        CHECK_RC(bpt_trace_pattern(s, "_:_/2", BPT_OFF, NULL), 3);
    }

    /* exception_from: a call through a traced slot that leaves by longjmp,
       caught where nothing is traced and reported with bpt_unwind_to; and
       call_memory, charged to the slot's function. */
    {
        bpt_func *f_jump = NULL;
        bpt_info info;
        volatile int unwound = -1;
        CHECK_RC(bpt_register_slot((void **)(void *)&systems_jump[0], "engine", "jumper", 2, &f_jump), 0);
        CHECK_RC(bpt_trace_pattern(s, "engine:jumper/2", BPT_CALL | BPT_RETURN | BPT_EXCEPTION, NULL), 1);
        if (setjmp(out_of_system) == 0) __atomic_load_n(&table_jump[0], __ATOMIC_RELAXED)(1, 2);
        else unwound = bpt_unwind_to(__builtin_frame_address(0));
        CHECK(__atomic_load_n(&table_jump[0], __ATOMIC_RELAXED)(0, 7) == 7, "jumper(0, 7)");
        n = bpt_session_drain(s, m, 16);
        for (i = 0; i < n; i++) {
            bpt_format_dbg(&m[i], line, sizeof line);
            printf("  %s\n", line);
        }
        CHECK(unwound == 1, "bpt_unwind_to dropped %d frames", unwound);
        CHECK(n == 4 && m[0].type == BPT_MSG_CALL && m[1].type == BPT_MSG_EXCEPTION_FROM &&
              strcmp(m[1].exception_class, "unwind") == 0 && m[2].type == BPT_MSG_CALL &&
              m[3].type == BPT_MSG_RETURN_FROM && m[3].value == 7,
              "call, exception_from (unwind), call, return_from 7: %d messages", n);
        CHECK_RC(bpt_trace_pattern(s, "engine:jumper/2", BPT_OFF, NULL), 1);
        CHECK_RC(bpt_trace_pattern(s, "engine:jumper/2", BPT_MEMORY, NULL), 1);
        for (i = 0; i < 10; i++) __atomic_load_n(&table_jump[0], __ATOMIC_RELAXED)(0, 100);
        memset(&info, 0, sizeof info);
        CHECK_RC(bpt_trace_info(s, f_jump, BPT_INFO_MEMORY, &info), 0);
        CHECK(info.calls == 10 && info.memory_bytes == 1000, "call_memory: %llu calls, %llu bytes",
              (unsigned long long)info.calls, (unsigned long long)info.memory_bytes);
        CHECK_RC(bpt_trace_pattern(s, "engine:jumper/2", BPT_OFF, NULL), 1);
        CHECK(systems_jump[0] == jumper, "jumper's slot restored");
        CHECK_RC(bpt_unregister(f_jump), 0);
    }

    /* A slot written behind bptrace's back while traced (as a lazy binding
       still in flight would, slots.c S3): detected when switched off, and
       the slot is then off, not stuck. */
    CHECK_RC(bpt_trace_pattern(s, "engine:physics/2", BPT_COUNT, NULL), 1);
    __atomic_store_n(&systems[0], physics, __ATOMIC_RELAXED);
    CHECK(call_rw(0, 1, 1) == 11, "the call goes straight to the function");
    CHECK_RC(bpt_trace_pattern(s, "engine:physics/2", BPT_OFF, NULL), BPT_ENOTPATCHABLE);
    printf("written behind bptrace's back: %s\n", bpt_last_error());
    CHECK(strstr(bpt_last_error(), "dynamic linker") != NULL, "the message names the dynamic linker");
    CHECK(!f_rw->installed && systems[0] == physics, "the slot is off");

    /* Everything off: the slots hold the functions, the page is read-only. */
    maps_perms(&systems_ro[0], perms_after);
    CHECK(systems[0] == physics && systems_ro[0] == physics && systems_ro[1] == render,
          "every slot holds its function again");
    CHECK(strcmp(perms_before, perms_after) == 0, "the const table's page is %s again (now %s)", perms_before,
          perms_after);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(f_rw), 0);
    CHECK_RC(bpt_unregister(f_ro), 0);
    CHECK_RC(bpt_unregister(f_render), 0);
    /* Registered again with the same function: its record comes back. */
    CHECK_RC(bpt_register_slot((void **)(void *)&systems[0], "engine", "physics", 2, &dup), 0);
    CHECK(dup == f_rw, "the retired record is reused");
    CHECK_RC(bpt_unregister(dup), 0);
    mixed_change();
    refused_slot_page();
    refused_after_allocation();
    printf("sum %ld\n", sum);
    return CHECK_DONE();
}
#else
int main(void) {
    bpt_func *f = NULL;
    CHECK_RC(bpt_register_slot((void **)(void *)&systems[0], "engine", "physics", 2, &f), BPT_ENOTSUP);
    printf("bpt_register_slot: %s\n", bpt_last_error());
    CHECK_RC(bpt_register_imports(NULL, NULL), BPT_ENOTSUP);
    printf("bpt_register_imports: %s\n", bpt_last_error());
    CHECK(call_rw(0, 1, 2) == 12 && call_ro(1, 5, 2) == 3, "the tables still work");
    return CHECK_SKIP("no native sites in this configuration (tcc or BPT_NO_NATIVE): slots need trampolines; "
                      "BPT_ENOTSUP checked");
}
#endif
