/* site_aarch64.c: native function entries on aarch64.

   BPT_TRACEABLE compiles a function with 8 NOP words before it and one NOP
   at its entry, after a bti c or paciasp with -mbranch-protection. The
   padding is filled once at registration; afterwards only the entry word
   changes:

   fn-32  bpt_func *                  (8 bytes, read by the stub)
   fn-24  &bpt__aarch64_stub          (8 bytes, the literal loaded at fn-12)
   fn-16  AA1E03E9  mov x9, x30       keep the caller's return address
   fn-12  58FFFFB0  ldr x16, fn-24
   fn-8   D63F0200  blr x16           x30 = fn-4: the stub finds the record at x30-28
   fn-4   B site+4                    the stub returns here: on past the site
   site   D503201F  nop  <->  B fn-16 (the only word patched at run time)

   The stub returns to fn-4, where its blr came from, so the return stack
   predicts its `ret`; a stub that returned straight to site+4 would be
   mispredicted on every hit (site_x86_64.c measures the same on x86-64).

   NOP and B are on the ARM ARM's list of instructions that may be changed
   while another core executes them (B2.2.5, "concurrent modification and
   execution of instructions"), as Linux arm64 ftrace relies on. Each write is
   followed by cache maintenance here (clean D, invalidate I) and by a
   SYNC_CORE wait in the protocol (an ISB on every core). The literals are
   written only at registration, while nothing can reach them, because an
   8-byte store to a possibly 4-aligned address is not single-copy atomic. */
#include "internal.h"

#if defined(BPT_NATIVE) && defined(__aarch64__)

#define BPT__A64_NOP 0xD503201Fu

/* The entry stub: `hint #34` is bti c (a landing pad for the blr). It
   saves x0-x9 and its own return address (fn-4) in a bpt__regs frame and,
   when the record's path_hint says so, calls a short path with the
   integer registers alone: the count path, bpt__native_count_path(record),
   for a function that only counts, or the call path,
   bpt__native_call_path(record, frame, entry sp), for one that only
   traces calls, or the call-return path, bpt__native_call_return_path
   (the same arguments), for one that traces calls and their returns, or
   the time path, bpt__native_time_path (the same arguments), for one
   that only times its calls (>>count path, >>call path, >>time path in
   site_native.c). Otherwise, or when the
   short path declines, it saves q0-q7 too and calls
   bpt__native_entry(record, frame, what the short path said). Then it
   restores, puts the caller's return address back in x30 and returns to
   fn-4 with `ret x16`. Where the count path may use the vector registers
   (BPT__COUNT_SAVES_FP, >>intregs in port.h: clang has no
   general-regs-only for aarch64) they are saved before it instead. */
#define BPT__A64_SAVE_Q \
    "    stp q0, q1, [sp, #80]\n" \
    "    stp q2, q3, [sp, #112]\n" \
    "    stp q4, q5, [sp, #144]\n" \
    "    stp q6, q7, [sp, #176]\n"
#define BPT__A64_LOAD_Q \
    "    ldp q0, q1, [sp, #80]\n" \
    "    ldp q2, q3, [sp, #112]\n" \
    "    ldp q4, q5, [sp, #144]\n" \
    "    ldp q6, q7, [sp, #176]\n"
