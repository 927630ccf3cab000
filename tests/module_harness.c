/* module_harness.c: standalone test of src/module.c (DESIGN §4.5): finding a
   module's patchable entries and naming them from ELF symbols. Not a t_*.c
   test: tests/module_harness.sh builds it (with its shared object) in every
   configuration and runs it.

   It tests the module.c inside bptrace.h once amalgamate.sh includes it
   (regenerate bptrace.h after editing src/module.c), else src/module.c.

   Usage: module_harness DIR [ITERATIONS] [ELF32_FILE]
     DIR holds libmh.so (module_harness_lib.c), libmh_stripped.so (the same,
     strip --strip-all) and libmh_other.so (-DHARNESS_OTHER_BUILD); corrupt
     copies are written to DIR/fuzz. ITERATIONS (default 4000) is the number
     of mutations per fuzzed file. ELF32_FILE, if given, is a real 32-bit ELF.

   What it checks:
   - the main program's 160 patchable functions (120 global, 40 static) and
     the library's 71 are each found once, at their address, under their
     name; the counts match; entries come in address order;
   - lookup by NULL, by basename and by path agree;
   - a stripped library names its exported functions from .dynsym and its
     static ones fn_0x<link-time address>;
   - a module without the section gives 0; errors give the right BPT_E*;
   - a file replaced after load (another build, or a changed build ID) is
     refused, and a stripped file of the same build is accepted;
   - truncated and corrupted files never crash the parser nor the whole scan
     (run it under -fsanitize=address,undefined). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#if !defined(BPT__PFE_SECTION)     /* module.c not in the amalgamation yet */
#  include "../src/module.c"
#endif
#include <dlfcn.h>
#include <sys/stat.h>

#include "module_harness.h"

#if !defined(__TINYC__)
#  define MAIN_G(n) H_DEFINE(main_g_, , n)
#  define MAIN_S(n) H_DEFINE(main_s_, static, n)
#  define MAIN_G_ENTRY(n) H_ENTRY(main_g_, 0, n)
#  define MAIN_S_ENTRY(n) H_ENTRY(main_s_, 1, n)
H_D100(MAIN_G, 1) H_D10(MAIN_G, 20) H_D10(MAIN_G, 21)
H_D10(MAIN_S, 30) H_D10(MAIN_S, 31) H_D10(MAIN_S, 32) H_D10(MAIN_S, 33)
static const harness_fn main_table[] = {
    H_D100(MAIN_G_ENTRY, 1) H_D10(MAIN_G_ENTRY, 20) H_D10(MAIN_G_ENTRY, 21)
    H_D10(MAIN_S_ENTRY, 30) H_D10(MAIN_S_ENTRY, 31) H_D10(MAIN_S_ENTRY, 32) H_D10(MAIN_S_ENTRY, 33)
};
static const size_t main_count = sizeof main_table / sizeof main_table[0];
#else
/* tcc has no patchable_function_entry: its main program has no section. */
static const harness_fn *const main_table = NULL;
static const size_t main_count = 0;
#endif

#if defined(HARNESS_WHOLE)
/* Built with -fpatchable-function-entry: every function of the program has
   an entry, not only ours. */
static const int main_exact = 0;
#else
static const int main_exact = 1;
#endif

static int failures, checks;
static int lib_alias_is_global;
#define CHECK(c, ...) do { checks++; if (!(c)) { failures++; \
    fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #c); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

/* >>collect: what a scan visited. */
typedef struct seen_fn { uintptr_t fn; char name[160]; } seen_fn;
typedef struct collector {
    seen_fn *v;
    size_t n, cap;
    size_t stop_after;      /* 0: never stop */
    int unordered;          /* visits not in strictly increasing address order */
} collector;

static int collect(void *fn, const char *name, uint64_t size, void *user) {
    collector *c = (collector *)user;
    (void)size;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        seen_fn *v = (seen_fn *)realloc(c->v, cap * sizeof *v);
        if (!v) return BPT_ENOMEM;
        c->v = v;
        c->cap = cap;
    }
    if (c->n && (uintptr_t)fn <= c->v[c->n - 1].fn) c->unordered++;
    c->v[c->n].fn = (uintptr_t)fn;
    snprintf(c->v[c->n].name, sizeof c->v[c->n].name, "%s", name);
    c->n++;
    return c->stop_after && c->n == c->stop_after ? BPT_ELIMIT : 0;
}

