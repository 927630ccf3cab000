/* site_x86_64.c: native function entries on x86-64.

   BPT_TRACEABLE compiles a function with 24 NOP bytes before it and a 2-byte
   NOP at its entry (gcc: 90 90, clang: 66 90), after an endbr64 when
   -fcf-protection is on. Registration fills the padding once, while nothing
   can execute it, and makes the entry NOP the one instruction 66 90
   (>>renop); afterwards only the 2-byte entry word ever changes. Both
   entries share the padding; only the resume jump's displacement differs:

   fn-24  &bpt__x86_64_stub (8 bytes; its top two, fn-18 and fn-17, are 0)
   fn-16  bpt_func *, its low 6 bytes (a user-space address fits in 48 bits)
   fn-10  FF 15 EC FF FF FF  call *[fn-24]       the stub returns to fn-4
   fn-4   EB 04 | EB 08      jmp fn+2 | fn+6     on to the word after the site
   fn-2   EB F6              jmp fn-10           the bounce the site jumps to

   plain entry (site = fn)                  endbr64 entry (site = fn+4)
   fn+0   66 90 <-> EB FC    jmp fn-2        fn+0   F3 0F 1E FA        endbr64
                                            fn+4   66 90 <-> EB F8    jmp fn-2

   Why:
   - A thread may sit between gcc's two single-byte NOPs when registration
     makes them 66 90 (it runs 90, a NOP) or, had it not, when the word
     changes; it then executes the jump's displacement byte alone, so that
     byte must be a harmless one-byte instruction: FC is CLD (the direction
     flag is clear at every function entry, SysV ABI 3.2.1), F8 is CLC
     (flags are dead at an entry). Hence the bounce at fn-2: the call sits
     further away than such a displacement reaches.
   - The stub returns where its call came from, fn-4: the CPU's return stack
     predicts that `ret`, and a jump takes it on to the entry's next
     instruction. A stub that rewrote its return slot to skip ahead instead
     mispredicted every hit: 6.5 ns a call more on the AMD EPYC of
     PERFORMANCE.md (bench/ret_predict.c, `make bench` section 1).
   - The stub finds the record with one 8-byte load from fn-18 and one
     shift: the stub's address above it gives the load its two zero bytes.
     The record first and the stub's address after it (until 2026-12-01)
     took a shift each way to clear the address's two low bytes: one
     instruction more in every hit (callgrind: bench/overhead.c).
   - The 2-byte store is atomic as long as it stays within one cache line
     (Intel SDM vol. 3, 9.1.1), which registration checks. The indirect call
     reaches the stub from any distance, and the stub finds the record at a
     fixed offset from its return address, as BEAM finds GenericBp in front
     of the code. */
#include "internal.h"

#if defined(BPT_NATIVE) && defined(__x86_64__)

/* The entry stub: when the record's path_hint says so, call a short
   path with the integer registers alone: the count path,
   bpt__native_count_path(record), for a function that only counts, or
   the call path, bpt__native_call_path(record, args, entry sp), for one
   that only traces calls, the call-return path (the same arguments) for
   one that traces calls and their returns, or the time path (the same
   arguments) for one that only times its calls (>>count path, >>call
   path, >>time path in site_native.c). The count
   path keeps every register but rax (>>keeps regs in port.h), so only rax
   and rdi are saved around it; the call route saves the eight integer
   registers a function's entry may hold. Otherwise, or when the
   short path declines, save the integer and vector argument registers in
   a bpt__regs frame and call bpt__native_entry(record, frame, what the
   short path said). Restore and
   return to fn-4. The ABI leaves rsp 16-aligned here, but before the
   full path the stub realigns it all the same: a caller compiled with
   gcc's IPA stack alignment may not have aligned it. The short routes do
   not: the short paths touch no vector register (>>intregs in port.h), so
   no aligned access of theirs can fault. The frame also holds rbp, so that
   the handler finds the traced function's own return slot at 16(%rbp),
   which return trace swaps (frames.c). Where the count path may use vector
   registers (BPT__COUNT_SAVES_FP, >>intregs in port.h: tcc, a sanitizer)
   it does not keep the others either: the stub then saves the frame,
   vector registers included, before it calls the count path. */
#define BPT__X86_SAVE_XMM \
    "    movaps %xmm0, 80(%rsp)\n" \
    "    movaps %xmm1, 96(%rsp)\n" \
    "    movaps %xmm2, 112(%rsp)\n" \
    "    movaps %xmm3, 128(%rsp)\n" \
    "    movaps %xmm4, 144(%rsp)\n" \
    "    movaps %xmm5, 160(%rsp)\n" \
    "    movaps %xmm6, 176(%rsp)\n" \
    "    movaps %xmm7, 192(%rsp)\n"
