/* registry.c: the set-path API. Function records come and go, sessions are
   created and destroyed, trace patterns are matched against the registered
   functions and handed to the protocol (bp.c). Everything here runs under
   the code modification permission. */

/* A pointer-keyed open-addressing set (linear probing, backward-shift
   deletion): validates bpt_func handles and finds duplicate sites in O(1). */
typedef struct bpt__ptrset {
    const void **keys;
    size_t cap, len;              /* cap is 0 or a power of two */
} bpt__ptrset;

static size_t bpt__ptr_hash(const void *p, size_t mask) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33;
    return (size_t)x & mask;
}

static size_t bpt__ptrset_slot(const bpt__ptrset *set, const void *p) {
    size_t i = bpt__ptr_hash(p, set->cap - 1);
    while (set->keys[i] && set->keys[i] != p) i = (i + 1) & (set->cap - 1);
    return i;
}

static int bpt__ptrset_has(const bpt__ptrset *set, const void *p) {
    return set->cap && set->keys[bpt__ptrset_slot(set, p)] == p;
}

/* Make room for `extra` more keys. Returns 0 or BPT_ENOMEM (set unchanged). */
static int bpt__ptrset_reserve(bpt__ptrset *set, size_t extra) {
    const void **old = set->keys;
    size_t i, oldcap = set->cap, cap = oldcap ? oldcap : 64;
    if ((set->len + extra) * 2 <= set->cap) return 0;
    while ((set->len + extra) * 2 > cap) cap *= 2;
    set->keys = (const void **)BPT_MALLOC(cap * sizeof *set->keys);
    if (!set->keys) { set->keys = old; return BPT_ENOMEM; }
    memset(set->keys, 0, cap * sizeof *set->keys);
    set->cap = cap;
    for (i = 0; i < oldcap; i++)
        if (old[i]) set->keys[bpt__ptrset_slot(set, old[i])] = old[i];
    BPT_FREE(old);
    return 0;
}

static void bpt__ptrset_add(bpt__ptrset *set, const void *p) {   /* after reserve */
    set->keys[bpt__ptrset_slot(set, p)] = p;
    set->len++;
}

static void bpt__ptrset_remove(bpt__ptrset *set, const void *p) {
    size_t mask = set->cap - 1, i = bpt__ptrset_slot(set, p), j, home;
    if (set->keys[i] != p) return;
    set->keys[i] = NULL;
    set->len--;
    /* Shift back the rest of the cluster whose home is at or before the hole. */
    for (j = (i + 1) & mask; set->keys[j]; j = (j + 1) & mask) {
        home = bpt__ptr_hash(set->keys[j], mask);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            set->keys[i] = set->keys[j];
            set->keys[j] = NULL;
            i = j;
        }
    }
}

static struct {
    bpt_func **funcs;             /* the registered functions, in registration order */
    uint32_t len, cap;
    bpt__ptrset records;          /* bpt_func pointers */
    bpt__ptrset sites;            /* site addresses */
} bpt__registry;

/* >>func */

/* Make room for `extra` more functions. Returns 0 or BPT_ENOMEM. */
static int bpt__registry_reserve(uint32_t extra) {
    if (bpt__registry.len + extra > bpt__registry.cap) {
        uint32_t cap = bpt__registry.cap ? bpt__registry.cap : 256;
        while (cap < bpt__registry.len + extra) cap *= 2;
        bpt_func **funcs = (bpt_func **)BPT_MALLOC(cap * sizeof *funcs);
        if (!funcs) return BPT_ENOMEM;
        if (bpt__registry.len) memcpy(funcs, bpt__registry.funcs, bpt__registry.len * sizeof *funcs);
        BPT_FREE(bpt__registry.funcs);
        bpt__registry.funcs = funcs;
        bpt__registry.cap = cap;
    }
    if (bpt__ptrset_reserve(&bpt__registry.records, extra) < 0 || bpt__ptrset_reserve(&bpt__registry.sites, extra) < 0)
        return BPT_ENOMEM;
    return 0;
}

/* A new, unregistered function record with interned names and no site yet.
   The caller holds the permission. Returns 0 or BPT_ENOMEM. */
static int bpt__func_new(const char *module, const char *name, int arity, const char *who, bpt_func **out) {
    bpt_func *f = (bpt_func *)BPT_MALLOC(sizeof *f);
    if (!f || bpt__registry_reserve(1) < 0) {
        BPT_FREE(f);
        return bpt__fail(BPT_ENOMEM, "%s: no memory to register %s:%s/%d", who, module, name, arity);
    }
    memset(f, 0, sizeof *f);
    if (!(f->module = bpt__intern(module)) || !(f->name = bpt__intern(name))) {
        BPT_FREE(f);
        return bpt__fail(BPT_ENOMEM, "%s: no memory to register %s:%s/%d", who, module, name, arity);
    }
    f->arity = arity;
    bpt__store_relaxed_ptr(&f->gen_bp, NULL);
    return (*out = f, 0);
}

/* Make f known: after bpt__registry_reserve, so it cannot fail. */
static void bpt__registry_add(bpt_func *f, const void *site_key) {
    f->registry_ix = bpt__registry.len;
    bpt__registry.funcs[bpt__registry.len++] = f;
    bpt__ptrset_add(&bpt__registry.records, f);
    bpt__ptrset_add(&bpt__registry.sites, site_key);
}

/* Records of native functions are never freed. A thread can be between the
   patched jump and its pin in the stub, where no wait sees it, and the stub
   then reads the record through the pointer in the padding: it must stay
   valid. Retired records are kept, and reused when the same function is
   registered again, so their number is bounded by the distinct functions
   ever registered. VM records are freed after a wait: the VM owns the window
   between its fetch and bpt_vm_breakpoint (see bpt_unregister). */
static bpt_func *bpt__retired;   /* under the permission, linked through next_retired */

