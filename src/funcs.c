/* funcs.c: the function records (bpt_func) and their registration. A
   record names one function and its site: a VM instruction word or a
   native entry. The registry holds every registered record, for trace
   patterns to match (trace_pattern.c) and handles to be checked. ERTS
   knows its functions from the loader; a C program has none, so functions
   are registered, one by one (bpt_register_vm, bpt_register_native) or a
   module's patchable entries at once (bpt_register_module). A function
   registered while patterns are in force gets them at once, through the
   same protocol (bp.c), with no thread stopped. Everything here runs
   under the code modification permission. */
#include "internal.h"

BPT__SHARED struct bpt__registry bpt__registry;   /* registry.h */

/* Make room for `extra` more functions. Returns 0 or BPT_ENOMEM. */
BPT__PRIVATE int bpt__registry_reserve(uint32_t extra) {
    if (bpt__registry.len + extra > bpt__registry.cap) {
        uint32_t cap = bpt__registry.cap ? bpt__registry.cap : 256;
        while (cap < bpt__registry.len + extra) cap *= 2;
        bpt_func **funcs = (bpt_func **)BPT_MALLOC(cap * sizeof *funcs);
        bpt__reg_key *keys = (bpt__reg_key *)BPT_MALLOC(cap * sizeof *keys);
        if (!funcs || !keys) {
            BPT_FREE(funcs);
            BPT_FREE(keys);
            return BPT_ENOMEM;
        }
        if (bpt__registry.len) {
            memcpy(funcs, bpt__registry.funcs, bpt__registry.len * sizeof *funcs);
            memcpy(keys, bpt__registry.keys, bpt__registry.len * sizeof *keys);
        }
        BPT_FREE(bpt__registry.funcs);
        BPT_FREE(bpt__registry.keys);
        bpt__registry.funcs = funcs;
        bpt__registry.keys = keys;
        bpt__registry.cap = cap;
    }
    if (bpt__ptrset_reserve(&bpt__registry.records, extra) < 0 || bpt__ptrset_reserve(&bpt__registry.sites, extra) < 0)
        return BPT_ENOMEM;
    return 0;
}

/* A zeroed record that starts a cache line (the layout in breakpoint.h
   counts on it), from BPT_MALLOC; or NULL. */
static bpt_func *bpt__func_alloc(void) {
    void *base = BPT_MALLOC(sizeof(bpt_func) + BPT__CACHE_LINE - 1);
    bpt_func *f;
    if (!base) return NULL;
    f = (bpt_func *)(((uintptr_t)base + BPT__CACHE_LINE - 1) & ~(uintptr_t)(BPT__CACHE_LINE - 1));
    memset(f, 0, sizeof *f);
    f->alloc_base = base;
    return f;
}

/* Free a record of bpt__func_alloc (NULL: nothing). */
BPT__PRIVATE void bpt__func_free(bpt_func *f) {
    if (f) BPT_FREE(f->alloc_base);
}

/* The shortcuts start the record's second line (breakpoint.h). */
typedef char bpt__func_shortcut_line[offsetof(struct bpt_func, shortcut) == BPT__CACHE_LINE || sizeof(void *) != 8
                                     ? 1 : -1];

/* A new, unregistered function record with interned names and no site yet
   (addr: a native function's entry, or NULL, for its name entry). The
   caller holds the permission. Returns 0, BPT_ENOMEM or BPT_ELIMIT (the
   name table is full); *out is NULL on an error. */
BPT__PRIVATE int bpt__func_new(const char *module, const char *name, int arity, bpt_format_fn format,
                         const void *addr, const char *who, bpt_func **out) {
    bpt_func *f = bpt__func_alloc();
    int rc;
    *out = NULL;   /* on every failure too: a caller's f is never left unset */
    if (!f || bpt__registry_reserve(1) < 0) {
        bpt__func_free(f);
        return bpt__fail(BPT_ENOMEM, "%s: no memory to register %s:%s/%d", who, module, name, arity);
    }
    if (!(f->module = bpt__intern(module)) || !(f->name = bpt__intern(name))) {
        bpt__func_free(f);
        return bpt__fail(BPT_ENOMEM, "%s: no memory to register %s:%s/%d", who, module, name, arity);
    }
    if ((rc = bpt__names_id(f->module, f->name, arity, format, addr, &f->fid)) < 0) {
        bpt__func_free(f);
        return bpt__fail(rc, "%s: cannot register %s:%s/%d: %s", who, module, name, arity, bpt__names_why(rc));
    }
    f->arity = arity;
    bpt__store_relaxed_ptr(&f->gen_bp, NULL);
    return (*out = f, 0);
}