typedef char bpt__path_hint_at_0[offsetof(struct bpt_func, path_hint) == 0 ? 1 : -1];   /* the stub reads it there */
typedef char bpt__regs_224[sizeof(bpt__regs) == 224 ? 1 : -1];   /* the stub's frame, and the entry sp above it */
#if defined(BPT__COUNT_SAVES_FP)
#  define BPT__A64_Q_BEFORE_COUNT BPT__A64_SAVE_Q
#  define BPT__A64_Q_AFTER_COUNT BPT__A64_LOAD_Q
#  define BPT__A64_Q_FOR_ENTRY ""
#else
#  define BPT__A64_Q_BEFORE_COUNT ""
#  define BPT__A64_Q_AFTER_COUNT ""
#  define BPT__A64_Q_FOR_ENTRY BPT__A64_SAVE_Q
#endif
__asm__(
    "    .text\n"
    "    .p2align 6\n"                   /* a cache line (>>line aligned, port.h) */
    "    .globl bpt__aarch64_stub\n    .hidden bpt__aarch64_stub\n"   /* global, hidden: gcc's -flto may put this */
                                    /* assembly in a partition of its own (tests/lto_check.sh) */
    "    .type bpt__aarch64_stub, %function\n"
    "bpt__aarch64_stub:\n"
    "    hint #34\n"
    "    sub sp, sp, #224\n"
    "    stp x0, x1, [sp, #0]\n"
    "    stp x2, x3, [sp, #16]\n"
    "    stp x4, x5, [sp, #32]\n"
    "    stp x6, x7, [sp, #48]\n"
    "    stp x8, x9, [sp, #64]\n"
    "    str x30, [sp, #208]\n"
    BPT__A64_Q_BEFORE_COUNT
    "    ldur x0, [x30, #-28]\n"
    "    ldr w16, [x0]\n"                 /* the record's path_hint, at its offset 0 */
    "    mov w2, #" BPT__STR(BPT__PATH_FULL) "\n"   /* for the full path */
    "    cmp w16, #" BPT__STR(BPT__HINT_COUNT) "\n"
    "    b.eq 6f\n"
    "    cmp w16, #" BPT__STR(BPT__HINT_CALL) "\n"
    "    b.lo 3f\n"                       /* BPT__HINT_FULL: no short path can finish this function */
    "    mov x1, sp\n"                    /* args: the frame's x0-x7 */
    "    add x2, sp, #224\n"              /* the entry sp (bpt__arch_entry_sp) */
    "    b.ne 8f\n"
    "    bl bpt__native_call_path\n"
    "    b 7f\n"
    "8:\n"
    "    cmp w16, #" BPT__STR(BPT__HINT_CALL_RETURN) "\n"
    "    b.ne 9f\n"
    "    bl bpt__native_call_return_path\n"
    "    b 7f\n"
    "9:\n"
    "    bl bpt__native_time_path\n"
    "    b 7f\n"
    "6:\n"
    "    bl bpt__native_count_path\n"
    "7:\n"
    "    cmp w0, #" BPT__STR(BPT__PATH_DONE) "\n"
    "    b.ne 1f\n"
    BPT__A64_Q_AFTER_COUNT
    "    b 2f\n"
    "1:\n"                                /* the short path said FULL or WAKE */
    "    mov w2, w0\n"
    "    ldr x16, [sp, #208]\n"            /* fn-4 again: the call took x30 */
    "    ldur x0, [x16, #-28]\n"
    "3:\n"                                /* the full path, every argument register saved */
    BPT__A64_Q_FOR_ENTRY
    "    mov x1, sp\n"
    "    bl bpt__native_entry\n"
    BPT__A64_LOAD_Q
    "2:\n"
    "    ldr x16, [sp, #208]\n"
    "    ldp x0, x1, [sp, #0]\n"
    "    ldp x2, x3, [sp, #16]\n"
    "    ldp x4, x5, [sp, #32]\n"
    "    ldp x6, x7, [sp, #48]\n"
    "    ldp x8, x9, [sp, #64]\n"
    "    add sp, sp, #224\n"
    "    mov x30, x9\n"
    "    ret x16\n"
    "    .size bpt__aarch64_stub, . - bpt__aarch64_stub\n");
/* Hidden: the assembly symbols are local to this object, and only a
   PC-relative reference (adrp + add) reaches them exactly. A default-
   visibility extern would go through a GOT entry, which the toolchain
   resolves for a local symbol as its section plus nothing: the start of
   this object's text, not the symbol (the trampoline came out as the stub). */
extern __attribute__((visibility("hidden"))) char bpt__aarch64_stub[];

/* The return trampoline (return trace, frames.c). A traced function whose
   saved return address (x9 in the stub's frame) the entry handler swapped
   returns here with sp as it was at its entry. Save the return registers
   (x0-x7, q0-q3: AAPCS64 returns up to four vector registers for an HFA),
   ask bpt__native_return(sp, saved) for the original return address,
   restore, and continue there with `ret x16`: a return, which BTI does not
   check, where a br would need a landing pad at the target. No landing pad
   here either: a ret, not a branch, brings the traced function here. */