static void bpt__func_release(bpt_func *f) {
    if (f->kind == BPT__SITE_NATIVE) {
        pthread_mutex_lock(&bpt__code_mod_permission);
        f->next_retired = bpt__retired;
        bpt__retired = f;
        pthread_mutex_unlock(&bpt__code_mod_permission);
        return;
    }
    bpt_thread_progress_wait();   /* a thread still inside bpt_vm_breakpoint(f) */
    BPT_FREE(f);
}

/* A retired native record for fn, unlinked from the retired list, or NULL. */
static bpt_func *bpt__func_reuse(void *fn) {
    bpt_func **pp;
    for (pp = &bpt__retired; *pp; pp = &(*pp)->next_retired)
        if ((*pp)->fn == fn) {
            bpt_func *f = *pp;
            *pp = f->next_retired;
            return f;
        }
    return NULL;
}

/* Apply the patterns in force in every session to a newly registered
   function, in the order they were set: the same protocol, no thread stopped. */
static int bpt__apply_patterns(bpt_func *f, uint64_t *t) {
    int i, rc;
    for (i = 0; i < BPT_MAX_SESSIONS; i++) {
        bpt__session *s = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[i]);
        bpt__pattern_entry *e;
        if (!s) continue;
        for (e = s->patterns; e; e = e->next) {
            bpt__op op;
            if (!bpt__mfa_match(&e->mfa, f->module, f->name, f->arity)) continue;
            op.kinds = e->flags & BPT__KINDS;
            op.how = e->flags & BPT__HOWS;
            op.ms = e->ms;
            if (op.how == BPT_OFF && !op.kinds) op.kinds = BPT__KINDS;
            if ((rc = bpt__protocol_run(s, &f, 1, &op, t)) < 0) return rc;
        }
    }
    return 0;
}

int bpt_register_vm(bpt_vm_word *first_word, bpt_vm_word breakpoint_word, const char *module,
                    const char *name, int arity, const bpt_vm_ops *ops, bpt_func **out) {
    bpt_func *f;
    uint64_t t = bpt__now_ns();
    int rc;
    if (!first_word || !module || !name || !out)
        return bpt__fail(BPT_EINVAL, "bpt_register_vm: first_word, module, name and out must not be NULL");
    if (arity < 0 || arity > 255)
        return bpt__fail(BPT_EINVAL, "bpt_register_vm: arity %d is outside 0..255", arity);
    if (strlen(module) > BPT__NAME_MAX || strlen(name) > BPT__NAME_MAX)
        return bpt__fail(BPT_ELIMIT, "bpt_register_vm: module and name are limited to %d bytes", BPT__NAME_MAX);
    if ((rc = bpt__permission_seize("bpt_register_vm")) < 0) return rc;
    /* Duplicates first: a registered site may hold the breakpoint word. */
    if (bpt__ptrset_has(&bpt__registry.sites, first_word)) {
        bpt__permission_release();
        return bpt__fail(BPT_EEXIST, "bpt_register_vm: %s:%s/%d: the site %p is already registered",
                         module, name, arity, (void *)first_word);
    }
    if ((rc = bpt__site_vm_check(first_word, breakpoint_word)) < 0) {
        bpt__permission_release();
        return rc;
    }
    if ((rc = bpt__func_new(module, name, arity, "bpt_register_vm", &f)) < 0) {
        bpt__permission_release();
        return rc;
    }
    f->kind = BPT__SITE_VM;
    f->site = first_word;
    f->orig_word = BPT_VM_FETCH(first_word);
    f->bp_word = breakpoint_word;
    f->word_size = sizeof(bpt_vm_word);
    f->ops = ops;
    bpt__registry_add(f, first_word);
    rc = bpt__apply_patterns(f, &t);
    bpt__permission_release();
    *out = f;
    return rc < 0 ? rc : 0;
}

#if defined(BPT_NATIVE)
/* Fill the pre-entry padding of fs[0..n) (layouts ls) in one batch of code
   writes. Nothing executes the padding before a site is installed, so plain
   stores do; the icache is synced for aarch64. Returns 0 or BPT_EPERM /
   BPT_ENOMEM with nothing written. */
static int bpt__native_prepare(bpt_func **fs, bpt__entry_layout *ls, int n, const char *who) {
    bpt__code_batch batch = { NULL, 0, 0 };
    int i, rc;
    for (i = 0; i < n; i++)
        if (bpt__batch_add(&batch, (uint8_t *)fs[i]->fn - BPT__PAD_BYTES, BPT__PAD_BYTES) < 0) {
            BPT_FREE(batch.pages);
            return bpt__fail(BPT_ENOMEM, "%s: no memory to batch %d code writes", who, n);
        }
    if ((rc = bpt__batch_open(&batch, who)) < 0) {
        BPT_FREE(batch.pages);
        return rc;
    }
    for (i = 0; i < n; i++) {
        uint8_t *pad = (uint8_t *)fs[i]->fn - BPT__PAD_BYTES;
        memcpy(ls[i].pre, &fs[i], sizeof fs[i]);   /* the record pointer, read by the stub */
        memcpy(pad, ls[i].pre, BPT__PAD_BYTES);
        bpt__arch_sync_icache(pad, BPT__PAD_BYTES);
    }
    bpt__batch_close(&batch);
    return 0;
}

/* The address index (frames.c, >>symbolize) follows the native functions
   as they come and go, in two steps, both under the permission:

     1. bpt__addr_index_alloc, before the registry changes: room for every
        native function there will be. Out of memory here fails the whole
        registration or unregistration with BPT_ENOMEM and changes nothing.
        (An index that stayed old would name an unregistered function as a
        caller: its record is retired, and a later registration may reuse
        it for another function.)
     2. bpt__addr_index_publish, after the registry changed: fill, sort,
        publish with a release store, and free the old index after a
        thread progress wait, so no pinned reader still searches it. It
        cannot fail.

   A function's extent is its ELF symbol's size; a function registered by
   hand has none, so it extends to the next registered entry, at most
   64 KiB. */
