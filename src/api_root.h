/* api_root.h: the root record, the public half's one concern here: how a
   reader in another process (examples/bpt) finds and walks bptrace's data
   without stopping the program, as think-outside-the-beam reads a BEAM, but
   from a layout the program describes itself rather than offsets a tool
   hard-codes for one version. */
#include "api_probes.h"

/* >>root
   Every program (or shared object) built with the implementation holds
   one object, `bpt_root` (a bpt_root_record), an exported symbol in its
   ELF symbol table. It is read-only: constant data the compiler lays out,
   relocated at load. It holds:

     magic, version      BPT_ROOT_MAGIC and BPT_ROOT_VERSION; a reader
                         refuses any other (the meaning of a field changed)
     sizes, offsets      the size of every structure a reader walks
                         (BPT_ROOT_STRUCTS) and the offset and width of
                         every field it reads (BPT_ROOT_FIELDS), so that a
                         reader checks each one before it reads anything
     consts              the limits and encodings it needs (BPT_ROOT_CONSTS)
     globals             the addresses where the walks start: the thread
                         records, the registry, the sessions, thread
                         progress's epoch (BPT_ROOT_GLOBALS)

   A reader finds it from /proc/PID/maps and the ELF symbols of each mapped
   file, checks it with bpt_root_check, and reads with process_vm_readv:
   never ptrace, never a stop, never a write. The root holds addresses, not
   writable pointers a reader could use: a reader cannot write through
   process_vm_readv, and the root itself is constant.

   Consistency. The thread records are never freed and their list is
   push-only; a thread's counters, call_time tables and shadow stack are
   its own and change under the reader, who sees each word as it was at some
   moment (a call_time row's calls and time may be a moment apart, and a
   table its owner grew out of may be gone: read it again). The
   registry and the sessions change only under the code modification
   permission, and around each hold the layout sequence count
   (BPT_ROOT_G_SEQ) moves, odd while held [L1]:

     set path (bp.c)   take the permission; seq := seq + 1 (odd); full
                       fence; change ...; release store seq + 1 (even);
                       let go of the permission
     reader            read seq; acquire fence; read the registry, the
                         sessions and what they point at; acquire fence;
                         read seq again: odd, or changed, means torn: read
                         again (bpt retries, then says the data may be torn)

   The reader's reads are process_vm_readv calls on its own CPU, so its
   fences order them as they would order its own loads.
*/
#define BPT_ROOT_MAGIC   0x31544f4f52545042ull   /* "BPTROOT1", little-endian */
#define BPT_ROOT_VERSION 3u   /* 2: call_time's tables past MAX_THREADS (TIMEM_MORE), no overflow table;
                                 3: frames keep no entry time (FRAME_TS gone: no reader used it, and
                                 its clock read cost every return-traced entry ~20 instructions) */

/* The structures a reader walks: (ID, the implementation's type). */
#define BPT_ROOT_STRUCTS(X) \
    X(THREAD,  bpt__thread)          /* a thread record (progress.h) */ \
    X(FUNC,    bpt_func)             /* a registered function (breakpoint.h) */ \
    X(BP,      bpt__GenericBp)       /* one session's breakpoint on a function */ \
    X(BPDATA,  bpt__GenericBpData)   /* one generation of it */ \
    X(COUNT,   bpt__BpCount)         /* call_count's counter slot */ \
    X(FRAME,   bpt__frame)           /* a shadow stack frame (frames.h) */ \
    X(SESSION, bpt__session)         /* a trace session (session.h) */ \
    X(LANE,    bpt__lane)            /* one thread's buffer in a session */ \
    X(PATTERN, bpt__pattern_entry)   /* a pattern in force in a session (pattern.h) */ \
    X(TIMEM,   bpt__BpTimem)         /* call_time/call_memory's tables of one breakpoint (timem.h) */ \
    X(TABLE,   bpt__timem_table)     /* one thread's table */ \
    X(CELL,    bpt__timem_cell)      /* one process's calls, time and memory in it */

/* The fields a reader reads: (ID, its structure's ID, the member). The
   root gives each one's offset and width in bytes. */
