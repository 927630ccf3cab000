/* root.c: the root record (api_root.h): the one object an outside reader
   looks up by name, which tells it where bptrace's data is and how it is
   laid out, and bpt_root_check, which a reader runs on its copy before it
   trusts a single offset.

   The record is constant: every size and offset comes from the compiler
   (sizeof, offsetof) and every address from the loader (relocations), so it
   is right from the program's first instruction, before any bptrace call,
   and nothing on any path writes it. What moves is elsewhere: the layout
   sequence count (bp.c, [L1]) and the data the addresses lead to. */
#include "internal.h"

#if defined(__x86_64__)
#  define BPT__ROOT_ARCH "x86_64"
#elif defined(__aarch64__)
#  define BPT__ROOT_ARCH "aarch64"
#else
#  define BPT__ROOT_ARCH "other"
#endif

/* Kept by the linker and found by name: exported, or, with BPTRACE_STATIC
   (several copies may be linked), a local symbol, which a reader finds in
   the file's .symtab. */
#if defined(BPTRACE_STATIC)
#  define BPT__ROOT_LINKAGE static
#elif defined(__cplusplus)
#  define BPT__ROOT_LINKAGE extern "C"
#else
#  define BPT__ROOT_LINKAGE
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(BPTRACE_STATIC)
#  define BPT__ROOT_KEEP __attribute__((used))
#elif defined(__GNUC__) || defined(__clang__)
#  define BPT__ROOT_KEEP __attribute__((used, visibility("default")))
#else
#  define BPT__ROOT_KEEP
#endif

#if defined(BPT_NATIVE)
#  define BPT__ROOT_PAD BPT__PAD_BYTES
#else
#  define BPT__ROOT_PAD 0
#endif

#define BPT__ROOT_FIELD_BYTES(type, member) ((uint32_t)sizeof(((type *)0)->member))
#define BPT__ROOT_STRUCT_OF(id, st, member) BPT_ROOT_S_##st,
#define BPT__ROOT_TYPE_THREAD  bpt__thread
#define BPT__ROOT_TYPE_FUNC    bpt_func
#define BPT__ROOT_TYPE_BP      bpt__GenericBp
#define BPT__ROOT_TYPE_BPDATA  bpt__GenericBpData
#define BPT__ROOT_TYPE_COUNT   bpt__BpCount
#define BPT__ROOT_TYPE_FRAME   bpt__frame
#define BPT__ROOT_TYPE_SESSION bpt__session
#define BPT__ROOT_TYPE_LANE    bpt__lane
#define BPT__ROOT_TYPE_PATTERN bpt__pattern_entry
#define BPT__ROOT_TYPE_TIMEM   bpt__BpTimem
#define BPT__ROOT_TYPE_TABLE   bpt__timem_table
#define BPT__ROOT_TYPE_CELL    bpt__timem_cell
#define BPT__ROOT_SIZE(id, type) (uint32_t)sizeof(type),
#define BPT__ROOT_OFF(id, st, member) (uint32_t)offsetof(BPT__ROOT_TYPE_##st, member),
#define BPT__ROOT_BYTES(id, st, member) BPT__ROOT_FIELD_BYTES(BPT__ROOT_TYPE_##st, member),
#define BPT__ROOT_KIND_FLAG(NAME, name, flag) flag,

BPT__ROOT_LINKAGE BPT__ROOT_KEEP const bpt_root_record bpt_root = {
    BPT_ROOT_MAGIC, BPT_ROOT_VERSION, (uint32_t)sizeof(bpt_root_record),
    BPTRACE_VERSION, BPT__ROOT_ARCH,
    BPT_ROOT_NSTRUCTS, BPT_ROOT_NFIELDS, BPT_ROOT_NGLOBALS, BPT_ROOT_NCONSTS,
    { BPT_ROOT_STRUCTS(BPT__ROOT_SIZE) },
    { BPT_ROOT_FIELDS(BPT__ROOT_STRUCT_OF) },
    { BPT_ROOT_FIELDS(BPT__ROOT_OFF) },
    { BPT_ROOT_FIELDS(BPT__ROOT_BYTES) },
    {   /* in BPT_ROOT_CONSTS's order */
        BPT_MAX_SESSIONS, BPT__LANE_DIRS, BPT__LANES_PER_DIR, BPT__COUNT_PAGES, BPT__COUNT_PAGE_SLOTS,
        BPT_SHADOW_FRAMES, BPT__NEST_BITS, BPT__ONLINE, BPT__NKINDS, BPT__KIX_COUNT, BPT__ROOT_PAD,
        BPT_MAX_THREADS, BPT__KIX_TIME, BPT__TIMEM_MORE
    },
    { BPT_KINDS(BPT__ROOT_KIND_FLAG) },
    {   /* in BPT_ROOT_GLOBALS's order */
        { &bpt__layout_seq }, { &bpt__progress.records }, { &bpt__progress.nrecords },
        { &bpt__progress.epoch }, { &bpt__progress.waits },
        { &bpt__registry.funcs }, { &bpt__registry.len },
        { &bpt__sessions.slot[0] }, { &bpt__active_ix }
    }
};
/* The tables above are positional: one entry per row of their lists. */
typedef char bpt__root_consts_fit[BPT_ROOT_NCONSTS == 14 && BPT_ROOT_NGLOBALS == 9 ? 1 : -1];