static int bpt__addr_entry_cmp(const void *a, const void *b) {
    uintptr_t x = ((const bpt__addr_entry *)a)->start, y = ((const bpt__addr_entry *)b)->start;
    return x < y ? -1 : x > y;
}

static uint32_t bpt__native_count(void) {
    uint32_t i, n = 0;
    for (i = 0; i < bpt__registry.len; i++) n += bpt__registry.funcs[i]->kind == BPT__SITE_NATIVE;
    return n;
}

/* Step 1: room for `n` entries. NULL after bpt__fail(BPT_ENOMEM). */
static bpt__addr_index *bpt__addr_index_alloc(size_t n, const char *who) {
    bpt__addr_index *ix = (bpt__addr_index *)BPT_MALLOC(sizeof *ix + sizeof(bpt__addr_entry) * n);
    if (!ix) bpt__fail(BPT_ENOMEM, "%s: no memory for the address index of %lu native functions; "
                       "nothing changed", who, (unsigned long)n);
    return ix;
}

/* Step 2: ix came from step 1 with room for every native function now
   registered. */
static void bpt__addr_index_publish(bpt__addr_index *ix) {
    bpt__addr_index *old;
    size_t k;
    uint32_t i;
    ix->n = 0;
    for (i = 0; i < bpt__registry.len; i++) {
        const bpt_func *f = bpt__registry.funcs[i];
        if (f->kind != BPT__SITE_NATIVE) continue;
        ix->e[ix->n].start = (uintptr_t)f->fn;
        ix->e[ix->n].end = f->code_size ? (uintptr_t)f->fn + (uintptr_t)f->code_size : 0;
        ix->e[ix->n++].f = f;
    }
    if (ix->n > 1) qsort(ix->e, ix->n, sizeof ix->e[0], bpt__addr_entry_cmp);
    for (k = 0; k < ix->n; k++) {
        uintptr_t bound = ix->e[k].start + 65536;
        if (k + 1 < ix->n && ix->e[k + 1].start < bound) bound = ix->e[k + 1].start;
        if (!ix->e[k].end || ix->e[k].end > bound) ix->e[k].end = bound;
    }
    old = (bpt__addr_index *)bpt__load_relaxed_ptr(&bpt__addr_index_cur);
    bpt__store_release_ptr(&bpt__addr_index_cur, ix);   /* pairs with bpt__symbolize's acquire */
    if (old) {
        bpt_thread_progress_wait();
        BPT_FREE(old);
    }
}

/* Undo bpt__native_new when registration fails later (under the
   permission). A record the function's padding already points at, from an
   earlier registration, goes back to the retired list: a thread may still
   be in that entry's stub and read it. Only a record nothing points at is
   freed. */
static void bpt__native_discard(bpt_func *f) {
    if (*(bpt_func *const *)(const void *)((const uint8_t *)f->fn - BPT__PAD_BYTES) == f) {
        f->next_retired = bpt__retired;
        bpt__retired = f;
    } else {
        BPT_FREE(f);
    }
}

/* A native function record from its checked layout (not yet registered). */
static int bpt__native_new(void *fn, const char *module, const char *name, int arity,
                           const bpt__entry_layout *l, const char *who, bpt_func **out) {
    bpt_func *f = bpt__func_reuse(fn);
    int rc;
    if (f) {   /* registered before: the padding already points at this record */
        const char *m = bpt__intern(module), *nm = bpt__intern(name);
        if (!m || !nm || bpt__registry_reserve(1) < 0) {
            f->next_retired = bpt__retired;
            bpt__retired = f;
            return bpt__fail(BPT_ENOMEM, "%s: no memory to register %s:%s/%d", who, module, name, arity);
        }
        memset(f, 0, sizeof *f);
        f->module = m;
        f->name = nm;
        f->arity = arity;
    } else if ((rc = bpt__func_new(module, name, arity, who, &f)) < 0) {
        return rc;
    }
    f->kind = BPT__SITE_NATIVE;
    f->fn = fn;
    f->site = l->site;
    f->orig_word = l->orig_word;
    f->bp_word = l->bp_word;
    f->word_size = l->word_size;
    f->resume = l->resume;
#if defined(__aarch64__)
    f->signs_lr = l->signs_lr;
#endif
    *out = f;
    return 0;
}
#endif

int bpt_register_native(void *fn, const char *module, const char *name, int arity, bpt_func **out) {
#if !defined(BPT_NATIVE)
    (void)fn; (void)module; (void)name; (void)arity; (void)out;
    return bpt__fail(BPT_ENOTSUP, "bpt_register_native: native entry patching needs gcc or clang on "
                     "x86-64 or aarch64 without BPT_NO_NATIVE; VM sites work everywhere");
#else
    bpt__entry_layout l;
    bpt__addr_index *ix;
    bpt_func *f;
    uint64_t t = bpt__now_ns();
    int rc;
    if (!fn || !module || !name || !out)
        return bpt__fail(BPT_EINVAL, "bpt_register_native: fn, module, name and out must not be NULL");
    if (arity < 0 || arity > 255)
        return bpt__fail(BPT_EINVAL, "bpt_register_native: arity %d is outside 0..255", arity);
    if (strlen(module) > BPT__NAME_MAX || strlen(name) > BPT__NAME_MAX)
        return bpt__fail(BPT_ELIMIT, "bpt_register_native: module and name are limited to %d bytes", BPT__NAME_MAX);
    if ((rc = bpt__arch_native_usable("bpt_register_native")) < 0) return rc;
    if ((rc = bpt__permission_seize("bpt_register_native")) < 0) return rc;
    if (bpt__ptrset_has(&bpt__registry.sites, fn)) {
        bpt__permission_release();
        return bpt__fail(BPT_EEXIST, "bpt_register_native: %s:%s/%d at %p is already registered",
                         module, name, arity, fn);
    }
    memset(&l, 0, sizeof l);
    if ((rc = bpt__arch_entry_layout(fn, name, &l)) < 0 ||
        (rc = bpt__native_new(fn, module, name, arity, &l, "bpt_register_native", &f)) < 0) {
        bpt__permission_release();
        return rc;
    }
    if (!(ix = bpt__addr_index_alloc(bpt__native_count() + 1, "bpt_register_native"))) {
        bpt__native_discard(f);
        bpt__permission_release();
        return BPT_ENOMEM;
    }
    if ((rc = bpt__native_prepare(&f, &l, 1, "bpt_register_native")) < 0) {
        BPT_FREE(ix);
        bpt__native_discard(f);
        bpt__permission_release();
        return rc;
    }
    bpt__registry_add(f, fn);
    bpt__addr_index_publish(ix);
    rc = bpt__apply_patterns(f, &t);
    bpt__permission_release();
    *out = f;
    return rc < 0 ? rc : 0;
#endif
}