#define BPT_ROOT_FIELDS(X) \
    X(THREAD_STATE,        THREAD,  state)          /* u64: epoch << NEST_BITS | ONLINE | pins; 0 offline */ \
    X(THREAD_IN_USE,       THREAD,  in_use)         /* u32: 1 while a live thread owns it */ \
    X(THREAD_NEXT,         THREAD,  next)           /* pointer: the next record, NULL at the end */ \
    X(THREAD_INDEX,        THREAD,  index)          /* u32: its lane number in every session */ \
    X(THREAD_TID,          THREAD,  tid)            /* u32: the owner's OS thread id */ \
    X(THREAD_SHADOW,       THREAD,  shadow)         /* 2 pointers: native and VM frames (NULL: none yet) */ \
    X(THREAD_SHADOW_DEPTH, THREAD,  shadow_depth)   /* 2 u32: frames in use on each */ \
    X(THREAD_FIBER,        THREAD,  fiber)          /* u64: the stack the thread runs on now */ \
    X(THREAD_COUNTS,       THREAD,  counts)         /* COUNT_PAGES pointers to u64 counter pages */ \
    X(FUNC_MODULE,         FUNC,    module)         /* pointer to a NUL-terminated name */ \
    X(FUNC_NAME,           FUNC,    name)           /* pointer to a NUL-terminated name */ \
    X(FUNC_ARITY,          FUNC,    arity)          /* int */ \
    X(FUNC_FID,            FUNC,    fid)            /* u32: the id its records carry */ \
    X(FUNC_KIND,           FUNC,    kind)           /* int: 1 a VM site, 2 a native entry */ \
    X(FUNC_FN,             FUNC,    fn)             /* pointer: a native function's address */ \
    X(FUNC_CODE_SIZE,      FUNC,    code_size)      /* u64: its bytes of code (0: unknown) */ \
    X(FUNC_INSTALLED,      FUNC,    installed)      /* int: the breakpoint word is in place */ \
    X(FUNC_GEN_BP,         FUNC,    gen_bp)         /* pointer: the first session's BP */ \
    X(BP_DATA,             BP,      data)           /* 2 BPDATA: the generations */ \
    X(BP_SESSION,          BP,      session)        /* pointer: its SESSION */ \
    X(BP_NEXT,             BP,      next)           /* pointer: the next session's BP */ \
    X(BPDATA_FLAGS,        BPDATA,  flags)          /* u32: ON(k) = 1 << 2k, ACTIVE(k) = 2 << 2k */ \
    X(BPDATA_DATA,         BPDATA,  data)           /* NKINDS pointers: kind k's data (COUNT for count) */ \
    X(COUNT_SLOT,          COUNT,   slot)           /* u32: counter n of every thread's pages */ \
    X(COUNT_BASE,          COUNT,   base)           /* u64: subtracted (the sum at the last restart) */ \
    X(COUNT_SPILL,         COUNT,   spill)          /* u64: added (hits without a page) */ \
    X(FRAME_FID,           FRAME,   fid)            /* u32: the function's id */ \
    X(FRAME_F,             FRAME,   f)              /* pointer: its FUNC (compare, do not follow) */ \
    X(FRAME_FIBER,         FRAME,   fiber)          /* u64: the stack it was pushed on (native) */ \
    X(FRAME_GONE,          FRAME,   gone)           /* u8: a tombstone (ended under another stack) */ \
    X(SESSION_ID,          SESSION, id)             /* u64: its weak id */ \
    X(SESSION_NAME,        SESSION, name)           /* char[]: NUL-terminated */ \
    X(SESSION_TRACER,      SESSION, tracer)         /* pointer: non-NULL for a callback tracer */ \
    X(SESSION_USDT,        SESSION, usdt)           /* int: 1 for a USDT session */ \
    X(SESSION_CHUNK_BYTES, SESSION, chunk_bytes)    /* u32 */ \
    X(SESSION_CHUNKS,      SESSION, chunks)         /* u32: each lane's chunks at its start */ \
    X(SESSION_MAX_CHUNKS,  SESSION, max_chunks)     /* u32: the most a lane grows to */ \
    X(SESSION_FLIGHT,      SESSION, flight_recorder) /* int */ \
    X(SESSION_DEAD,        SESSION, dead)           /* u32: destroy began */ \
    X(SESSION_LIMITED,     SESSION, limited)        /* u64: records refused by the rate limit */ \
    X(SESSION_SKIPPED,     SESSION, frames_skipped) /* u64: returns that could not be traced */ \
    X(SESSION_LANELESS,    SESSION, lost_laneless)  /* u64: lost before a thread had a lane */ \
    X(SESSION_LANE_DIR,    SESSION, lane_dir)       /* LANE_DIRS pointers to LANES_PER_DIR lane pointers */ \
    X(SESSION_PATTERNS,    SESSION, patterns)       /* pointer: the first PATTERN */ \
    X(LANE_NUMBER,         LANE,    number)         /* u64: the thread record's index */ \
    X(LANE_CHUNK_BYTES,    LANE,    chunk_bytes)    /* u32 */ \
    X(LANE_BUDGET,         LANE,    budget)         /* u32: chunks it holds now */ \
    X(LANE_WRITTEN,        LANE,    written)        /* u64: records put in chunks */ \
    X(LANE_DROPPED,        LANE,    dropped)        /* u64: lost to a full buffer */ \
    X(LANE_OVERWRITTEN,    LANE,    overwritten)    /* u64: taken back by a flight recorder */ \
    X(LANE_DELIVERED,      LANE,    delivered)      /* u64: given to a callback or a USDT probe */ \
    X(LANE_LOST,           LANE,    lost)           /* u64: dropped by a nested send */ \
    X(LANE_DRAINED,        LANE,    drained)        /* u64: read by a drainer or a file writer */ \
    X(PATTERN_NEXT,        PATTERN, next)           /* pointer */ \
    X(PATTERN_MODULE,      PATTERN, mfa.module)     /* char[]: "*" for any */ \
    X(PATTERN_FUNCTION,    PATTERN, mfa.function)   /* char[] */ \
    X(PATTERN_ARITY,       PATTERN, mfa.arity)      /* int: -1 for any */ \
    X(PATTERN_FLAGS,       PATTERN, flags)          /* unsigned: the BPT_* flags it was set with */ \
    X(TIMEM_TABLES,        TIMEM,   table)          /* MAX_THREADS pointers to TABLE, by thread record index */ \
    X(TIMEM_MORE,          TIMEM,   more)           /* pointer (NULL: none): TIMEM_MORE pointers to TABLE, by index - MAX_THREADS */ \
    X(TIMEM_CARRIED,       TIMEM,   carried)        /* pointer: the TABLE of earlier collections' sums */ \
    X(TABLE_CAP,           TABLE,   cap)            /* u32: cells, a power of two */ \
    X(TABLE_CELLS,         TABLE,   cell)           /* the first of cap CELLs (the width of one) */ \
    X(CELL_PROCESS,        CELL,    process)        /* u64: 0 a free cell */ \
    X(CELL_CALLS,          CELL,    calls)          /* u64 */ \
    X(CELL_TIME,           CELL,    time_ns)        /* u64: own time, ns */ \
    X(CELL_MEMORY,         CELL,    mem)            /* i64: bytes */

