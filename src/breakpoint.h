/* breakpoint.h: the data the set path (bp.c) writes and the hit path
   (hit.c) reads: the kinds, function records, GenericBp and its two
   generations. Names as in beam_bp.c. */

/* >>kinds: the breakpoint kinds come from one table, BPT_KINDS (the public
   half, api_pattern.h: it also makes the public flags BPT_COUNT, BPT_CALL,
   ...). Each kind
   has a part of its own (kind_count.c, kind_call.c, kind_timem.c) that
   defines its hooks, found by name from the row:

     bpt__kind_<name>_prepare  step 2: allocate what step 3 will need
     bpt__kind_<name>_stage    step 3: write the change into a staging generation
     bpt__kind_<name>_ref      step 11: a second generation shares the data
     bpt__kind_<name>_unref    steps 3, 11, 12: a generation lets go of it
     bpt__kind_<name>_hit      the hit path: what the kind does on a call
     bpt__kind_<name>_info     bpt_trace_info: what it reports

   So a new kind is a row in the table and a part of its own, nothing else.
   Kind k owns two bits of a generation's flags, as beam_bp.c's ERTS_BPF_*
   pairs: ON (set) and ACTIVE (not paused). */
enum {
#define BPT__KIND_IX(NAME, name, flag) BPT__KIX_##NAME,
    BPT_KINDS(BPT__KIND_IX)
#undef BPT__KIND_IX
    BPT__NKINDS
};
#define BPT__BPF_ON(k)     (1u << (2 * (k)))
#define BPT__BPF_ACTIVE(k) (2u << (2 * (k)))
#define BPT__KIND_ACTIVE_OR(NAME, name, flag) | BPT__BPF_ACTIVE(BPT__KIX_##NAME)
#define BPT__BPF_ACTIVE_ALL (0u BPT_KINDS(BPT__KIND_ACTIVE_OR))   /* every kind's ACTIVE bit */
#define BPT__KIND_OR(NAME, name, flag) | (flag)
#define BPT__KINDS (0u BPT_KINDS(BPT__KIND_OR))   /* every kind's public flag */
/* Two flag bits per kind fit a generation's uint32_t flags, and every kind's
   public flag fits a frame's actions (frames.c) and stays below the BPT_OFF /
   BPT_PAUSE / BPT_RESTART bits. */
typedef char bpt__kinds_fit[(BPT__NKINDS <= 16 && BPT__KINDS < (1u << 16)) ? 1 : -1];

/* One generation of one session's settings on one function. */
typedef struct bpt__GenericBpData {
    uint32_t flags;               /* BPT__BPF_ON(k) | BPT__BPF_ACTIVE(k) per kind k */
    void *data[BPT__NKINDS];      /* kind k's data, owned by its part; valid while ON(k) */
} bpt__GenericBpData;

/* What one protocol run (bp.c) does to each affected function's breakpoint
   of one session: switch kinds on (how 0), off, pause or restart them. */
typedef struct bpt__op {
    unsigned kinds;               /* BPT__KINDS bits: the kinds it changes */
    unsigned how;                 /* 0, BPT_OFF, BPT_PAUSE, BPT_RESTART */
    bpt__ms *ms;                  /* for BPT_CALL switched on; the op holds one reference */
} bpt__op;


/* The breakpoint of one trace session on one function. */
typedef struct bpt__GenericBp {
    bpt_vm_word orig_instr;       /* the word the breakpoint replaces */
    bpt__GenericBpData data[2];   /* indexed by bpt_active_bp_ix() / its staging twin */
    bpt__session *session;
    bpt__atomic_ptr next;         /* bpt__GenericBp *: the next session's, walked by readers */
    struct bpt__GenericBp *to_insert;    /* set path: a new session's GenericBp, parked until step 5 */
    struct bpt__GenericBp *next_to_free; /* set path: freed after step 12 */
} bpt__GenericBp;

/* The call_count kind's data (kind_count.c): shared by the generations
   that count into it, freed when the last lets go (refc changes only under
   the code modification permission). Declared here for the root record
   (root.c): an outside reader sums its slot's counters. */
typedef struct bpt__BpCount {
    /* The slot, slot / BPT__COUNT_PAGE_SLOTS and slot % BPT__COUNT_PAGE_SLOTS,
       as the hit uses them: where a thread record holds the page's pointer
       (a byte offset: one load on the hit), and the counter's index in it. */
    uintptr_t dir, off;
    uint32_t slot;
    uint32_t refc;
    uint64_t base;                /* set path: the sum at the last BPT_RESTART */
    bpt__atomic_u64 spill;        /* hits that could not use their own counter (kind_count.c) */
} bpt__BpCount;

enum bpt__site_kind { BPT__SITE_VM = 1, BPT__SITE_NATIVE = 2 };

