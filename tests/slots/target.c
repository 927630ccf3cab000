/* tests/slots/target.c: calls through import slots (bpt_register_imports,
   #21), built by tests/slots/run in each link setup:
     lazy    -Wl,-z,lazy: the first call to strcspn comes after registration,
             while its slot still points into this program's .plt (checked)
     now     -Wl,-z,now -Wl,-z,relro: full RELRO, the GOT read-only (checked
             before, and again after everything is off)
     noplt   -fno-plt: calls load the GOT entry (R_*_GLOB_DAT) themselves
   and checks, in each, for five slots: strspn and strcspn from this program
   into libc, cbrt into libm, strspn from a dlopened library, and strpbrk
   in a const table of function pointers (an R_*_64 relocation, RELRO):
   - call_count exact;
   - call trace with the arguments (strings, a double) from the registers;
   - return_from with the return value;
   - call_time's calls;
   - every import of this program counted, and timed (return trace), at once:
     bptrace's own calls into libc go through the same GOT and must not
     recurse, and setjmp, which returns twice, is not registered (its
     second return would find no frame: the process aborted);
   - after everything is off, every slot holds its target, no slot's page
     changed its protection, and bptrace's refusals (a module not loaded).
   `target stress` switches call_count on and off 10^5 times (BPT_TEST_SCALE
   divides) over strspn and cbrt, called by 4 threads, with exact counts in
   steady windows and every result right. */
#define BPTRACE_IMPLEMENTATION
#include "../../bptrace.h"
#include "../check.h"
#include <dlfcn.h>
#include <link.h>
#include <setjmp.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

static const char *words[4] = { "abcx", "ab", "cba!", "x" };   /* strspn(w, "abc"): 3 2 3 0 */
static const size_t spans[4] = { 3, 2, 3, 0 };
static const double cubes[4] = { 27.0, 8.0, 64.0, 1.0 };
static const double roots[4] = { 3.0, 2.0, 4.0, 1.0 };
/* cbrt is correctly rounded to within an ulp or so, not exact. */
static int near(double a, double b) { return fabs(a - b) < 1e-12; }
static size_t (*lib_span)(const char *, const char *);
static const char *variant, *exe, *lib;

/* Each caller makes n calls through its slot and checks every result. */
static long call_strspn(long n) {
    long i, wrong = 0;
    for (i = 0; i < n; i++) wrong += strspn(words[i & 3], "abc") != spans[i & 3];
    return wrong;
}
static long call_strcspn(long n) {
    long i, wrong = 0;
    for (i = 0; i < n; i++) wrong += strcspn(words[i & 3], "x!") != (size_t[]){ 3, 2, 3, 0 }[i & 3];
    return wrong;
}
static long call_cbrt(long n) {
    long i, wrong = 0;
    for (i = 0; i < n; i++) wrong += !near(cbrt(cubes[i & 3]), roots[i & 3]);
    return wrong;
}
/* A table of function pointers, filled by the dynamic linker (an
   R_*_64 / ABS64 relocation against strpbrk), const: read-only after
   relocation (RELRO). strpbrk is called only through it. */
static char *(*const pbrk_table[1])(const char *, const char *) = { strpbrk };
static char *(*const *volatile pbrk_slots)(const char *, const char *) = pbrk_table;
static long call_pbrk(long n) {
    long i, wrong = 0;
    for (i = 0; i < n; i++) {
        const char *w = words[i & 3];
        wrong += __atomic_load_n(&pbrk_slots[0], __ATOMIC_RELAXED)(w, "x!") != (w[0] == 'x' ? w : strchr(w, 'x') ? strchr(w, 'x') : strchr(w, '!'));
    }
    return wrong;
}
static long call_lib(long n) {
    long i, wrong = 0;
    for (i = 0; i < n; i++) wrong += lib_span(words[i & 3], "abc") != spans[i & 3];
    return wrong;
}

/* One slot under test: where it is, how to call through it, and what its
   first call's messages must say. */
typedef struct slot_case {
    const char *module, *name;
    long (*call)(long n);
    const char *args, *ret;       /* the match spec */
    const char *call_has, *ret_has;   /* in bpt_format_dbg's lines */
    void **slot;                  /* the slot, when the symbol may have others; else NULL */
} slot_case;

/* The slot a module's relocations give name, found by the test itself
   from the loaded dynamic section (DT_JMPREL, DT_RELA), so that its value
   can be looked at before bptrace touches anything. */