/* The addresses where the walks start: (ID, what is there). */
#define BPT_ROOT_GLOBALS(X) \
    X(SEQ,       "u64: the layout sequence count [L1]") \
    X(THREADS,   "pointer: the first THREAD") \
    X(NTHREADS,  "u32: thread records made") \
    X(EPOCH,     "u64: thread progress's global epoch") \
    X(WAITS,     "u64: thread progress waits completed") \
    X(FUNCS,     "pointer: an array of NFUNCS pointers to FUNC, in registration order") \
    X(NFUNCS,    "u32: registered functions") \
    X(SESSIONS,  "MAX_SESSIONS pointers to SESSION (NULL: a free slot)") \
    X(ACTIVE_IX, "u32: the active generation, 0 or 1")

/* The limits and encodings: (ID). */
#define BPT_ROOT_CONSTS(X) \
    X(MAX_SESSIONS) X(LANE_DIRS) X(LANES_PER_DIR) X(COUNT_PAGES) X(COUNT_PAGE_SLOTS) \
    X(SHADOW_FRAMES) X(NEST_BITS) X(ONLINE) X(NKINDS) X(KIND_COUNT) \
    X(ENTRY_PAD)   /* bytes before a native entry that its hit runs through (0: no native sites) */ \
    X(MAX_THREADS) X(KIND_TIME) X(TIMEM_MORE)

