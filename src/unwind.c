/* unwind.c: C++ exceptions through return-traced native frames.

   A return-traced frame's slot holds the return trampoline instead of its
   return address (frames.c F1). longjmp never reads that slot, but an
   unwinder does: it looks up each return address's unwind information,
   finds none for the trampoline, and the throw ends in std::terminate. So
   bptrace stands between the C++ runtime and the unwinder, as uftrace does
   around __cxa_throw and __cxa_begin_catch: it defines (interposes) four
   functions of the Itanium C++ ABI, and pthread_exit, and forwards each to
   the definition after it (interpose.h: libgcc_s, libstdc++, libc).

   U1. Unhook (_Unwind_RaiseException, _Unwind_Resume_or_Rethrow: a throw
       or a rethrow begins; _Unwind_Resume, below; pthread_exit's forced
       unwind): each return-traced frame of the thread gets its original
       return address back in its slot and is marked unhooked. The
       unwinder then walks a plain stack, in its search phase and in its
       cleanup phase. If no handler is found, std::terminate sees that
       plain stack too (its frames are ended later, if ever, by F0).
   U2. Catch (__cxa_begin_catch, which a catch clause's landing pad calls
       first): the frames at or below the catcher's stack pointer were
       unwound: exception_from "throw", newest first (F0's rule, with the
       catcher's sp). The frames left are alive: their slots get the
       trampoline back, so their return_from still comes.
   U1 again at _Unwind_Resume, which a cleanup (destructors) calls to go on
   unwinding: a throw caught inside a destructor has hooked the frames
   above it again (U2), and the outer unwind goes on through them. A
   cleanup's traced calls push and pop above the unhooked frames, and F0
   ends the dead frames it meets.

   Where a frame's slot is (bpt__arch_saved_ret_range):
     x86-64: exactly at its entry stack pointer;
     aarch64: somewhere in the function's own frame, where its prologue
       stored x30. U1 rewrites each word of that frame that holds the
       trampoline (stripped of a pointer signature), U2 each word that holds
       the original. An unwritten local that holds a stale copy is
       rewritten too; nothing reads it.

   What is not covered, and what happens then:
   - a catch whose __cxa_begin_catch call does not reach this definition (a
     library that binds it to its own copy): the live frames stay unhooked,
     their returns are not traced, and F0 later ends them as "unwind";
   - aarch64: a function that moved x30 into a callee-saved register, which
     a deeper frame then saved: the slot is not found and std::terminate
     follows, as before;
   - a C program that loads C++ code with dlopen: a program exports these
     definitions to the libraries it loads only when it is linked with the
     C++ runtime, with -rdynamic, or is the LD_PRELOAD agent; otherwise
     the library's throw reaches the unwinder directly, as without
     bptrace. Exported, they forward to the library's own runtime even
     when it was loaded RTLD_LOCAL (interpose.c; t_interpose_local);
   - a static link: the runtime's own definitions win over these weak
     ones where they are linked in (-static-libstdc++: no U2), and where
     they are not, there is nothing to forward to and the first call of
     one aborts with a message (a throw, and pthread_exit too). A fully
     static program defines BPT_NO_INTERPOSE (and a throw through a
     return frame terminates);
   - pthread_cancel: the unwind starts inside the C library, unseen;
   - tcc, which has no native sites, compiles none of this.
   The thread's shadow stack is its own: U1 and U2 run on the throwing
   thread and touch no other thread's frames. */
#include "internal.h"

#if defined(BPT__INTERPOSE)
/* Rewrite, in frame fr's slot range, each word that holds `from` (once
   stripped) with `to` (signed as the function signs its return address).
   below: the lowest address the frame can reach. Returns the words
   rewritten. */
static int bpt__unwind_swap(const bpt__frame *fr, uintptr_t below, uintptr_t from, uintptr_t to) {
    uintptr_t a, b;
    int n = 0;
    bpt__arch_saved_ret_range(fr->sp, below, &a, &b);
    for (a = (a + sizeof(uintptr_t) - 1) & ~(uintptr_t)(sizeof(uintptr_t) - 1); a + sizeof(uintptr_t) <= b;
         a += sizeof(uintptr_t)) {
        uintptr_t *w = (uintptr_t *)a;
        if (bpt__arch_ret_strip(fr->f, *w) != from) continue;
        *w = bpt__arch_ret_sign(fr->f, to, fr->sp);
        n++;
    }
    return n;
}

/* U1 (hook = 0) and U2's second half (hook = 1): walk the thread's native
   frames from the newest, each one's range bounded below by the previous
   (newer) frame's entry sp, starting at `below`, the current sp. A frame
   under construction or below the walk (another stack) is left alone; a
   tail call's frame has no slot of its own (the frame it replaced has it). */
static void bpt__unwind_rewrite(bpt__thread *rec, uintptr_t below, int hook) {
    uint32_t i = rec->shadow_depth[BPT__STACK_NATIVE];
    uintptr_t alt_lo, alt_hi;
    (void)bpt__altstack_bounds(rec, below, &alt_lo, &alt_hi);
    while (i-- > 0) {
        bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][i];
        int fr_alt = fr->sp >= alt_lo && fr->sp < alt_hi, below_alt = below >= alt_lo && below < alt_hi;
        if (bpt__frame_filling(rec, BPT__STACK_NATIVE, i) || !bpt__frame_mine(rec, BPT__STACK_NATIVE, fr) ||
            fr->sp < below || fr_alt != below_alt)
            continue;   /* being pushed, another fiber's, ended, or not on this stack (a handler's
                           throw on the sigaltstack unwinds only the sigaltstack) */
        if (fr->ret == 0) continue;
        if (!hook && !fr->unhooked)
            fr->unhooked = bpt__unwind_swap(fr, below, BPT__RETURN_TRAMPOLINE, fr->ret) > 0;
        else if (hook && fr->unhooked) {
            bpt__unwind_swap(fr, below, fr->ret, BPT__RETURN_TRAMPOLINE);
            fr->unhooked = 0;   /* rewritten, or its slot is gone: F0 or F2 will end it */
        }
        below = fr->sp;
    }
}

