/* bench/ret_predict.c (section 1, x86-64): why the entry stub returns where
   its call came from (site_x86_64.c). A loop calls a 3-instruction function
   whose first instruction calls a stub, as an entry with a breakpoint does:
   - "ret to its call": the stub returns to the address its call pushed,
     which jumps on (bptrace's layout since issue 16);
   - "ret to +2": the stub adds 2 to its return address and returns there,
     skipping a 2-byte instruction (bptrace's layout before): the CPU's
     return stack predicted the pushed address, so every return mispredicts;
   - "pop + jmp": the stub pops its return address and jumps past it.
   Then the return of a return-traced call, the function called from 4
   call sites in turn:
   - "return trace, swapped slot": the stub swaps the caller's
     return address for a trampoline's and keeps it aside; the function's
     ret goes to the trampoline, which jumps to the kept address, as
     bptrace's return trace does (frames.c, F1). The return stack
     predicted the caller: every such return mispredicts;
   - "return trace, body called": after the stub, the caller's return
     address is kept aside (popped), the function's body is called, and
     its ret comes back to that call; the kept address is pushed and
     returned to, which the return stack predicts (its entry is the
     caller's own call's). What a layout that calls the body from its
     padding would cost; bptrace does not do this (PERFORMANCE.md).
   Each piece of code starts a 64-byte line of its own, so that adding one
   moves no other (the first row ran 0.55 or 2.2 ns a call as the code
   before it grew by 16 bytes).
   ns per call, median of 9 runs of 20,000,000 calls (min..max), and the
   ratio to the first. */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime under -std=c11 (bench.h) */
#include "bench.h"

#if defined(__x86_64__)
__asm__(
    "    .text\n"
    "    .p2align 6\n"
    "ret_stub_norm: ret\n"
    "    .p2align 6\n"
    "ret_stub_skip: addq $2, (%rsp)\n"
    "    ret\n"
    "    .p2align 6\n"
    "ret_stub_pj: popq %r11\n"
    "    addq $2, %r11\n"
    "    jmp *%r11\n"
    "    .p2align 6\n"
    "ret_f_norm: call ret_stub_norm\n"
    "    jmp 1f\n"
    "1:  ret\n"
    "    .p2align 6\n"
    "ret_f_skip: call ret_stub_skip\n"
    "    .byte 0xeb, 0xfb\n"            /* the 2-byte instruction the stub skips */
    "    ret\n"
    "    .p2align 6\n"
    "ret_f_pj: call ret_stub_pj\n"
    "    .byte 0xeb, 0xfb\n"
    "    ret\n"
    "    .p2align 6\n"
    "ret_loop_norm: call ret_f_norm\n"
    "    dec %rdi\n"
    "    jnz ret_loop_norm\n"
    "    ret\n"
    "    .p2align 6\n"
    "ret_loop_skip: call ret_f_skip\n"
    "    dec %rdi\n"
    "    jnz ret_loop_skip\n"
    "    ret\n"
    "    .p2align 6\n"
    "ret_loop_pj: call ret_f_pj\n"
    "    dec %rdi\n"
    "    jnz ret_loop_pj\n"
    "    ret\n"
    /* Return trace, swapped: one word aside (the loop does not nest). */
    "    .p2align 6\n"
    "ret_stub_swap: movq 8(%rsp), %r11\n"      /* the caller's return address */
    "    movq %r11, ret_kept(%rip)\n"
    "    leaq ret_tramp(%rip), %r11\n"
    "    movq %r11, 8(%rsp)\n"
    "    ret\n"
    "    .p2align 6\n"
    "ret_tramp: jmp *ret_kept(%rip)\n"
    "    .p2align 6\n"
    "ret_f_swap: call ret_stub_swap\n"
    "    jmp 1f\n"
    "1:  ret\n"
    /* Return trace, body called. */
    "    .p2align 6\n"
    "ret_f_body: call ret_stub_norm\n"
    "    popq ret_kept(%rip)\n"                 /* the caller's return address, aside */
    "    call 2f\n"                             /* the body */
    "    pushq ret_kept(%rip)\n"
    "    ret\n"
    "2:  ret\n"
    "    .p2align 6\n"
    "ret_loop_swap: call ret_f_swap\n"
    "    call ret_f_swap\n"
    "    call ret_f_swap\n"
    "    call ret_f_swap\n"
    "    sub $4, %rdi\n"
    "    jg ret_loop_swap\n"
    "    ret\n"
    "    .p2align 6\n"
    "ret_loop_body: call ret_f_body\n"
    "    call ret_f_body\n"
    "    call ret_f_body\n"
    "    call ret_f_body\n"
    "    sub $4, %rdi\n"
    "    jg ret_loop_body\n"
    "    ret\n"
    "    .data\n"
    "    .p2align 3\n"
    "ret_kept: .quad 0\n"
    "    .text\n");
void ret_loop_norm(long n), ret_loop_skip(long n), ret_loop_pj(long n), ret_loop_swap(long n), ret_loop_body(long n);

enum { RUNS = 9 };
static const long CALLS = 20000000;

int main(void) {
    enum { K = 5 };
    static void (*const loops[K])(long) = { ret_loop_norm, ret_loop_skip, ret_loop_pj, ret_loop_swap, ret_loop_body };
    static const char *const names[K] = { "stub ret to its call, then a jmp", "stub ret to +2 (mispredicted)",
                                          "stub pop + jmp to +2", "return trace, swapped slot",
                                          "return trace, body called" };
    double v[K][RUNS];
    bench_stat s[K];
    char what[96], ratio[32];
    for (int r = 0; r < RUNS; r++)
        for (int k = 0; k < K; k++) {   /* interleaved */
            uint64_t t0 = bench_now();
            loops[k](CALLS);
            v[k][r] = (double)(bench_now() - t0) / (double)CALLS;
        }
    for (int k = 0; k < K; k++) s[k] = bench_stats(v[k], RUNS);
    for (int k = 0; k < K; k++) {
        snprintf(what, sizeof what, "return probe: %s", names[k]);
        snprintf(ratio, sizeof ratio, "%.2fx", s[k].med / s[0].med);
        bench_row("1", what, s[k], "ns/call", ratio);
    }
    return 0;
}
#else
int main(void) {
    printf("1    SKIPPED return probe: x86-64 only\n");
    return 0;
}
#endif