enum bpt_root_struct {
#define BPT__ROOT_S(id, type) BPT_ROOT_S_##id,
    BPT_ROOT_STRUCTS(BPT__ROOT_S)
#undef BPT__ROOT_S
    BPT_ROOT_NSTRUCTS
};
enum bpt_root_field {
#define BPT__ROOT_F(id, st, member) BPT_ROOT_F_##id,
    BPT_ROOT_FIELDS(BPT__ROOT_F)
#undef BPT__ROOT_F
    BPT_ROOT_NFIELDS
};
enum bpt_root_global {
#define BPT__ROOT_G(id, what) BPT_ROOT_G_##id,
    BPT_ROOT_GLOBALS(BPT__ROOT_G)
#undef BPT__ROOT_G
    BPT_ROOT_NGLOBALS
};
enum bpt_root_const {
#define BPT__ROOT_C(id) BPT_ROOT_C_##id,
    BPT_ROOT_CONSTS(BPT__ROOT_C)
#undef BPT__ROOT_C
    BPT_ROOT_NCONSTS
};

/* An address in the target: 64 bits on every architecture. */
typedef union bpt_root_addr {
    const volatile void *p;       /* what the program stores */
    uint64_t u;                   /* what a reader reads */
} bpt_root_addr;

typedef struct bpt_root_record {
    uint64_t magic;                                /* BPT_ROOT_MAGIC */
    uint32_t version;                              /* BPT_ROOT_VERSION */
    uint32_t bytes;                                /* sizeof(bpt_root_record) */
    char bptrace_version[16];                      /* BPTRACE_VERSION, e.g. "0.1.0" */
    char arch[16];                                 /* "x86_64", "aarch64" or "other" */
    uint32_t nstructs, nfields, nglobals, nconsts; /* the four tables' lengths */
    uint32_t struct_bytes[BPT_ROOT_NSTRUCTS];      /* sizeof each structure */
    uint32_t field_struct[BPT_ROOT_NFIELDS];       /* the structure (BPT_ROOT_S_*) a field is in */
    uint32_t field_off[BPT_ROOT_NFIELDS];          /* its offset in bytes */
    uint32_t field_bytes[BPT_ROOT_NFIELDS];        /* its width in bytes */
    uint32_t consts[BPT_ROOT_NCONSTS];
    uint32_t kind_flag[16];                        /* kind k's public flag (BPT_COUNT ...); 0 past NKINDS */
    bpt_root_addr global[BPT_ROOT_NGLOBALS];
} bpt_root_record;

/* The root record of the program or shared object that defines
   BPTRACE_IMPLEMENTATION (a local symbol with BPTRACE_STATIC). */
#if !defined(BPTRACE_STATIC)
BPT_API const bpt_root_record bpt_root;
#endif

/* bpt_root_check: whether a root record read from a target can be used.

   Parameters
     r             a copy of the target's bpt_root, as read; bytes of it valid
     bytes         how many bytes of it were read
     why, why_len  where to write the reason it is refused (may be NULL)
   Returns
     0 when the magic, version and size match this header's, every table
     length matches, every structure's size is at most 1 MiB, and every
     field lies inside its structure (offset + width <= size) with a width
     that fits what it holds: a word of 1, 2, 4 or 8 bytes, or an array
     of the length the consts give. Otherwise a negative BPT_E* and a
     one-line reason in why.
   Errors
     BPT_EINVAL    r is NULL
     BPT_EFORMAT   bytes < sizeof(bpt_root_record), the magic is wrong, or a size,
                   offset or width is out of range (the reason names it)
     BPT_ENOTSUP   a known magic with another layout version
   Thread safety  any thread; pure (reads only r)
   Source         the check a reader of ELF or of a .bpt file does of a header
*/
BPT_API int bpt_root_check(const bpt_root_record *r, size_t bytes, char *why, size_t why_len);