#define BPT__X86_LOAD_XMM \
    "    movaps 80(%rsp), %xmm0\n" \
    "    movaps 96(%rsp), %xmm1\n" \
    "    movaps 112(%rsp), %xmm2\n" \
    "    movaps 128(%rsp), %xmm3\n" \
    "    movaps 144(%rsp), %xmm4\n" \
    "    movaps 160(%rsp), %xmm5\n" \
    "    movaps 176(%rsp), %xmm6\n" \
    "    movaps 192(%rsp), %xmm7\n"
typedef char bpt__path_hint_at_0[offsetof(struct bpt_func, path_hint) == 0 ? 1 : -1];   /* the stub reads it there */
#if defined(BPT__COUNT_SAVES_FP)
#  define BPT__X86_XMM_BEFORE_COUNT BPT__X86_SAVE_XMM
#  define BPT__X86_XMM_AFTER_COUNT BPT__X86_LOAD_XMM
#  define BPT__X86_XMM_FOR_ENTRY ""
#else
#  define BPT__X86_XMM_BEFORE_COUNT ""
#  define BPT__X86_XMM_AFTER_COUNT ""
#  define BPT__X86_XMM_FOR_ENTRY BPT__X86_SAVE_XMM
#endif
#define BPT__X86_RECORD_TO_RDI   /* fn-18: the stub's top 2 bytes (0), then the record's 6 */ \
    "    movq -14(%r11), %rdi\n" \
    "    shrq $16, %rdi\n"
#if defined(BPT__COUNT_KEEPS_REGS)
/* >>count route: the count path's common case in the stub itself, steps
   CA1-CA5 for CP1-CP5 (>>count path in site_native.c, whose C is the
   reference): the thread has its record, is quiescent, and pins need no
   fence (membarrier is registered); the active generation counts and no
   return-traced frame is open; the counter page is mapped. Then pin, add
   one to the thread's counter, unpin and return to fn-4, with rax and rdi
   saved and r11 used, and no call: a counted call runs 36 instructions in
   the stub, the hint's dispatch included, where the stub and the C path
   ran 57 (its save of 3 registers, the call, its checks of cases that are
   rare here; callgrind). Anything else goes to the C path with nothing
   changed (label 10: a first hit, a nested pin, a managed thread, pins
   that fence: no membarrier), or, once pinned, unpins and leaves the hit
   to the full path as the C path does (label 12: a frame open, a kind
   other than COUNT or NONE while the hint is COUNT, a counter page not
   mapped). Entered with r11 the record and rax and rdi saved; reads
   bpt__tls_thread, bpt__progress and bpt__active_ix by name (BPT__ASM_READ
   in port.h) and the structures at the offsets checked below. x86-64 only: aarch64 has no add to memory
   that a signal handler cannot split (BPT__SIGNAL_ATOMIC_INC, port.h), so
   a route there would also need the count's mark; its stub calls the C
   path. */
#  define BPT__X86_REC_STATE 0       /* bpt__thread.state */
#  define BPT__X86_REC_DEPTH 96      /* bpt__thread.shadow_depth[BPT__STACK_NATIVE] */
#  define BPT__X86_F_SHORTCUT 64     /* bpt_func.shortcut[0] */
#  define BPT__X86_SC_SHIFT 5        /* sizeof(bpt__shortcut) == 1 << 5 */
#  define BPT__X86_SC_KIND 64        /* + .kind */
#  define BPT__X86_SC_DIR 80         /* + .count_dir */
#  define BPT__X86_SC_OFF 88         /* + .count_off */
#  define BPT__X86_KIND_NONE 0       /* BPT__SHORTCUT_NONE */
#  define BPT__X86_KIND_COUNT 1      /* BPT__SHORTCUT_COUNT */
#  define BPT__X86_PIN_WORD 8        /* bpt__progress.pin_word */
#  define BPT__X86_FUTEX 16          /* bpt__progress.futex */
/* Each offset the assembly uses, and each field's width as it reads it. */
typedef char bpt__x86_route_rec[offsetof(bpt__thread, state) == BPT__X86_REC_STATE &&
                                sizeof(((bpt__thread *)0)->state) == 8 &&
                                sizeof(((bpt__thread *)0)->counts[0]) == 8 &&
                                offsetof(bpt__thread, shadow_depth) + 4 * BPT__STACK_NATIVE == BPT__X86_REC_DEPTH &&
                                sizeof(((bpt__thread *)0)->shadow_depth[0]) == 4 ? 1 : -1];