typedef struct find_slot { const char *want_module, *name; void **slot; } find_slot;
static int find_slot_cb(struct dl_phdr_info *info, size_t size, void *data) {
    find_slot *q = (find_slot *)data;
    const ElfW(Dyn) *d = NULL;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *rel[2] = { NULL, NULL };
    size_t relsz[2] = { 0, 0 }, i, k;
    const char *base = strrchr(info->dlpi_name, '/') ? strrchr(info->dlpi_name, '/') + 1 : info->dlpi_name;
    (void)size;
    if (q->want_module ? strcmp(base, q->want_module) != 0 : info->dlpi_name[0] != '\0') return 0;
    for (i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) d = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    for (; d && d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {   /* glibc has relocated these pointers in place (x86-64, aarch64) */
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)d->d_un.d_ptr; break;
        case DT_STRTAB: strtab = (const char *)d->d_un.d_ptr; break;
        case DT_JMPREL: rel[0] = (const ElfW(Rela) *)d->d_un.d_ptr; break;
        case DT_PLTRELSZ: relsz[0] = d->d_un.d_val; break;
        case DT_RELA: rel[1] = (const ElfW(Rela) *)d->d_un.d_ptr; break;
        case DT_RELASZ: relsz[1] = d->d_un.d_val; break;
        }
    }
    for (k = 0; k < 2 && symtab && strtab; k++)
        for (i = 0; rel[k] && i < relsz[k] / sizeof(ElfW(Rela)); i++)
            if (ELF64_R_SYM(rel[k][i].r_info) && strcmp(strtab + symtab[ELF64_R_SYM(rel[k][i].r_info)].st_name, q->name) == 0)
                q->slot = (void **)(info->dlpi_addr + rel[k][i].r_offset);
    return 1;
}
static void **slot_of(const char *module_or_null, const char *name) {
    find_slot q = { module_or_null, name, NULL };
    dl_iterate_phdr(find_slot_cb, &q);
    return q.slot;
}

/* "r--p" of the mapping that holds p. */
static void maps_perms(const void *p, char out[5]) {
    char line[512];
    FILE *fp = fopen("/proc/self/maps", "r");
    strcpy(out, "????");
    while (fp && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
            memcpy(out, perms, 4);
            out[4] = '\0';
        }
    }
    if (fp) fclose(fp);
}

static bpt_func *lookup(const char *module, const char *name) {
    bpt_func *f = NULL;
    CHECK_RC(bpt_func_lookup(module, name, 0, &f), 0);
    return f;
}

/* How many slots the registry holds under module:name (white box). A
   symbol can have several: aarch64's linker gives strpbrk, whose address
   the const table takes, a PLT slot besides the table's word. */
static int slots_named(const char *module, const char *name) {
    uint32_t i;
    int n = 0;
    for (i = 0; i < bpt__registry.len; i++)
        n += strcmp(bpt__registry.funcs[i]->module, module) == 0 && strcmp(bpt__registry.funcs[i]->name, name) == 0;
    return n;
}

/* The record of the slot at `slot`, or NULL (white box). */
static bpt_func *slot_record(void **slot) {
    uint32_t i;
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__registry.funcs[i]->site == (void *)slot) return bpt__registry.funcs[i];
    return NULL;
}