/* >>module */

#if defined(BPT_NATIVE)
/* The patchable entries of a module, as bpt__module_scan reports them. */
typedef struct bpt__module_entries {
    void **fn;
    char **name;
    uint64_t *size;
    int n, cap;
} bpt__module_entries;

static void bpt__module_entries_free(bpt__module_entries *e) {
    int i;
    for (i = 0; i < e->n; i++) BPT_FREE(e->name[i]);
    BPT_FREE(e->fn);
    BPT_FREE(e->name);
    BPT_FREE(e->size);
}

static int bpt__module_collect(void *fn, const char *name, uint64_t size, void *user) {
    bpt__module_entries *e = (bpt__module_entries *)user;
    size_t len = strlen(name);
    if (bpt__ptrset_has(&bpt__registry.sites, fn)) return 0;   /* registered already */
    /* bptrace's own functions, when the whole program is built with the
       patchable-entry flags: tracing the hit path would recurse into itself. */
    if (strncmp(name, "bpt_", 4) == 0) return 0;
    if (e->n == e->cap) {
        int cap = e->cap ? e->cap * 2 : 256;
        void **fns = (void **)BPT_MALLOC(sizeof *fns * (size_t)cap);
        char **names = (char **)BPT_MALLOC(sizeof *names * (size_t)cap);
        uint64_t *sizes = (uint64_t *)BPT_MALLOC(sizeof *sizes * (size_t)cap);
        if (!fns || !names || !sizes) {
            BPT_FREE(fns); BPT_FREE(names); BPT_FREE(sizes);
            return bpt__fail(BPT_ENOMEM, "bpt_register_module: no memory for %d entries; nothing registered", cap);
        }
        if (e->n) {
            memcpy(fns, e->fn, sizeof *fns * (size_t)e->n);
            memcpy(names, e->name, sizeof *names * (size_t)e->n);
            memcpy(sizes, e->size, sizeof *sizes * (size_t)e->n);
        }
        BPT_FREE(e->fn); BPT_FREE(e->name); BPT_FREE(e->size);
        e->fn = fns; e->name = names; e->size = sizes; e->cap = cap;
    }
    if (len > BPT__NAME_MAX) len = BPT__NAME_MAX;   /* C++ symbols can be long: keep a prefix */
    if (!(e->name[e->n] = (char *)BPT_MALLOC(len + 1)))
        return bpt__fail(BPT_ENOMEM, "bpt_register_module: no memory for a name; nothing registered");
    memcpy(e->name[e->n], name, len);
    e->name[e->n][len] = '\0';
    e->size[e->n] = size;
    e->fn[e->n++] = fn;
    return 0;
}
#endif

int bpt_register_module(const char *module) {
#if !defined(BPT_NATIVE)
    (void)module;
    return bpt__fail(BPT_ENOTSUP, "bpt_register_module: native entry patching needs gcc or clang on "
                     "x86-64 or aarch64 without BPT_NO_NATIVE");
#else
    bpt__module_entries e = { NULL, NULL, NULL, 0, 0 };
    bpt__entry_layout *ls = NULL;
    bpt__addr_index *ix = NULL;
    bpt_func **fs = NULL;
    const char *mod = NULL;
    uint64_t t = bpt__now_ns();
    int i, made = 0, rc;
    if ((rc = bpt__arch_native_usable("bpt_register_module")) < 0) return rc;
    if ((rc = bpt__permission_seize("bpt_register_module")) < 0) return rc;
    rc = bpt__module_scan(module, BPT__PAD_BYTES, &mod, bpt__module_collect, &e);
    if (rc >= 0 && e.n) {
        ls = (bpt__entry_layout *)BPT_MALLOC(sizeof *ls * (size_t)e.n);
        fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (size_t)e.n);
        if (!ls || !fs || bpt__registry_reserve((uint32_t)e.n) < 0)
            rc = bpt__fail(BPT_ENOMEM, "bpt_register_module: no memory for %d functions", e.n);
        else if (!(ix = bpt__addr_index_alloc(bpt__native_count() + (uint32_t)e.n, "bpt_register_module")))
            rc = BPT_ENOMEM;
    }
    /* Check every entry and make every record before touching any code:
       one refusal or one ENOMEM registers nothing. */
    for (i = 0; rc >= 0 && i < e.n; i++) {
        memset(&ls[i], 0, sizeof ls[i]);
        if ((rc = bpt__arch_entry_layout(e.fn[i], e.name[i], &ls[i])) < 0) break;
        if ((rc = bpt__native_new(e.fn[i], mod, e.name[i], 0, &ls[i], "bpt_register_module", &fs[i])) < 0) break;
        fs[i]->code_size = e.size[i];
        made++;
    }
    if (rc >= 0 && e.n) rc = bpt__native_prepare(fs, ls, e.n, "bpt_register_module");
    if (rc >= 0) {
        for (i = 0; i < e.n; i++) bpt__registry_add(fs[i], e.fn[i]);
        if (e.n) bpt__addr_index_publish(ix);
        for (i = 0; i < e.n && rc >= 0; i++) rc = bpt__apply_patterns(fs[i], &t);
        if (rc >= 0) rc = e.n;
    } else {
        for (i = 0; i < made; i++) bpt__native_discard(fs[i]);
        BPT_FREE(ix);
    }
    bpt__permission_release();
    bpt__module_entries_free(&e);
    BPT_FREE(ls);
    BPT_FREE(fs);
    return rc;
