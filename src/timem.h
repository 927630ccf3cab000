/* timem.h: what other parts use of the call_time and call_memory tables
   (timem.c): the kind parts (kind_timem.c) and the frames charge them,
   bpt_trace_info collects and reports them, and the root record (root.c)
   tells an outside reader their layout. */

typedef struct bpt__BpTimem bpt__BpTimem;

/* The tables (timem.c has how they are written and collected). Declared
   here for the root record (root.c): an outside reader sums them while
   their owners write them, each value one an owner wrote. */
typedef struct bpt__timem_cell {
    uint64_t process;             /* 0: a free cell (process ids are never 0) */
    uint64_t calls, time_ns;
    int64_t mem;
} bpt__timem_cell;

/* Open addressing, linear probing, a power-of-two capacity, at most half full. */
typedef struct bpt__timem_table {
    uint32_t cap, used;
    bpt__thread *owner;           /* the thread whose hit mapped it (BPT_HIT_MAP); NULL: the
                                     set path's (BPT_MALLOC) */
    struct bpt__timem_table *next_free;   /* on its owner's list of idle tables [T2] */
    bpt__timem_cell cell[1];
} bpt__timem_table;

enum {
    BPT__TIMEM_HIT_CAP = 64,    /* a hit's first table: 64 cells fill most of a page */
    BPT__TIMEM_MORE = 65536     /* thread records past BPT_MAX_THREADS that get a table: the
                                   count of records that get a trace buffer (session.h's lane
                                   directory), past the first BPT_MAX_THREADS */
};

struct bpt__BpTimem {
    bpt__atomic_ptr table[BPT_MAX_THREADS];   /* bpt__timem_table *, by thread record index */
    bpt__atomic_ptr more;                     /* bpt__atomic_ptr[BPT__TIMEM_MORE]: the tables of thread
                                                 records past BPT_MAX_THREADS, by index - BPT_MAX_THREADS;
                                                 mapped by the first charge that needs it [T3] */
    bpt__timem_table *carried;                /* set path: the sums of earlier collections */
    struct bpt__BpTimem *prev;                /* set path: idle tables a collection could not
                                                 merge (out of memory), summed by the next one */
    bpt__atomic_u64 lost;                     /* charges dropped: no memory for a table, a thread
                                                 record past both, a signal handler's charge
                                                 nested in its thread's of these tables, or one
                                                 nested deeper than BPT__TIMEM_NEST [H1]; added
                                                 to by the charging threads (timem.c) */
    uint64_t lost_carried;                    /* set path: the drops of earlier collections, as
                                                 `carried` holds their sums (C6); reported as
                                                 bpt_info.lost_charges */
    uint32_t refc;                            /* set path: generations that point here */
};

/* The flag bits of the two kinds that share the tables (breakpoint.h's
   BPT__BPF_ON/ACTIVE, as beam_bp.c's ERTS_BPF_TIME_TRACE and friends). */
#define BPT__BPF_TIME_TRACE  BPT__BPF_ON(BPT__KIX_TIME)
#define BPT__BPF_TIME_ACTIVE BPT__BPF_ACTIVE(BPT__KIX_TIME)
#define BPT__BPF_MEM_TRACE   BPT__BPF_ON(BPT__KIX_MEMORY)
#define BPT__BPF_MEM_ACTIVE  BPT__BPF_ACTIVE(BPT__KIX_MEMORY)
#define BPT__BPF_TIMEM_ON     (BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE)
#define BPT__BPF_TIMEM_ACTIVE (BPT__BPF_TIME_ACTIVE | BPT__BPF_MEM_ACTIVE)

BPT__PRIVATE bpt__BpTimem *bpt__timem_new(void);   /* one reference; NULL when out of memory */
BPT__PRIVATE void bpt__timem_free(bpt__BpTimem *t);
BPT__PRIVATE void bpt__timem_ref(bpt__BpTimem *t);
BPT__PRIVATE void bpt__timem_unref(bpt__BpTimem *t);
BPT__PRIVATE bpt__BpTimem *bpt__timem_of(const bpt__GenericBpData *d);
BPT__PRIVATE void bpt__timem_point(bpt__GenericBpData *d, bpt__BpTimem *t);
BPT__HOT BPT__INTREGS int64_t bpt__mem_add(int64_t a, int64_t b);   /* net bytes, modulo 2^64 */
BPT__HOT void bpt__timem_charge(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                uint64_t calls, uint64_t ns, int64_t mem);
BPT__HOT BPT__INTREGS int bpt__timem_charge_try(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                                uint64_t calls, uint64_t ns, int64_t mem);
BPT__PRIVATE int bpt__timem_collect(bpt__GenericBp **gs, int n);
BPT__PRIVATE void bpt__timem_report(const bpt__BpTimem *tm, bpt_info *out);
BPT__PRIVATE uint32_t bpt__timem_nprocs(const bpt__BpTimem *tm);