static void check_case(bpt_session s, const slot_case *c) {
    char pattern[300], line[400];
    bpt_func *f = c->slot ? slot_record(c->slot) : lookup(c->module, c->name);
    int k = slots_named(c->module, c->name);
    bpt_info info;
    bpt_match ms;
    bpt_msg m[8];
    int n, i;
    CHECK(f != NULL, "%s:%s: its slot is registered", c->module, c->name);
    if (!f) return;
    if (!c->slot) CHECK(k == 1, "%s:%s: one slot (%d)", c->module, c->name, k);
    snprintf(pattern, sizeof pattern, "%s:%s/_", c->module, c->name);
    /* call_count: exact. */
    CHECK_RC(bpt_trace_pattern(s, pattern, BPT_COUNT, NULL), k);
    CHECK(c->call(1000) == 0, "%s: results through the counted slot", pattern);
    memset(&info, 0, sizeof info);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_COUNT, &info), 0);
    CHECK(info.count == 1000, "%s: counted %llu of 1000 calls", pattern, (unsigned long long)info.count);
    CHECK_RC(bpt_trace_pattern(s, pattern, BPT_OFF, NULL), k);
    /* Call trace with arguments, return_from with the value. */
    memset(&ms, 0, sizeof ms);
    ms.args = c->args;
    ms.ret = c->ret;
    CHECK_RC(bpt_trace_pattern(s, pattern, BPT_CALL | BPT_RETURN, &ms), k);
    CHECK(c->call(1) == 0, "%s: the traced call's result", pattern);
    n = bpt_session_drain(s, m, 8);
    for (i = 0; i < n; i++) {
        bpt_format_dbg(&m[i], line, sizeof line);
        printf("  %s\n", line);
        if (i == 0) CHECK(m[i].type == BPT_MSG_CALL && strstr(line, c->call_has), "%s: call message has %s", pattern, c->call_has);
        if (i == 1) CHECK(m[i].type == BPT_MSG_RETURN_FROM && strstr(line, c->ret_has), "%s: return_from has %s", pattern, c->ret_has);
    }
    CHECK(n == 2, "%s: a call and a return_from: %d messages", pattern, n);
    CHECK_RC(bpt_trace_pattern(s, pattern, BPT_OFF, NULL), k);
    /* call_time. */
    CHECK_RC(bpt_trace_pattern(s, pattern, BPT_TIME, NULL), k);
    CHECK(c->call(200) == 0, "%s: results while timed", pattern);
    memset(&info, 0, sizeof info);
    CHECK_RC(bpt_trace_info(s, f, BPT_INFO_TIME, &info), 0);
    CHECK(info.calls == 200, "%s: call_time counted %llu of 200 calls", pattern, (unsigned long long)info.calls);
    printf("%s: call_time %llu calls, %llu ns\n", pattern, (unsigned long long)info.calls, (unsigned long long)info.time_ns);
    CHECK_RC(bpt_trace_pattern(s, pattern, BPT_OFF, NULL), k);
}

/* After everything is off: every slot holds its target again (white box:
   the registry, as the test includes the implementation). */
static int n_registered, n_restored;
static void check_restored(void) {
    uint32_t i;
    for (i = 0; i < bpt__registry.len; i++) {
        const bpt_func *f = bpt__registry.funcs[i];
        n_registered++;
        if (f->slot_prot && !f->installed && *(void *const *)f->site == (void *)(uintptr_t)f->orig_word) n_restored++;
        else CHECK(0, "%s:%s: slot %p holds %p, not its target %p", f->module, f->name, f->site,
                   *(void *const *)f->site, (void *)(uintptr_t)f->orig_word);
    }
}

/* >>stress: 4 threads call through strspn's and cbrt's slots while the main
   thread switches call_count on both on and off. */
enum { RUN, PAUSE, COUNTED };
static int phase, acks;           /* atomic */
static long wrong;                /* atomic */
static void *stress_caller(void *arg) {
    int seen = RUN;
    (void)arg;
    for (;;) {
        int p = __atomic_load_n(&phase, __ATOMIC_ACQUIRE);
        if (p < 0) break;
        if (p != seen) {   /* a new phase: COUNTED makes 100 calls each; then say so */
            if (p == COUNTED) __atomic_fetch_add(&wrong, call_strspn(100) + call_cbrt(100), __ATOMIC_RELAXED);
            __atomic_fetch_add(&acks, 1, __ATOMIC_ACQ_REL);
            seen = p;
        }
        if (p == RUN) __atomic_fetch_add(&wrong, call_strspn(4) + call_cbrt(4), __ATOMIC_RELAXED);
    }
    return NULL;
}
static void stress_phase(int p) {
    __atomic_store_n(&acks, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&phase, p, __ATOMIC_RELEASE);
    while (__atomic_load_n(&acks, __ATOMIC_ACQUIRE) < 4) sched_yield();
}
static int stress(void) {
    pthread_t t[4];
    bpt_session s;
    bpt_func *f_span, *f_cbrt;
    long flips = check_scale(100000), r, windows = 0;
    char pattern[300];
    snprintf(pattern, sizeof pattern, "%s:_/_", exe);
    CHECK(bpt_register_imports(NULL, "strspn") == 1 && bpt_register_imports(NULL, "cbrt") == 1, "%s", bpt_last_error());
    f_span = lookup(exe, "strspn");
    f_cbrt = lookup(exe, "cbrt");
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    for (r = 0; r < 4; r++) pthread_create(&t[r], NULL, stress_caller, NULL);
    for (r = 0; r < flips; r++) {
        CHECK_RC(bpt_trace_pattern(s, pattern, BPT_COUNT, NULL), 2);
        if (r % 1000 == 999) {   /* a steady window: nobody else calls; 4 x 100 calls each */
            bpt_info a, b, c, d;
            memset(&a, 0, sizeof a); memset(&b, 0, sizeof b); memset(&c, 0, sizeof c); memset(&d, 0, sizeof d);
            stress_phase(PAUSE);
            bpt_trace_info(s, f_span, BPT_INFO_COUNT, &a);
            bpt_trace_info(s, f_cbrt, BPT_INFO_COUNT, &b);
            stress_phase(COUNTED);
            bpt_trace_info(s, f_span, BPT_INFO_COUNT, &c);
            bpt_trace_info(s, f_cbrt, BPT_INFO_COUNT, &d);
            CHECK(c.count - a.count == 400 && d.count - b.count == 400, "window %ld: %llu and %llu of 400", windows,
                  (unsigned long long)(c.count - a.count), (unsigned long long)(d.count - b.count));
            windows++;
            stress_phase(RUN);
        }
        CHECK_RC(bpt_trace_pattern(s, pattern, BPT_OFF, NULL), 2);
    }
    __atomic_store_n(&phase, -1, __ATOMIC_RELEASE);
    for (r = 0; r < 4; r++) pthread_join(t[r], NULL);
    printf("%ld switches on and off over strspn and cbrt under 4 threads, %ld steady windows exact, %ld wrong results\n",
           flips, windows, wrong);
    CHECK(wrong == 0, "every call through a switching slot returned right");
    CHECK(f_span && *(void **)f_span->site == (void *)(uintptr_t)f_span->orig_word, "strspn's slot restored");
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}