typedef char bpt__x86_route_sc[offsetof(struct bpt_func, shortcut) == BPT__X86_F_SHORTCUT &&
                               sizeof(bpt__shortcut) == 1u << BPT__X86_SC_SHIFT &&
                               sizeof(((struct bpt_func *)0)->shortcut[0]) == sizeof(bpt__shortcut) &&
                               sizeof(((bpt__shortcut *)0)->kind) == 4 &&
                               sizeof(((bpt__shortcut *)0)->count_dir) == 8 &&
                               sizeof(((bpt__shortcut *)0)->count_off) == 8 &&
                               BPT__X86_F_SHORTCUT + offsetof(bpt__shortcut, kind) == BPT__X86_SC_KIND &&
                               BPT__X86_F_SHORTCUT + offsetof(bpt__shortcut, count_dir) == BPT__X86_SC_DIR &&
                               BPT__X86_F_SHORTCUT + offsetof(bpt__shortcut, count_off) == BPT__X86_SC_OFF &&
                               BPT__SHORTCUT_NONE == BPT__X86_KIND_NONE && BPT__SHORTCUT_COUNT == BPT__X86_KIND_COUNT ? 1 : -1];
typedef char bpt__x86_route_progress[offsetof(struct bpt__progress_state, pin_word) == BPT__X86_PIN_WORD &&
                                     sizeof(bpt__progress.pin_word) == 8 && sizeof(bpt__progress.futex) == 4 &&
                                     sizeof(bpt__atomic_u32) == 4 &&   /* bpt__active_ix (hit.c) */
                                     offsetof(struct bpt__progress_state, futex) == BPT__X86_FUTEX &&
                                     BPT__NEST_MASK == 0xffff && BPT__PIN_FENCE == (uint64_t)1 << 63 ? 1 : -1];
#  define BPT__X86_COUNT_ROUTE \
    /* CA1. The thread's record (initial-exec TLS, as the C path's). */ \
    "    movq bpt__tls_thread@gottpoff(%rip), %rax\n" \
    "    movq %fs:(%rax), %rax\n" \
    "    testq %rax, %rax\n" \
    "    jz 10f\n" \
    /* CA2. Pin, as bpt__pin_rec's quiescent case: the state's low 16 bits */ \
    /* (open pins, ONLINE) are 0, the pin word (acquire: an x86 load) has */ \
    /* no fence flag; store it [B1], the light barrier being this order */ \
    /* (membarrier is registered). */ \
    "    cmpw $0, " BPT__STR(BPT__X86_REC_STATE) "(%rax)\n"      /* the low 16 bits: BPT__NEST_MASK */ \
    "    jne 10f\n" \
    "    movq bpt__progress+" BPT__STR(BPT__X86_PIN_WORD) "(%rip), %rdi\n" \
    "    testq %rdi, %rdi\n"             /* BPT__PIN_FENCE, bit 63 */ \
    "    js 10f\n" \
    "    movq %rdi, " BPT__STR(BPT__X86_REC_STATE) "(%rax)\n" \
    /* CA3. The active generation's shortcut [G2] (acquire: an x86 load) */ \
    /* is COUNT or NONE, and no return-traced frame is open. */ \
    "    movl bpt__active_ix(%rip), %edi\n" \
    "    shlq $" BPT__STR(BPT__X86_SC_SHIFT) ", %rdi\n" \
    "    addq %r11, %rdi\n"              /* the shortcut, less BPT__X86_F_SHORTCUT */ \
    "    cmpl $0, " BPT__STR(BPT__X86_REC_DEPTH) "(%rax)\n" \
    "    jne 12f\n" \
    "    cmpl $" BPT__STR(BPT__X86_KIND_COUNT) ", " BPT__STR(BPT__X86_SC_KIND) "(%rdi)\n" \
    "    jne 11f\n" \
    /* CA4. Add one to the thread's counter, if its page is mapped: one */ \
    /* instruction, which a signal handler cannot split [H1] */ \
    /* (bpt__owner_inc1_u64, port.h). */ \
    "    movq " BPT__STR(BPT__X86_SC_DIR) "(%rdi), %r11\n" \
    "    movq (%rax,%r11), %r11\n"       /* the page, at the record's offset count_dir */ \
    "    testq %r11, %r11\n" \
    "    jz 12f\n" \
    "    movq " BPT__STR(BPT__X86_SC_OFF) "(%rdi), %rdi\n" \
    "    addq $1, (%r11,%rdi,8)\n" \
    /* CA5. Unpin, as bpt__state_store: store 0 [B3], the light barrier */ \
    /* (this order) [B2], and a look at the futex word: a sleeper (or any */ \
    /* flag) leaves the wake to the full path, every register saved. The */ \
    /* state is still the one CA2 stored: a signal handler that pins in */ \
    /* between restores it, and none can make the thread managed or online */ \
    /* while it is pinned (progress.c). */ \
    "13:\n" \
    "    movq $0, " BPT__STR(BPT__X86_REC_STATE) "(%rax)\n" \
    "    cmpl $0, bpt__progress+" BPT__STR(BPT__X86_FUTEX) "(%rip)\n" \
    "    jne 14f\n" \
    "    popq %rdi\n" \
    "    popq %rax\n" \
    "    ret\n" \
    "11:\n"                              /* not COUNT: NONE is done as well */ \
    "    cmpl $" BPT__STR(BPT__X86_KIND_NONE) ", " BPT__STR(BPT__X86_SC_KIND) "(%rdi)\n" \
    "    je 13b\n" \
    "12:\n"                              /* declined once pinned: unpin; the full path's own */ \
    "    movq $0, " BPT__STR(BPT__X86_REC_STATE) "(%rax)\n"    /* unpin wakes a sleeper */ \
    "    movl $" BPT__STR(BPT__PATH_FULL) ", %r11d\n" \
    "    jmp 15f\n" \
    "14:\n" \
    "    movl $" BPT__STR(BPT__PATH_DONE_WAKE) ", %r11d\n" \
    "15:\n" \
    "    popq %rdi\n" \
    "    popq %rax\n" \
    "    jmp 5f\n" \
    "10:\n"