#endif
}

/* Forget f; the caller holds the permission, then calls bpt__func_release. */
static void bpt__registry_remove(bpt_func *f) {
    uint32_t ix = f->registry_ix;
    bpt__registry.funcs[ix] = bpt__registry.funcs[--bpt__registry.len];
    bpt__registry.funcs[ix]->registry_ix = ix;
    bpt__ptrset_remove(&bpt__registry.records, f);
    bpt__ptrset_remove(&bpt__registry.sites, f->kind == BPT__SITE_NATIVE ? f->fn : f->site);
}

int bpt_unregister_module(const char *module) {
    static const bpt__op off_all = { BPT__KINDS, BPT_OFF, NULL };
    const char *base;
    bpt_func **fs, **traced;
    void *ix = NULL;              /* bpt__addr_index *, with BPT_NATIVE */
    uint64_t t = bpt__now_ns();
    uint32_t i;
    int n = 0, k, slot, rc;
    if (!module) return bpt__fail(BPT_EINVAL, "bpt_unregister_module: module is NULL");
    base = strrchr(module, '/') ? strrchr(module, '/') + 1 : module;
    if ((rc = bpt__permission_seize("bpt_unregister_module")) < 0) return rc;
    fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len + 1));
    traced = (bpt_func **)BPT_MALLOC(sizeof *traced * (bpt__registry.len + 1));
    if (!fs || !traced) {
        BPT_FREE(fs); BPT_FREE(traced);
        bpt__permission_release();
        return bpt__fail(BPT_ENOMEM, "bpt_unregister_module: no memory");
    }
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__registry.funcs[i]->kind == BPT__SITE_NATIVE && strcmp(bpt__registry.funcs[i]->module, base) == 0)
            fs[n++] = bpt__registry.funcs[i];
#if defined(BPT_NATIVE)
    if (n && !(ix = bpt__addr_index_alloc(bpt__native_count(), "bpt_unregister_module"))) {
        BPT_FREE(fs); BPT_FREE(traced);
        bpt__permission_release();
        return BPT_ENOMEM;
    }
#endif
    /* Every session's breakpoints off, through the protocol, session by session. */
    for (slot = 0; slot < BPT_MAX_SESSIONS && rc >= 0; slot++) {
        bpt__session *s = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[slot]);
        int nt = 0;
        if (!s) continue;
        for (k = 0; k < n; k++) if (bpt__find_bp(fs[k], s)) traced[nt++] = fs[k];
        if (nt) rc = bpt__protocol_run(s, traced, nt, &off_all, &t);
    }
    if (rc >= 0) for (k = 0; k < n; k++) bpt__registry_remove(fs[k]);
#if defined(BPT_NATIVE)
    if (rc >= 0 && n) bpt__addr_index_publish((bpt__addr_index *)ix);
    else BPT_FREE(ix);
#else
    (void)ix;
#endif
    bpt__permission_release();
    BPT_FREE(traced);
    if (rc < 0) { BPT_FREE(fs); return rc; }
    if (n == 0) {
        BPT_FREE(fs);
        return bpt__fail(BPT_ENOENT, "bpt_unregister_module: no registered function of '%s'", base);
    }
    for (k = 0; k < n; k++) bpt__func_release(fs[k]);
    BPT_FREE(fs);
    return n;
}

int bpt_unregister(bpt_func *f) {
    void *ix = NULL;              /* bpt__addr_index *, with BPT_NATIVE */
    int rc;
    if (!f) return bpt__fail(BPT_EINVAL, "bpt_unregister: f is NULL");
    if ((rc = bpt__permission_seize("bpt_unregister")) < 0) return rc;
    if (!bpt__ptrset_has(&bpt__registry.records, f)) {
        bpt__permission_release();
        return bpt__fail(BPT_ENOENT, "bpt_unregister: %p is not a registered function", (void *)f);
    }
    if (bpt__load_relaxed_ptr(&f->gen_bp)) {
        bpt__GenericBp *g = (bpt__GenericBp *)bpt__load_relaxed_ptr(&f->gen_bp);
        bpt__permission_release();
        return bpt__fail(BPT_EBUSY, "bpt_unregister: %s:%s/%d is traced by session '%s'",
                         f->module, f->name, f->arity, g->session->name);
    }
    if (f->installed) {   /* an uninstall whose mprotect was refused left the word in place */
        bpt__permission_release();
        return bpt__fail(BPT_EBUSY, "bpt_unregister: %s:%s/%d still has its breakpoint word "
                         "(restoring it was refused); retry after the cause is gone", f->module, f->name, f->arity);
    }
#if defined(BPT_NATIVE)
    if (f->kind == BPT__SITE_NATIVE && !(ix = bpt__addr_index_alloc(bpt__native_count(), "bpt_unregister"))) {
        bpt__permission_release();
        return BPT_ENOMEM;
    }
#endif
    bpt__registry_remove(f);
#if defined(BPT_NATIVE)
    if (ix) bpt__addr_index_publish((bpt__addr_index *)ix);
#else
    (void)ix;
#endif
    bpt__permission_release();
    bpt__func_release(f);
    return 0;
}

