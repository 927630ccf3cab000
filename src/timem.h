/* timem.h: what other parts use of the call_time and call_memory tables
   (timem.c): the tables are opaque; the kind parts (kind_timem.c) and the
   frames charge them, and bpt_trace_info collects and reports them. */

typedef struct bpt__BpTimem bpt__BpTimem;

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
BPT__PRIVATE void bpt__timem_charge(bpt__BpTimem *t, bpt__thread *rec, uint64_t process,
                                    uint64_t calls, uint64_t ns, int64_t mem);
BPT__PRIVATE int bpt__timem_collect(bpt__GenericBp **gs, int n);
BPT__PRIVATE void bpt__timem_report(const bpt__BpTimem *tm, bpt_info *out);
BPT__PRIVATE uint32_t bpt__timem_nprocs(const bpt__BpTimem *tm);