static void collector_reset(collector *c, size_t stop_after) {
    free(c->v);
    memset(c, 0, sizeof *c);
    c->stop_after = stop_after;
}

static const seen_fn *collector_find(const collector *c, uintptr_t fn) {
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->v[mid].fn < fn) lo = mid + 1; else hi = mid;
    }
    return lo < c->n && c->v[lo].fn == fn ? &c->v[lo] : NULL;
}

/* Scan module and check that every function of table is there, once, named
   as expected. stripped_base: the load bias of a stripped object, whose
   static functions are then expected as fn_0x<fn - bias>; 0 otherwise. */
static int check_module(const char *label, const char *module, const harness_fn *table, size_t n, int exact,
                        uintptr_t stripped_base, const char *want_name) {
    /* LTO makes the library's weak alias of lib_g_400 global (the prevailing
       definition): two global names for one address, either is right. */
    int alias_ok = lib_alias_is_global;
    collector c;
    const char *module_name = NULL;
    size_t i, unnamed = 0, align[16] = {0};
    int rc;
    memset(&c, 0, sizeof c);
    rc = bpt__module_scan(module, HARNESS_PAD, &module_name, collect, &c);
    CHECK(rc >= 0, "%s: scan returned %d (%s)", label, rc, bpt_last_error());
    if (rc < 0) { collector_reset(&c, 0); return rc; }
    CHECK((size_t)rc == c.n, "%s: returned %d, visited %zu", label, rc, c.n);
    if (exact) CHECK((size_t)rc == n, "%s: %d entries, expected %zu", label, rc, n);
    else CHECK((size_t)rc >= n, "%s: %d entries, expected at least %zu", label, rc, n);
    CHECK(!c.unordered, "%s: %d visits out of address order", label, c.unordered);
    CHECK(module_name && want_name && strcmp(module_name, want_name) == 0, "%s: module name '%s', expected '%s'",
          label, module_name ? module_name : "(null)", want_name ? want_name : "(null)");
    for (i = 0; i < n; i++) {
        const seen_fn *s = collector_find(&c, (uintptr_t)table[i].fn);
        char expect[64];
        if (stripped_base && table[i].is_static)
            snprintf(expect, sizeof expect, "fn_0x%llx", (unsigned long long)((uintptr_t)table[i].fn - stripped_base));
        else
            snprintf(expect, sizeof expect, "%s", table[i].name);
        CHECK(s != NULL, "%s: %s at %p not visited", label, table[i].name, table[i].fn);
        if (s && alias_ok && strcmp(expect, "lib_g_400") == 0 && strcmp(s->name, "lib_weak_alias") == 0) continue;
        if (s) CHECK(strcmp(s->name, expect) == 0, "%s: %p named '%s', expected '%s'", label, table[i].fn, s->name, expect);
    }
    for (i = 0; i < c.n; i++) {
        if (strncmp(c.v[i].name, "fn_0x", 5) == 0) unnamed++;
        align[(c.v[i].fn - HARNESS_PAD) & 15]++;
    }
    if (!stripped_base) CHECK(unnamed == 0, "%s: %zu entries without a name in an unstripped object", label, unnamed);
    printf("  %-28s %4d entries (%zu unnamed), module '%s'; padding start mod 16:", label, rc, unnamed,
           module_name ? module_name : "?");
    for (i = 0; i < 16; i++)
        if (align[i]) printf(" [%zu]=%zu", i, align[i]);
    printf("\n");
    collector_reset(&c, 0);
    return rc;
}

/* >>files */
static int read_file(const char *path, unsigned char **buf, size_t *len) {
    FILE *fp = fopen(path, "rb");
    long n;
    if (!fp) return -1;
    if (fseek(fp, 0, SEEK_END) != 0 || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET) != 0) { fclose(fp); return -1; }
    *buf = (unsigned char *)malloc((size_t)n + 1);
    *len = (size_t)n;
    if (!*buf || fread(*buf, 1, (size_t)n, fp) != (size_t)n) { fclose(fp); return -1; }
    fclose(fp);
    return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off) {
    const char *p = (const char *)buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n <= 0) return -1;
        p += n; len -= (size_t)n; off += n;
    }
    return 0;
}

