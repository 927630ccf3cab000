/* breakpoint.h: the data the set path (bp.c) writes and the hit path
   (hit.c) reads: function records, GenericBp and its two generations.
   Names and flag values as in beam_bp.c. */

enum {
    BPT__BPF_LOCAL_TRACE  = 0x01,
    BPT__BPF_COUNT        = 0x04,
    BPT__BPF_COUNT_ACTIVE = 0x08,
    BPT__BPF_TIME_TRACE   = 0x10,   /* call_time */
    BPT__BPF_TIME_ACTIVE  = 0x20,
    BPT__BPF_MEM_TRACE    = 0x40,   /* call_memory */
    BPT__BPF_MEM_ACTIVE   = 0x80
};

typedef struct bpt__BpTimem bpt__BpTimem;   /* timem.c */

/* call_count, as BEAM's BpCount: shared by the generations that count into
   it, freed when the last lets go (refc under the permission). */
typedef struct bpt__BpCount {
    bpt__atomic_u64 value;
    uint32_t refc;
} bpt__BpCount;

/* One generation of one session's settings on one function. */
typedef struct bpt__GenericBpData {
    uint32_t flags;               /* BPT__BPF_* */
    bpt__ms *local_ms;            /* BPT__BPF_LOCAL_TRACE: the match spec, or NULL (match all) */
    bpt__BpCount *count;          /* BPT__BPF_COUNT */
    bpt__BpTimem *timem;          /* BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE: the tables */
} bpt__GenericBpData;

/* The breakpoint of one trace session on one function. */
typedef struct bpt__GenericBp {
    bpt_vm_word orig_instr;       /* the word the breakpoint replaces */
    bpt__GenericBpData data[2];   /* indexed by bpt_active_bp_ix() / its staging twin */
    bpt__session *session;
    bpt__atomic_ptr next;         /* bpt__GenericBp *: the next session's, walked by readers */
    struct bpt__GenericBp *to_insert;    /* set path: a new session's GenericBp, parked until step 5 */
    struct bpt__GenericBp *next_to_free; /* set path: freed after step 12 */
} bpt__GenericBp;

enum bpt__site_kind { BPT__SITE_VM = 1, BPT__SITE_NATIVE = 2 };

struct bpt_func {
    const char *module, *name;    /* interned */
    int arity;
    int kind;                     /* enum bpt__site_kind */
    /* The site: the one word that switches between the original and the
       breakpoint. VM: an 8-byte instruction word. Native: the 2-byte entry
       NOP (x86-64) or the 4-byte entry NOP (aarch64). */
    void *site;
    uint64_t orig_word;           /* the site's original content */
    uint64_t bp_word;             /* what it holds while a breakpoint is installed */
    unsigned word_size;           /* 8, 4 or 2 bytes */
    void *fn;                     /* native: the function's address */
    uint64_t code_size;           /* native: bytes of code from the ELF symbol (0: unknown) */
    uintptr_t resume;             /* native: where the stub continues (the word after the site) */
    int signs_lr;                 /* native aarch64: the entry signs the return address (paciasp) */
    const bpt_vm_ops *ops;        /* VM: argument access and formatting */
    bpt__atomic_ptr gen_bp;       /* bpt__GenericBp *: list head, BEAM's ci->gen_bp */
    int installed;                /* set path: the breakpoint word is in place */
    uint32_t registry_ix;         /* set path: position in the registry */
    struct bpt_func *next_retired;/* set path: native records are retired, never freed */
};

#if defined(BPT_NATIVE)
/* The register frame an entry stub builds on the stack and hands to the
   hit path. Its layout is fixed by the stub's assembly (site_*.c). */
#  if defined(__x86_64__)
typedef struct bpt__regs {
    uint64_t gpr[8];              /* rdi rsi rdx rcx r8 r9 (arguments), rax (varargs count), r10 (static chain) */
    uint64_t rbp;                 /* the stub's frame pointer: the function's return slot is at rbp+16 */
    uint64_t pad;
    uint64_t fp[8][2];            /* xmm0-7: floating-point arguments (low 128 bits) */
} bpt__regs;
/* What the return trampoline saves: the return registers (SysV x86-64). */
typedef struct bpt__retregs {
    uint64_t gpr[2];              /* rax, rdx */
    uint64_t fp[2][2];            /* xmm0, xmm1 (low 128 bits) */
} bpt__retregs;
enum { BPT__INT_ARG_REGS = 6, BPT__FP_ARG_REGS = 8 };
#  else
typedef struct bpt__regs {
    uint64_t gpr[10];             /* x0-x7 (arguments), x8 (indirect result), x9 (the caller's LR) */
    uint64_t fp[8][2];            /* q0-q7: floating-point arguments */
} bpt__regs;
/* What the return trampoline saves: the return registers (AAPCS64). */
typedef struct bpt__retregs {
    uint64_t gpr[8];              /* x0-x7 */
    uint64_t fp[4][2];            /* q0-q3 */
} bpt__retregs;
enum { BPT__INT_ARG_REGS = 8, BPT__FP_ARG_REGS = 8 };
#  endif
#endif

/* The active generation index. Step 7 of the protocol flips it with a
   release store; the hit path reads it with an acquire load, so a hit that
   sees the new index sees what step 3 staged. */
static bpt__atomic_u32 bpt__active_ix;

unsigned bpt_active_bp_ix(void) { return bpt__load_acquire_u32(&bpt__active_ix); }
unsigned bpt_staging_bp_ix(void) { return bpt__load_acquire_u32(&bpt__active_ix) ^ 1u; }