/* The thread's record if it has native frames, else NULL. */
static bpt__thread *bpt__unwind_frames(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    return rec && rec->shadow_depth[BPT__STACK_NATIVE] ? rec : NULL;
}

/* The entry stubs. Each interposed function is a few instructions of
   assembly: save its one argument, call its C half with the stack pointer
   it was entered with (exact: the entry sp that names a callee's place, as
   frames.c's), restore the argument and jump to the runtime's definition,
   which the C half returns. So no frame of bptrace's is on the stack while
   the unwinder runs (the unwinder needs no unwind information of ours, and
   a failed search returns straight to __cxa_throw, whose std::terminate
   then sees the original return addresses), and the runtime's function
   returns to the original caller. The definitions are weak: where the
   runtime's own is linked in statically (-static-libstdc++), the link
   keeps the runtime's and this step does not happen (a throw through a
   return frame then calls std::terminate; a catch ends its frames later,
   as "unwind"). */
#if defined(__x86_64__)
#  define BPT__UNWIND_STUB(name, half)                                        \
    "    .text\n    .p2align 4\n    .weak " name "\n"                          \
    "    .type " name ", @function\n" name ":\n"                              \
    "    push %rdi\n"                  /* the argument; the stack aligned */  \
    "    lea 8(%rsp), %rdi\n"          /* the entry sp: the return address */ \
    "    call " half "\n"                                                    \
    "    pop %rdi\n"                                                         \
    "    jmp *%rax\n"                  /* the runtime's, to our caller */     \
    "    .size " name ", . - " name "\n"
#else
#  define BPT__UNWIND_STUB(name, half)                                        \
    "    .text\n    .p2align 4\n    .weak " name "\n"                          \
    "    .type " name ", %function\n" name ":\n"                              \
    "    hint #34\n"                   /* bti c: a NOP without BTI */         \
    "    stp x0, x30, [sp, #-16]!\n"                                         \
    "    add x0, sp, #16\n"            /* the entry sp */                     \
    "    bl " half "\n"                                                      \
    "    mov x16, x0\n"                                                      \
    "    ldp x0, x30, [sp], #16\n"                                           \
    "    br x16\n"                     /* the runtime's, to our caller */     \
    "    .size " name ", . - " name "\n"
#endif
__asm__(BPT__UNWIND_STUB("_Unwind_RaiseException", "bpt__unwind_raise")
        BPT__UNWIND_STUB("_Unwind_Resume_or_Rethrow", "bpt__unwind_rethrow")
        BPT__UNWIND_STUB("_Unwind_Resume", "bpt__unwind_resume")
        BPT__UNWIND_STUB("pthread_exit", "bpt__unwind_exit")
        BPT__UNWIND_STUB("__cxa_begin_catch", "bpt__unwind_catch"));

/* U1, then the runtime's definition of name. */
static uintptr_t bpt__unwind_leave(bpt__atomic_ptr *next, const char *name, uintptr_t sp) {
    bpt__thread *rec = bpt__unwind_frames();
    if (rec) bpt__unwind_rewrite(rec, sp, 0);
    return (uintptr_t)bpt__interposed_next(next, name);
}

/* U1: a throw (__cxa_throw, std::rethrow_exception). */
BPT__ASM_CALLED uintptr_t bpt__unwind_raise(uintptr_t sp) {
    static bpt__atomic_ptr next;
    return bpt__unwind_leave(&next, "_Unwind_RaiseException", sp);
}

/* U1: a rethrow (`throw;`, __cxa_rethrow). */
BPT__ASM_CALLED uintptr_t bpt__unwind_rethrow(uintptr_t sp) {
    static bpt__atomic_ptr next;
    return bpt__unwind_leave(&next, "_Unwind_Resume_or_Rethrow", sp);
}

/* U1: a cleanup is done and the unwind goes on. */
BPT__ASM_CALLED uintptr_t bpt__unwind_resume(uintptr_t sp) {
    static bpt__atomic_ptr next;
    return bpt__unwind_leave(&next, "_Unwind_Resume", sp);
}

/* U1: pthread_exit's forced unwind, which runs the C++ destructors (and
   pthread_cleanup handlers) of every frame on the way. A cancellation
   (pthread_cancel) unwinds from inside the C library, unseen: a return
   frame stops its unwind, and the destructors above it do not run. */
BPT__ASM_CALLED uintptr_t bpt__unwind_exit(uintptr_t sp) {
    static bpt__atomic_ptr next;
    return bpt__unwind_leave(&next, "pthread_exit", sp);
}

/* U2: a catch clause begins, in the function that called us. */
BPT__ASM_CALLED uintptr_t bpt__unwind_catch(uintptr_t sp) {
    static bpt__atomic_ptr next;
    bpt__thread *rec = bpt__unwind_frames();
    if (rec && bpt__pin()) {
        bpt__native_settle_dead(rec, sp, 0, "throw");
        bpt__unwind_rewrite(rec, sp, 1);
        bpt__unpin(rec);
    }
    return (uintptr_t)bpt__interposed_next(&next, "__cxa_begin_catch");
}
#endif /* BPT__INTERPOSE */