/* The short routes, where the count and call paths keep every register
   but rax (>>keeps regs in port.h). The record and its hint are read with
   r11 alone (free: the entry holds nothing in it), so a function neither
   path can finish goes to the full path at once.
   The count route (BPT__HINT_COUNT): save rax (a variadic callee's count
   of vector arguments) and rdi, run the common case (>>count route, above;
   it returns to fn-4 or goes to the full path itself), else call the C
   path with the record in rdi, and on DONE restore the two and return to
   fn-4. The stub is entered with rsp 16-aligned
   (below), so two words keep it so at the call, as the ABI has it
   (tests/stub_align_check.sh reads rsp at each C function the stub and
   the trampoline call; a third word of padding here had the count path
   entered with rsp 8 off, until 2026-11-28).
   The call route (BPT__HINT_CALL, BPT__HINT_CALL_RETURN, BPT__HINT_TIME:
   the call path, the call-return path or the time path, by the hint):
   each is an ordinary function
   (it saves the registers a callee must keep, and clobbers the others but
   r11's), so push every register a function's entry may hold that it
   may clobber, r9 down to rdi, so that rdi..r9 lie in order at rsp (the
   path's args); 8 words keep the stack 16-aligned. Call with the record in
   rdi, rsp in rsi and the function's entry sp in rdx (above the 8 words
   and the stub's own return address), and pop them all.
   The full path gets what the short path said in r11d. */
#  define BPT__X86_SHORT_ROUTES \
    "    movq (%rsp), %r11\n"             /* return address = fn-4 */ \
    "    movq -14(%r11), %r11\n"          /* fn-18: the stub's top 2 bytes (0), then the record's 6 */ \
    "    shrq $16, %r11\n" \
    "    cmpl $" BPT__STR(BPT__HINT_COUNT) ", (%r11)\n"   /* the record's path_hint, at its offset 0 */ \
    "    jne 6f\n" \
    "    pushq %rax\n" \
    "    pushq %rdi\n"                    /* 2 words: 16-aligned at the call */ \
    BPT__X86_COUNT_ROUTE                  /* >>count route; else on to the C path */ \
    "    movq %r11, %rdi\n" \
    "    call bpt__native_count_path\n" \
    "    cmpl $" BPT__STR(BPT__PATH_DONE) ", %eax\n" \
    "    jne 1f\n" \
    "    popq %rdi\n" \
    "    popq %rax\n" \
    "    ret\n" \
    "1:\n" \
    "    movl %eax, %r11d\n"              /* FULL or WAKE */ \
    "    popq %rdi\n" \
    "    popq %rax\n" \
    "    jmp 5f\n" \
    "6:\n" \
    "    cmpl $" BPT__STR(BPT__HINT_CALL) ", (%r11)\n" \
    "    jb 4f\n"                          /* BPT__HINT_FULL: no short path can finish this function */ \
    "    pushq %rax\n" \
    "    pushq %r10\n" \
    "    pushq %r9\n" \
    "    pushq %r8\n" \
    "    pushq %rcx\n" \
    "    pushq %rdx\n" \
    "    pushq %rsi\n" \
    "    pushq %rdi\n" \
    "    movq %rsp, %rsi\n"               /* args: rdi rsi rdx rcx r8 r9; 16-aligned */ \
    "    leaq 72(%rsp), %rdx\n"           /* the entry sp: 8 words and fn-4 up */ \
    "    movq %r11, %rdi\n" \
    "    jne 8f\n"                         /* the hint's compare above still: CALL_RETURN or TIME */ \
    "    call bpt__native_call_path\n" \
    "    jmp 9f\n" \
    "8:\n" \
    "    cmpl $" BPT__STR(BPT__HINT_CALL_RETURN) ", (%rdi)\n" \
    "    jne 3f\n" \
    "    call bpt__native_call_return_path\n" \
    "    jmp 9f\n" \
    "3:\n" \
    "    call bpt__native_time_path\n" \
    "9:\n" \
    "    popq %rdi\n" \
    "    popq %rsi\n" \
    "    popq %rdx\n" \
    "    popq %rcx\n" \
    "    popq %r8\n" \
    "    popq %r9\n" \
    "    popq %r10\n" \
    "    cmpl $" BPT__STR(BPT__PATH_DONE) ", %eax\n" \
    "    jne 7f\n" \
    "    popq %rax\n" \
    "    ret\n" \
    "7:\n" \
    "    movl %eax, %r11d\n"              /* FULL or WAKE */ \
    "    popq %rax\n" \
    "    jmp 5f\n" \
    "4:\n" \
    "    movl $" BPT__STR(BPT__PATH_FULL) ", %r11d\n" \
    "5:\n"