__asm__(
    "    .text\n"
    "    .p2align 4\n"
    "    .globl bpt__aarch64_return_trampoline\n    .hidden bpt__aarch64_return_trampoline\n"
    "    .type bpt__aarch64_return_trampoline, %function\n"
    "bpt__aarch64_return_trampoline:\n"
    "    sub sp, sp, #128\n"
    "    stp x0, x1, [sp, #0]\n"
    "    stp x2, x3, [sp, #16]\n"
    "    stp x4, x5, [sp, #32]\n"
    "    stp x6, x7, [sp, #48]\n"
    "    stp q0, q1, [sp, #64]\n"
    "    stp q2, q3, [sp, #96]\n"
    "    add x0, sp, #128\n"
    "    mov x1, sp\n"
    "    bl bpt__native_return\n"
    "    mov x16, x0\n"
    "    ldp q0, q1, [sp, #64]\n"
    "    ldp q2, q3, [sp, #96]\n"
    "    ldp x0, x1, [sp, #0]\n"
    "    ldp x2, x3, [sp, #16]\n"
    "    ldp x4, x5, [sp, #32]\n"
    "    ldp x6, x7, [sp, #48]\n"
    "    add sp, sp, #128\n"
    "    ret x16\n"
    "    .size bpt__aarch64_return_trampoline, . - bpt__aarch64_return_trampoline\n");

/* Where the traced function's return address lives while its entry stub
   runs (x9, saved in the frame and moved back to x30 on the way out), and
   the stack pointer at its entry, which identifies its frame (the stub's
   frame sits right below it). */
BPT__PRIVATE uintptr_t *bpt__arch_ret_slot(bpt__regs *r) { return (uintptr_t *)&r->gpr[9]; }
BPT__PRIVATE uintptr_t bpt__arch_entry_sp(const bpt__regs *r) { return (uintptr_t)r + sizeof *r; }

/* A function that begins with paciasp has signed its return address with
   the entry sp as modifier before the stub runs; its autiasp will check
   whatever x30 holds at its return. So the original is kept stripped
   (xpaclri) and the trampoline's address goes in signed the same way
   (pacia1716: x17 signed with modifier x16). Both are hint-space
   instructions: NOPs on a CPU without pointer authentication, where
   paciasp signed nothing either. */
BPT__PRIVATE uintptr_t bpt__arch_ret_strip(const bpt_func *f, uintptr_t ret) {
    register uintptr_t lr __asm__("x30") = ret;
    if (!f->signs_lr) return ret;
    __asm__("hint #7" : "+r"(lr));   /* xpaclri */
    return lr;
}
BPT__PRIVATE uintptr_t bpt__arch_ret_sign(const bpt_func *f, uintptr_t ret, uintptr_t sp) {
    register uintptr_t x17 __asm__("x17") = ret;
    register uintptr_t x16 __asm__("x16") = sp;
    if (!f->signs_lr) return ret;
    __asm__("hint #8" : "+r"(x17) : "r"(x16));   /* pacia1716 */
    return x17;
}

/* x30 came into the function's body holding the trampoline; the prologue
   stored it in the function's own frame, which lies below its entry sp
   and above anything it called. Where exactly is the compiler's choice
   (gcc puts the frame record at the bottom or, with stack-clash
   protection, at the top), so the range is the whole frame, and at most
   the 1 MiB under the entry sp: a bound, should `below` be on another
   stack after all, never a walk into unmapped memory. */
BPT__PRIVATE void bpt__arch_saved_ret_range(uintptr_t entry_sp, uintptr_t below, uintptr_t *lo, uintptr_t *hi) {
    uintptr_t floor = entry_sp > ((uintptr_t)1 << 20) ? entry_sp - ((uintptr_t)1 << 20) : 0;
    *lo = below < entry_sp ? below : entry_sp;
    if (*lo < floor) *lo = floor;
    *hi = entry_sp;
}

static uint32_t bpt__a64_word(const uint8_t *p) { uint32_t w; memcpy(&w, p, 4); return w; }

/* B from `from` to `to`: imm26 counts words. */
static uint32_t bpt__a64_branch(uintptr_t from, uintptr_t to) {
    return 0x14000000u | ((uint32_t)((intptr_t)(to - from) >> 2) & 0x03FFFFFFu);
}

