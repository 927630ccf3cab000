/* t_imports_lazy:
   A program's store into an import slot the dynamic linker has not bound
   yet, made between bpt_register_imports' scan and its bind (SL3 in
   slots.c): a plthook-style hook installed by another thread while the
   registration runs. Found by review, under gdb: the bind was a plain
   store of the resolved target, which overwrote the program's hook, and
   the program's calls silently stopped reaching it. A test point at the
   bind makes the interleaving exact. Claims:
   - the registration takes the slot (1 registered) and the program's hook
     stays in it; calls through the slot reach the hook;
   - switching call_count on says BPT_ENOTPATCHABLE and leaves the hook:
     the slot holds neither the record's target nor its trampoline;
   - without a hook, the same registration binds the slot to libc's
     function (the linker's choice), which tracing then counts.
   Debian's gcc and clang link lazily by default (tcc cannot be asked to:
   it refuses -z lazy, and has no native sites anyway); a toolchain that
   binds at load (-z now by default) leaves nothing to test, and the test
   says SKIPPED. */
static void t_test_point(const char *where);
#define BPT_TEST_POINT(where) t_test_point(where)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <dlfcn.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(BPT_NATIVE)
/* Not called before registration: their slots stay unbound until then.
   Each is called from its own function, so the call goes through the slot. */
__attribute__((noinline)) static pid_t call_getpgrp(void) { return getpgrp(); }
__attribute__((noinline)) static pid_t call_getppid(void) { return getppid(); }

static int hook_calls;
static pid_t hook(void) { hook_calls++; return 4242; }

typedef struct found { const char *name; void **slot; uintptr_t unbound; } found;
static int find_slot(void **slot, const char *name, uintptr_t target, uintptr_t unbound, void *user) {
    found *f = (found *)user;
    (void)target;
    if (strcmp(name, f->name) != 0) return 0;
    f->slot = slot;
    f->unbound = unbound;
    return 1;
}

static void **hook_into;   /* the slot the "program" hooks at the bind, if set */
static void t_test_point(const char *where) {
    if (hook_into && !strcmp(where, "slots: about to bind a lazy slot")) {
        bpt__store_release_ptr((bpt__atomic_ptr *)(void *)hook_into, (void *)(uintptr_t)hook);
        hook_into = NULL;
    }
}

static void *slot_word(void **slot) { return bpt__load_acquire_ptr((bpt__atomic_ptr *)(void *)slot); }

int main(void) {
    const char *mod = NULL;
    found fg = { "getpgrp", NULL, 0 }, fp = { "getppid", NULL, 0 };
    bpt_session s;
    bpt_info info;
    bpt_func *f;
    void *libc_getppid = dlsym(RTLD_DEFAULT, "getppid");
    int n;
    pid_t r;
    CHECK(bpt__module_imports(NULL, &mod, find_slot, &fg) >= 0, "scan: %s", bpt_last_error());
    CHECK(bpt__module_imports(NULL, &mod, find_slot, &fp) >= 0, "scan: %s", bpt_last_error());
    if (!fg.slot || !fp.slot) return CHECK_SKIP("getpgrp or getppid has no import slot in this program");
    if (!fg.unbound || !fp.unbound)
        return CHECK_SKIP("the slots are bound at load (a toolchain linking with -z now): no lazy slot to test");
    printf("getpgrp's slot %p holds %p (unbound), getppid's %p holds %p\n", (void *)fg.slot, slot_word(fg.slot),
           (void *)fp.slot, slot_word(fp.slot));

    /* The program hooks getpgrp's slot between the scan and the bind. */
    hook_into = fg.slot;
    n = bpt_register_imports(NULL, "getpgrp");
    CHECK(n == 1, "getpgrp's slot registered: %d (%s)", n, bpt_last_error());
    CHECK(hook_into == NULL, "the test point ran");
    CHECK(slot_word(fg.slot) == (void *)(uintptr_t)hook, "the program's hook stays in the slot (it holds %p)",
          slot_word(fg.slot));
    r = call_getpgrp();
    CHECK(r == 4242 && hook_calls == 1, "a call through the slot reaches the hook: %d, %d calls", (int)r,
          hook_calls);

    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "_:getpgrp/_", BPT_COUNT, NULL), BPT_ENOTPATCHABLE);
    printf("switch-on: %s\n", bpt_last_error());
    CHECK(slot_word(fg.slot) == (void *)(uintptr_t)hook, "the hook still in the slot after the refused switch");
    CHECK(bpt_trace_pattern(s, "_:getpgrp/_", BPT_OFF, NULL) >= 0, "off: %s", bpt_last_error());

    /* No hook: bound to libc's function, as the linker would, and traced. */
    n = bpt_register_imports(NULL, "getppid");
    CHECK(n == 1, "getppid's slot registered: %d (%s)", n, bpt_last_error());
    CHECK(slot_word(fp.slot) == libc_getppid, "getppid's slot bound to libc's getppid (%p, holds %p)",
          libc_getppid, slot_word(fp.slot));
    CHECK_RC(bpt_trace_pattern(s, "_:getppid/_", BPT_COUNT, NULL), 1);
    CHECK(call_getppid() == (pid_t)syscall(SYS_getppid), "getppid through the traced slot");
    CHECK_RC(bpt_func_lookup(mod, "getppid", 0, &f), 0);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &info), 0);
    CHECK(info.count == 1, "getppid counted once: %llu", (unsigned long long)info.count);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK(slot_word(fp.slot) == libc_getppid, "getppid's slot holds libc's function again");
    return CHECK_DONE();
}
#else
static void t_test_point(const char *where) { (void)where; }
NATIVE_UNSUPPORTED_MAIN("bpt_register_imports")
#endif
