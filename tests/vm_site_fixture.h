/* vm_site_fixture.h: one VM site for tests of the transport, "vm:f/1":
   its word is 0x1111 and 0x2222 while a breakpoint is set; vm_call(a) runs
   it as an interpreter would, with a as its one argument, and checks that
   the word it executes is the original. Include after check.h. */
#ifndef VM_SITE_FIXTURE_H
#define VM_SITE_FIXTURE_H

static bpt_vm_word word = 0x1111;
static bpt_func *f;

static uint64_t arg0(const void *frame, int i) { (void)i; return *(const uint64_t *)frame; }
static const bpt_vm_ops ops = { arg0, NULL, NULL };

static void vm_call(uint64_t a) {
    bpt_vm_word w = BPT_VM_FETCH(&word);
    if (w == 0x2222) w = bpt_vm_breakpoint(f, &a, NULL);
    CHECK(w == 0x1111, "the site executed %#lx", (unsigned long)w);
}

/* Register the site as vm:f/1: 0, or bpt_register_vm's error. */
static int vm_site_register(void) { return bpt_register_vm(&word, 0x2222, "vm", "f", 1, &ops, &f); }

#endif