/* Make f known: after bpt__registry_reserve, so it cannot fail. */
BPT__PRIVATE void bpt__registry_add(bpt_func *f, const void *site_key) {
    bpt__reg_key *k = &bpt__registry.keys[bpt__registry.len];
    k->module = f->module;
    k->name = f->name;
    k->arity = f->arity;
    f->registry_ix = bpt__registry.len;
    bpt__registry.funcs[bpt__registry.len++] = f;
    bpt__ptrset_add(&bpt__registry.records, f);
    bpt__ptrset_add(&bpt__registry.sites, site_key);
}

/* The registered functions that mfa matches, in registration order, into
   fs (room for bpt__registry.len). Returns how many.
   >>match: a pass over every registered function, which bpt_trace_pattern
   and bpt_trace_info make. It reads the registry's keys, not the records:
   a record's names sit on a line of its own, a miss per function once
   there are 10,000 (>>working set in bp.c), where the keys are one array
   that the processor streams in. What stays a miss is each name's bytes,
   asked for BPT__SET_AHEAD functions on (>>prefetch in port.h). Over
   10,000 functions with no worker, the match took 85 us reading the
   records (with their lines asked for ahead), and takes 45 reading the
   keys (bench/pattern_scale.c steps, an instrumented copy). */
BPT__PRIVATE int bpt__registry_match(const bpt__mfa *mfa, bpt_func **fs) {
    const bpt__reg_key *keys = bpt__registry.keys;
    uint32_t i, len = bpt__registry.len;
    int n = 0;
    for (i = 0; i < len; i++) {
        if (i + BPT__SET_AHEAD < len) BPT__PREFETCH_R(keys[i + BPT__SET_AHEAD].name);
        if (bpt__mfa_match(mfa, keys[i].module, keys[i].name, keys[i].arity)) fs[n++] = bpt__registry.funcs[i];
    }
    return n;
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
    bpt__func_free(f);
}

#if defined(BPT_NATIVE)
/* A retired record, unlinked from the retired list, or NULL: with slot
   NULL, a native entry's, for the function at fn (its padding points at
   the record); else a slot's (slots.c), for that slot and target (its
   trampoline already jumps there). */
BPT__PRIVATE bpt_func *bpt__retired_take(const void *fn, const void *slot, uint64_t target) {
    bpt_func **pp;
    for (pp = &bpt__retired; *pp; pp = &(*pp)->next_retired) {
        bpt_func *f = *pp;
        if (slot ? f->slot_prot && f->site == slot && f->orig_word == target : !f->slot_prot && f->fn == fn) {
            *pp = f->next_retired;
            return f;
        }
    }
    return NULL;
}

/* A retired record made new for module:name/arity, as bpt__func_new makes
   a fresh one (addr: what the name entry keeps, as there), every other
   field cleared. Returns 0, or BPT_ENOMEM or BPT_ELIMIT with f back on the
   retired list (something may still point at it: an entry's padding, a
   trampoline). */
BPT__PRIVATE int bpt__func_renew(bpt_func *f, const char *module, const char *name, int arity, const void *addr,
                                 const char *who) {
    const char *m = bpt__intern(module), *nm = bpt__intern(name);
    uint32_t fid = 0;
    int rc = m && nm && bpt__registry_reserve(1) == 0 ? bpt__names_id(m, nm, arity, NULL, addr, &fid) : BPT_ENOMEM;
    if (rc < 0) {
        f->next_retired = bpt__retired;
        bpt__retired = f;
        return bpt__fail(rc, "%s: cannot register %s:%s/%d: %s", who, module, name, arity, bpt__names_why(rc));
    }
    {
        void *base = f->alloc_base;
        memset(f, 0, sizeof *f);
        f->alloc_base = base;
    }
    f->module = m;
    f->name = nm;
    f->arity = arity;
    f->fid = fid;
    return 0;
}
#endif