/* Replace path by a new file with these bytes: a rename, so that a loaded
   object keeps its own (now unnamed) inode and its mapping stays intact. */
static int replace_file(const char *path, const unsigned char *buf, size_t len) {
    char tmp[4096];
    int fd, rc;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) return -1;
    rc = pwrite_all(fd, buf, len, 0);
    close(fd);
    return rc == 0 ? rename(tmp, path) : -1;
}

/* >>fuzz: mutations that aim at the fields the parser trusts least. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
    return rng_state;
}

typedef struct region { size_t off, len; } region;
typedef struct elf_layout {
    region ehdr, shdrs, tables[8];   /* tables: symbol, string and section name tables */
    size_t ntables;
} elf_layout;

/* Where the interesting parts of a valid file are (the original is trusted). */
static void elf_layout_of(const unsigned char *buf, size_t len, elf_layout *l) {
    Elf64_Ehdr eh;
    size_t i;
    memset(l, 0, sizeof *l);
    l->ehdr.len = len < sizeof eh ? len : sizeof eh;
    if (len < sizeof eh) return;
    memcpy(&eh, buf, sizeof eh);
    if (eh.e_shoff && eh.e_shoff + (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) <= len) {
        l->shdrs.off = eh.e_shoff;
        l->shdrs.len = (size_t)eh.e_shnum * sizeof(Elf64_Shdr);
        for (i = 0; i < eh.e_shnum && l->ntables < 8; i++) {
            Elf64_Shdr sh;
            memcpy(&sh, buf + eh.e_shoff + i * sizeof sh, sizeof sh);
            if ((sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM || sh.sh_type == SHT_STRTAB) &&
                sh.sh_size && sh.sh_offset + sh.sh_size <= len) {
                l->tables[l->ntables].off = sh.sh_offset;
                l->tables[l->ntables].len = sh.sh_size;
                l->ntables++;
            }
        }
    }
}

static size_t pick_in(region r, size_t width, size_t len) {
    size_t off;
    if (r.len < width) return len >= width ? (size_t)(rnd() % (len - width + 1)) : 0;
    off = r.off + (size_t)(rnd() % (r.len - width + 1));
    return off;
}

/* Apply one mutation to buf (len bytes); returns the first changed offset and
   stores how many bytes changed, so the caller can rewrite and restore them. */
static size_t mutate(unsigned char *buf, size_t len, const elf_layout *l, size_t *changed) {
    static const uint64_t extremes[] = { 0, 1, 8, 24, 64, 0x7fffffffull, 0x80000000ull, 0xffffffffull,
                                         0x7fffffffffffffffull, 0xffffffffffffffffull, 0xfffffffffffffff0ull };
    static const uint16_t extremes16[] = { 0, 1, 0xffff, SHN_XINDEX, PN_XNUM, 64, 56, 24, 0x8000 };
    size_t off, i, width;
    switch (rnd() % 6) {
    case 0:         /* a few bits anywhere */
        off = (size_t)(rnd() % len);
        width = 1 + (size_t)(rnd() % 4);
        if (off + width > len) width = len - off;
        for (i = 0; i < width; i++) buf[off + i] ^= (unsigned char)(1u << (rnd() % 8));
        break;
    case 1:         /* a byte of the ELF header */
        off = pick_in(l->ehdr, 1, len);
        width = 1;
        buf[off] = (unsigned char)rnd();
        break;
    case 2:         /* a byte of the section header table */
        off = pick_in(l->shdrs, 1, len);
        width = 1;
        buf[off] = (unsigned char)rnd();
        break;
    case 3: {       /* an 8-byte field of a section header set to an extreme */
        uint64_t v = extremes[rnd() % (sizeof extremes / sizeof extremes[0])];
        if (rnd() % 3 == 0) v = len - (size_t)(rnd() % 64);
        width = 8;
        off = pick_in(l->shdrs, 8, len) & ~(size_t)7;
        if (off + 8 > len) off = len - 8;
        memcpy(buf + off, &v, 8);
        break;
    }
    case 4: {       /* bytes of a symbol or string table */
        region r = l->ntables ? l->tables[rnd() % l->ntables] : l->ehdr;
        off = pick_in(r, 1, len);
        width = 1 + (size_t)(rnd() % 8);
        if (off + width > len) width = len - off;
        for (i = 0; i < width; i++) buf[off + i] = (unsigned char)rnd();
        break;
    }
    default: {      /* a 2-byte count or index of the ELF header (e_phentsize .. e_shstrndx) */
        uint16_t v = extremes16[rnd() % (sizeof extremes16 / sizeof extremes16[0])];
        off = 54 + 2 * (size_t)(rnd() % 5);
        width = 2;
        if (off + 2 > len) { off = 0; width = 0; break; }
        memcpy(buf + off, &v, 2);
        break;
    }
    }
    *changed = width;
    return off;
}

