/* slots.c: pointer slots as sites. A call into a shared library goes
   through an 8-byte slot of the caller's GOT (its PLT stub jumps through
   it; code built with -fno-plt calls through it), as a call from another
   module reaches an Erlang function through its export entry, where
   Tracing.md's global call trace breaks. An interpreter's dispatch table or
   an engine's table of systems is the same thing, built by hand. The slot
   is the site: it holds the target (the original word) or the address of
   a trampoline (the breakpoint word), and the protocol switches it with one
   aligned store, as it switches an entry word (site_native.c).

   A trampoline is a small function of bptrace's own, laid out as a
   BPT_TRACEABLE entry whose word always holds the breakpoint (sites.h,
   site_<arch>.c): the entry stub runs the hit with the caller's return
   address and argument registers as they are at any entry, and then jumps
   on to the target. So every kind works on a slot as on an entry: the
   arguments come from the registers, and return trace swaps the caller's
   return address.

   SL0. Trampolines live in pages bptrace maps for each registration. They
       are written while the pages are read+write, then made read+execute
       (W^X) and every thread's instruction stream is serialized (SYNC_CORE)
       before any slot can point at them. A page that a slot may point at
       is never writable again.
   SL1. A slot is written with one release store (bpt__slot_write,
       site_native.c; [SL1] in src/README.md's barrier pairs). A page that is not writable (a GOT under full RELRO,
       a table in .rodata) is made read+write for the batch of writes and
       given back its protection after.
   SL2. Records and trampolines are never freed: a thread may have loaded
       the slot's old value and be on its way into the trampoline, where no
       wait sees it, as for a native entry's padding (funcs.c). A slot
       registered again with the same target reuses its record.
   SL3. Lazy binding: an import slot the dynamic linker has not bound yet is
       bound first, to the target the linker would choose (module.c,
       >>imports): the slot then holds what it would hold after its first
       call. The bind is a compare-and-swap from the PLT address the scan
       saw: a lazy binding already in flight on another thread writes the
       same value, and a hook the program stored since stays (the first
       switch-on then says BPT_ENOTPATCHABLE). One still in flight when
       the breakpoint is installed (a thread preempted inside the dynamic
       linker for that whole time) would write the target over the
       trampoline's address: that is detected, not silently lost: the
       uninstall's check finds the slot changed (BPT_ENOTPATCHABLE, naming
       the dynamic linker), and a call through it meanwhile goes untraced.
   SL4. Calls that do not go through a slot are not traced through one: a
       library's calls to its own functions, and calls through another
       module's slots (register that module's imports too). */
#include "internal.h"

#if defined(BPT_NATIVE)

/* >>maps: the process's mappings, from /proc/self/maps (proc(5)): where a
   slot's page protection comes from, and whether a target is code. */
typedef struct bpt__mapping {
    uintptr_t lo, hi;
    unsigned prot;
    int shared;                   /* MAP_SHARED: other processes read it too */
} bpt__mapping;
typedef struct bpt__maps {
    bpt__mapping *v;
    size_t n, cap;
} bpt__maps;

static int bpt__maps_read(bpt__maps *m, const char *who) {
    char line[512], perms[8];
    FILE *fp = fopen("/proc/self/maps", "re");
    int whole = 1;
    memset(m, 0, sizeof *m);
    if (!fp) return bpt__fail(BPT_ENOTSUP, "%s: cannot read /proc/self/maps (%s): the slots' mappings are "
                              "unknown", who, strerror(errno));
    while (fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        int start = whole;        /* a long path's rest is not a line of its own */
        whole = strchr(line, '\n') != NULL;
        if (!start || sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || strlen(perms) != 4) continue;
        if (m->n == m->cap) {
            size_t cap = m->cap ? m->cap * 2 : 64;
            bpt__mapping *v = (bpt__mapping *)BPT_MALLOC(sizeof *v * cap);
            if (!v) {
                fclose(fp);
                BPT_FREE(m->v);
                return bpt__fail(BPT_ENOMEM, "%s: no memory for the process's mappings", who);
            }
            if (m->n) memcpy(v, m->v, sizeof *v * m->n);
            BPT_FREE(m->v);
            m->v = v;
            m->cap = cap;
        }
        m->v[m->n].lo = (uintptr_t)lo;
        m->v[m->n].hi = (uintptr_t)hi;
        m->v[m->n].shared = perms[3] == 's';
        m->v[m->n++].prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                            (perms[2] == 'x' ? PROT_EXEC : 0);
    }
    fclose(fp);
    return 0;
}