#  define BPT__X86_FULL_WHAT "    movl %r11d, %edx\n"   /* what the count route said */
#else
#  define BPT__X86_SHORT_ROUTES ""
#  define BPT__X86_FULL_WHAT ""
#endif
__asm__(
    "    .text\n"
    "    .p2align 6\n"                   /* a cache line (>>line aligned, port.h) */
    "    .globl bpt__x86_64_stub\n    .hidden bpt__x86_64_stub\n"   /* global, hidden: gcc's -flto may put this */
                                    /* assembly in a partition of its own (tests/lto_check.sh) */
    "    .type bpt__x86_64_stub, @function\n"
    "bpt__x86_64_stub:\n"
    BPT__X86_SHORT_ROUTES
    "    pushq %rbp\n"
    "    movq %rsp, %rbp\n"
    "    andq $-16, %rsp\n"
    "    subq $208, %rsp\n"
    "    movq %rdi, 0(%rsp)\n"
    "    movq %rsi, 8(%rsp)\n"
    "    movq %rdx, 16(%rsp)\n"
    "    movq %rcx, 24(%rsp)\n"
    "    movq %r8, 32(%rsp)\n"
    "    movq %r9, 40(%rsp)\n"
    "    movq %rax, 48(%rsp)\n"
    "    movq %r10, 56(%rsp)\n"
#if defined(BPT__COUNT_KEEPS_REGS)
    BPT__X86_FULL_WHAT
    "    movq 8(%rbp), %r11\n"             /* fn-4 */
    BPT__X86_RECORD_TO_RDI
#else
    "    movq 8(%rbp), %r11\n"             /* return address = fn-4 */
    BPT__X86_XMM_BEFORE_COUNT
    BPT__X86_RECORD_TO_RDI
    "    xorl %edx, %edx\n"               /* BPT__PATH_FULL, for the full path */
    "    cmpl $" BPT__STR(BPT__HINT_COUNT) ", (%rdi)\n"   /* the record's path_hint, at its offset 0 */
    "    je 6f\n"
    "    cmpl $" BPT__STR(BPT__HINT_CALL) ", (%rdi)\n"
    "    jb 3f\n"                          /* BPT__HINT_FULL: no short path can finish this function */
    "    movq %rsp, %rsi\n"               /* args: the frame's first six words, rdi..r9 */
    "    leaq 16(%rbp), %rdx\n"           /* the entry sp (bpt__arch_entry_sp); the flags stay */
    "    jne 8f\n"
    "    call bpt__native_call_path\n"
    "    jmp 7f\n"
    "8:\n"
    "    cmpl $" BPT__STR(BPT__HINT_CALL_RETURN) ", (%rdi)\n"
    "    jne 9f\n"
    "    call bpt__native_call_return_path\n"
    "    jmp 7f\n"
    "9:\n"
    "    call bpt__native_time_path\n"
    "    jmp 7f\n"
    "6:\n"
    "    call bpt__native_count_path\n"
    "7:\n"
    "    cmpl $" BPT__STR(BPT__PATH_DONE) ", %eax\n"
    "    jne 1f\n"
    BPT__X86_XMM_AFTER_COUNT
    "    jmp 2f\n"
    "1:\n"                                /* the short path said FULL or WAKE */
    "    movl %eax, %edx\n"
    "    movq 8(%rbp), %r11\n"             /* fn-4 again: the count path used r11 */
    BPT__X86_RECORD_TO_RDI
    "3:\n"                                /* the full path, every argument register saved */
#endif
    BPT__X86_XMM_FOR_ENTRY
    "    movq %rbp, 64(%rsp)\n"
    "    movq %rsp, %rsi\n"
    "    call bpt__native_entry\n"
    BPT__X86_LOAD_XMM
    "2:\n"
    "    movq 0(%rsp), %rdi\n"
    "    movq 8(%rsp), %rsi\n"
    "    movq 16(%rsp), %rdx\n"
    "    movq 24(%rsp), %rcx\n"
    "    movq 32(%rsp), %r8\n"
    "    movq 40(%rsp), %r9\n"
    "    movq 48(%rsp), %rax\n"
    "    movq 56(%rsp), %r10\n"
    "    movq %rbp, %rsp\n"
    "    popq %rbp\n"
    "    ret\n"
    "    .size bpt__x86_64_stub, . - bpt__x86_64_stub\n");