/* What a corrupted file may make a scan return. BPT_ENOTPATCHABLE: a
   mutated symbol address that lands inside an entry's padding looks like a
   module built with another architecture's patchable-entry values. */
static int acceptable_error(int rc) {
    return rc == BPT_EINVAL || rc == BPT_ENOTSUP || rc == BPT_ENOMEM || rc == BPT_ENOTPATCHABLE;
}

/* Open, look names up, close: the whole of the file-side parser. */
static int parse_file(const char *path) {
    bpt__elf_file f;
    int rc = bpt__elf_open(path, &f);
    if (rc == 0) {
        size_t i, step = f.nfuncs / 64 + 1;
        for (i = 0; i < f.nfuncs; i += step) {
            const char *name = bpt__elf_func_name(&f, f.funcs[i].addr, NULL);
            CHECK(name && name >= f.strtab && name < f.strtab + f.strtab_size, "%s: symbol %zu", path, i);
        }
    }
    bpt__elf_close(&f);
    return rc;
}

typedef struct outcomes { int ok, ok_other_count, einval, enotsup, enomem, other; } outcomes;
static void tally(outcomes *o, int rc) {
    if (rc >= 0) o->ok++;
    else if (rc == BPT_EINVAL) o->einval++;
    else if (rc == BPT_ENOTSUP) o->enotsup++;
    else if (rc == BPT_ENOMEM) o->enomem++;
    else o->other++;
}

/* Truncate a copy of orig at every size of the first 512 bytes, at every
   section boundary, and at a stride; then mutate it iterations times. Each
   version goes through the parser (and, when module is not NULL, the file is
   the one at a loaded module's path: through the whole scan too). */
static void fuzz_file(const char *label, const char *path, const unsigned char *orig, size_t len, int iterations,
                      const char *module, int expected_count) {
    unsigned char *buf = (unsigned char *)malloc(len);
    elf_layout l;
    outcomes parse = {0}, scan = {0};
    size_t size, i, nsizes = 0;
    int fd, it, truncated_ok = 0;
    Elf64_Ehdr eh;
    memcpy(buf, orig, len);
    memcpy(&eh, orig, sizeof eh);
    elf_layout_of(orig, len, &l);
    if (replace_file(path, orig, len) != 0 || (fd = open(path, O_RDWR)) < 0) {
        CHECK(0, "%s: cannot write %s", label, path);
        free(buf);
        return;
    }
    /* Truncations. The section header table ends the file (as ld writes
       it), so every truncated copy lacks part of it: always BPT_EINVAL. */
    for (size = 0; size < len; size += size < 512 ? 1 : 509 + (size_t)(rnd() % 64)) {
        int rc;
        if (ftruncate(fd, (off_t)size) != 0) break;
        rc = parse_file(path);
        nsizes++;
        CHECK(rc == BPT_EINVAL, "%s: truncated at %zu: %d (%s)", label, size, rc, bpt_last_error());
        tally(&parse, rc);
    }
    for (i = 0; i < l.ntables + 1; i++) {   /* right at and around each table's end */
        size_t ends[3];
        size_t k, end = i < l.ntables ? l.tables[i].off + l.tables[i].len : l.shdrs.off + 1;
        ends[0] = end - 1; ends[1] = end; ends[2] = end + 1;
        for (k = 0; k < 3; k++) {
            int rc;
            if (ends[k] >= len) continue;
            if (ftruncate(fd, (off_t)ends[k]) != 0) break;
            rc = parse_file(path);
            nsizes++;
            CHECK(rc == BPT_EINVAL, "%s: truncated at %zu: %d", label, ends[k], rc);
            tally(&parse, rc);
        }
    }
    if (ftruncate(fd, 0) != 0 || pwrite_all(fd, orig, len, 0) != 0) CHECK(0, "%s: restore", label);
    truncated_ok = parse_file(path) == 0;
    CHECK(truncated_ok, "%s: the restored copy does not parse: %s", label, bpt_last_error());

    /* Mutations, written in place and undone after each run. */
    for (it = 0; it < iterations; it++) {
        size_t changed, off = mutate(buf, len, &l, &changed);
        int rc;
        if (changed && pwrite_all(fd, buf + off, changed, (off_t)off) != 0) { CHECK(0, "%s: pwrite", label); break; }
        rc = parse_file(path);
        CHECK(rc == 0 || acceptable_error(rc), "%s: mutation %d: %d (%s)", label, it, rc, bpt_last_error());
        tally(&parse, rc);
        if (module && it % 4 == 0) {
            collector c;
            const char *name;
            memset(&c, 0, sizeof c);
            rc = bpt__module_scan(module, HARNESS_PAD, &name, collect, &c);
            CHECK(rc >= 0 || acceptable_error(rc), "%s: scan after mutation %d: %d (%s)", label, it, rc,
                  bpt_last_error());
            tally(&scan, rc);
            if (rc >= 0 && rc != expected_count) scan.ok_other_count++;
            collector_reset(&c, 0);
        }
        memcpy(buf + off, orig + off, changed);
        if (changed && pwrite_all(fd, orig + off, changed, (off_t)off) != 0) { CHECK(0, "%s: restore", label); break; }
    }
    close(fd);
    printf("  fuzz %-22s %zu truncations, %d mutations: parser ok %d, EINVAL %d, ENOTSUP %d, ENOMEM %d, other %d\n",
           label, nsizes, iterations, parse.ok, parse.einval, parse.enotsup, parse.enomem, parse.other);
    if (module)
        printf("  %-27s whole scan of the loaded module over those files: ok %d (%d with another count), "
               "EINVAL %d, ENOTSUP %d, other %d\n", "", scan.ok, scan.ok_other_count, scan.einval, scan.enotsup,
               scan.other);
    free(buf);
}