int main(int argc, char **argv) {
    static char exe_buf[4096];
    char libpath[4096], perms_before[5][5], perms_after[5], pattern[300];
    void **lazy_slot, **slots[5];
    slot_case cases[5];
    bpt_session s;
    void *h;
    int i, n;
    ssize_t len = readlink("/proc/self/exe", exe_buf, sizeof exe_buf - 1);
    exe_buf[len > 0 ? len : 0] = '\0';
    exe = strrchr(exe_buf, '/') ? strrchr(exe_buf, '/') + 1 : exe_buf;
    if (argc > 1 && strcmp(argv[1], "stress") == 0) return stress();
    if (argc < 3) {
        fprintf(stderr, "usage: target VARIANT LIB.so | target stress\n");
        return 2;
    }
    variant = argv[1];
    snprintf(libpath, sizeof libpath, "%s", argv[2]);
    lib = strrchr(libpath, '/') ? strrchr(libpath, '/') + 1 : libpath;

    /* Before anything: strcspn not called yet. Lazy: its slot points into
       this program (its .plt); bound at load otherwise. */
    lazy_slot = slot_of(NULL, "strcspn");
    CHECK(lazy_slot != NULL, "strcspn's slot found");
    if (lazy_slot) {
        Dl_info di, me;
        int own = dladdr(*lazy_slot, &di) && dladdr((void *)&main, &me) && di.dli_fbase == me.dli_fbase;
        printf("%s: strcspn's slot %p holds %p (%s)\n", variant, (void *)lazy_slot, *lazy_slot,
               own ? "unbound: this program's .plt" : "bound");
        CHECK(own == (strcmp(variant, "lazy") == 0), "%s: strcspn's slot is %s before registration", variant,
              own ? "unbound" : "bound");
    }
    h = dlopen(libpath, strcmp(variant, "lazy") == 0 ? RTLD_LAZY | RTLD_LOCAL : RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL, "dlopen %s: %s", libpath, dlerror());
    if (!h) return CHECK_DONE();
    *(void **)&lib_span = dlsym(h, "lib_span");

    /* Refusals. */
    CHECK_RC(bpt_register_imports("libnot-loaded.so", NULL), BPT_ENOENT);
    printf("not loaded: %s\n", bpt_last_error());
    CHECK_RC(bpt_register_imports("", NULL), BPT_EINVAL);
    CHECK_RC(bpt_register_imports(NULL, ""), BPT_EPATTERN);

    n = bpt_register_imports(NULL, NULL);
    printf("%s: %d import slots of %s registered\n", variant, n, exe);
    CHECK(n >= 8, "the program's imports: %d (%s)", n, bpt_last_error());
    CHECK_RC(bpt_register_imports(NULL, NULL), 0);   /* registered already: none new */
    n = bpt_register_imports(lib, "strspn");
    CHECK(n == 1, "%s's strspn slot: %d (%s)", lib, n, bpt_last_error());
    if (lazy_slot) {
        Dl_info di;
        CHECK(dladdr(*lazy_slot, &di) && di.dli_fname && strstr(di.dli_fname, "libc"), "strcspn's slot bound by "
              "registration, to %s", dladdr(*lazy_slot, &di) && di.dli_fname ? di.dli_fname : "?");
    }

    cases[0] = (slot_case){ exe, "strspn", call_strspn, "str,str", "i64", "(\"abcx\",\"abc\")", "-> 3", NULL };
    cases[1] = (slot_case){ exe, "strcspn", call_strcspn, "str,str", "u64", "(\"abcx\",\"x!\")", "-> 3", NULL };
    cases[2] = (slot_case){ exe, "cbrt", call_cbrt, "f64", "f64", "(27", "-> 3", NULL };
    cases[3] = (slot_case){ lib, "strspn", call_lib, "str,str", "i64", "(\"abcx\",\"abc\")", "-> 3", NULL };
    cases[4] = (slot_case){ exe, "strpbrk", call_pbrk, "str,str", "ptr", "(\"abcx\",\"x!\")", "-> 0x",
                            (void **)(void *)&pbrk_table[0] };
    for (i = 0; i < 5; i++) {
        bpt_func *f = cases[i].slot ? slot_record(cases[i].slot) : lookup(cases[i].module, cases[i].name);
        slots[i] = f ? (void **)f->site : NULL;
        maps_perms(slots[i], perms_before[i]);
        printf("%s:%s: slot %p, page %s\n", cases[i].module, cases[i].name, (void *)slots[i], perms_before[i]);
    }
    if (strcmp(variant, "now") == 0)
        CHECK(perms_before[0][1] == '-', "full RELRO: the GOT is read-only (%s)", perms_before[0]);

    CHECK_RC(bpt_session_create(NULL, &s), 0);
    for (i = 0; i < 5; i++) check_case(s, &cases[i]);

    /* Every import counted and timed at once: bptrace's own calls through
       this GOT (the clock, mmap, the futex) must not recurse, strspn stays
       exact, and a setjmp/longjmp pair runs untraced (not registered). */
    snprintf(pattern, sizeof pattern, "%s:_/_", exe);
    {
        bpt_func *f_sj;
        CHECK(bpt_func_lookup(exe, "_setjmp", 0, &f_sj) == BPT_ENOENT && bpt_func_lookup(exe, "setjmp", 0, &f_sj) ==
              BPT_ENOENT, "setjmp is not registered");
    }
    n = bpt_trace_pattern(s, pattern, BPT_COUNT | BPT_TIME, NULL);
    CHECK(n >= 8, "count and time on every import: %d", n);
    CHECK(call_strspn(500) == 0 && call_cbrt(10) == 0, "results");
    {
        static jmp_buf jb;
        static volatile int jumped;
        if (setjmp(jb) == 0) longjmp(jb, 1);
        else jumped = 1;
        CHECK(jumped, "setjmp returned twice under call_time on every import");
    }
    {
        bpt_info info;
        memset(&info, 0, sizeof info);
        CHECK_RC(bpt_trace_info(s, lookup(exe, "strspn"), BPT_INFO_COUNT, &info), 0);
        CHECK(info.count == 500, "strspn among every import: %llu of 500", (unsigned long long)info.count);
    }
    CHECK(bpt_trace_pattern(s, pattern, BPT_COUNT | BPT_TIME | BPT_OFF, NULL) == n, "off");

    /* Everything off: targets back, protections unchanged. */
    check_restored();
    printf("%d of %d slots hold their target again\n", n_restored, n_registered);
    CHECK(n_registered > 8 && n_restored == n_registered, "every slot restored");
    CHECK(perms_before[4][1] == '-', "the const table is read-only after relocation (%s)", perms_before[4]);
    for (i = 0; i < 5; i++) {
        maps_perms(slots[i], perms_after);
        CHECK(strcmp(perms_after, perms_before[i]) == 0, "%s:%s's page is %s again (now %s)", cases[i].module,
              cases[i].name, perms_before[i], perms_after);
    }
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK(bpt_unregister_module(lib) == 1, "the library's slot unregistered before dlclose");
    CHECK(dlclose(h) == 0, "dlclose");
    return CHECK_DONE();
}