/* The mapping that holds [addr, addr + len), or NULL. */
static const bpt__mapping *bpt__maps_find(const bpt__maps *m, uintptr_t addr, size_t len) {
    size_t i;
    for (i = 0; i < m->n; i++)
        if (addr >= m->v[i].lo && addr - m->v[i].lo + len <= m->v[i].hi - m->v[i].lo) return &m->v[i];
    return NULL;
}

/* Its protection, or -1. */
static int bpt__maps_prot(const bpt__maps *m, uintptr_t addr, size_t len) {
    const bpt__mapping *x = bpt__maps_find(m, addr, len);
    return x ? (int)x->prot : -1;
}

/* Step 2 of a change that writes slots (bpt__sites_batch_prepare): each
   slot's protection as it is now, which the batch opens and restores. The
   program may have changed it since registration (sealed a table it filled,
   say): a protection remembered from then would make the write fault, or
   take write access back from a page the program opened. A slot no
   longer mapped (its module unloaded without bpt_unregister_module) is
   marked BPT__SLOT_UNMAPPED in a switch-off (switch_off), which then
   forgets it without a write (bpt__sites_write): else it could never be
   switched off, its session never destroyed. Anything else refuses it. A
   slot mapped with no access (PROT_NONE) is refused by every change: its
   word is still there, and a switch-off that forgot it would leave the
   trampoline in the slot, unknown (found by review; t_slot_swap).
   Returns 0; BPT_EINVAL for a slot mapped with no access, or for one no
   longer mapped in a change that may switch something on; BPT_ENOTSUP,
   BPT_ENOMEM. */
BPT__PRIVATE int bpt__slots_prot_refresh(bpt_func **fs, int n, int switch_off) {
    bpt__maps maps;
    int i, rc = 0;
    if ((rc = bpt__maps_read(&maps, "bpt_trace_pattern")) < 0) return rc;
    for (i = 0; i < n && rc == 0; i++) {
        int p;
        if (fs[i]->kind != BPT__SITE_NATIVE || !fs[i]->slot_prot) continue;
        if ((p = bpt__maps_prot(&maps, (uintptr_t)fs[i]->site, sizeof(void *))) > 0) {
            if (fs[i]->page_prot != (unsigned)p) fs[i]->page_prot = (unsigned)p;   /* the stubs' line: where it changes */
        }
        else if (p == 0)   /* mapped with no access now: its word stays, until the program gives access back */
            rc = bpt__fail(BPT_EINVAL, "%s:%s: its slot %p is mapped with no access now (PROT_NONE); nothing "
                           "changed: change it again once the program gives access back", fs[i]->module,
                           fs[i]->name, fs[i]->site);
        else if (switch_off)   /* unmapped: nothing to write to */
            fs[i]->page_prot = BPT__SLOT_UNMAPPED;
        else
            rc = bpt__fail(BPT_EINVAL, "%s:%s: its slot %p is no longer mapped (its module unloaded without "
                           "bpt_unregister_module?); nothing changed (a switch-off forgets it)", fs[i]->module,
                           fs[i]->name, fs[i]->site);
    }
    BPT_FREE(maps.v);
    return rc;
}

/* One slot to register. */
typedef struct bpt__slot_req {
    void **slot;
    char *name;                   /* owned */
    uintptr_t target;
    uintptr_t unbound;            /* not bound yet by the dynamic linker: what the slot held (SL3); else 0 */
} bpt__slot_req;

typedef struct bpt__slot_reqs {
    bpt__slot_req *v;
    int n, cap;
    const char *pattern;          /* bpt_register_imports' filter on symbol names */
} bpt__slot_reqs;

static void bpt__slot_reqs_free(bpt__slot_reqs *r) {
    int i;
    for (i = 0; i < r->n; i++) BPT_FREE(r->v[i].name);
    BPT_FREE(r->v);
}