/* Files that are not ELF64 of this machine, or not files at all. */
static void check_garbage(const char *dir, const char *elf32) {
    static const size_t sizes[] = { 0, 1, 4, 15, 16, 63, 64, 65, 200, 4096 };
    char path[4096];
    unsigned char buf[4096];
    size_t i, k;
    int rc;
    snprintf(path, sizeof path, "%s/garbage.bin", dir);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (k = 0; k < sizes[i]; k++) buf[k] = (unsigned char)rnd();
        if (sizes[i] >= 4) memcpy(buf, ELFMAG, 4);      /* past the magic, into the header */
        if (sizes[i] >= 6) { buf[EI_CLASS] = ELFCLASS64; buf[EI_DATA] = ELFDATA2LSB; }
        replace_file(path, buf, sizes[i]);
        rc = parse_file(path);
        CHECK(acceptable_error(rc), "garbage of %zu bytes: %d", sizes[i], rc);
        for (k = 0; k < sizes[i]; k++) buf[k] = (unsigned char)rnd();    /* no magic at all */
        replace_file(path, buf, sizes[i]);
        CHECK(parse_file(path) == BPT_EINVAL, "random %zu bytes", sizes[i]);
    }
    memset(buf, 0, 64);
    memcpy(buf, ELFMAG, 4);
    buf[EI_CLASS] = ELFCLASS32; buf[EI_DATA] = ELFDATA2LSB;
    replace_file(path, buf, 64);
    CHECK((rc = parse_file(path)) == BPT_ENOTSUP, "ELFCLASS32 header: %d", rc);
    buf[EI_CLASS] = ELFCLASS64; buf[EI_DATA] = ELFDATA2MSB;
    replace_file(path, buf, 64);
    CHECK((rc = parse_file(path)) == BPT_ENOTSUP, "big-endian header: %d", rc);
    buf[EI_CLASS] = 7; buf[EI_DATA] = ELFDATA2LSB;
    replace_file(path, buf, 64);
    CHECK((rc = parse_file(path)) == BPT_EINVAL, "unknown class: %d", rc);
    if (elf32) {
        CHECK((rc = parse_file(elf32)) == BPT_ENOTSUP, "real 32-bit ELF %s: %d (%s)", elf32, rc, bpt_last_error());
        printf("  %-28s %s: %s\n", "32-bit ELF", elf32, bpt_last_error());
    }
    CHECK((rc = parse_file(dir)) == BPT_EINVAL, "a directory: %d", rc);
    snprintf(path, sizeof path, "%s/no-such-file", dir);
    CHECK((rc = parse_file(path)) == BPT_ENOENT, "a missing file: %d", rc);
    if (geteuid() != 0) {       /* root reads a mode 000 file anyway */
        snprintf(path, sizeof path, "%s/garbage.bin", dir);
        chmod(path, 0);
        CHECK((rc = parse_file(path)) == BPT_EPERM, "an unreadable file: %d", rc);
        chmod(path, 0644);
    }
}