#undef BPT__ROOT_SIZE
#undef BPT__ROOT_OFF
#undef BPT__ROOT_BYTES
#undef BPT__ROOT_STRUCT_OF
#undef BPT__ROOT_KIND_FLAG

/* The structure each field must be in, by this header's list. */
static const uint8_t bpt__root_want_struct[BPT_ROOT_NFIELDS] = {
#define BPT__ROOT_STRUCT_OF(id, st, member) BPT_ROOT_S_##st,
    BPT_ROOT_FIELDS(BPT__ROOT_STRUCT_OF)
#undef BPT__ROOT_STRUCT_OF
};

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 4, 5)))
#endif
static int bpt__root_refuse(char *why, size_t why_len, int code, const char *fmt, ...) {
    va_list ap;
    if (why && why_len) {
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return code;
}
#define BPT__U(x) ((unsigned long long)(x))

/* The width a field must have: [lo, hi] bytes, and whether it must be a
   power of two (a word). Arrays have the length the consts give. */
static void bpt__root_field_want(const bpt_root_record *r, int f, uint64_t *lo, uint64_t *hi, int *word) {
    const uint32_t *c = r->consts;
    *word = 0;
    switch (f) {
    case BPT_ROOT_F_THREAD_SHADOW: *lo = *hi = 16; return;
    case BPT_ROOT_F_THREAD_SHADOW_DEPTH: *lo = *hi = 8; return;
    case BPT_ROOT_F_THREAD_COUNTS: *lo = *hi = 8ull * c[BPT_ROOT_C_COUNT_PAGES]; return;
    case BPT_ROOT_F_BP_DATA: *lo = *hi = 2ull * r->struct_bytes[BPT_ROOT_S_BPDATA]; return;
    case BPT_ROOT_F_BPDATA_DATA: *lo = *hi = 8ull * c[BPT_ROOT_C_NKINDS]; return;
    case BPT_ROOT_F_SESSION_LANE_DIR: *lo = *hi = 8ull * c[BPT_ROOT_C_LANE_DIRS]; return;
    case BPT_ROOT_F_TIMEM_TABLES: *lo = *hi = 8ull * c[BPT_ROOT_C_MAX_THREADS]; return;
    case BPT_ROOT_F_TABLE_CELLS: *lo = *hi = r->struct_bytes[BPT_ROOT_S_CELL]; return;
    case BPT_ROOT_F_SESSION_NAME: case BPT_ROOT_F_PATTERN_MODULE: case BPT_ROOT_F_PATTERN_FUNCTION:
        *lo = 2; *hi = 4096; return;   /* a NUL-terminated string */
    case BPT_ROOT_F_THREAD_NEXT: case BPT_ROOT_F_FUNC_MODULE: case BPT_ROOT_F_FUNC_NAME:
    case BPT_ROOT_F_FUNC_FN: case BPT_ROOT_F_FUNC_GEN_BP: case BPT_ROOT_F_BP_SESSION:
    case BPT_ROOT_F_BP_NEXT: case BPT_ROOT_F_FRAME_F: case BPT_ROOT_F_SESSION_TRACER:
    case BPT_ROOT_F_SESSION_PATTERNS: case BPT_ROOT_F_PATTERN_NEXT:
    case BPT_ROOT_F_TIMEM_MORE: case BPT_ROOT_F_TIMEM_CARRIED:
        *lo = *hi = 8; return;          /* a pointer: 64-bit targets only */
    default: *lo = 1; *hi = 8; *word = 1; return;
    }
}

int bpt_root_check(const bpt_root_record *r, size_t bytes, char *why, size_t why_len) {
    int i;
    if (why && why_len) why[0] = 0;
    if (!r) return bpt__root_refuse(why, why_len, BPT_EINVAL, "no root record given");
    if (bytes < sizeof(r->magic) + sizeof(r->version) || r->magic != BPT_ROOT_MAGIC)
        return bpt__root_refuse(why, why_len, BPT_EFORMAT, "not a bptrace root record: magic %#llx, not %#llx",
                                BPT__U(bytes >= sizeof(r->magic) ? r->magic : 0), BPT__U(BPT_ROOT_MAGIC));
    if (r->version != BPT_ROOT_VERSION)
        return bpt__root_refuse(why, why_len, BPT_ENOTSUP, "root layout version %llu; this reader reads version %llu",
                                BPT__U(r->version), BPT__U(BPT_ROOT_VERSION));
    if (bytes < sizeof *r || r->bytes != sizeof *r)
        return bpt__root_refuse(why, why_len, BPT_EFORMAT, "root record of %llu bytes, %llu expected",
                                BPT__U(bytes < sizeof *r ? bytes : r->bytes), BPT__U(sizeof *r));
    if (r->nstructs != BPT_ROOT_NSTRUCTS || r->nfields != BPT_ROOT_NFIELDS ||
        r->nglobals != BPT_ROOT_NGLOBALS || r->nconsts != BPT_ROOT_NCONSTS)
        return bpt__root_refuse(why, why_len, BPT_EFORMAT, "root tables of %llu structures and %llu fields do not match "
                                "this reader's", BPT__U(r->nstructs), BPT__U(r->nfields));
    if (!memchr(r->bptrace_version, 0, sizeof r->bptrace_version) || !memchr(r->arch, 0, sizeof r->arch))
        return bpt__root_refuse(why, why_len, BPT_EFORMAT, "root strings are not terminated");
    for (i = 0; i < BPT_ROOT_NSTRUCTS; i++)
        if (r->struct_bytes[i] == 0 || r->struct_bytes[i] > (1u << 20))
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "structure %llu has a size of %llu bytes",
                                    BPT__U(i), BPT__U(r->struct_bytes[i]));
    {
        const uint32_t *c = r->consts;
        if (c[BPT_ROOT_C_NKINDS] == 0 || c[BPT_ROOT_C_NKINDS] > 16 || c[BPT_ROOT_C_KIND_COUNT] >= c[BPT_ROOT_C_NKINDS] ||
            c[BPT_ROOT_C_COUNT_PAGES] == 0 || c[BPT_ROOT_C_COUNT_PAGES] > 4096 ||
            c[BPT_ROOT_C_COUNT_PAGE_SLOTS] == 0 || c[BPT_ROOT_C_COUNT_PAGE_SLOTS] > (1u << 20) ||
            c[BPT_ROOT_C_MAX_SESSIONS] == 0 || c[BPT_ROOT_C_MAX_SESSIONS] > 65535 ||
            c[BPT_ROOT_C_LANE_DIRS] == 0 || c[BPT_ROOT_C_LANE_DIRS] > 65536 ||
            c[BPT_ROOT_C_LANES_PER_DIR] == 0 || c[BPT_ROOT_C_LANES_PER_DIR] > 65536 ||
            c[BPT_ROOT_C_SHADOW_FRAMES] == 0 || c[BPT_ROOT_C_SHADOW_FRAMES] > (1u << 24) ||
            c[BPT_ROOT_C_NEST_BITS] == 0 || c[BPT_ROOT_C_NEST_BITS] > 32 || c[BPT_ROOT_C_ENTRY_PAD] > 256 ||
            c[BPT_ROOT_C_MAX_THREADS] == 0 || c[BPT_ROOT_C_MAX_THREADS] > 65536 ||
            c[BPT_ROOT_C_KIND_TIME] >= c[BPT_ROOT_C_NKINDS] || c[BPT_ROOT_C_TIMEM_MORE] > (1u << 24))
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "a root constant is out of range "
                                    "(kinds %llu, count pages %llu)", BPT__U(c[BPT_ROOT_C_NKINDS]), BPT__U(c[BPT_ROOT_C_COUNT_PAGES]));
    }
    for (i = 0; i < BPT_ROOT_NFIELDS; i++) {
        uint64_t lo, hi, w = r->field_bytes[i];
        int word;
        if (r->field_struct[i] != bpt__root_want_struct[i])
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "field %llu is in structure %llu, not its own",
                                    BPT__U(i), BPT__U(r->field_struct[i]));
        if ((uint64_t)r->field_off[i] + w > r->struct_bytes[r->field_struct[i]])
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "field %llu ends at byte %llu, past its structure",
                                    BPT__U(i), BPT__U(r->field_off[i] + w));
        bpt__root_field_want(r, i, &lo, &hi, &word);
        if (w < lo || w > hi || (word && (w & (w - 1))))
            return bpt__root_refuse(why, why_len, BPT_EFORMAT, "field %llu is %llu bytes wide", BPT__U(i), BPT__U(w));
    }
    return 0;
}
#undef BPT__U