int bpt_func_lookup(const char *module, const char *name, int arity, bpt_func **out) {
    uint32_t i;
    int rc;
    if (!module || !name || !out) return bpt__fail(BPT_EINVAL, "bpt_func_lookup: a NULL argument");
    if ((rc = bpt__permission_seize("bpt_func_lookup")) < 0) return rc;
    for (i = 0; i < bpt__registry.len; i++) {
        bpt_func *f = bpt__registry.funcs[i];
        if (f->arity == arity && strcmp(f->name, name) == 0 && strcmp(f->module, module) == 0) {
            *out = f;
            bpt__permission_release();
            return 0;
        }
    }
    bpt__permission_release();
    return bpt__fail(BPT_ENOENT, "bpt_func_lookup: %s:%s/%d is not registered", module, name, arity);
}

int bpt_func_count(void) {
    int n = bpt__permission_seize("bpt_func_count");
    if (n < 0) return n;
    n = (int)bpt__registry.len;
    bpt__permission_release();
    return n;
}

/* >>session */

int bpt_session_create(const bpt_session_desc *desc, bpt_session *out) {
    static const bpt_session_desc defaults;
    const bpt_session_desc *d = desc ? desc : &defaults;
    bpt__session *s = NULL;
    int slot, rc;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_session_create: out is NULL");
    if (d->ring_size > (1u << 20))
        return bpt__fail(BPT_EINVAL, "bpt_session_create: ring_size %u is over 1<<20", d->ring_size);
    if (d->rate_per_ms && !d->rate_max)
        return bpt__fail(BPT_EINVAL, "bpt_session_create: rate_per_ms needs rate_max");
    if (d->name && strlen(d->name) > 63)
        return bpt__fail(BPT_ELIMIT, "bpt_session_create: the name is over 63 bytes");
    if ((rc = bpt__permission_seize("bpt_session_create")) < 0) return rc;
    for (slot = 0; slot < BPT_MAX_SESSIONS; slot++)
        if (!bpt__load_relaxed_ptr(&bpt__sessions.slot[slot])) break;
    if (slot == BPT_MAX_SESSIONS) {
        bpt__permission_release();
        return bpt__fail(BPT_ELIMIT, "bpt_session_create: %d sessions are alive (BPT_MAX_SESSIONS)", BPT_MAX_SESSIONS);
    }
    if ((rc = bpt__session_alloc(d, &s)) < 0) {
        bpt__permission_release();
        return rc;
    }
    /* Weak id: a per-slot generation, never 0, so a stale handle never matches. */
    s->id = (++bpt__sessions.generation[slot] << 16) | (uint64_t)slot;
    bpt__store_release_ptr(&bpt__sessions.slot[slot], s);   /* pairs with bpt__session_lookup */
    bpt__permission_release();
    out->id = s->id;
    return 0;
}

/* Every registered function with a breakpoint of session s. Caller frees. */
static int bpt__funcs_of_session(const bpt__session *s, bpt_func ***out, int *n) {
    uint32_t i;
    *n = 0;
    *out = (bpt_func **)BPT_MALLOC(sizeof **out * (bpt__registry.len ? bpt__registry.len : 1));
    if (!*out) return BPT_ENOMEM;
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__find_bp(bpt__registry.funcs[i], s)) (*out)[(*n)++] = bpt__registry.funcs[i];
    return 0;
}

int bpt_session_destroy(bpt_session handle) {
    static const bpt__op off_all = { BPT__KINDS, BPT_OFF, NULL };
    bpt__session *s;
    bpt_func **fs;
    bpt__pattern_entry *e;
    uint64_t t = bpt__now_ns();
    int n, rc;
    if ((rc = bpt__permission_seize("bpt_session_destroy")) < 0) return rc;
    bpt__step_done(1, 1, &t);
    s = bpt__session_lookup(handle.id);
    if (!s) {
        bpt__step_done(13, 1, &t);
        bpt__permission_release();
        return bpt__fail(BPT_ESESSION, "bpt_session_destroy: session %llu is not alive (destroyed twice?)",
                         (unsigned long long)handle.id);
    }
    if (bpt__funcs_of_session(s, &fs, &n) < 0) {
        bpt__step_done(13, 1, &t);
        bpt__permission_release();
        return bpt__fail(BPT_ENOMEM, "bpt_session_destroy: out of memory; the session is unchanged");
    }
    rc = bpt__protocol_run(s, fs, n, &off_all, &t);
    if (rc == BPT_ENOMEM) {
        BPT_FREE(fs);
        bpt__step_done(13, 1, &t);
        bpt__permission_release();
        return rc;   /* the protocol allocates before it changes anything: unchanged */
    }
    /* BPT_EPERM: the breakpoints are off and unlinked, only some words stay
       (they find no breakpoint): the session goes on to be destroyed. */
    BPT_FREE(fs);
    /* From here the session is gone for everyone: late hits see dead, and
       lookups by its weak id fail. */
    bpt__store_release_u32(&s->dead, 1);
    bpt__store_release_ptr(&bpt__sessions.slot[s->id & 0xffff], NULL);
    while ((e = s->patterns) != NULL) {
        s->patterns = e->next;
        bpt__pattern_entry_free(e);
    }
    bpt__step_done(13, 1, &t);
    bpt__permission_release();
    /* Drainers, stats readers and hits that found the session before it was
       unpublished are pinned: wait for them before freeing. */
    bpt_thread_progress_wait();
    bpt__session_free(s);
    return rc < 0 ? rc : 0;
}

/* >>pattern */