/* What the registry's site set holds for f: a native entry's address, or
   the word a VM site or a slot switches. */
BPT__PRIVATE const void *bpt__site_key(const bpt_func *f) {
    return f->kind == BPT__SITE_NATIVE && !f->slot_prot ? f->fn : f->site;
}

/* The op a pattern's flags ask for (bp.c): BPT_OFF with no kind switches
   every kind off. */
BPT__PRIVATE bpt__op bpt__pattern_op(unsigned flags, bpt__ms *ms) {
    bpt__op op;
    op.kinds = flags & BPT__KINDS;
    op.how = flags & BPT__HOWS;
    op.ms = ms;
    if (op.how == BPT_OFF && !op.kinds) op.kinds = BPT__KINDS;
    return op;
}

/* Apply the patterns in force in every session to a newly registered
   function, in the order they were set: the same protocol, no thread stopped. */
BPT__PRIVATE int bpt__apply_patterns(bpt_func *f, uint64_t *t) {
    int i, rc;
    for (i = 0; i < BPT_MAX_SESSIONS; i++) {
        bpt__session *s = (bpt__session *)bpt__load_relaxed_ptr(&bpt__sessions.slot[i]);
        bpt__pattern_entry *e;
        if (!s) continue;
        for (e = s->patterns; e; e = e->next) {
            bpt__op op;
            if (!bpt__mfa_match(&e->mfa, f->module, f->name, f->arity)) continue;
            op = bpt__pattern_op(e->flags, e->ms);
            if ((rc = bpt__protocol_run(s, &f, 1, &op, t, NULL)) < 0) return rc;
        }
    }
    return 0;
}

/* The checks every registration makes of its arguments (who: the API
   call; what: its site argument's name). Returns 0, BPT_EINVAL or
   BPT_ELIMIT. */
BPT__PRIVATE int bpt__register_args_check(const char *who, const char *what, const void *site, const char *module,
                                          const char *name, int arity, bpt_func **out) {
    if (!site || !module || !name || !out)
        return bpt__fail(BPT_EINVAL, "%s: %s, module, name and out must not be NULL", who, what);
    if (arity < 0 || arity > 255)
        return bpt__fail(BPT_EINVAL, "%s: arity %d is outside 0..255", who, arity);
    if (strlen(module) > BPT__NAME_MAX || strlen(name) > BPT__NAME_MAX)
        return bpt__fail(BPT_ELIMIT, "%s: module and name are limited to %d bytes", who, BPT__NAME_MAX);
    return 0;
}

