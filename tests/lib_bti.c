/* The shared object of t_native_bti (tests/run builds it with the
   patchable-entry flags, and on aarch64 with -mbranch-protection=bti
   -nostartfiles: its one object then carries the BTI property, and the
   loader maps its code with PROT_BTI on a CPU that has BTI). */
long lib_bti_fn(long x);
long lib_bti_fn(long x) { return x * 2 + 1; }
#if defined(__aarch64__)
/* A function with no landing pad, on the same page: an indirect call to
   it faults (SIGILL) exactly while the page is guarded. */
__asm__(".text\n"
        ".globl lib_bti_unguarded\n"
        ".type lib_bti_unguarded, %function\n"
        "lib_bti_unguarded:\n"
        "    add x0, x0, 2\n"
        "    ret\n"
        ".size lib_bti_unguarded, .-lib_bti_unguarded\n");
#endif