static int bpt__slot_reqs_add(bpt__slot_reqs *r, void **slot, const char *name, uintptr_t target,
                              uintptr_t unbound) {
    size_t len = strlen(name);
    char *copy;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 64;
        bpt__slot_req *v = (bpt__slot_req *)BPT_MALLOC(sizeof *v * (size_t)cap);
        if (!v) return bpt__fail(BPT_ENOMEM, "no memory for %d slots; nothing registered", cap);
        if (r->n) memcpy(v, r->v, sizeof *v * (size_t)r->n);
        BPT_FREE(r->v);
        r->v = v;
        r->cap = cap;
    }
    if (len > BPT__NAME_MAX) len = BPT__NAME_MAX;   /* a long C++ symbol: its prefix, as bpt_register_module */
    if (!(copy = (char *)BPT_MALLOC(len + 1))) return bpt__fail(BPT_ENOMEM, "no memory for a slot's name");
    memcpy(copy, name, len);
    copy[len] = '\0';
    r->v[r->n].slot = slot;
    r->v[r->n].name = copy;
    r->v[r->n].target = target;
    r->v[r->n++].unbound = unbound;
    return 0;
}

/* Functions that return twice or switch contexts: the frame return trace
   pushes at the first return is gone at the second (a longjmp back into
   setjmp's caller, vfork's child and parent, a context resumed), and the
   return trampoline would find no frame. Not registered. */
static int bpt__returns_twice(const char *name) {
    static const char *const names[] = { "setjmp", "_setjmp", "__sigsetjmp", "sigsetjmp", "savectx", "vfork",
                                         "__vfork", "getcontext", "swapcontext" };
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0) return 1;
    return 0;
}

/* bpt__module_imports' visitor: keep the slots whose name matches. */
static int bpt__imports_collect(void **slot, const char *name, uintptr_t target, uintptr_t unbound, void *user) {
    bpt__slot_reqs *r = (bpt__slot_reqs *)user;
    if (strncmp(name, "bpt_", 4) == 0) return 0;   /* bptrace's own API, from another module: would recurse */
    if (bpt__returns_twice(name)) return 0;
    if (r->pattern && !bpt__glob(r->pattern, name)) return 0;
    return bpt__slot_reqs_add(r, slot, name, target, unbound) < 0 ? BPT_ENOMEM : 1;
}

/* SL0: n trampolines' pages, read+write, zero-filled. NULL (with the
   error) when mmap refuses. */
static uint8_t *bpt__tramp_map(int n, size_t *bytes, const char *who) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    void *p;
    *bytes = ((size_t)n * BPT__TRAMP_BYTES + ps - 1) / ps * ps;
    p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        bpt__fail(BPT_ENOMEM, "%s: mmap of %zu bytes for trampolines refused: %s", who, *bytes, strerror(errno));
        return NULL;
    }
    return (uint8_t *)p;
}

/* Fill one trampoline for f (its record, registered next): the padding
   as registration writes a BPT_TRACEABLE entry's, and the breakpoint word
   in for good. Returns 0 or the layout's refusal (a record above 2^48). */
static int bpt__tramp_fill(uint8_t *block, bpt_func *f) {
    bpt__entry_layout l;
    uint8_t *fn = bpt__arch_tramp_init(block, (uintptr_t)f->orig_word);
    int rc;
    memset(&l, 0, sizeof l);
    if ((rc = bpt__arch_entry_layout(fn, f->name, &l)) < 0 || (rc = bpt__arch_put_record(l.pre, f)) < 0) return rc;
    memcpy(fn - BPT__PAD_BYTES, l.pre, BPT__PAD_BYTES);
    memcpy(l.site, &l.bp_word, l.word_size);    /* little-endian: the word's low bytes */
    f->fn = fn;
    f->code_size = BPT__TRAMP_BYTES - 32;        /* the function's part of the block */
    return 0;
}

/* Check one request against the mappings and the registry. Returns 1 (go
   on), 0 (skip: imports only) or a BPT_E* code. */