BPT__PRIVATE int bpt__arch_entry_layout(void *fnp, const char *name, bpt__entry_layout *l) {
    uint8_t *fn = (uint8_t *)fnp;
    uint32_t first = bpt__a64_word(fn);
    uint32_t tail[4] = { 0xAA1E03E9u, 0x58FFFFB0u, 0xD63F0200u, 0 };
    uintptr_t stub = (uintptr_t)bpt__aarch64_stub;
    int i, fresh = 1, landing = first == 0xD503245Fu /* bti c */ || first == 0xD503233Fu /* paciasp */;
    uint8_t *site = fn + (landing ? 4 : 0);
    if ((uintptr_t)fn & 3)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: not 4-byte aligned", name, fnp);
    if (bpt__a64_word(site) != BPT__A64_NOP)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: entry words %08x %08x are not BPT_TRACEABLE's "
                         "(expected NOP, optionally after bti c or paciasp)", name, fnp,
                         (unsigned)first, (unsigned)bpt__a64_word(fn + 4));
    tail[3] = bpt__a64_branch((uintptr_t)(fn - 4), (uintptr_t)site + 4);
    memcpy(l->pre + 8, &stub, 8);
    memcpy(l->pre + 16, tail, 16);
    for (i = 0; i < 8; i++) fresh &= bpt__a64_word(fn - BPT__PAD_BYTES + 4 * i) == BPT__A64_NOP;
    if (!fresh && memcmp(fn - 16, l->pre + 16, 16) != 0)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s at %p: the 8 words before the entry are neither NOPs nor "
                         "bptrace's (compiled without patchable_function_entry(9,8)?)", name, fnp);
    l->site = site;
    l->word_size = 4;
    l->orig_word = BPT__A64_NOP;
    l->bp_word = bpt__a64_branch((uintptr_t)site, (uintptr_t)(fn - 16));
    l->signs_lr = first == 0xD503233Fu;
    return 0;
}

/* A slot's trampoline (sites.h): the padding at block+0, the function at
   block+32, the slot's entry:
   fn     D503245F   bti c           a landing pad, for the PLT's br x17
   fn+4   the site: NOP, then B fn-16 for good
   fn+8   58000050   ldr x16, fn+16  the target
   fn+12  D61F0200   br x16          x30 is the caller's (or return trace's)
   fn+16  the target (8 bytes, aligned)
   The stub returns to fn-4, whose branch lands on fn+8. */
BPT__PRIVATE uint8_t *bpt__arch_tramp_init(uint8_t *block, uintptr_t target) {
    const uint32_t code[4] = { 0xD503245Fu, BPT__A64_NOP, 0x58000050u, 0xD61F0200u };
    uint8_t *fn = block + 32;
    int i;
    memset(block, 0, BPT__TRAMP_BYTES);   /* udf #0 where nothing goes */
    for (i = 0; i < 8; i++) {
        uint32_t nop = BPT__A64_NOP;
        memcpy(block + 4 * i, &nop, 4);
    }
    memcpy(fn, code, sizeof code);
    memcpy(fn + 16, &target, sizeof target);
    return fn;
}

/* The record pointer at fn-32, all 8 bytes. */
BPT__PRIVATE int bpt__arch_put_record(uint8_t *pre, const bpt_func *f) {
    memcpy(pre, &f, sizeof f);
    return 0;
}

BPT__PRIVATE const bpt_func *bpt__arch_padding_record(const void *fn) {
    const bpt_func *f;
    memcpy(&f, (const uint8_t *)fn - BPT__PAD_BYTES, sizeof f);
    return f;
}

/* One aligned 4-byte store: single-copy atomic (ARM ARM B2.2.1). A str in
   asm rather than a C atomic: a sanitizer must not instrument a store into
   code (TSAN's shadow of text is read-only). */
BPT__PRIVATE void bpt__arch_write_site(uint8_t *site, uint64_t word) {
    __asm__ __volatile__("str %w1, %0" : "=m"(*(uint32_t *)(void *)site) : "r"((uint32_t)word) : "memory");
    __builtin___clear_cache((char *)site, (char *)site + 4);
}

BPT__PRIVATE void bpt__arch_sync_icache(void *start, size_t len) {
    __builtin___clear_cache((char *)start, (char *)start + len);
}

/* >>prefetch (port.h) for writing: prfm pstl1keep, in every ARMv8-A. */
BPT__PRIVATE void bpt__arch_prefetch_setup(void) {}
BPT__PRIVATE void bpt__arch_prefetch_w(const void *p) { __builtin_prefetch(p, 1); }

/* A guarded control stack (prctl PR_GET_SHADOW_STACK_STATUS, Linux 6.13)
   would fault on return trace's swapped return address. The entry stub
   returns where its blr came from, which a GCS accepts, but no machine here
   runs one, so registration refuses as well until it is tested. Returns
   0, or BPT_ENOTSUP saying so. */
BPT__PRIVATE int bpt__arch_native_usable(const char *who) {
    unsigned long status = 0;
    if (syscall(SYS_prctl, 74 /* PR_GET_SHADOW_STACK_STATUS */, &status, 0, 0, 0) == 0 && (status & 1))
        return bpt__fail(BPT_ENOTSUP, "%s: a guarded control stack (GCS) is active in this process; "
                         "bptrace's return trace swaps return addresses and would fault", who);
    return 0;
}

#endif /* BPT_NATIVE && __aarch64__ */