/* Hidden, so that references are PC-relative: a GOT entry for a symbol
   local to this object is not reliable (see site_aarch64.c). */
extern __attribute__((visibility("hidden"))) char bpt__x86_64_stub[];

/* The return trampoline (return trace, frames.c). A traced function whose
   return slot the entry handler swapped returns here, with rsp one word
   above that slot. Save the return registers (rax, rdx, and the low 128
   bits of xmm0, xmm1: SysV returns nothing else, x87 st0 aside, which C
   code here leaves alone; so a function returning long double or a 256- or
   512-bit vector must not be return-traced, as api_pattern.h says), ask
   bpt__native_return(slot, saved) for the original return address, restore,
   and jump there. A jmp, not push+ret: the caller's own return addresses
   below stay paired with the return stack buffer. */
__asm__(
    "    .text\n"
    "    .p2align 4\n"
    "    .globl bpt__x86_64_return_trampoline\n    .hidden bpt__x86_64_return_trampoline\n"
    "    .type bpt__x86_64_return_trampoline, @function\n"
    "bpt__x86_64_return_trampoline:\n"
    "    pushq %rbp\n"                    /* lands on the dead return slot */
    "    movq %rsp, %rbp\n"               /* rbp = the slot's address */
    "    andq $-16, %rsp\n"
    "    subq $48, %rsp\n"
    "    movq %rax, 0(%rsp)\n"
    "    movq %rdx, 8(%rsp)\n"
    "    movaps %xmm0, 16(%rsp)\n"
    "    movaps %xmm1, 32(%rsp)\n"
    "    movq %rbp, %rdi\n"
    "    movq %rsp, %rsi\n"
    "    call bpt__native_return\n"
    "    movq %rax, %r11\n"
    "    movaps 16(%rsp), %xmm0\n"
    "    movaps 32(%rsp), %xmm1\n"
    "    movq 0(%rsp), %rax\n"
    "    movq 8(%rsp), %rdx\n"
    "    movq %rbp, %rsp\n"
    "    popq %rbp\n"
    "    jmp *%r11\n"
    "    .size bpt__x86_64_return_trampoline, . - bpt__x86_64_return_trampoline\n");

/* Where the traced function's return address lives while its entry stub
   runs (the slot its caller's call pushed), and the stack pointer at its
   entry, which identifies its frame: the same thing on x86-64. */
BPT__PRIVATE uintptr_t *bpt__arch_ret_slot(bpt__regs *r) { return (uintptr_t *)(uintptr_t)(r->rbp + 16); }
BPT__PRIVATE uintptr_t bpt__arch_entry_sp(const bpt__regs *r) { return (uintptr_t)(r->rbp + 16); }
/* Return addresses are stored as they are (no pointer authentication). */
BPT__PRIVATE uintptr_t bpt__arch_ret_strip(const bpt_func *f, uintptr_t ret) { (void)f; return ret; }
BPT__PRIVATE uintptr_t bpt__arch_ret_sign(const bpt_func *f, uintptr_t ret, uintptr_t sp) { (void)f; (void)sp; return ret; }
/* The call pushed the return address at the entry sp, and there it stays. */
BPT__PRIVATE void bpt__arch_saved_ret_range(uintptr_t entry_sp, uintptr_t below, uintptr_t *lo, uintptr_t *hi) {
    (void)below;
    *lo = entry_sp;
    *hi = entry_sp + sizeof(uintptr_t);
}

static const uint8_t bpt__endbr64[4] = { 0xF3, 0x0F, 0x1E, 0xFA };