int bpt_register_vm(bpt_vm_word *first_word, bpt_vm_word breakpoint_word, const char *module,
                    const char *name, int arity, const bpt_vm_ops *ops, bpt_func **out) {
    bpt_func *f;
    uint64_t t = bpt__now_ns();
    int rc;
    if ((rc = bpt__register_args_check("bpt_register_vm", "first_word", first_word, module, name, arity, out)) < 0 ||
        (rc = bpt__permission_seize("bpt_register_vm")) < 0)
        return rc;
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
    if ((rc = bpt__func_new(module, name, arity, ops ? ops->format : NULL, NULL, "bpt_register_vm", &f)) < 0) {
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
/* How many registered functions are native: the address index
   (symbols.c) has an entry for each. */
BPT__PRIVATE uint32_t bpt__native_count(void) {
    uint32_t i, n = 0;
    for (i = 0; i < bpt__registry.len; i++) n += bpt__registry.funcs[i]->kind == BPT__SITE_NATIVE;
    return n;
}

/* Undo bpt__native_new when registration fails later (under the
   permission). A record the function's padding already points at, from an
   earlier registration, goes back to the retired list: a thread may still
   be in that entry's stub and read it. Only a record nothing points at is
   freed. */
BPT__PRIVATE void bpt__native_discard(bpt_func *f) {
    if (!f->slot_prot) bpt__names_release(f->fid, f->fn);   /* its name's id: free for another */
    if (bpt__arch_padding_record(f->fn) == f) {
        f->next_retired = bpt__retired;
        bpt__retired = f;
    } else {
        bpt__func_free(f);
    }
}

/* A native function record from its checked layout (not yet registered). */
static int bpt__native_new(void *fn, const char *module, const char *name, int arity,
                           const bpt__entry_layout *l, const char *who, bpt_func **out) {
    bpt_func *f = bpt__retired_take(fn, NULL, 0);
    int rc;
    if (f) {   /* registered before: the padding already points at this record */
        if ((rc = bpt__func_renew(f, module, name, arity, fn, who)) < 0) return rc;
    } else if ((rc = bpt__func_new(module, name, arity, NULL, fn, who, &f)) < 0) {
        return rc;
    }
    f->kind = BPT__SITE_NATIVE;
    f->fn = fn;
    f->site = l->site;
    f->orig_word = l->orig_word;
    f->bp_word = l->bp_word;
    f->word_size = l->word_size;
    f->signs_lr = l->signs_lr;
    f->code_guarded = bpt__module_code_guarded(fn);   /* its code writes keep the guard (site_native.c) */
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
    bpt_func *f = NULL;   /* set by bpt__native_new; gcc -O2 cannot see it once all is static and inlined */
    uint64_t t = bpt__now_ns();
    int rc;
    if ((rc = bpt__register_args_check("bpt_register_native", "fn", fn, module, name, arity, out)) < 0 ||
        (rc = bpt__arch_native_usable("bpt_register_native")) < 0 ||
        (rc = bpt__permission_seize("bpt_register_native")) < 0)
        return rc;
    bpt__hide_provenance(fn);   /* its pad, before fn, is read and written below */
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
    bpt__addr_index_publish(ix, bpt__registry.funcs, bpt__registry.len);
    rc = bpt__apply_patterns(f, &t);
    bpt__permission_release();
    *out = f;
    return rc < 0 ? rc : 0;
#endif
}

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

/* C++ names are shown demangled ("game::step(long)") where the program
   has a C++ runtime: a weak reference to the Itanium ABI's __cxa_demangle
   (libstdc++, libc++abi), 0 in a program without one, which keeps the
   symbol's name. An asm label, so that <cxxabi.h>'s declaration of the same
   function in the user's file does not conflict. Its result is malloc'd by
   the runtime: free(), not BPT_FREE. */
extern char *bpt__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status)
    __asm__("__cxa_demangle") __attribute__((weak));

static int bpt__module_collect(void *fn, const char *symbol, uint64_t size, void *user) {
    bpt__module_entries *e = (bpt__module_entries *)user;
    char *demangled = NULL;
    const char *name = symbol;
    size_t len;
    int status = -1;
    if (bpt__ptrset_has(&bpt__registry.sites, fn)) return 0;   /* registered already */
    /* bptrace's own functions, when the whole program is built with the
       patchable-entry flags: tracing the hit path would recurse into itself. */
    if (strncmp(symbol, "bpt_", 4) == 0) return 0;
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
    if (strncmp(symbol, "_Z", 2) == 0 && bpt__cxa_demangle &&
        (demangled = bpt__cxa_demangle(symbol, NULL, NULL, &status)) && status == 0 &&
        strlen(demangled) <= BPT__NAME_MAX)
        name = demangled;   /* longer than a pattern can name: the symbol's prefix instead */
    len = strlen(name);
    if (len > BPT__NAME_MAX) len = BPT__NAME_MAX;   /* C++ symbols can be long: keep a prefix */
    if (!(e->name[e->n] = (char *)BPT_MALLOC(len + 1))) {
        free(demangled);
        return bpt__fail(BPT_ENOMEM, "bpt_register_module: no memory for a name; nothing registered");
    }
    memcpy(e->name[e->n], name, len);
    e->name[e->n][len] = '\0';
    free(demangled);
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
        if (e.n) bpt__addr_index_publish(ix, bpt__registry.funcs, bpt__registry.len);
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
    if (f->kind == BPT__SITE_NATIVE && !f->slot_prot) bpt__names_release(f->fid, f->fn);
    bpt__registry.funcs[ix] = bpt__registry.funcs[--bpt__registry.len];
    bpt__registry.keys[ix] = bpt__registry.keys[bpt__registry.len];
    bpt__registry.funcs[ix]->registry_ix = ix;
    bpt__ptrset_remove(&bpt__registry.records, f);
    bpt__ptrset_remove(&bpt__registry.sites, bpt__site_key(f));
}

int bpt_unregister_module(const char *module) {
    static const bpt__op off_all = { BPT__KINDS, BPT_OFF, NULL };
    const char *base;
    size_t len;
    bpt_func **fs, **traced;
    void *ix = NULL;              /* bpt__addr_index *, with BPT_NATIVE */
    uint64_t t = bpt__now_ns();
    uint32_t i;
    int n = 0, k, slot, rc;
    if (!module) return bpt__fail(BPT_EINVAL, "bpt_unregister_module: module is NULL");
    base = strrchr(module, '/') ? strrchr(module, '/') + 1 : module;
    len = strlen(base);
    if (len > BPT__NAME_MAX) len = BPT__NAME_MAX;   /* registered cut, as module.c cuts it */
    if ((rc = bpt__permission_seize("bpt_unregister_module")) < 0) return rc;
    fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (bpt__registry.len + 1));
    traced = (bpt_func **)BPT_MALLOC(sizeof *traced * (bpt__registry.len + 1));
    if (!fs || !traced) {
        BPT_FREE(fs); BPT_FREE(traced);
        bpt__permission_release();
        return bpt__fail(BPT_ENOMEM, "bpt_unregister_module: no memory");
    }
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__registry.funcs[i]->kind == BPT__SITE_NATIVE && strncmp(bpt__registry.funcs[i]->module, base, len) == 0 &&
            bpt__registry.funcs[i]->module[len] == '\0')
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
        if (nt) rc = bpt__protocol_run(s, traced, nt, &off_all, &t, NULL);
    }
    /* A function whose word an earlier switch-off could not restore (mprotect
       refused, a foreign word there) has no breakpoint left, so no session
       switched it off above; it still holds its word. Refused, as
       bpt_unregister refuses it: forgotten, its entry would run the stub
       for good and refuse a new registration (found by review). */
    for (k = 0; rc >= 0 && k < n; k++)
        if (fs[k]->installed)
            rc = bpt__fail(BPT_EBUSY, "bpt_unregister_module: %s:%s/%d still has its breakpoint word (restoring it "
                           "was refused); once the cause is gone, switch a pattern that names it off again; "
                           "nothing unregistered", fs[k]->module, fs[k]->name, fs[k]->arity);
    if (rc >= 0) for (k = 0; k < n; k++) bpt__registry_remove(fs[k]);
