/* unwind.c: C++ exceptions through return-traced native frames.

   A return-traced frame's slot holds the return trampoline instead of its
   return address (frames.c F1). longjmp never reads that slot, but an
   unwinder does: it looks up each return address's unwind information,
   finds none for the trampoline, and the throw ends in std::terminate. So
   bptrace stands between the C++ runtime and the unwinder, as uftrace does
   around __cxa_throw and __cxa_begin_catch: it defines (interposes) four
   functions of the Itanium C++ ABI and forwards each to the definition
   after it (interpose.h: libgcc_s, libstdc++ or libc++abi).

   U1. Unhook (_Unwind_RaiseException, _Unwind_Resume_or_Rethrow: a throw
       or a rethrow begins; _Unwind_Resume, below): each return-traced frame of the thread gets
       its original return address back in its slot and is marked
       unhooked. The unwinder then walks a plain stack, in its search phase
       and in its cleanup phase. If the call returns (no handler was found:
       std::terminate follows), the frames are hooked again.
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
     C++ runtime (or with -rdynamic); otherwise the library's throw reaches
     the unwinder directly, as without bptrace;
   - a static link with libgcc_eh: its _Unwind_RaiseException and this one
     collide at link time. Define BPT_NO_INTERPOSE there (and a throw
     through a return-traced frame terminates);
   - tcc, which has no native sites, compiles none of this.
   The thread's shadow stack is its own: U1 and U2 run on the throwing
   thread and touch no other thread's frames. */
#include "internal.h"

#if defined(BPT__INTERPOSE)
BPT__INTERPOSED int bpt__hook_raise(void *exc) __asm__("_Unwind_RaiseException");
BPT__INTERPOSED int bpt__hook_rethrow(void *exc) __asm__("_Unwind_Resume_or_Rethrow");
BPT__INTERPOSED void bpt__hook_resume(void *exc) __asm__("_Unwind_Resume");
BPT__INTERPOSED void *bpt__hook_begin_catch(void *exc) __asm__("__cxa_begin_catch");

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
    while (i-- > 0) {
        bpt__frame *fr = &rec->shadow[BPT__STACK_NATIVE][i];
        if (bpt__frame_filling(rec, BPT__STACK_NATIVE, i) || !bpt__frame_mine(rec, BPT__STACK_NATIVE, fr) ||
            fr->sp < below)
            continue;   /* being pushed, another fiber's, ended, or not on this stack */
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

/* U1 around a call that starts an unwind. */
static int bpt__unwind_begin(bpt__atomic_ptr *cache, const char *name, void *exc, uintptr_t sp) {
    int (*next)(void *) = (int (*)(void *))bpt__interposed_next(cache, name);
    bpt__thread *rec = bpt__unwind_frames();
    int rc;
    if (rec) bpt__unwind_rewrite(rec, sp, 0);
    rc = next(exc);
    if ((rec = bpt__unwind_frames())) bpt__unwind_rewrite(rec, sp, 1);   /* no handler: hooked again */
    return rc;
}

/* The stack pointer at this function's entry, which names its place as a
   callee (frames.c's entry sp): the frame address the caller had before
   its call (CFA), less what the call pushed. */
#if defined(__x86_64__)
#  define BPT__HOOK_ENTRY_SP() ((uintptr_t)__builtin_dwarf_cfa() - sizeof(uintptr_t))
#else
#  define BPT__HOOK_ENTRY_SP() ((uintptr_t)__builtin_dwarf_cfa())
#endif

/* U1: a throw (__cxa_throw, std::rethrow_exception). Forwards to the
   unwinder; returns only if it does (_URC_END_OF_STACK: no handler). */
int bpt__hook_raise(void *exc) {
    static bpt__atomic_ptr next;
    return bpt__unwind_begin(&next, "_Unwind_RaiseException", exc, BPT__HOOK_ENTRY_SP());
}

/* U1: a rethrow (`throw;`, __cxa_rethrow). */
int bpt__hook_rethrow(void *exc) {
    static bpt__atomic_ptr next;
    return bpt__unwind_begin(&next, "_Unwind_Resume_or_Rethrow", exc, BPT__HOOK_ENTRY_SP());
}

/* U1: a cleanup is done and the unwind goes on. Never returns. */
void bpt__hook_resume(void *exc) {
    static bpt__atomic_ptr next;
    void (*resume)(void *) = (void (*)(void *))bpt__interposed_next(&next, "_Unwind_Resume");
    bpt__thread *rec = bpt__unwind_frames();
    if (rec) bpt__unwind_rewrite(rec, BPT__HOOK_ENTRY_SP(), 0);
    resume(exc);
}

/* U2: a catch clause begins, in the function that called us. */
void *bpt__hook_begin_catch(void *exc) {
    static bpt__atomic_ptr next;
    void *(*begin)(void *) = (void *(*)(void *))bpt__interposed_next(&next, "__cxa_begin_catch");
    uintptr_t sp = BPT__HOOK_ENTRY_SP();
    bpt__thread *rec = bpt__unwind_frames();
    if (rec && bpt__pin()) {
        bpt__native_settle_dead(rec, sp, 0, "throw");
        bpt__unwind_rewrite(rec, sp, 1);
        bpt__unpin(rec);
    }
    return begin(exc);
}
#endif /* BPT__INTERPOSE */