/* A pattern to remember for functions registered later, or NULL (ENOMEM). */
static bpt__pattern_entry *bpt__pattern_entry_new(const bpt__mfa *mfa, unsigned flags, bpt__ms *ms) {
    bpt__pattern_entry *e = (bpt__pattern_entry *)BPT_MALLOC(sizeof *e);
    if (!e) return NULL;
    e->next = NULL;
    e->mfa = *mfa;
    e->flags = flags;
    e->ms = ms;
    bpt__ms_ref(ms);
    return e;
}

/* Keep e in the session's patterns (it is replayed, in order, on functions
   registered later). A BPT_OFF cancels the earlier entries with the same
   pattern whose kinds it switches off entirely, and is kept itself only if
   an entry remains that it could act on (one with a kind it switches off):
   so a pattern switched on and off again and again leaves nothing behind.
   Never fails: e was allocated before the protocol ran. */
static void bpt__remember_pattern(bpt__session *s, bpt__pattern_entry *e) {
    bpt__pattern_entry **pp = &s->patterns, *old;
    unsigned kinds = e->flags & BPT__KINDS;
    if ((e->flags & BPT__HOWS) == BPT_OFF) {
        int acts = 0;
        if (kinds == 0) kinds = BPT__KINDS;
        while ((old = *pp) != NULL) {
            unsigned okinds = old->flags & BPT__KINDS;
            int old_off = (old->flags & BPT__HOWS) == BPT_OFF;
            if (old_off && !okinds) okinds = BPT__KINDS;   /* BPT_OFF alone: every kind */
            if (memcmp(&old->mfa, &e->mfa, sizeof e->mfa) == 0 && (okinds & ~kinds) == 0) {
                *pp = old->next;
                bpt__pattern_entry_free(old);
            } else {
                acts |= !old_off && (okinds & kinds) != 0;   /* an entry this OFF switches off */
                pp = &old->next;
            }
        }
        if (!acts) { bpt__pattern_entry_free(e); return; }
    }
    while (*pp) pp = &(*pp)->next;
    *pp = e;
}

int bpt_trace_pattern(bpt_session handle, const char *pattern, unsigned flags, const bpt_match *match) {
    bpt__mfa mfa;
    bpt__session *s;
    bpt__op op;
    bpt__pattern_entry *entry;
    bpt_func **fs;
    uint64_t t = bpt__now_ns();
    uint32_t i;
    int n = 0, rc;
    memset(&mfa, 0, sizeof mfa);
    if ((rc = bpt__pattern_parse(pattern, &mfa)) < 0 || (rc = bpt__flags_check(flags)) < 0) return rc;
    op.kinds = flags & BPT__KINDS;
    op.how = flags & BPT__HOWS;
    op.ms = NULL;
    if (op.how == BPT_OFF && !op.kinds) op.kinds = BPT__KINDS;
    if ((match || (flags & BPT__CALL_ACTIONS)) && (op.kinds & BPT_CALL) && op.how == 0 &&
        (rc = bpt__ms_new(match, flags & BPT__CALL_ACTIONS, &op.ms)) < 0)
        return rc;
    if ((rc = bpt__permission_seize("bpt_trace_pattern")) < 0) {
        bpt__ms_unref(op.ms);
        return rc;
    }
    bpt__step_done(1, 1, &t);
    s = bpt__session_lookup(handle.id);
    if (!s) {
        rc = bpt__fail(BPT_ESESSION, "bpt_trace_pattern: session %llu is not alive", (unsigned long long)handle.id);
        goto out;
    }
    fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len ? bpt__registry.len : 1));
    if (!fs) {
        rc = bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory to match '%s'", pattern);
        goto out;
    }
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__mfa_match(&mfa, bpt__registry.funcs[i]->module, bpt__registry.funcs[i]->name,
                           bpt__registry.funcs[i]->arity))
            fs[n++] = bpt__registry.funcs[i];
#if defined(BPT_NATIVE)
    /* Return trace swaps return addresses: refused where the CPU checks them. */
    for (i = 0; (flags & BPT__FRAME_ACTIONS) && op.how == 0 && i < (uint32_t)n; i++)
        if (fs[i]->kind == BPT__SITE_NATIVE) {
            if ((rc = bpt__arch_native_usable("bpt_trace_pattern (return trace)")) < 0) {
                BPT_FREE(fs);
                goto out;
            }
            break;
        }
#endif
    /* Everything that can fail is allocated before the protocol runs. */
    entry = bpt__pattern_entry_new(&mfa, flags, op.ms);
    if (!entry) rc = bpt__fail(BPT_ENOMEM, "bpt_trace_pattern: no memory to remember '%s'", pattern);
    else if ((rc = bpt__protocol_run(s, fs, n, &op, &t)) < 0) bpt__pattern_entry_free(entry);
    else bpt__remember_pattern(s, entry);
    BPT_FREE(fs);
    if (rc == 0) rc = n;
out:
    bpt__ms_unref(op.ms);
    bpt__step_done(13, 1, &t);
    bpt__permission_release();
    return rc;
}

/* >>info */

