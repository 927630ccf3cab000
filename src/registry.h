/* registry.h: what other parts use of the registered functions: the
   registry (funcs.c) and the pointer sets it keeps (ptrset.c), the
   address index that names code addresses (symbols.c), interned names
   (intern.c) and the module scanner that finds patchable entries
   (module.c). Everything here is set path, under the code modification
   permission, except bpt__symbolize (pinned readers) and the interned
   names' pointers (read anywhere). */

/* A set of pointers (ptrset.c). */
typedef struct bpt__ptrset {
    const void **keys;
    size_t cap, len;              /* cap is 0 or a power of two */
} bpt__ptrset;

BPT__PRIVATE int bpt__ptrset_has(const bpt__ptrset *set, const void *p);
BPT__PRIVATE int bpt__ptrset_reserve(bpt__ptrset *set, size_t extra);   /* 0 or BPT_ENOMEM */
BPT__PRIVATE void bpt__ptrset_add(bpt__ptrset *set, const void *p);     /* after reserve */
BPT__PRIVATE void bpt__ptrset_remove(bpt__ptrset *set, const void *p);

/* Blocks of one size that the set path frees and allocates again at every
   change (ptrset.c, >>recycle): GenericBps and BpCounts. */
typedef struct bpt__recycle {
    void *head;                   /* the free blocks, linked through their first word */
    size_t size;                  /* bytes of each block */
} bpt__recycle;

BPT__PRIVATE void *bpt__recycle_take(bpt__recycle *r);           /* NULL: out of memory */
BPT__PRIVATE void bpt__recycle_give(bpt__recycle *r, void *p);   /* p may be NULL */

/* What a pattern matches of a registered function: its names and arity,
   copied from its record (>>match in funcs.c). */
typedef struct bpt__reg_key {
    const char *module, *name;    /* interned, as the record's */
    int arity;
} bpt__reg_key;

/* Every registered function (funcs.c). */
struct bpt__registry {
    bpt_func **funcs;             /* the registered functions, in registration order */
    bpt__reg_key *keys;           /* keys[i]: funcs[i]'s names and arity (>>match in funcs.c) */
    uint32_t len, cap;
    bpt__ptrset records;          /* bpt_func pointers */
    bpt__ptrset sites;            /* site addresses */
};
BPT__DATA(struct bpt__registry, bpt__registry);   /* funcs.c */

BPT__PRIVATE bpt__op bpt__pattern_op(unsigned flags, bpt__ms *ms);   /* a pattern's flags as a protocol op */

/* Registration's steps (funcs.c), which slots.c shares; under the
   permission. Reserve room, make a record, make it known (cannot fail
   after the reserve), apply the patterns in force. */
BPT__PRIVATE int bpt__registry_reserve(uint32_t extra);   /* 0 or BPT_ENOMEM */
BPT__PRIVATE int bpt__register_args_check(const char *who, const char *what, const void *site, const char *module,
                                          const char *name, int arity, bpt_func **out);
BPT__PRIVATE int bpt__func_new(const char *module, const char *name, int arity, bpt_format_fn format,
                               const void *addr, const char *who, bpt_func **out);
BPT__PRIVATE void bpt__func_free(bpt_func *f);   /* a record of bpt__func_new's */
BPT__PRIVATE void bpt__registry_add(bpt_func *f, const void *site_key);
BPT__PRIVATE int bpt__registry_match(const bpt__mfa *mfa, bpt_func **fs);   /* how many, into fs */
BPT__PRIVATE const void *bpt__site_key(const bpt_func *f);
BPT__PRIVATE int bpt__apply_patterns(bpt_func *f, uint64_t *t);
#if defined(BPT_NATIVE)
BPT__PRIVATE void bpt__native_discard(bpt_func *f);   /* undo a record a failed registration made */
BPT__PRIVATE bpt_func *bpt__retired_take(const void *fn, const void *slot, uint64_t target);
BPT__PRIVATE int bpt__func_renew(bpt_func *f, const char *module, const char *name, int arity, const void *addr,
                                 const char *who);
#endif

#if defined(BPT_NATIVE)
/* The address index of the native functions (symbols.c). */
typedef struct bpt__addr_index bpt__addr_index;
BPT__PRIVATE const bpt_func *bpt__symbolize(uintptr_t addr);
BPT__PRIVATE bpt__addr_index *bpt__addr_index_alloc(size_t n, const char *who);
BPT__PRIVATE void bpt__addr_index_publish(bpt__addr_index *ix, bpt_func *const *funcs, uint32_t nfuncs);
BPT__PRIVATE uint32_t bpt__native_count(void);   /* funcs.c: how many the index must hold */
#endif

/* Keyed hashes of the readers' tables (intern.c): the writers' tracks
   (format.c) and a trace file's lanes (tracefile.c), whose keys come from
   a file or a host: a key per table, so that no input can pick keys that
   all collide. */
BPT__PRIVATE uint64_t bpt__hash_seed(const void *table);   /* the table's address and the clock */
BPT__PRIVATE uint64_t bpt__hash_u64(uint64_t x, uint64_t seed);   /* splitmix64's finalizer */

/* Interned names (intern.c): copied once, kept for the life of the process. */
BPT__PRIVATE const char *bpt__intern(const char *text);   /* NULL when out of memory */

/* The module scanner (module.c). */
/* Called once per patchable entry of the module, in address order: fn is the
   function's entry address (padding start + pad_bytes), name is valid only
   during the call. Return 0 to continue, a negative BPT_E* to stop
   (propagated). */
typedef int (*bpt__module_visit_fn)(void *fn, const char *name, uint64_t size, void *user);
BPT__PRIVATE int bpt__module_scan(const char *module, size_t pad_bytes, const char **module_name,
                                  bpt__module_visit_fn visit, void *user);
/* Called once per import slot of the module (bpt__module_imports): slot,
   the symbol's name (valid during the call), and target, the function the
   slot calls (resolved first where the dynamic linker has not bound the
   slot yet: then unbound is what the slot held, the address of its PLT
   code, and 0 otherwise). Return 1 when it took the slot, 0 when it
   passed, or a negative BPT_E* to stop (propagated). */
#if defined(BPT_NATIVE)
/* Is the code at addr on a page the loader guarded with BTI (module.c)? */
BPT__PRIVATE int bpt__module_code_guarded(const void *addr);
typedef int (*bpt__import_visit_fn)(void **slot, const char *name, uintptr_t target, uintptr_t unbound,
                                     void *user);
BPT__PRIVATE int bpt__module_imports(const char *module, const char **module_name,
                                     bpt__import_visit_fn visit, void *user);
#endif