/* >>shortcut: what a hit on a function does in one generation, worked out
   by the set path when it stages the generation (step 3) rather than by
   every hit, as Linux ftrace gives each call site the ops it needs (arm64
   CALL_OPS) and BEAM's call_count-only breakpoints take their own short
   path. WALK is the general case: every session's GenericBp, every kind
   (hit.c). COUNT: exactly one session's breakpoint is active and it only
   counts; `data` is its BpCount. CALL: exactly one session's breakpoint
   is active and it only traces calls (with or without return trace, which
   is the call kind's match spec); `data` is that GenericBp, and the hit
   runs the call kind alone. CALL_PLAIN: a CALL whose record needs nothing
   but the function and its integer arguments: no match spec, or one with
   no predicate, argument spec, message or action (no return trace), into
   a session that buffers its records and sets no rate limit.
   CALL_RETURN: a CALL_PLAIN but for the match spec's actions, which ask
   for return_from (return_trace, exception_trace) and nothing else: the
   call record, and a return frame (frames.c) of one session. A native
   entry's call-return path (site_native.c) writes the record, and pushes
   the frame, with the integer registers alone; anywhere else it is a
   CALL. TIME: exactly one session's breakpoint is active, with call_time
   alone, and the session times by the wall clock (not time_cpu): a
   native entry's time path (site_native.c) counts the call and pushes
   the frame with the integer registers alone; anywhere else it is a ONE.
   ONE: exactly one session's breakpoint is
   active, for anything else (several kinds, call_memory, call_time by CPU time);
   `data` is that GenericBp, whose kinds the hit runs without walking the
   list. NONE: nothing is active (a breakpoint word not yet
   removed, or every kind paused). A shortcut is a summary of
   the GenericBp data of the same generation and follows its rules: step 3
   writes the staging one, the commit publishes it with the index [G2],
   step 11 copies it, after the wait that keeps hits off it. */
enum bpt__shortcut_kind {
    BPT__SHORTCUT_NONE, BPT__SHORTCUT_COUNT, BPT__SHORTCUT_WALK, BPT__SHORTCUT_ONE, BPT__SHORTCUT_CALL,
    BPT__SHORTCUT_CALL_PLAIN, BPT__SHORTCUT_CALL_RETURN, BPT__SHORTCUT_TIME
};
typedef struct bpt__shortcut {
    uint32_t kind;                /* enum bpt__shortcut_kind */
    void *data;                   /* COUNT: the BpCount (kind_count.c); every other kind but NONE
                                     and WALK: the bpt__GenericBp */
    /* COUNT: the BpCount's dir and off, copied at step 3, so that a counted
       hit reads nothing that the set path writes: the BpCount's refc
       changes at every step 3 and 11 that touches it. A store to a line
       that another core reads costs both cores a transfer of the line:
       while one worker counted 10,000 functions, switching them off took
       step 3 1.17 ms with the hits reading the BpCount, 0.21 ms with these
       copies (bench/pattern_scale.c; PERFORMANCE.md, issue #16). */
    uintptr_t count_dir, count_off;
} bpt__shortcut;

/* A function's record, in cache lines by who reads them (>>working set in
   bp.c): the first line holds what the entry stubs read first (the hint)
   and what the set path reads and writes of every function it installs,
   removes or links (its site and words, list head, installed); the second line the
   shortcuts, which the short paths read and steps 3 and 11 write; the rest
   is read when a pattern is matched, a record formatted, or a function
   registered. The set path stores into the first line only what changes
   (as path_hint, bp.c), since every stub reads it.
   Records start on a line of their own (bpt__func_alloc, funcs.c): laid
   out as they were (these fields spread over three lines, `installed`
   beside the shortcuts, at malloc's 16-byte alignment), a change over
   10,000 functions took 1.13 ms instead of 0.89 (bench/pattern_scale.c
   steps, no worker). */
