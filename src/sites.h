/* sites.h: what other parts use of sites, where the instruction word
   lives: the architecture interface each site_<arch>.c defines, the
   VM site writer (site_vm.c), and the batched, checked writer of code and
   its entry from the stubs (site_native.c). */

/* The pages one batch of code writes touches (native sites only; empty
   otherwise). Text pages are made read+write+execute for the writes (not
   read+write: other threads keep executing on them) and read+execute again
   afterwards, each page once per batch however many sites it holds. A
   BTI-guarded page (aarch64) keeps PROT_BTI in both: its entry's low bit
   says so (BPT__PAGE_GUARDED, site_native.c). */
typedef struct bpt__code_batch {
    uintptr_t *pages;
    int n, cap;
} bpt__code_batch;
/* The pages of the pointer slots one batch writes whose mapping is not
   writable (a GOT under full RELRO, a table in .rodata): each made
   writable once for the batch and given back its own protection after. */
typedef struct bpt__slot_pages {
    uintptr_t *pages;
    unsigned *prot;               /* each page's protection outside the batch */
    int n, cap;
} bpt__slot_pages;
/* The protocol's batch, prepared at step 2 with room for every site of
   the change, so that the writes allocate nothing. */
typedef struct bpt__sites_batch {
    bpt__code_batch code;
    bpt__slot_pages data;
} bpt__sites_batch;

BPT__PRIVATE void bpt__site_vm_write(bpt_func *f, uint64_t w);
BPT__PRIVATE int bpt__site_vm_check(const bpt_vm_word *word, bpt_vm_word bp_word);
BPT__PRIVATE int bpt__sites_batch_prepare(bpt__sites_batch *sb, bpt_func **fs, int n, int code, int slots,
                                          int switch_off);
/* How many items on the set path's passes ask for the lines of
   (>>working set in bp.c, >>prefetch in port.h). */
enum { BPT__SET_AHEAD = 8 };
BPT__PRIVATE void bpt__sites_batch_free(bpt__sites_batch *sb);
/* While a thread runs bptrace's own code, its calls through traced slots
   are not traced (>>own calls, site_native.c). */
BPT__PRIVATE void bpt__own_enter(void);
BPT__PRIVATE void bpt__own_leave(void);
BPT__PRIVATE int bpt__sites_write(bpt_func **fs, int n, int install, int *wrote_code,
                                  bpt__sites_batch *sb, int *written);

/* A native entry's stub reads the record's path_hint (breakpoint.h) and
   tries the short path it names, with the integer registers alone
   (site_native.c); the set path writes it (bp.c) in every build. */
#define BPT__HINT_FULL 0       /* none: the full path at once */
#define BPT__HINT_COUNT 1      /* the count path (COUNT, NONE) */
#define BPT__HINT_CALL 2       /* the call path (CALL_PLAIN, NONE) */
#define BPT__HINT_CALL_RETURN 3   /* the call-return path (CALL_RETURN, NONE) */
#define BPT__HINT_TIME 4       /* the time path (TIME, NONE) */

#if defined(BPT_NATIVE)
#  if defined(__x86_64__)
#    define BPT__PAD_BYTES 24      /* fn-24: the stub's address, the record, call/jmp/jmp */
extern __attribute__((visibility("hidden"))) char bpt__x86_64_return_trampoline[];
#    define BPT__RETURN_TRAMPOLINE ((uintptr_t)bpt__x86_64_return_trampoline)
#    define BPT__TRAMP_ENTRY (-10)   /* straight to the padding's call: no jump to take first */
/* The call path's return slot (site_native.c): the one the call pushed,
   at the entry sp (bpt__arch_ret_slot's, from the stack pointer alone). */
#    define BPT__ARCH_SHORT_RET_SLOT(args, sp) ((void)(args), (uintptr_t *)(sp))
#  else
#    define BPT__PAD_BYTES 32      /* fn-32: the record, the stub's address, mov/ldr/blr/b */
extern __attribute__((visibility("hidden"))) char bpt__aarch64_return_trampoline[];
#    define BPT__RETURN_TRAMPOLINE ((uintptr_t)bpt__aarch64_return_trampoline)
#    define BPT__TRAMP_ENTRY 0        /* bti c: a landing pad for the PLT's br x17 */
/* The call path's return slot (site_native.c): x9 in the stub's frame,
   which args is (bpt__arch_ret_slot's). */
#    define BPT__ARCH_SHORT_RET_SLOT(args, sp) ((void)(sp), (uintptr_t *)&(args)[9])
#  endif

