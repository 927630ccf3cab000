/* sites.h: what other parts use of sites, where the instruction word
   lives: the architecture interface each site_<arch>.c defines, the
   VM site writer (site_vm.c), and the batched, checked writer of code and
   its entry from the stubs (site_native.c). */

/* The pages one batch of code writes touches (native sites only; empty
   otherwise). Text pages are made read+write+execute for the writes (not
   read+write: other threads keep executing on them) and read+execute again
   afterwards, each page once per batch however many sites it holds. */
typedef struct bpt__code_batch {
    uintptr_t *pages;
    int n, cap;
} bpt__code_batch;
typedef bpt__code_batch bpt__sites_batch;   /* the protocol's batch, prepared at step 2 */

BPT__PRIVATE void bpt__site_vm_write(bpt_func *f, uint64_t w);
BPT__PRIVATE int bpt__site_vm_check(const bpt_vm_word *word, bpt_vm_word bp_word);
BPT__PRIVATE int bpt__sites_batch_prepare(bpt__sites_batch *sb, bpt_func **fs, int n);
BPT__PRIVATE int bpt__sites_write(bpt_func **fs, int n, int install, int *wrote_code,
                                  bpt__sites_batch *sb, int *written);

#if defined(BPT_NATIVE)
#  if defined(__x86_64__)
#    define BPT__PAD_BYTES 24      /* fn-24: the record, the stub's address, call/jmp/jmp */
extern __attribute__((visibility("hidden"))) char bpt__x86_64_return_trampoline[];
#    define BPT__RETURN_TRAMPOLINE ((uintptr_t)bpt__x86_64_return_trampoline)
#  else
#    define BPT__PAD_BYTES 32      /* fn-32: the record, the stub's address, mov/ldr/blr/b */
extern __attribute__((visibility("hidden"))) char bpt__aarch64_return_trampoline[];
#    define BPT__RETURN_TRAMPOLINE ((uintptr_t)bpt__aarch64_return_trampoline)
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
BPT__PRIVATE int bpt__arch_native_usable(const char *who);

BPT__PRIVATE int bpt__native_prepare(bpt_func **fs, bpt__entry_layout *ls, int n, const char *who);
/* Called by the entry stubs' assembly by name: not static. The count
   path's result is a number, which the stubs compare: */
#define BPT__COUNT_FULL 0      /* nothing done: the full path must run */
#define BPT__COUNTED 1         /* done */
#define BPT__COUNTED_WAKE 2    /* done; a thread-progress waiter sleeps: wake it, every register saved */
#define BPT__STR_(x) #x
#define BPT__STR(x) BPT__STR_(x)
BPT__ASM_CALLED BPT__INTREGS int bpt__native_count_path(bpt_func *f);
BPT__ASM_CALLED void bpt__native_entry(bpt_func *f, bpt__regs *regs, int counted);
#endif
