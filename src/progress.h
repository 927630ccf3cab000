/* progress.h: what other parts use of thread progress (progress.c): the
   thread record every traced thread owns, pinning, the waits' callers'
   side, and bpt__fail, which keeps a failure's message in the record. */

/* call_count's counters (kind_count.c): a thread record holds up to
   BPT__COUNT_PAGES pages of BPT__COUNT_PAGE_SLOTS counters each, one per
   call_count breakpoint slot. A page is 64 KiB of address space, memory only
   where touched. */
#define BPT__COUNT_PAGE_SLOTS 8192u
#define BPT__COUNT_PAGES 64u
#define BPT__COUNT_SLOTS (BPT__COUNT_PAGES * BPT__COUNT_PAGE_SLOTS)

/* call_time charges open on a thread at once, each nested in the one
   before by a signal handler (timem.c [H1]); a deeper one is dropped. */
#define BPT__TIMEM_NEST 4u

/* A thread's record: created on its first pin, reused after it exits,
   never freed while walkable (progress.c). */
struct bpt__thread {
    /* Written by the owner, read by waiters: first, on its own cache line. */
    bpt__atomic_u64 state;
    bpt__atomic_u32 in_use;         /* 1 while a live thread owns the record */
    bpt__atomic_u32 sync_ack;       /* bumped by the sync-core fallback signal handler */
    uint32_t sync_expect;           /* waiter only: sync_ack before the signal; ~0: none sent */
    struct bpt__thread *next;       /* immutable once the record is published */
    uint32_t index;                 /* slot for per-thread data (rings); stable across reuse */
    uint32_t tid;                   /* OS thread id of the owner */
    pthread_t self;
    int managed;                    /* owner only: registered as a managed thread */
    int in_tracer;                  /* owner only: inside a callback tracer */
    volatile int sending;           /* owner only: inside bpt__session_send (a signal handler may interrupt it) */
    int holds_permission;           /* owner only: holds the code modification permission */
    int offline_to_block;           /* owner only: went offline to block in bptrace; back online after */
    uint64_t process;               /* owner only: the process time is charged to */
    /* Return-trace frames (frames.c): native [0] and VM [1] shadow stacks,
       allocated on first use, kept when the record is reused. Written by the
       owner and by signal handlers nested on it, never by another thread. */
    struct bpt__frame *shadow[2];
    volatile uint32_t shadow_depth[2];
    volatile uint32_t shadow_filling[2];   /* 1 + the index of the frame being filled, 0: none [H1] */
    uintptr_t alt_lo, alt_hi;     /* native: the last armed sigaltstack seen (bpt__altstack_bounds) */
    uint32_t vm_serial;             /* owner only: VM frame tokens' check value */
    uint64_t fiber, fibers;         /* owner only: the stack the thread runs on now, and the last
                                       tag given (fibers.c); native frames carry their stack's tag.
                                       64 bits: a tag is made at every switch, and one reused
                                       while its stack still has frames would mix two stacks */
    void *volatile timem_charging[BPT__TIMEM_NEST];   /* owner only: the call_time tables being
                                       charged, the first timem_depth of them (timem.c) [H1] */
    volatile uint32_t timem_depth;
    volatile uint32_t timem_walking;   /* 1: a process or fiber switch pauses or resumes its frames [H1] */
    bpt__atomic_ptr timem_free;     /* idle call_time tables this thread mapped, to reuse (timem.c) [T2];
                                       kept when the record is reused */
    /* call_count's counter pages (kind_count.c): mapped by the owner on its
       first count in a page, published by CAS [P1], read by bpt_trace_info;
       kept when the record is reused, so an exited thread's counts stay. */
    bpt__atomic_ptr counts[BPT__COUNT_PAGES];
#if !defined(BPT__SIGNAL_ATOMIC_INC)
    volatile int counting;          /* owner only: inside a count update (kind_count.c) [H1] */
#endif
    char errmsg[320];               /* owner only: bpt_last_error() */
};

/* A thread record's state word (progress.c has its meaning): the epoch
   above BPT__NEST_BITS, the ONLINE bit and the count of open pins below. */
#define BPT__NEST_BITS 16
#define BPT__NEST_MASK ((1u << BPT__NEST_BITS) - 1)
#define BPT__ONLINE (1u << (BPT__NEST_BITS - 1))   /* a managed thread, online */
#define BPT__PINS (BPT__ONLINE - 1)                /* the pins open */
#define BPT__PIN_FENCE ((uint64_t)1 << 63)        /* in pin_word only: pins fence (progress.c) */
#define BPT__FUTEX_FENCE 2u                        /* in the futex word: unpins fence (progress.c) */

/* Thread progress's shared state (progress.c). Declared here for the root
   record (root.c), which tells an outside reader where the epoch, the
   counters and the list of records are. */
struct bpt__progress_state {
    bpt__atomic_u64 epoch;          /* global epoch; starts at 1 */
    /* What a pin reads (>>pin word in progress.c): epoch << 16 | 1, which
       it stores as its state, and BPT__PIN_FENCE while pins must fence
       (no membarrier), which it clears from what it stores. Written at
       init and by each waiter, after the epoch. */
    bpt__atomic_u64 pin_word;
    bpt__atomic_u32 futex;          /* bit 0: a waiter sleeps (or is about to); BPT__FUTEX_FENCE:
                                       set for good while sections end with a fence (progress.c) */
    bpt__atomic_ptr records;        /* bpt__thread list head, push-only */
    bpt__atomic_u32 nrecords;
    bpt__atomic_u32 light_pins;     /* membarrier PRIVATE_EXPEDITED registered */
    bpt__atomic_u32 sync_core;      /* membarrier SYNC_CORE registered */
    pthread_mutex_t wait_lock;      /* one waiter at a time */
    pthread_key_t key;              /* exit destructor (and the TLS slot on tcc) */
    bpt__atomic_u64 waits, futex_sleeps, futex_wakes, sync_core_waits;
};
BPT__DATA(struct bpt__progress_state, bpt__progress);   /* progress.c */

BPT__HOT BPT__INTREGS bpt__thread *bpt__thread_self_or_null(void);
BPT__PRIVATE bpt__thread *bpt__thread_records(void);   /* every record ever made: walk ->next */
BPT__PRIVATE bpt__thread *bpt__thread_self(void);   /* creates the record: NULL when out of memory */
BPT__PRIVATE void bpt__progress_ensure_init(void);
BPT__HOT bpt__thread *bpt__pin(void);               /* NULL: no record (out of memory), not pinned */
BPT__HOT void bpt__unpin(bpt__thread *rec);
/* The pin and unpin of the count path (>>intregs in port.h): the thread's
   record exists; the unpin leaves the wake to its caller. */
BPT__HOT BPT__INTREGS void bpt__pin_rec(bpt__thread *rec);
BPT__HOT BPT__INTREGS int bpt__unpin_quiet(bpt__thread *rec);   /* nonzero: call bpt__progress_wake */
BPT__NOINLINE void bpt__progress_wake(void);
BPT__PRIVATE int bpt__thread_pinned(const bpt__thread *rec);
BPT__PRIVATE void bpt__block_begin(bpt__thread *rec);   /* a managed thread goes offline to block */
BPT__PRIVATE void bpt__block_end(bpt__thread *rec);
BPT__PRIVATE void bpt__progress_atfork_child(bpt__thread *self);   /* locks.c's fork child handler */
BPT__PRIVATE int bpt__fail(int code, const char *fmt, ...);
BPT__PRIVATE uint32_t bpt__threads_count(void);   /* thread records made so far: indexes are below it */