/* >>main */
static uintptr_t load_base(const void *addr) {
    Dl_info info;
    return dladdr(addr, &info) ? (uintptr_t)info.dli_fbase : 0;
}

static void *open_lib(const char *path, const harness_fn **table, int *count) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const int *count_p;
    CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
    if (!h) return NULL;
    *table = (const harness_fn *)dlsym(h, "harness_lib_table");
    count_p = (const int *)dlsym(h, "harness_lib_count");
    CHECK(*table && count_p, "dlsym in %s: %s", path, dlerror());
    if (!*table || !count_p) return NULL;
    *count = *count_p;
    lib_alias_is_global = dlsym(h, "harness_lib_lto") != NULL;
    return h;
}

int main(int argc, char **argv) {
    char path[4096], fuzzdir[2048], lib[4096], exe_buf[4096], fuzzlib[4096];
    const char *dir, *exe_name;
    const harness_fn *lib_table, *stripped_table;
    int lib_count, stripped_count, rc, iterations = argc > 2 ? atoi(argv[2]) : 4000;
    unsigned char *bytes, *other, *stripped;
    size_t nbytes, nother, nstripped;
    collector c;
    const char *name;
    ssize_t n;
    if (argc < 2) { fprintf(stderr, "usage: %s DIR [ITERATIONS] [ELF32_FILE]\n", argv[0]); return 2; }
    dir = argv[1];
    snprintf(fuzzdir, sizeof fuzzdir, "%s/fuzz", dir);
    mkdir(fuzzdir, 0755);
    n = readlink("/proc/self/exe", exe_buf, sizeof exe_buf - 1);
    exe_buf[n > 0 ? n : 0] = '\0';
    exe_name = bpt__module_basename(exe_buf);
    memset(&c, 0, sizeof c);

    printf("module harness (%s, pad %d bytes)\n", exe_name, HARNESS_PAD);
    /* The main program: by NULL, by its basename, by its path. */
    check_module("main (NULL)", NULL, main_table, main_count, main_exact, 0, exe_name);
    check_module("main (basename)", exe_name, main_table, main_count, main_exact, 0, exe_name);
    check_module("main (path)", exe_buf, main_table, main_count, main_exact, 0, exe_name);

    /* The library, by basename and by path; static functions too. */
    snprintf(lib, sizeof lib, "%s/libmh.so", dir);
    if (!open_lib(lib, &lib_table, &lib_count)) return 1;
    check_module("libmh.so (basename)", "libmh.so", lib_table, (size_t)lib_count, 1, 0, "libmh.so");
    check_module("libmh.so (path)", lib, lib_table, (size_t)lib_count, 1, 0, "libmh.so");

    /* Stripped: exported functions from .dynsym, static ones unnamed. */
    snprintf(path, sizeof path, "%s/libmh_stripped.so", dir);
    if (!open_lib(path, &stripped_table, &stripped_count)) return 1;
    check_module("libmh_stripped.so", "libmh_stripped.so", stripped_table, (size_t)stripped_count, 1,
                 load_base(stripped_table), "libmh_stripped.so");

    /* No section: 0 entries, not an error. */
    rc = bpt__module_scan("libc.so.6", HARNESS_PAD, &name, collect, &c);
    CHECK(rc == 0 && c.n == 0, "libc.so.6: %d (%s)", rc, bpt_last_error());
    printf("  %-28s %4d entries (no " BPT__PFE_SECTION " section)\n", "libc.so.6", rc);
    collector_reset(&c, 0);

    /* Errors. */
    rc = bpt__module_scan("no_such_module.so", HARNESS_PAD, &name, collect, &c);
    CHECK(rc == BPT_ENOENT && strstr(bpt_last_error(), "no_such_module.so"), "not loaded: %d (%s)", rc, bpt_last_error());
    printf("  %-28s %d: %s\n", "not loaded", rc, bpt_last_error());
    CHECK(bpt__module_scan("", HARNESS_PAD, &name, collect, &c) == BPT_EINVAL, "empty module name");
    CHECK(bpt__module_scan(NULL, HARNESS_PAD, NULL, collect, &c) == BPT_EINVAL, "NULL module_name");
    CHECK(bpt__module_scan(NULL, HARNESS_PAD, &name, NULL, &c) == BPT_EINVAL, "NULL visit");
    collector_reset(&c, 5);
    rc = bpt__module_scan("libmh.so", HARNESS_PAD, &name, collect, &c);
    CHECK(rc == BPT_ELIMIT && c.n == 5, "a visitor that stops: %d after %zu visits", rc, c.n);
    collector_reset(&c, 0);

    /* A loaded copy whose file is then replaced. */
    if (read_file(lib, &bytes, &nbytes) != 0) { CHECK(0, "read %s", lib); return 1; }
    snprintf(path, sizeof path, "%s/libmh_other.so", dir);
    if (read_file(path, &other, &nother) != 0) { CHECK(0, "read %s", path); return 1; }
    snprintf(path, sizeof path, "%s/libmh_stripped.so", dir);
    if (read_file(path, &stripped, &nstripped) != 0) { CHECK(0, "read %s", path); return 1; }
    snprintf(fuzzlib, sizeof fuzzlib, "%s/libmhfuzz.so", fuzzdir);
    replace_file(fuzzlib, bytes, nbytes);
    {
        const harness_fn *t;
        int count;
        size_t i;
        if (!open_lib(fuzzlib, &t, &count)) return 1;
        check_module("libmhfuzz.so", "libmhfuzz.so", t, (size_t)count, 1, 0, "libmhfuzz.so");
        replace_file(fuzzlib, other, nother);
        rc = bpt__module_scan("libmhfuzz.so", HARNESS_PAD, &name, collect, &c);
        CHECK(rc == BPT_EINVAL && strstr(bpt_last_error(), "not the file that was loaded"),
              "replaced by another build: %d (%s)", rc, bpt_last_error());
        printf("  %-28s %d: %s\n", "replaced by another build", rc, bpt_last_error());
        collector_reset(&c, 0);
        replace_file(fuzzlib, stripped, nstripped);
        check_module("replaced by its stripped copy", "libmhfuzz.so", t, (size_t)count, 1, load_base(t),
                     "libmhfuzz.so");
        for (i = 0; i + 4 <= nbytes; i++)                   /* the build ID note: "GNU\0" then the ID */
            if (memcmp(bytes + i, "GNU\0", 4) == 0 && i >= 12 && bytes[i - 4] == NT_GNU_BUILD_ID) break;
        CHECK(i + 4 < nbytes, "no build ID note in libmh.so");
        if (i + 4 < nbytes) {
            bytes[i + 4] ^= 1;
            replace_file(fuzzlib, bytes, nbytes);
            rc = bpt__module_scan("libmhfuzz.so", HARNESS_PAD, &name, collect, &c);
            CHECK(rc == BPT_EINVAL, "another build ID: %d (%s)", rc, bpt_last_error());
            printf("  %-28s %d: %s\n", "build ID changed", rc, bpt_last_error());
            collector_reset(&c, 0);
            bytes[i + 4] ^= 1;
        }
        /* Corrupt versions at the loaded module's path: the whole scan. */
        fuzz_file("libmh.so", fuzzlib, bytes, nbytes, iterations, "libmhfuzz.so", count);
    }
    free(bytes);
    free(other);
    free(stripped);
    if (read_file("/proc/self/exe", &bytes, &nbytes) == 0) {
        snprintf(path, sizeof path, "%s/exe.bin", fuzzdir);
        fuzz_file("main program", path, bytes, nbytes, iterations, NULL, 0);
        free(bytes);
    }
    check_garbage(fuzzdir, argc > 3 ? argv[3] : NULL);

    printf("%s: %d checks, %d failed\n", exe_name, checks, failures);
    return failures != 0;
}