struct bpt_func {
    /* First, at offset 0, where the entry stubs read it: which short path
       the stub tries before the full one (site_native.c), BPT__HINT_*
       in sites.h: the count path when either generation's shortcut is
       COUNT or NONE, the call path when either is CALL_PLAIN, the
       call-return path when either is CALL_RETURN, the time path when
       either is TIME, else none. A hint, written by the set path with
       the shortcuts; the path decides under its pin. A function that
       times by CPU time or with call_memory, traces returns with more
       than return_from, or mixes kinds goes to the full path at once. */
    uint32_t path_hint;
    /* Beside it, in the cache line the stub reads: 0 for a code site; for
       a pointer slot (slots.c: a GOT entry, a function-pointer table), the
       protection its page had at registration (PROT_READ, maybe
       PROT_WRITE: never 0). Fixed while registered: hits read it as "a
       slot". */
    uint32_t slot_prot;
    int kind;                     /* enum bpt__site_kind */
    int installed;                /* set path: the breakpoint word is in place */
    unsigned word_size;           /* 8, 4 or 2 bytes */
    int code_guarded;             /* native aarch64: its page is BTI-guarded (bpt__module_code_guarded) */
    unsigned page_prot;           /* slot: its page's protection at the current change's step 2 (set path) */
    int padding_fresh;            /* set path, native: the padding written since the last SYNC_CORE
                                     wait; its first install's step 4 waits with SYNC_CORE (bp.c) */
    /* The site: the one word that switches between the original and the
       breakpoint. VM: an 8-byte instruction word. Native: the 2-byte entry
       NOP (x86-64) or the 4-byte entry NOP (aarch64). Slot: the 8-byte
       pointer, which holds the function's address or its trampoline's. */
    void *site;
    uint64_t orig_word;           /* the site's original content */
    uint64_t bp_word;             /* what it holds while a breakpoint is installed */
    bpt__atomic_ptr gen_bp;       /* bpt__GenericBp *: list head, BEAM's ci->gen_bp */
    /* The second line: the short paths' summary of each generation. */
    bpt__shortcut shortcut[2];    /* per generation, as GenericBp's data (>>shortcut above) */
    const char *module, *name;    /* interned */
    int arity;
    uint32_t fid;                 /* its name id (names.c): what its records carry */
    void *fn;                     /* native: the function's address; slot: its trampoline's entry */
    uint64_t code_size;           /* native: bytes of code from the ELF symbol (0: unknown) */
    int signs_lr;                 /* native aarch64: the entry signs the return address (paciasp) */
    uint32_t registry_ix;         /* set path: position in the registry */
    const bpt_vm_ops *ops;        /* VM: argument access and formatting */
    struct bpt_func *next_retired;/* set path: native records are retired, never freed */
    void *alloc_base;             /* what BPT_MALLOC gave (bpt__func_alloc): what BPT_FREE takes */
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
    uint64_t link, pad;           /* x30 at the stub's entry: fn-4, where it returns */
} bpt__regs;
/* What the return trampoline saves: the return registers (AAPCS64). */
typedef struct bpt__retregs {
    uint64_t gpr[8];              /* x0-x7 */
    uint64_t fp[4][2];            /* q0-q3 */
} bpt__retregs;
enum { BPT__INT_ARG_REGS = 8, BPT__FP_ARG_REGS = 8 };
#  endif
#endif

/* >>protocol: the set path (bp.c). */
BPT__PRIVATE int bpt__op_enables(const bpt__op *op);   /* switched on (how 0) */
BPT__PRIVATE int bpt__permission_seize(const char *who);   /* 0, BPT_ENOMEM or BPT_EDEADLK */
BPT__PRIVATE int bpt__set_path_allowed(const char *who);  /* its checks alone: 0, BPT_ENOMEM or BPT_EDEADLK */
BPT__PRIVATE void bpt__permission_release(void);
BPT__PRIVATE bpt__GenericBp *bpt__find_bp(const bpt_func *f, const bpt__session *s);
BPT__PRIVATE int bpt__change_begin(const char *who, uint64_t *t);   /* step 1 */
BPT__PRIVATE int bpt__protocol_run(bpt__session *s, bpt_func **fs, int n, const bpt__op *op, uint64_t *t,
                                   int *committed);   /* steps 2-12 */
BPT__PRIVATE void bpt__commit(void);                                 /* step 7 */
BPT__PRIVATE void bpt__change_end(uint64_t *t);                      /* step 13 */
BPT__DATA(pthread_mutex_t, bpt__code_mod_permission);   /* locks.c */
BPT__DATA(bpt__atomic_u64, bpt__layout_seq);               /* bp.c: [L1], odd while the permission is held */
BPT__DATA(bpt__atomic_u32, bpt__active_ix);                /* hit.c: the active generation [G2] */
BPT__HOT BPT__INTREGS unsigned bpt__active_ix_load(void);

/* >>kinds: every kind's hooks, declared from the table (what each does:
   the comment at the top of this file; who calls them: bp.c, hit.c,
   trace_info.c, each through the table too). */
#define BPT__KIND_HOOKS(NAME, name, flag) \
    BPT__PRIVATE int bpt__kind_##name##_prepare(const bpt__op *op, const bpt__GenericBpData *staging, void **out); \
    BPT__PRIVATE void bpt__kind_##name##_stage(bpt__GenericBpData *d, const bpt__op *op, void *prepared); \
    BPT__PRIVATE void bpt__kind_##name##_ref(void *data); \
    BPT__PRIVATE void bpt__kind_##name##_unref(void *data); \
    BPT__HOT void bpt__kind_##name##_hit(bpt__hit *h, bpt__session *s, const bpt__GenericBpData *d); \
    BPT__PRIVATE void bpt__kind_##name##_info(const bpt__GenericBpData *d, unsigned what, bpt_info *out);
BPT_KINDS(BPT__KIND_HOOKS)
#undef BPT__KIND_HOOKS
/* The count kind's hit without a GenericBp, for the COUNT shortcut. */
BPT__HOT void bpt__kind_count_add(bpt__thread *rec, void *count);
BPT__HOT BPT__INTREGS int bpt__kind_count_try_add(bpt__thread *rec, uintptr_t dir, uintptr_t off, void *count);   /* 0: page not mapped */
#if defined(BPT_NATIVE)
/* The call kind's plain record (>>plain call in kind_call.c), for the call
   path: written in place at p, which has BPT__CALL_PLAIN_ROOM bytes;
   flags: BPT__REC_CALL_NO_RETURN or 0. */
BPT__HOT BPT__INTREGS uint32_t bpt__call_rec_plain(unsigned char *p, const bpt_func *f, const uint64_t *gpr,
                                                   uint64_t ticks, uint16_t flags);
#endif