static int bpt__slot_check(const bpt__slot_req *q, const bpt__maps *maps, const char *module, int strict,
                           const char *who, unsigned *prot) {
    const bpt__mapping *x = bpt__maps_find(maps, (uintptr_t)q->slot, sizeof(void *));
    int p = x ? (int)x->prot : -1, tp;
    if (bpt__ptrset_has(&bpt__registry.sites, q->slot))
        return strict ? bpt__fail(BPT_EEXIST, "%s: %s:%s: the slot %p is already registered", who, module,
                                  q->name, (void *)q->slot)
                      : 0;
    if (p < 0)
        return bpt__fail(BPT_EINVAL, "%s: %s:%s: the slot %p lies outside any mapping", who, module, q->name,
                         (void *)q->slot);
    if (p & PROT_EXEC)
        return bpt__fail(BPT_ENOTPATCHABLE, "%s: %s:%s: the slot %p lies in executable memory; a slot is data",
                         who, module, q->name, (void *)q->slot);
    if (x->shared)
        return bpt__fail(BPT_EINVAL, "%s: %s:%s: the slot %p lies in a shared mapping: another process would "
                         "read the trampoline's address, which is mapped here only", who, module, q->name,
                         (void *)q->slot);
    if (!(p & PROT_READ))
        return bpt__fail(BPT_EINVAL, "%s: %s:%s: the slot %p is not readable", who, module, q->name,
                         (void *)q->slot);
    tp = bpt__maps_prot(maps, q->target, 1);
    if (tp < 0 || !(tp & PROT_EXEC)) {
        if (!strict) return 0;   /* an import that is data after all (an untyped GLOB_DAT) */
        return bpt__fail(BPT_EINVAL, "%s: %s:%s: the slot %p holds %p, which is not code", who, module,
                         q->name, (void *)q->slot, (void *)q->target);
    }
    *prot = (unsigned)p;
    return 1;
}

/* A record for one checked request: a retired one for the same slot and
   target (its trampoline is ready: SL2), or a new one, to fill. */
static int bpt__slot_record(const bpt__slot_req *q, const char *module, int arity, unsigned prot,
                            const char *who, bpt_func **out, int *fresh) {
    bpt_func *f = bpt__retired_take(NULL, (const void *)q->slot, q->target);
    int rc;
    *fresh = !f;
    if (f) {   /* its trampoline stays: fn and code_size survive the renewal */
        void *fn = f->fn;
        uint64_t size = f->code_size;
        if ((rc = bpt__func_renew(f, module, q->name, arity, NULL, who)) < 0) return rc;
        f->fn = fn;
        f->code_size = size;
    } else if ((rc = bpt__func_new(module, q->name, arity, NULL, NULL, who, &f)) < 0) {
        return rc;
    }
    f->arity = arity;
    f->kind = BPT__SITE_NATIVE;
    f->slot_prot = prot;
    f->page_prot = prot;
    f->site = (void *)q->slot;
    f->orig_word = (uint64_t)q->target;
    f->word_size = sizeof(void *);
    *out = f;
    return 0;
}

/* SL3: bind a lazy import slot to its target, as the dynamic linker's
   first call through it would (its page is writable: the linker writes
   lazy slots there itself). A compare-and-swap from the PLT address the
   scan saw, as every slot write is [SL1]: a linker binding the same slot
   meanwhile has stored the same value, and a store of the program's since
   the scan (a plthook-style hook) stays. Such a slot holds neither what
   the record calls nor its trampoline: the first switch-on says
   BPT_ENOTPATCHABLE and leaves it alone (bpt__sites_write). A plain store
   here overwrote the program's hook (found by review, under gdb;
   t_imports_lazy). Release: the resolved target is code, complete before
   the module was mapped. */
static void bpt__slot_bind(const bpt__slot_req *q) {
    BPT_TEST_POINT("slots: about to bind a lazy slot");   /* t_imports_lazy */
    (void)bpt__cas_ptr((bpt__atomic_ptr *)(void *)q->slot, (void *)q->unbound, (void *)q->target);
}

/* Register the checked slots of reqs (bpt_register_imports: strict 0,
   skipping what is not a code slot or registered already;
   bpt_register_slot: strict 1, refusing instead). All or nothing, as
   bpt_register_module. Under the permission. Returns how many were
   registered, or a BPT_E* code. */