/* What registration writes and what the protocol switches, for one entry. */
typedef struct bpt__entry_layout {
    uint8_t *site;
    uint64_t orig_word, bp_word;
    unsigned word_size;
    int signs_lr;                  /* aarch64: paciasp before the site */
    uint8_t pre[BPT__PAD_BYTES];   /* the padding's new content */
} bpt__entry_layout;

/* The architecture interface (site_x86_64.c, site_aarch64.c). */
BPT__PRIVATE uintptr_t *bpt__arch_ret_slot(bpt__regs *r);   /* the traced function's return address */
BPT__PRIVATE uintptr_t bpt__arch_entry_sp(const bpt__regs *r);   /* the stack pointer at its entry */
BPT__PRIVATE uintptr_t bpt__arch_ret_strip(const bpt_func *f, uintptr_t ret);
BPT__PRIVATE uintptr_t bpt__arch_ret_sign(const bpt_func *f, uintptr_t ret, uintptr_t sp);
/* Where a return-traced function keeps the trampoline's address once its
   body runs: [*lo, *hi), given its entry sp and the lowest address its own
   frame can reach (a deeper frame's entry sp, or the current sp). */
BPT__PRIVATE void bpt__arch_saved_ret_range(uintptr_t entry_sp, uintptr_t below, uintptr_t *lo, uintptr_t *hi);
BPT__PRIVATE int bpt__arch_entry_layout(void *fnp, const char *name, bpt__entry_layout *l);
BPT__PRIVATE int bpt__arch_put_record(uint8_t *pre, const bpt_func *f);   /* the record into the padding */
BPT__PRIVATE const bpt_func *bpt__arch_padding_record(const void *fn);     /* and back */
BPT__PRIVATE void bpt__arch_write_site(uint8_t *site, uint64_t word);
BPT__PRIVATE void bpt__arch_sync_icache(void *start, size_t len);
BPT__PRIVATE void bpt__arch_prefetch_setup(void);            /* once, before bpt__arch_prefetch_w's first use */
BPT__PRIVATE void bpt__arch_prefetch_w(const void *p);       /* >>prefetch in port.h: p's line, for writing */
BPT__PRIVATE int bpt__arch_native_usable(const char *who);

BPT__PRIVATE int bpt__native_prepare(bpt_func **fs, bpt__entry_layout *ls, int n, const char *who);

/* Step 2 of a change that writes slots: their protections now (slots.c).
   BPT__SLOT_UNMAPPED in page_prot: a switch-off found the slot's page gone,
   and writes nothing there. */
#define BPT__SLOT_UNMAPPED 0x80000000u
BPT__PRIVATE int bpt__slots_prot_refresh(bpt_func **fs, int n, int switch_off);

/* A pointer slot's trampoline (slots.c): a block of BPT__TRAMP_BYTES,
   aligned to them, laid out as a BPT_TRACEABLE function whose entry word
   always holds the breakpoint, followed by a jump to the slot's original
   target. bpt__arch_tramp_init fills a fresh, writable block with the
   padding's NOPs, the entry NOP and that jump, and returns the function's
   address, for bpt__arch_entry_layout; the slot then points at
   fn + BPT__TRAMP_ENTRY. */
#define BPT__TRAMP_BYTES 64
BPT__PRIVATE uint8_t *bpt__arch_tramp_init(uint8_t *block, uintptr_t target);
/* Called by the entry stubs' assembly by name: not static. A short
   path's result is a number, which the stubs compare: */
#define BPT__PATH_FULL 0       /* nothing done: the full path must run */
#define BPT__PATH_DONE 1       /* done */
#define BPT__PATH_DONE_WAKE 2  /* done; a thread-progress waiter sleeps: wake it, every register saved */
#define BPT__STR_(x) #x
#define BPT__STR(x) BPT__STR_(x)
BPT__ASM_CALLED BPT__INTREGS BPT__KEEPS_REGS BPT__LINE_ALIGNED int bpt__native_count_path(bpt_func *f);
/* args: the integer argument registers, in order (x86-64: rdi rsi rdx rcx
   r8 r9; aarch64: x0-x7), as the stub saved them; sp: the function's
   stack pointer at entry (bpt__arch_entry_sp). An ordinary function
   otherwise: the stub saves what it may clobber. */
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_call_path(bpt_func *f, uint64_t *args, uintptr_t sp);
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_call_return_path(bpt_func *f, uint64_t *args,
                                                                                 uintptr_t sp);
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_time_path(bpt_func *f, uint64_t *args, uintptr_t sp);
BPT__ASM_CALLED void bpt__native_entry(bpt_func *f, bpt__regs *regs, int counted);
#endif
