/* bench/ret_predict.c (section 1, x86-64): why the entry stub returns where
   its call came from (site_x86_64.c). A loop calls a 3-instruction function
   whose first instruction calls a stub, as an entry with a breakpoint does:
   - "ret to its call": the stub returns to the address its call pushed,
     which jumps on (bptrace's layout since issue 16);
   - "ret to +2": the stub adds 2 to its return address and returns there,
     skipping a 2-byte instruction (bptrace's layout before): the CPU's
     return stack predicted the pushed address, so every return mispredicts;
   - "pop + jmp": the stub pops its return address and jumps past it.
   ns per call, median of 9 runs of 20,000,000 calls (min..max), and the
   ratio to the first. */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime under -std=c11 (bench.h) */
#include "bench.h"

#if defined(__x86_64__)
__asm__(
    "    .text\n"
    "ret_stub_norm: ret\n"
    "ret_stub_skip: addq $2, (%rsp)\n"
    "    ret\n"
    "ret_stub_pj: popq %r11\n"
    "    addq $2, %r11\n"
    "    jmp *%r11\n"
    "ret_f_norm: call ret_stub_norm\n"
    "    jmp 1f\n"
    "1:  ret\n"
    "ret_f_skip: call ret_stub_skip\n"
    "    .byte 0xeb, 0xfb\n"            /* the 2-byte instruction the stub skips */
    "    ret\n"
    "ret_f_pj: call ret_stub_pj\n"
    "    .byte 0xeb, 0xfb\n"
    "    ret\n"
    "ret_loop_norm: call ret_f_norm\n"
    "    dec %rdi\n"
    "    jnz ret_loop_norm\n"
    "    ret\n"
    "ret_loop_skip: call ret_f_skip\n"
    "    dec %rdi\n"
    "    jnz ret_loop_skip\n"
    "    ret\n"
    "ret_loop_pj: call ret_f_pj\n"
    "    dec %rdi\n"
    "    jnz ret_loop_pj\n"
    "    ret\n");
void ret_loop_norm(long n), ret_loop_skip(long n), ret_loop_pj(long n);

enum { RUNS = 9 };
static const long CALLS = 20000000;

int main(void) {
    static void (*const loops[3])(long) = { ret_loop_norm, ret_loop_skip, ret_loop_pj };
    static const char *const names[3] = { "stub ret to its call, then a jmp", "stub ret to +2 (mispredicted)",
                                          "stub pop + jmp to +2" };
    double v[3][RUNS];
    bench_stat s[3];
    char what[96], ratio[32];
    for (int r = 0; r < RUNS; r++)
        for (int k = 0; k < 3; k++) {   /* interleaved */
            uint64_t t0 = bench_now();
            loops[k](CALLS);
            v[k][r] = (double)(bench_now() - t0) / (double)CALLS;
        }
    for (int k = 0; k < 3; k++) s[k] = bench_stats(v[k], RUNS);
    for (int k = 0; k < 3; k++) {
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