static int bpt__slots_register(bpt__slot_reqs *reqs, const bpt__maps *maps, const char *module, int arity,
                               int strict, const char *who, bpt_func **first) {
    bpt_func **fs = NULL;
    int *fresh = NULL, i, n = 0, nfresh = 0, rc, k;
    unsigned *prot = NULL;
    uint8_t *pages = NULL;
    size_t bytes = 0;
    bpt__addr_index *ix = NULL;
    uint64_t t = bpt__now_ns();
    fs = (bpt_func **)BPT_MALLOC(sizeof *fs * (size_t)(reqs->n + 1));
    fresh = (int *)BPT_MALLOC(sizeof *fresh * (size_t)(reqs->n + 1));
    prot = (unsigned *)BPT_MALLOC(sizeof *prot * (size_t)(reqs->n + 1));
    rc = !fs || !fresh || !prot ? bpt__fail(BPT_ENOMEM, "%s: no memory for %d slots", who, reqs->n) : 0;
    /* Check everything, then make every record, before anything changes.
       The requests that pass move to the front. */
    for (i = 0, k = 0; rc >= 0 && i < reqs->n; i++) {
        unsigned p = 0;
        int ok = bpt__slot_check(&reqs->v[i], maps, module, strict, who, &p);
        if (ok < 0) {
            rc = ok;
        } else if (ok) {
            prot[k] = p;
            if (k != i) {
                reqs->v[k] = reqs->v[i];
                reqs->v[i].name = NULL;
            }
            k++;
        } else {
            BPT_FREE(reqs->v[i].name);   /* skipped */
            reqs->v[i].name = NULL;
        }
    }
    if (rc >= 0) reqs->n = k;
    if (rc >= 0 && reqs->n && (bpt__registry_reserve((uint32_t)reqs->n) < 0 ||
                               !(ix = bpt__addr_index_alloc(bpt__native_count() + (uint32_t)reqs->n, who))))
        rc = bpt__fail(BPT_ENOMEM, "%s: no memory to register %d slots", who, reqs->n);
    for (i = 0; rc >= 0 && i < reqs->n; i++) {
        if ((rc = bpt__slot_record(&reqs->v[i], module, arity, prot[i], who, &fs[i], &fresh[i])) < 0) break;
        n++;
        nfresh += fresh[i];
    }
    /* SL0: the new records' trampolines, written, then read+execute. */
    if (rc >= 0 && nfresh && !(pages = bpt__tramp_map(nfresh, &bytes, who))) rc = BPT_ENOMEM;
    for (i = 0, k = 0; rc >= 0 && i < n; i++)
        if (fresh[i]) rc = bpt__tramp_fill(pages + (size_t)BPT__TRAMP_BYTES * (size_t)k++, fs[i]);
    if (rc >= 0 && pages) {
        if (mprotect(pages, bytes, PROT_READ | PROT_EXEC) != 0)
            rc = bpt__fail(BPT_EPERM, "%s: mprotect of the trampolines read+execute refused: %s", who,
                           strerror(errno));
        else
            bpt__arch_sync_icache(pages, bytes);
    }
    if (rc < 0) {
        /* No slot points at the new trampolines yet: they and their
           records go. A reused record goes back to the retired list. */
        for (i = 0; i < n; i++) {
            if (fresh[i]) bpt__func_free(fs[i]);
            else bpt__native_discard(fs[i]);
        }
        if (pages) munmap(pages, bytes);
        BPT_FREE(ix);
        n = 0;
    } else if (n) {
        if (pages) bpt_thread_progress_wait_sync_core();   /* SL0: before any slot points there */
        for (i = 0; i < n; i++) {
            if (reqs->v[i].unbound) bpt__slot_bind(&reqs->v[i]);   /* SL3 */
            fs[i]->bp_word = (uint64_t)(uintptr_t)((uint8_t *)fs[i]->fn + BPT__TRAMP_ENTRY);
            bpt__registry_add(fs[i], fs[i]->site);
        }
        bpt__addr_index_publish(ix, bpt__registry.funcs, bpt__registry.len);
        if (first) *first = fs[0];
        for (i = 0; i < n && rc >= 0; i++) rc = bpt__apply_patterns(fs[i], &t);
    } else {
        BPT_FREE(ix);
    }
    BPT_FREE(fs);
    BPT_FREE(fresh);
    BPT_FREE(prot);
    return rc < 0 ? rc : n;
}
#endif /* BPT_NATIVE */