#if defined(BPT_NATIVE)
    if (rc >= 0 && n) bpt__addr_index_publish((bpt__addr_index *)ix, bpt__registry.funcs, bpt__registry.len);
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
        /* The message is made under the permission: once it is released, a
           bpt_session_destroy may free that session and its name. */
        rc = bpt__fail(BPT_EBUSY, "bpt_unregister: %s:%s/%d is traced by session '%s'",
                       f->module, f->name, f->arity, g->session->name);
        bpt__permission_release();
        return rc;
    }
    if (f->installed) {   /* an uninstall whose mprotect was refused left the word in place */
        rc = bpt__fail(BPT_EBUSY, "bpt_unregister: %s:%s/%d still has its breakpoint word (restoring it was "
                       "refused); once the cause is gone, switch a pattern that names it off again",
                       f->module, f->name, f->arity);   /* under the permission: f is still registered */
        bpt__permission_release();
        return rc;
    }
#if defined(BPT_NATIVE)
    if (f->kind == BPT__SITE_NATIVE && !(ix = bpt__addr_index_alloc(bpt__native_count(), "bpt_unregister"))) {
        bpt__permission_release();
        return BPT_ENOMEM;
    }
#endif
    bpt__registry_remove(f);
#if defined(BPT_NATIVE)
    if (ix) bpt__addr_index_publish((bpt__addr_index *)ix, bpt__registry.funcs, bpt__registry.len);
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