/* What bpt_trace_info reports of g (NULL: no breakpoint of the session). */
static int bpt__info_of(const bpt__GenericBp *g, unsigned what, bpt_info *out, bpt_info_process *procs, uint32_t cap) {
    unsigned ix = bpt__load_relaxed_u32(&bpt__active_ix);
    const bpt__GenericBpData *d;
    memset(out, 0, sizeof *out);
    out->procs = procs;
    out->procs_cap = cap;
    if (!g) return 0;
    d = &g->data[ix];
    /* Each kind that is on reports itself (kind_*.c), in the table's order. */
#define BPT__KIND_INFO(NAME, name, flag) \
    if (d->flags & BPT__BPF_ON(BPT__KIX_##NAME)) bpt__kind_##name##_info(d, what, out);
    BPT_KINDS(BPT__KIND_INFO)
#undef BPT__KIND_INFO
    return 1;
}

/* The session's breakpoints on the registered functions matching mfa (or f
   alone), and the nine-step collection when time or memory is asked for. */
static int bpt__info_gather(const bpt__session *s, const bpt__mfa *mfa, const bpt_func *f, unsigned what,
                            bpt_func ***fs_out, bpt__GenericBp ***gs_out, int *n_out, const char *who) {
    bpt_func **fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len + 1));
    bpt__GenericBp **gs = (bpt__GenericBp **)BPT_MALLOC(sizeof *gs * (bpt__registry.len + 1));
    bpt__GenericBp **timed = (bpt__GenericBp **)BPT_MALLOC(sizeof *timed * (bpt__registry.len + 1));
    unsigned ix = bpt__load_relaxed_u32(&bpt__active_ix);
    uint32_t i;
    int n = 0, nt = 0, rc = 0;
    if (!fs || !gs || !timed) {
        BPT_FREE(fs); BPT_FREE(gs); BPT_FREE(timed);
        return bpt__fail(BPT_ENOMEM, "%s: no memory", who);
    }
    for (i = 0; i < bpt__registry.len; i++) {
        bpt_func *fi = bpt__registry.funcs[i];
        bpt__GenericBp *g;
        if (f ? fi != f : !bpt__mfa_match(mfa, fi->module, fi->name, fi->arity)) continue;
        if (!(g = bpt__find_bp(fi, s)) && !f) continue;
        fs[n] = fi;
        gs[n++] = g;
        if (g && (what & (BPT_INFO_TIME | BPT_INFO_MEMORY)) &&
            (g->data[ix].flags & (BPT__BPF_TIME_TRACE | BPT__BPF_MEM_TRACE)))
            timed[nt++] = g;
    }
    if (nt) rc = bpt__timem_collect(timed, nt);
    BPT_FREE(timed);
    if (rc < 0) { BPT_FREE(fs); BPT_FREE(gs); return rc; }
    *fs_out = fs;
    *gs_out = gs;
    *n_out = n;
    return 0;
}

#define BPT__INFO_ALL (BPT_INFO_FLAGS | BPT_INFO_COUNT | BPT_INFO_TIME | BPT_INFO_MEMORY)

int bpt_trace_info(bpt_session handle, const bpt_func *f, unsigned what, bpt_info *out) {
    bpt__session *s;
    bpt_func **fs = NULL;
    bpt__GenericBp **gs = NULL;
    bpt_info_process *procs;
    uint32_t cap;
    int rc, n;
    if (!f || !out) return bpt__fail(BPT_EINVAL, "bpt_trace_info: f and out must not be NULL");
    if (what & ~(unsigned)BPT__INFO_ALL) return bpt__fail(BPT_EINVAL, "bpt_trace_info: unknown what bits 0x%x", what);
    procs = out->procs;
    cap = procs ? out->procs_cap : 0;
    if ((rc = bpt__permission_seize("bpt_trace_info")) < 0) return rc;
    if (!(s = bpt__session_lookup(handle.id)))
        rc = bpt__fail(BPT_ESESSION, "bpt_trace_info: session %llu is not alive", (unsigned long long)handle.id);
    else if (!bpt__ptrset_has(&bpt__registry.records, f))
        rc = bpt__fail(BPT_ENOENT, "bpt_trace_info: %p is not a registered function", (const void *)f);
    else if ((rc = bpt__info_gather(s, NULL, f, what, &fs, &gs, &n, "bpt_trace_info")) == 0)
        bpt__info_of(n ? gs[0] : NULL, what, out, procs, cap);
    bpt__permission_release();
    BPT_FREE(fs);
    BPT_FREE(gs);
    return rc;
}

int bpt_trace_info_each(bpt_session handle, const char *pattern, unsigned what, bpt_info_fn fn, void *user) {
    bpt__mfa mfa;
    bpt__session *s;
    bpt_func **fs = NULL;
    bpt__GenericBp **gs = NULL;
    bpt_info_process *procs = NULL;
    int rc, n = 0, i;
    if (!fn) return bpt__fail(BPT_EINVAL, "bpt_trace_info_each: fn is NULL");
    if (what & ~(unsigned)BPT__INFO_ALL) return bpt__fail(BPT_EINVAL, "bpt_trace_info_each: unknown what bits 0x%x", what);
    if ((rc = bpt__pattern_parse(pattern, &mfa)) < 0) return rc;
    if ((rc = bpt__permission_seize("bpt_trace_info_each")) < 0) return rc;
    if (!(s = bpt__session_lookup(handle.id))) {
        bpt__permission_release();
        return bpt__fail(BPT_ESESSION, "bpt_trace_info_each: session %llu is not alive", (unsigned long long)handle.id);
    }
    /* One collection for every function of the pattern. */
    if ((rc = bpt__info_gather(s, &mfa, NULL, what, &fs, &gs, &n, "bpt_trace_info_each")) < 0) {
        bpt__permission_release();
        return rc;
    }
    for (i = 0; i < n; i++) {
        bpt_info info;
        uint32_t cap = 0;
        if (what & (BPT_INFO_TIME | BPT_INFO_MEMORY)) {   /* room for every process of this function */
            unsigned ix = bpt__load_relaxed_u32(&bpt__active_ix);
            const bpt__BpTimem *t = bpt__timem_of(&gs[i]->data[ix]);
            cap = t && t->carried ? t->carried->used : 0;
            BPT_FREE(procs);
            procs = cap ? (bpt_info_process *)BPT_MALLOC(sizeof *procs * cap) : NULL;
            if (cap && !procs) cap = 0;   /* totals still right; per process not shown */
        }
        bpt__info_of(gs[i], what, &info, procs, cap);
        fn(fs[i], fs[i]->module, fs[i]->name, fs[i]->arity, &info, user);
    }
    BPT_FREE(procs);
    bpt__permission_release();
    BPT_FREE(fs);
    BPT_FREE(gs);
    return n;
}