int bpt_register_imports(const char *module, const char *pattern) {
#if !defined(BPT_NATIVE)
    (void)module; (void)pattern;
    return bpt__fail(BPT_ENOTSUP, "bpt_register_imports: slot tracing needs gcc or clang on x86-64 or "
                     "aarch64 without BPT_NO_NATIVE (its trampolines are native code)");
#else
    bpt__slot_reqs reqs;
    bpt__maps maps;
    const char *mod = NULL;
    int rc;
    memset(&reqs, 0, sizeof reqs);
    if (module && !*module) return bpt__fail(BPT_EINVAL, "bpt_register_imports: module is \"\"");
    if (pattern && (!*pattern || strlen(pattern) > BPT__NAME_MAX))
        return bpt__fail(BPT_EPATTERN, "bpt_register_imports: the pattern must be 1..%d bytes", BPT__NAME_MAX);
    reqs.pattern = pattern && strcmp(pattern, "_") != 0 ? pattern : NULL;
    if ((rc = bpt__arch_native_usable("bpt_register_imports")) < 0) return rc;
    /* The scan and its lookups before the permission (>>imports, module.c),
       but not where the permission's own checks would refuse: the lookups
       take the dynamic linker's lock, which is no place for a pinned thread. */
    if ((rc = bpt__set_path_allowed("bpt_register_imports")) < 0) return rc;
    if ((rc = bpt__module_imports(module, &mod, bpt__imports_collect, &reqs)) < 0) {
        bpt__slot_reqs_free(&reqs);
        return rc;
    }
    if ((rc = bpt__permission_seize("bpt_register_imports")) < 0) {
        bpt__slot_reqs_free(&reqs);
        return rc;
    }
    if ((rc = bpt__maps_read(&maps, "bpt_register_imports")) == 0) {
        rc = bpt__slots_register(&reqs, &maps, mod, 0, 0, "bpt_register_imports", NULL);
        BPT_FREE(maps.v);
    }
    bpt__permission_release();
    bpt__slot_reqs_free(&reqs);
    return rc;
#endif
}

int bpt_register_slot(void **slot, const char *module, const char *name, int arity, bpt_func **out) {
#if !defined(BPT_NATIVE)
    (void)slot; (void)module; (void)name; (void)arity; (void)out;
    return bpt__fail(BPT_ENOTSUP, "bpt_register_slot: slot tracing needs gcc or clang on x86-64 or "
                     "aarch64 without BPT_NO_NATIVE (its trampolines are native code)");
#else
    bpt__slot_reqs reqs;
    bpt__maps maps;
    bpt_func *f = NULL;
    int rc;
    memset(&reqs, 0, sizeof reqs);
    if ((rc = bpt__register_args_check("bpt_register_slot", "slot", slot, module, name, arity, out)) < 0) return rc;
    if ((uintptr_t)slot & (sizeof(void *) - 1))
        return bpt__fail(BPT_EINVAL, "bpt_register_slot: %s:%s: the slot %p is not pointer-aligned", module,
                         name, (void *)slot);
    if ((rc = bpt__arch_native_usable("bpt_register_slot")) < 0) return rc;
    if ((rc = bpt__permission_seize("bpt_register_slot")) < 0) return rc;
    if ((rc = bpt__maps_read(&maps, "bpt_register_slot")) == 0) {
        /* Read the slot only once it is known to be mapped; the same
           snapshot then serves the checks of bpt__slots_register. */
        int prot = bpt__maps_prot(&maps, (uintptr_t)slot, sizeof *slot);
        if (prot < 0 || !(prot & PROT_READ))
            rc = bpt__fail(BPT_EINVAL, "bpt_register_slot: %s:%s: the slot %p lies outside any readable "
                           "mapping", module, name, (void *)slot);
        if (rc == 0)
            rc = bpt__slot_reqs_add(&reqs, slot, name,
                                    (uintptr_t)bpt__load_relaxed_ptr((bpt__atomic_ptr *)slot), 0);
        if (rc == 0) rc = bpt__slots_register(&reqs, &maps, module, arity, 1, "bpt_register_slot", &f);
        BPT_FREE(maps.v);
    }
    bpt__permission_release();
    bpt__slot_reqs_free(&reqs);
    if (f) *out = f;
    return rc < 0 ? rc : 0;
#endif
}