/* The padding's code from fn-10: the call, the resume jump (its
   displacement set per entry) and the bounce. */
static const uint8_t bpt__x86_pad_code[10] = { 0xFF, 0x15, 0xEC, 0xFF, 0xFF, 0xFF, 0xEB, 0x00, 0xEB, 0xF6 };
enum { BPT__X86_RECORD_AT = 8, BPT__X86_RECORD_BYTES = 6, BPT__X86_CODE_AT = 14 };   /* pre[]: stub, record, code */

/* Is the padding fresh (24 NOPs) or already ours (registered before)? The
   record bytes may differ: a new registration writes its own. */
static int bpt__x86_pad_ok(const uint8_t *fn, const uint8_t *want) {
    int i, fresh = 1;
    for (i = 0; i < BPT__PAD_BYTES; i++) fresh &= fn[i - BPT__PAD_BYTES] == 0x90;
    return fresh || (memcmp(fn - BPT__PAD_BYTES, want, BPT__X86_RECORD_AT) == 0 &&
                     memcmp(fn - BPT__PAD_BYTES + BPT__X86_CODE_AT, want + BPT__X86_CODE_AT,
                            BPT__PAD_BYTES - BPT__X86_CODE_AT) == 0);
}

BPT__PRIVATE int bpt__arch_entry_layout(void *fnp, const char *name, bpt__entry_layout *l) {
    uint8_t *fn = (uint8_t *)fnp;
    int endbr = memcmp(fn, bpt__endbr64, 4) == 0;
    uint8_t *site = fn + (endbr ? 4 : 0);
    uintptr_t stub = (uintptr_t)bpt__x86_64_stub;
    if (!((site[0] == 0x90 && site[1] == 0x90) || (site[0] == 0x66 && site[1] == 0x90)))
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: entry bytes %02x %02x %02x %02x %02x %02x are not "
                         "BPT_TRACEABLE's (expected 90 90 or 66 90, optionally after endbr64)",
                         name, fnp, fn[0], fn[1], fn[2], fn[3], fn[4], fn[5]);
    if (((uintptr_t)site & 63) == 63)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: the entry word crosses a cache line, so it "
                         "cannot be written atomically", name, fnp);
    if (stub >> 48)   /* the record's load takes the address's top two bytes for zeros */
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: bptrace's entry stub lies at %p, above 2^48, where "
                         "the padding's layout needs it below", name, fnp, (void *)stub);
    memcpy(l->pre, &stub, 8);
    memcpy(l->pre + BPT__X86_CODE_AT, bpt__x86_pad_code, sizeof bpt__x86_pad_code);
    l->pre[BPT__X86_CODE_AT + 7] = (uint8_t)(site + 2 - (fn - 2));   /* jmp fn+2 or fn+6: site+2, from fn-2 */
    if (!bpt__x86_pad_ok(fn, l->pre))
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: the %d bytes before the entry are neither NOPs "
                         "nor bptrace's (compiled without patchable_function_entry(26,24)?)",
                         name, fnp, BPT__PAD_BYTES);
    l->site = site;
    l->word_size = 2;
    /* >>renop: the word an untraced site holds once registered is one
       two-byte NOP, 66 90, whatever the compiler emitted: gcc emits two
       one-byte NOPs, 90 90, and every traceable call, traced or not, ran
       both: the second NOPs were 477 of the 33,216 instructions of one of
       bench/sqlite_flags.c's transactions.
       bpt__native_prepare writes it with the site's one aligned store. A
       thread may run the function meanwhile, and whatever it fetches is a
       NOP: 90 90, 66 90, or a mix of the two words' bytes (which is one of
       them); a thread that stood between gcc's NOPs goes on at the second
       byte, 90 in both. After that no thread can stand inside the word.
       No SYNC_CORE wait follows: a core that still runs the old word runs
       NOPs as well. */
    l->orig_word = 0x9066;   /* 66 90, little-endian */
    l->bp_word = endbr ? 0xF8EB : 0xFCEB;   /* jmp fn-2: EB F8 from fn+6 (CLC alone), EB FC from fn+2 (CLD alone) */
    return 0;
}

/* A slot's trampoline (sites.h): the padding at block+8, the function at
   block+32, whose entry word becomes the breakpoint's jump (it is never
   taken: the slot points at the padding's call, fn-10), then
   fn+2   FF 25 00 00 00 00   jmp *[fn+8]     on to the slot's target
   fn+8   the target (8 bytes, aligned)
   and int3 everywhere else. The stub returns to fn-4, whose jump lands on
   fn+2: the traced function's own return address is still the caller's,
   at the top of the stack, as at any entry. */
BPT__PRIVATE uint8_t *bpt__arch_tramp_init(uint8_t *block, uintptr_t target) {
    static const uint8_t jmp_next[6] = { 0xFF, 0x25, 0, 0, 0, 0 };
    uint8_t *fn = block + 32;
    memset(block, 0xCC, BPT__TRAMP_BYTES);
    memset(fn - BPT__PAD_BYTES, 0x90, BPT__PAD_BYTES);
    fn[0] = 0x66;   /* the entry NOP of a registered site (>>renop) */
    fn[1] = 0x90;
    memcpy(fn + 2, jmp_next, sizeof jmp_next);
    memcpy(fn + 8, &target, sizeof target);
    return fn;
}

/* Where the record goes in the padding: its low 6 bytes at fn-16. Returns 0,
   or BPT_ENOTPATCHABLE when it lies above 2^48 (a BPT_MALLOC that maps
   there, with 5-level paging). */
BPT__PRIVATE int bpt__arch_put_record(uint8_t *pre, const bpt_func *f) {
    uintptr_t p = (uintptr_t)f;
    if (p >> 48)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s:%s: its record at %p lies above 2^48; the entry padding holds "
                         "48 bits of it", f->module, f->name, (const void *)f);
    memcpy(pre + BPT__X86_RECORD_AT, &p, BPT__X86_RECORD_BYTES);   /* little-endian: the low bytes */
    return 0;
}

BPT__PRIVATE const bpt_func *bpt__arch_padding_record(const void *fn) {
    uintptr_t p = 0;
    memcpy(&p, (const uint8_t *)fn - BPT__PAD_BYTES + BPT__X86_RECORD_AT, BPT__X86_RECORD_BYTES);
    return (const bpt_func *)p;
}

/* The one store that switches a site: 2 bytes, atomic within a cache line.
   Instruction fetch on other cores sees it after the SYNC_CORE wait that
   follows every batch of writes (site_native.c). One movw in asm rather than
   a C atomic: a sanitizer must not instrument a store into code (TSAN's
   shadow of text is read-only and faults). */
BPT__PRIVATE void bpt__arch_write_site(uint8_t *site, uint64_t word) {
    __asm__ __volatile__("movw %1, %0" : "=m"(*(uint16_t *)(void *)site) : "r"((uint16_t)word) : "memory");
}

BPT__PRIVATE void bpt__arch_sync_icache(void *start, size_t len) { (void)start; (void)len; }   /* coherent on x86 */

/* >>prefetch (port.h) for writing: prefetchw (0F 0D /1) where CPUID
   0x80000001 says PRFCHW (ECX bit 8), else nothing (prefetcht0 made the
   writer's stores slower). Some early x86-64 processors fault on
   prefetchw (64-bit Windows before 8.1 caught the #UD and patched the
   instruction out), so it runs only where CPUID says so.
   bpt__arch_prefetch_setup asks once, at the permission's seizure (bp.c);
   until then there is no hint. Only the permission's holder reads the
   answer. */
static bpt__atomic_u32 bpt__x86_64_prefetchw;
static pthread_once_t bpt__x86_64_prefetchw_once = PTHREAD_ONCE_INIT;

static void bpt__x86_64_prefetchw_probe(void) {
    uint32_t r[4];
    if (bpt__cpuid_ext(0x80000001u, r)) bpt__store_relaxed_u32(&bpt__x86_64_prefetchw, (r[2] >> 8) & 1);   /* ECX bit 8 */
}

BPT__PRIVATE void bpt__arch_prefetch_setup(void) { pthread_once(&bpt__x86_64_prefetchw_once, bpt__x86_64_prefetchw_probe); }

BPT__PRIVATE void bpt__arch_prefetch_w(const void *p) {
    if (bpt__load_relaxed_u32(&bpt__x86_64_prefetchw)) __asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
}

/* A CET user shadow stack (arch_prctl ARCH_SHSTK_STATUS, Linux 6.6) would
   fault on return trace's swapped return address. The entry stub returns
   where its call came from, which a shadow stack accepts, but no machine
   here runs one, so registration refuses as well until it is tested.
   Returns 0, or BPT_ENOTSUP saying so. */
BPT__PRIVATE int bpt__arch_native_usable(const char *who) {
    unsigned long features = 0;
    if (syscall(SYS_arch_prctl, 0x5005 /* ARCH_SHSTK_STATUS */, &features) == 0 && (features & 1))
        return bpt__fail(BPT_ENOTSUP, "%s: a CET shadow stack is active in this process; bptrace's return "
                         "trace swaps return addresses and would fault", who);
    return 0;
}

#endif /* BPT_NATIVE && __x86_64__ */
