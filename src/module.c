/* module.c: finding a module's patchable entries and naming them from ELF
   symbols. Runs on the set path, under the code modification
   permission; nothing here is reached from a breakpoint.

   The facts this part relies on, and where they come from:
   - gcc's manual (-fpatchable-function-entry=N,M and the
     patchable_function_entry attribute): "the starting addresses of these
     areas, which correspond to their respective function entries minus M,
     are additionally collected in the __patchable_function_entries section".
     M counts NOPs, not bytes: 24 bytes on x86-64 (26,24), 32 on aarch64
     (9,8, four bytes a NOP). The caller passes the byte count. Checked with
     gcc 12 and clang 14 on x86-64 (also with -fcf-protection: endbr64 comes
     after the symbol, so the padding still ends at it) and aarch64 (also with
     -mbranch-protection: bti c likewise).
   - The section is SHF_ALLOC | SHF_WRITE: in a PIE or a shared object every
     entry is an R_X86_64_RELATIVE / R_AARCH64_RELATIVE relocation, which
     ld.so applies at load time. With RELA the addend lives in the relocation
     and the file's bytes are the linker's choice: GNU ld and gold write the
     link-time address, lld writes 0 (unless --apply-dynamic-relocs). So the
     entries are read from memory, already relocated.
   - dl_iterate_phdr(3): dlpi_addr is the load bias (run-time address =
     bias + link-time address) and the first object visited is the main
     program, whose dlpi_name is "".
   - Section headers, .symtab and string tables are not part of any PT_LOAD
     segment, so they are read from the file with pread (System V gABI,
     chapter 4: Sections, String Table, Symbol Table). Everything the file
     says is bounds-checked: a truncated or garbage file gives BPT_EINVAL. */
#include "internal.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#if defined(__TINYC__)
/* tcc 0.9.27 cannot parse glibc's <link.h> (its audit structures have
   __int128_t members). Declare the prefix of dl_phdr_info that
   dl_iterate_phdr(3) documents: glibc passes its own, longer struct and we
   read only these fields. tcc is x86-64 only (port.h), hence Elf64. */
struct dl_phdr_info {
    Elf64_Addr dlpi_addr;
    const char *dlpi_name;
    const Elf64_Phdr *dlpi_phdr;
    Elf64_Half dlpi_phnum;
};
extern int dl_iterate_phdr(int (*callback)(struct dl_phdr_info *info, size_t size, void *data), void *data);
#  define ElfW(type) Elf64_##type
#else
#  include <link.h>
#endif

/* >>module */

#define BPT__PFE_SECTION "__patchable_function_entries"
/* The bytes at a function's entry that bpt__arch_entry_layout reads: x86-64
   fn[0..5] (endbr64, then the two-byte site), aarch64 fn[0..7] (bti c or
   paciasp, then the four-byte site). They must lie in the module's code too. */
#if defined(__aarch64__)
#  define BPT__ENTRY_BYTES 8
#else
#  define BPT__ENTRY_BYTES 6
#endif

/* One STT_FUNC symbol, kept small: a big program has 10^5 of them. */
typedef struct bpt__elf_func {
    uint64_t addr;          /* st_value: the link-time address */
    uint64_t size;          /* st_size: bytes of code (0: unknown) */
    uint32_t name;          /* st_name: offset in the string table */
    uint32_t index;         /* position in the symbol table: the last tie-break */
    uint32_t rank;          /* 0 global, 1 weak, 2 local: which alias names the address */
    uint8_t other;          /* st_other: aarch64's STO_AARCH64_VARIANT_PCS (wide argument registers) */
} bpt__elf_func;

/* What the scan needs from a module's file: its headers and its functions. */
typedef struct bpt__elf_file {
    const char *path;
    int fd;
    uint64_t size;                  /* bytes in the file: the bound of every offset */
    Elf64_Ehdr eh;
    Elf64_Shdr *sh;                 /* section headers; NULL when the file has none */
    size_t shnum;
    Elf64_Phdr *ph;                 /* program headers, to compare with the loaded image */
    size_t phnum;
    char *shstrtab;                 /* section names, NUL-terminated by us */
    size_t shstrtab_size;
    bpt__elf_func *funcs;           /* by address, then best name first */
    size_t nfuncs;
    char *strtab;                   /* the symbol names, NUL-terminated by us */
    size_t strtab_size;
    const char *symtab_name;        /* ".symtab", ".dynsym", or NULL (no names) */
} bpt__elf_file;

/* [off, off + size) lies within [0, limit), computed without overflow:
   every offset and size in a file is untrusted. */
static int bpt__elf_in_bounds(uint64_t off, uint64_t size, uint64_t limit) {
    return size <= limit && off <= limit - size;
}

static int bpt__elf_truncated(const bpt__elf_file *f, uint64_t off, uint64_t size, const char *what) {
    return bpt__fail(BPT_EINVAL, "%s: truncated ELF: %s at offset %llu size %llu is past the end (%llu bytes)",
                     f->path, what, (unsigned long long)off, (unsigned long long)size,
                     (unsigned long long)f->size);
}

/* Read exactly size bytes at off, or fail: the file may also shrink while
   we read it, so a short read is an error and not a zero-fill. */
static int bpt__elf_pread(const bpt__elf_file *f, uint64_t off, uint64_t size, void *buf, const char *what) {
    char *p = (char *)buf;
    if (!bpt__elf_in_bounds(off, size, f->size)) return bpt__elf_truncated(f, off, size, what);
    while (size > 0) {
        ssize_t n = pread(f->fd, p, size > (1u << 30) ? (size_t)1 << 30 : (size_t)size, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return bpt__fail(BPT_EINVAL, "%s: cannot read the %s: %s", f->path, what,
                             n < 0 ? strerror(errno) : "the file shrank");
        p += n; off += (uint64_t)n; size -= (uint64_t)n;
    }
    return 0;
}

/* Allocate and read size bytes at off, plus one NUL byte after them, so that
   a string table the file forgot to terminate cannot run us off its end. */
static int bpt__elf_read_alloc(const bpt__elf_file *f, uint64_t off, uint64_t size, const char *what, char **out) {
    char *buf;
    int rc;
    *out = NULL;
    if (!bpt__elf_in_bounds(off, size, f->size))   /* before allocating what the file claims */
        return bpt__elf_truncated(f, off, size, what);
    if (!(buf = (char *)BPT_MALLOC((size_t)size + 1)))
        return bpt__fail(BPT_ENOMEM, "%s: no memory for the %s (%llu bytes)", f->path, what,
                         (unsigned long long)size);
    if ((rc = bpt__elf_pread(f, off, size, buf, what)) < 0) { BPT_FREE(buf); return rc; }
    buf[size] = '\0';
    *out = buf;
    return 0;
}

/* The bytes of a section. SHT_NOBITS (.bss) has none in the file. */
static int bpt__elf_section_alloc(const bpt__elf_file *f, const Elf64_Shdr *s, const char *what, char **out) {
    if (s->sh_type == SHT_NOBITS)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: the %s is SHT_NOBITS", f->path, what);
    return bpt__elf_read_alloc(f, s->sh_offset, s->sh_size, what, out);
}

static const char *bpt__elf_section_name(const bpt__elf_file *f, const Elf64_Shdr *s) {
    return f->shstrtab && s->sh_name < f->shstrtab_size ? f->shstrtab + s->sh_name : "";
}

static int bpt__elf_host_lsb(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* e_ident first: the class decides how to read the rest, and a 32-bit
   file is a clear BPT_ENOTSUP rather than a misread 64-bit header. */
static int bpt__elf_read_header(bpt__elf_file *f) {
    unsigned char id[EI_NIDENT];
    int rc;
    if (f->size < EI_NIDENT) return bpt__fail(BPT_EINVAL, "%s: not an ELF file (%llu bytes)", f->path,
                                              (unsigned long long)f->size);
    if ((rc = bpt__elf_pread(f, 0, EI_NIDENT, id, "ELF identification")) < 0) return rc;
    if (memcmp(id, ELFMAG, SELFMAG) != 0) return bpt__fail(BPT_EINVAL, "%s: not an ELF file", f->path);
    if (id[EI_CLASS] == ELFCLASS32)
        return bpt__fail(BPT_ENOTSUP, "%s: 32-bit ELF (bptrace reads ELF64 only)", f->path);
    if (id[EI_CLASS] != ELFCLASS64)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: unknown class %u", f->path, (unsigned)id[EI_CLASS]);
    if (id[EI_DATA] != (bpt__elf_host_lsb() ? ELFDATA2LSB : ELFDATA2MSB))
        return bpt__fail(BPT_ENOTSUP, "%s: ELF byte order differs from this machine's", f->path);
    return bpt__elf_pread(f, 0, sizeof f->eh, &f->eh, "ELF header");
}

/* Section headers and their names. Extended numbering (gABI, "Sections"):
   with 65280 sections or more, e_shnum is 0 and the count is in section
   0's sh_size, and e_shstrndx is SHN_XINDEX with the index in its sh_link. */
static int bpt__elf_read_sections(bpt__elf_file *f) {
    Elf64_Shdr first;
    uint64_t shnum = f->eh.e_shnum, shstrndx = f->eh.e_shstrndx;
    int rc;
    if (f->eh.e_shoff == 0) return 0;           /* no section headers: nothing to find */
    if (f->eh.e_shentsize != sizeof(Elf64_Shdr))
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: e_shentsize is %u, not %u", f->path,
                         (unsigned)f->eh.e_shentsize, (unsigned)sizeof(Elf64_Shdr));
    if ((rc = bpt__elf_pread(f, f->eh.e_shoff, sizeof first, &first, "section header 0")) < 0) return rc;
    if (shnum == 0) shnum = first.sh_size;
    if (shstrndx == SHN_XINDEX) shstrndx = first.sh_link;
    if (shnum > f->size / sizeof(Elf64_Shdr))   /* also keeps the product below from overflowing */
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: %llu section headers do not fit in the file",
                         f->path, (unsigned long long)shnum);
    if ((rc = bpt__elf_read_alloc(f, f->eh.e_shoff, shnum * sizeof(Elf64_Shdr), "section headers",
                                  (char **)&f->sh)) < 0)
        return rc;
    f->shnum = (size_t)shnum;
    if (shstrndx == SHN_UNDEF) return 0;        /* sections without names: nothing to find */
    if (shstrndx >= shnum)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: section name table index %llu >= %llu sections",
                         f->path, (unsigned long long)shstrndx, (unsigned long long)shnum);
    if ((rc = bpt__elf_section_alloc(f, &f->sh[shstrndx], "section name table", &f->shstrtab)) < 0) return rc;
    f->shstrtab_size = (size_t)f->sh[shstrndx].sh_size;
    return 0;
}

/* Program headers, to check that the file is the image that was loaded.
   PN_XNUM: the count is in section 0's sh_info (gABI, "Program Header"). */
static int bpt__elf_read_segments(bpt__elf_file *f) {
    uint64_t phnum = f->eh.e_phnum;
    if (phnum == PN_XNUM) {
        if (!f->shnum)
            return bpt__fail(BPT_EINVAL, "%s: malformed ELF: e_phnum is PN_XNUM without section 0", f->path);
        phnum = f->sh[0].sh_info;
    }
    if (phnum == 0) return 0;
    if (f->eh.e_phentsize != sizeof(Elf64_Phdr))
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: e_phentsize is %u, not %u", f->path,
                         (unsigned)f->eh.e_phentsize, (unsigned)sizeof(Elf64_Phdr));
    f->phnum = (size_t)phnum;                   /* at most 2^32: the product cannot overflow */
    return bpt__elf_read_alloc(f, f->eh.e_phoff, phnum * sizeof(Elf64_Phdr), "program headers", (char **)&f->ph);
}

/* Which of several symbols at one address names it: the global one, so
   that gcc's "f.localalias" (a local alias it emits for global functions in
   shared objects) or a weak alias does not hide "f". */
static uint32_t bpt__elf_symbol_rank(unsigned char info) {
    switch (ELF64_ST_BIND(info)) {
    case STB_GLOBAL: return 0;
    case STB_WEAK:   return 1;
    default:         return 2;
    }
}

static int bpt__elf_func_cmp(const void *pa, const void *pb) {
    const bpt__elf_func *a = (const bpt__elf_func *)pa, *b = (const bpt__elf_func *)pb;
    if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Add the function symbols of n Elf64_Sym to f->funcs. Undefined symbols
   are imports (their st_value is 0 or a PLT slot, not the function). */
static void bpt__elf_add_functions(bpt__elf_file *f, const Elf64_Sym *sym, size_t n, size_t first_index) {
    size_t i;
    for (i = 0; i < n; i++) {
        const Elf64_Sym *s = &sym[i];
        bpt__elf_func *out;
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || s->st_shndx == SHN_UNDEF) continue;
        if (s->st_name == 0 || s->st_name >= f->strtab_size || !f->strtab[s->st_name]) continue;
        out = &f->funcs[f->nfuncs++];
        out->addr = s->st_value;
        out->size = s->st_size;
        out->name = s->st_name;
        out->index = (uint32_t)(first_index + i);
        out->rank = bpt__elf_symbol_rank(s->st_info);
        out->other = s->st_other;
    }
}

/* The function symbols, sorted. .symtab has static functions too; a
   stripped file keeps only .dynsym (exported functions). Neither: no names,
   and every entry gets a fn_0x... name. */
static int bpt__elf_read_functions(bpt__elf_file *f) {
    const Elf64_Shdr *symtab = NULL, *strtab;
    Elf64_Sym chunk[128];                       /* read in chunks: no second copy of the table */
    uint64_t count, done;
    size_t i;
    int rc;
    for (i = 0; i < f->shnum && !symtab; i++)
        if (f->sh[i].sh_type == SHT_SYMTAB) symtab = &f->sh[i];
    for (i = 0; i < f->shnum && !symtab; i++)
        if (f->sh[i].sh_type == SHT_DYNSYM) symtab = &f->sh[i];
    if (!symtab) return 0;
    f->symtab_name = symtab->sh_type == SHT_SYMTAB ? ".symtab" : ".dynsym";
    if (symtab->sh_entsize != sizeof(Elf64_Sym) || symtab->sh_size % sizeof(Elf64_Sym) != 0)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: %s entry size %llu, table size %llu", f->path,
                         f->symtab_name, (unsigned long long)symtab->sh_entsize,
                         (unsigned long long)symtab->sh_size);
    if (symtab->sh_link == 0 || symtab->sh_link >= f->shnum || f->sh[symtab->sh_link].sh_type != SHT_STRTAB)
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: %s links to section %u, not a string table",
                         f->path, f->symtab_name, (unsigned)symtab->sh_link);
    count = symtab->sh_size / sizeof(Elf64_Sym);
    if (!bpt__elf_in_bounds(symtab->sh_offset, symtab->sh_size, f->size))
        return bpt__elf_truncated(f, symtab->sh_offset, symtab->sh_size, f->symtab_name);
    if (count > UINT32_MAX)   /* bpt__elf_func.index is 32 bits */
        return bpt__fail(BPT_EINVAL, "%s: %llu symbols", f->path, (unsigned long long)count);
    strtab = &f->sh[symtab->sh_link];
    if ((rc = bpt__elf_section_alloc(f, strtab, "symbol name table", &f->strtab)) < 0) return rc;
    f->strtab_size = (size_t)strtab->sh_size;
    if (count && !(f->funcs = (bpt__elf_func *)BPT_MALLOC((size_t)count * sizeof *f->funcs)))
        return bpt__fail(BPT_ENOMEM, "%s: no memory for %llu symbols", f->path, (unsigned long long)count);
    for (done = 0; done < count; ) {
        size_t n = count - done < 128 ? (size_t)(count - done) : 128;
        if ((rc = bpt__elf_pread(f, symtab->sh_offset + done * sizeof(Elf64_Sym), n * sizeof(Elf64_Sym),
                                 chunk, f->symtab_name)) < 0)
            return rc;
        bpt__elf_add_functions(f, chunk, n, (size_t)done);
        done += n;
    }
    if (f->nfuncs > 1) qsort(f->funcs, f->nfuncs, sizeof *f->funcs, bpt__elf_func_cmp);
    return 0;
}

BPT__PRIVATE void bpt__elf_close(bpt__elf_file *f) {
    if (f->fd >= 0) close(f->fd);
    BPT_FREE(f->sh);
    BPT_FREE(f->ph);
    BPT_FREE(f->shstrtab);
    BPT_FREE(f->funcs);
    BPT_FREE(f->strtab);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* Open an ELF file and read its headers and function symbols. The harness
   calls this on truncated and corrupted copies: no offset, size or index in
   the file is trusted. In: path (kept, not copied). Out: *f, to release with
   bpt__elf_close (also after a failure). Returns 0; BPT_ENOENT (no such
   file); BPT_EPERM (cannot open it); BPT_EINVAL (not ELF, malformed or
   truncated); BPT_ENOTSUP (ELF32, or the other byte order); BPT_ENOMEM. */
BPT__PRIVATE int bpt__elf_open(const char *path, bpt__elf_file *f) {
    struct stat st;
    int rc;
    memset(f, 0, sizeof *f);
    f->path = path;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return bpt__fail(errno == ENOENT || errno == ENOTDIR ? BPT_ENOENT : BPT_EPERM,
                         "cannot open %s: %s (section headers and symbols are only in the file)",
                         path, strerror(errno));
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return bpt__fail(BPT_EINVAL, "%s: not a regular file", path);
    f->size = (uint64_t)st.st_size;
    if ((rc = bpt__elf_read_header(f)) < 0 || (rc = bpt__elf_read_sections(f)) < 0 ||
        (rc = bpt__elf_read_segments(f)) < 0 || (rc = bpt__elf_read_functions(f)) < 0)
        return rc;
    return 0;
}

/* The first function symbol at or above link-time address addr, or NULL.
   The first of equal addresses is the best-ranked (see bpt__elf_func_cmp). */
static const bpt__elf_func *bpt__elf_func_from(const bpt__elf_file *f, uint64_t addr) {
    size_t lo = 0, hi = f->nfuncs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->funcs[mid].addr < addr) lo = mid + 1; else hi = mid;
    }
    return lo < f->nfuncs ? &f->funcs[lo] : NULL;
}

#if !defined(STO_AARCH64_VARIANT_PCS)
#  define STO_AARCH64_VARIANT_PCS 0x80
#endif
/* Does the function symbol at addr follow a variant procedure call
   standard (aarch64: the vector PCS, or SVE arguments in z and p
   registers; STO_AARCH64_VARIANT_PCS)? Its arguments are wider than the
   entry stub saves (q0-q7): the stub's restore of a q register zeroes the
   z register's upper bits, so tracing it would corrupt them. */
static int bpt__elf_func_variant_pcs(const bpt__elf_file *f, uint64_t addr) {
#if defined(__aarch64__)
    const bpt__elf_func *e = bpt__elf_func_from(f, addr);
    for (; e && e < f->funcs + f->nfuncs && e->addr == addr; e++)   /* any alias says so */
        if (e->other & STO_AARCH64_VARIANT_PCS) return 1;
#else
    (void)f; (void)addr;
#endif
    return 0;
}

/* The name of the function symbol at addr, or NULL; *size its st_size. */
BPT__PRIVATE const char *bpt__elf_func_name(const bpt__elf_file *f, uint64_t addr, uint64_t *size) {
    const bpt__elf_func *e = bpt__elf_func_from(f, addr);
    if (!e || e->addr != addr) return NULL;
    if (size) *size = e->size;
    return f->strtab + e->name;
}

/* A loaded object, as dl_iterate_phdr reports it. The pointers stay valid
   while the object stays loaded, which the caller guarantees. */
typedef struct bpt__module_object {
    const char *want;               /* NULL: the main program; else a basename or path */
    char *exe_buf;                  /* PATH_MAX bytes for the main program's path */
    const char *exe_path;           /* the main program's path (for matching by name), or NULL */
    const char *exe_open;           /* what to open for its file: "/proc/self/exe" or exe_path */
    unsigned seen;                  /* objects visited: the first is the main program */
    int found;
    int is_main;
    uintptr_t bias;
    const ElfW(Phdr) *phdr;
    size_t phnum;
    const char *path;               /* dlpi_name, or exe_path for the main program */
} bpt__module_object;

static const char *bpt__module_basename(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A path as /proc names it, without the " (deleted)" the kernel appends once
   the file is deleted (say, rebuilt by make): no part of the name a user
   writes in a pattern. */
static char *bpt__module_undeleted(char *path) {
    static const char deleted[] = " (deleted)";
    size_t n = strlen(path), dl = sizeof deleted - 1;
    if (n > dl && strcmp(path + n - dl, deleted) == 0) path[n - dl] = '\0';
    return path;
}

/* The path of the file mapped at addr (/proc/self/maps), into buf (size
   bytes), or NULL: anonymous memory, no /proc, or a longer path. */
static const char *bpt__module_mapped_file(uintptr_t addr, char *buf, size_t size) {
    char line[PATH_MAX + 128];
    const char *found = NULL;
    FILE *fp = fopen("/proc/self/maps", "re");
    int whole = 1;
    if (!fp) return NULL;
    while (!found && fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        int start = whole, at = 0;   /* a long path's rest is not a line of its own */
        size_t n;
        whole = strchr(line, '\n') != NULL;
        if (!start || sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &at) != 2 || at == 0 ||
            addr < lo || addr >= hi)
            continue;
        n = strcspn(line + at, "\n");
        if (line[at] != '/' || !whole || n >= size) break;
        memcpy(buf, line + at, n);
        buf[n] = '\0';
        found = bpt__module_undeleted(buf);
    }
    fclose(fp);
    return found;
}

/* The main program's file, for its name and its sections: the one mapped
   where its first PT_LOAD segment is. /proc/self/exe names the same file,
   and opens it even once deleted, so it is opened there; but not when the
   program was started through the dynamic loader
   ("/lib64/ld-linux-x86-64.so.2 ./prog"): then /proc/self/exe is ld.so,
   and the mapped file is opened by its path. */
static void bpt__module_main_file(bpt__module_object *m, const struct dl_phdr_info *info) {
    char mapped[PATH_MAX];
    const char *path = NULL;
    ssize_t n = readlink("/proc/self/exe", m->exe_buf, PATH_MAX - 1);
    int i;
    if (n > 0) {
        m->exe_buf[n] = '\0';
        m->exe_path = bpt__module_undeleted(m->exe_buf);
        m->exe_open = "/proc/self/exe";
    }
    for (i = 0; i < (int)info->dlpi_phnum && !path; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD)
            path = bpt__module_mapped_file((uintptr_t)info->dlpi_addr + (uintptr_t)info->dlpi_phdr[i].p_vaddr,
                                           mapped, sizeof mapped);
    if (path && (!m->exe_path || strcmp(path, m->exe_path) != 0)) {   /* started through ld.so */
        memcpy(m->exe_buf, path, strlen(path) + 1);
        m->exe_path = m->exe_open = m->exe_buf;
    }
}

/* The name a module's functions are registered under, interned: its file's
   basename, cut to BPT__NAME_MAX bytes as function names are (a pattern
   spells no longer name). NULL: no memory. */
static const char *bpt__module_name(const char *path) {
    char buf[BPT__NAME_MAX + 1];
    size_t n = strlen(bpt__module_basename(path));
    if (n > BPT__NAME_MAX) n = BPT__NAME_MAX;
    memcpy(buf, bpt__module_basename(path), n);
    buf[n] = '\0';
    return bpt__intern(buf);
}

static int bpt__module_match(struct dl_phdr_info *info, size_t size, void *data) {
    bpt__module_object *m = (bpt__module_object *)data;
    int is_main = m->seen++ == 0;
    const char *path;
    (void)size;
    if (is_main) bpt__module_main_file(m, info);
    path = is_main ? m->exe_path : info->dlpi_name;
    if (!m->want ? !is_main
                 : !path || !*path || (strcmp(path, m->want) != 0 && strcmp(bpt__module_basename(path), m->want) != 0))
        return 0;
    m->found = 1;
    m->is_main = is_main;
    m->bias = (uintptr_t)info->dlpi_addr;
    m->phdr = info->dlpi_phdr;
    m->phnum = info->dlpi_phnum;
    m->path = path;
    return 1;
}

/* The loaded segment that holds link-time [vaddr, vaddr + size) and has
   every permission in flags, or NULL. */
static const ElfW(Phdr) *bpt__module_segment(const bpt__module_object *m, uint64_t vaddr, uint64_t size,
                                             unsigned flags) {
    size_t i;
    for (i = 0; i < m->phnum; i++) {
        const ElfW(Phdr) *p = &m->phdr[i];
        if (p->p_type == PT_LOAD && (p->p_flags & flags) == flags && vaddr >= p->p_vaddr &&
            bpt__elf_in_bounds(vaddr - p->p_vaddr, size, p->p_memsz))
            return p;
    }
    return NULL;
}

static int bpt__module_phdr_same(const ElfW(Phdr) *mem, const Elf64_Phdr *file) {
    return mem->p_type == file->p_type && mem->p_flags == file->p_flags && mem->p_offset == file->p_offset &&
           mem->p_vaddr == file->p_vaddr && mem->p_paddr == file->p_paddr && mem->p_filesz == file->p_filesz &&
           mem->p_memsz == file->p_memsz && mem->p_align == file->p_align;
}

/* Compare the loaded bytes of one PT_NOTE segment with the file's. */
static int bpt__module_note_same(const bpt__module_object *m, const bpt__elf_file *f, const ElfW(Phdr) *note) {
    char buf[256];
    uint64_t done, n;
    if (!bpt__module_segment(m, note->p_vaddr, note->p_filesz, PF_R)) return 1;   /* not loaded: nothing to compare */
    for (done = 0; done < note->p_filesz; done += n) {
        n = note->p_filesz - done < sizeof buf ? note->p_filesz - done : sizeof buf;
        if (bpt__elf_pread(f, note->p_offset + done, n, buf, "note segment") < 0 ||
            memcmp(buf, (const char *)(m->bias + (uintptr_t)(note->p_vaddr + done)), (size_t)n) != 0)
            return 0;
    }
    return 1;
}

/* The file at the module's path must be the image that was loaded: a library
   rebuilt in place while the program runs would give the new build's section
   addresses and names. Same program headers, and the same notes (which hold
   the build ID when the linker wrote one). */
static int bpt__module_check_image(const bpt__module_object *m, const bpt__elf_file *f) {
    size_t i;
    int same = f->phnum == m->phnum;
    for (i = 0; same && i < m->phnum; i++) same = bpt__module_phdr_same(&m->phdr[i], &f->ph[i]);
    for (i = 0; same && i < m->phnum; i++)
        if (m->phdr[i].p_type == PT_NOTE) same = bpt__module_note_same(m, f, &m->phdr[i]);
    if (!same)
        return bpt__fail(BPT_EINVAL, "%s is not the file that was loaded (program headers or build ID differ: "
                         "rebuilt or replaced since?)", f->path);
    return 0;
}

static int bpt__module_entry_cmp(const void *pa, const void *pb) {
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return a < b ? -1 : a > b;
}

/* Copy the relocated entries out of the loaded __patchable_function_entries
   section(s), sorted. A linked file has one such section; several (a
   relocatable link, say) are read alike. */
static int bpt__module_read_entries(const bpt__module_object *m, const bpt__elf_file *f, uint64_t **out, size_t *n) {
    uint64_t total = 0, *e;
    size_t i, k = 0;
    *out = NULL;
    *n = 0;
    for (i = 0; i < f->shnum; i++) {
        const Elf64_Shdr *s = &f->sh[i];
        if (strcmp(bpt__elf_section_name(f, s), BPT__PFE_SECTION) != 0) continue;
        if (s->sh_size % sizeof(uint64_t) != 0 || !(s->sh_flags & SHF_ALLOC) ||
            !bpt__module_segment(m, s->sh_addr, s->sh_size, PF_R))
            return bpt__fail(BPT_EINVAL, "%s: malformed ELF: " BPT__PFE_SECTION " (address 0x%llx, size %llu) "
                             "is not a whole number of addresses inside a loaded segment", f->path,
                             (unsigned long long)s->sh_addr, (unsigned long long)s->sh_size);
        total += s->sh_size / sizeof(uint64_t);
    }
    if (total == 0) return 0;
    if (total > INT_MAX)   /* the scan returns the count as an int */
        return bpt__fail(BPT_EINVAL, "%s: %llu patchable entries", f->path, (unsigned long long)total);
    if (!(e = (uint64_t *)BPT_MALLOC((size_t)total * sizeof *e)))
        return bpt__fail(BPT_ENOMEM, "%s: no memory for %llu patchable entries", f->path, (unsigned long long)total);
    for (i = 0; i < f->shnum; i++) {
        const Elf64_Shdr *s = &f->sh[i];
        if (strcmp(bpt__elf_section_name(f, s), BPT__PFE_SECTION) != 0 || s->sh_size == 0) continue;
        memcpy(e + k, (const void *)(m->bias + (uintptr_t)s->sh_addr), (size_t)s->sh_size);
        k += (size_t)(s->sh_size / sizeof(uint64_t));
    }
    qsort(e, k, sizeof *e, bpt__module_entry_cmp);
    *out = e;
    *n = k;
    return 0;
}

/* Visit each entry: check it is code of this module, name it, call visit.
   An entry outside the module's executable segments is not a function this
   file compiled; patching there would corrupt memory, so the whole scan
   fails rather than guess. */
static int bpt__module_visit_entries(const bpt__module_object *m, const bpt__elf_file *f, const uint64_t *e, size_t n,
                                     size_t pad_bytes, bpt__module_visit_fn visit, void *user) {
    char unnamed[32];
    size_t i;
    int visited = 0, rc;
    for (i = 0; i < n; i++) {
        uint64_t pad_start = e[i] - m->bias;    /* link-time address */
        uint64_t fn = pad_start + pad_bytes;
        const char *name;
        if (i > 0 && e[i] == e[i - 1]) continue;    /* one function, listed twice: register it once */
        if (fn < pad_start || fn > UINT64_MAX - BPT__ENTRY_BYTES ||
            !bpt__module_segment(m, pad_start, fn - pad_start + BPT__ENTRY_BYTES, PF_X))
            return bpt__fail(BPT_EINVAL, "%s: patchable entry 0x%llx (+%zu bytes of padding, and %d of the "
                             "entry) is not inside the module's code", f->path, (unsigned long long)e[i],
                             pad_bytes, BPT__ENTRY_BYTES);
        /* No symbol (stripped of .symtab and not exported, or no symbol table
           at all): the link-time address names it, as nm and addr2line show it. */
        uint64_t size = 0;
        if (!(name = bpt__elf_func_name(f, fn, &size))) {
            /* A function symbol within 128 bytes of this entry's padding
               (and before the next entry), but not where bptrace's padding
               says the function starts: the file was compiled with other
               -fpatchable-function-entry values (x86-64's 26,24 on aarch64
               puts it 64 bytes later; aarch64's 9,8 on x86-64, 16 bytes
               earlier). Its entries are NOPs inside the padding: patching
               them would trace nothing, silently. */
            uint64_t next = i + 1 < n ? e[i + 1] - m->bias : UINT64_MAX;
            const bpt__elf_func *near = bpt__elf_func_from(f, pad_start);
            if (near && near->addr < next && near->addr - pad_start < 128)
                return bpt__fail(BPT_ENOTPATCHABLE, "%s: function %s starts at 0x%llx, %lld bytes from where its "
                                 "patchable entry puts it with %zu bytes of padding: compiled with other "
                                 "-fpatchable-function-entry values than this architecture's (`make print-cflags`); "
                                 "nothing registered", f->path, f->strtab + near->name,
                                 (unsigned long long)near->addr, (long long)(near->addr - fn), pad_bytes);
            snprintf(unnamed, sizeof unnamed, "fn_0x%llx", (unsigned long long)fn);
            name = unnamed;
        }
        if (bpt__elf_func_variant_pcs(f, fn)) continue;   /* not traceable: skipped, as bptrace's own */
        if ((rc = visit((void *)(m->bias + (uintptr_t)fn), name, size, user)) < 0) return rc;
        visited++;
    }
    return visited;
}

/* Find a loaded module and open its file, checked against the image.
   In: module as bpt__module_scan takes it; exe_buf (PATH_MAX bytes) for the
   main program's path. Out: *m, *f (release f with bpt__elf_close, also
   after a failure), *module_name. Returns 0 or bpt__module_scan's errors. */
static int bpt__module_open(const char *module, char *exe_buf, bpt__module_object *m, bpt__elf_file *f,
                            const char **module_name) {
    int rc;
    memset(f, 0, sizeof *f);
    f->fd = -1;
    memset(m, 0, sizeof *m);
    m->want = module;
    m->exe_buf = exe_buf;
    dl_iterate_phdr(bpt__module_match, m);
    if (!m->found)
        return bpt__fail(BPT_ENOENT, "module '%s' is not loaded", module ? module : "(main program)");
    if (m->is_main && !m->exe_path)
        return bpt__fail(BPT_ENOENT, "cannot find the main program's file in /proc/self/maps or "
                         "/proc/self/exe (is /proc mounted?)");
    rc = bpt__elf_open(m->is_main ? m->exe_open : m->path, f);
    if (rc == 0) rc = bpt__module_check_image(m, f);
    if (rc == 0 && !(*module_name = bpt__module_name(m->path)))
        rc = bpt__fail(BPT_ENOMEM, "no memory for the module name");
    return rc;
}

/* bpt__module_scan: visit every patchable function entry of a loaded module.
   In: module, NULL for the main program, else the basename ("libfoo.so") or
   the path (as dlopen was given it) of a loaded object; the first match in
   load order wins. pad_bytes, the bytes of padding before each function (24
   on x86-64 with (26,24), 32 on aarch64 with (9,8)). visit and user: called
   per entry in address order with the function's run-time address and name
   (".symtab" name, else ".dynsym", else "fn_0x<link-time address>"); a
   negative return stops the scan and is returned as is.
   Out: *module_name, the interned basename of the module's file (cut to
   127 bytes), set before the first visit so that visit may use it.
   Returns the number of entries visited (0 when the module has no
   __patchable_function_entries section, or no section headers at all).
   Errors (with bpt_last_error): BPT_EINVAL (NULL visit or module_name, empty
   module; malformed ELF; the file differs from the loaded image; an entry
   outside the module's code); BPT_ENOENT (not loaded; file gone); BPT_EPERM
   (file unreadable: without it there is no section table to find the
   entries, so nothing is visited); BPT_ENOTSUP (ELF32 or foreign byte
   order); BPT_ENOMEM.
   Thread safety: not by itself; the caller holds the code modification
   permission and keeps the module loaded for the duration of the call.
   Source: dl_iterate_phdr(3); gcc -fpatchable-function-entry. */
BPT__PRIVATE int bpt__module_scan(const char *module, size_t pad_bytes, const char **module_name,
                                  bpt__module_visit_fn visit, void *user) {
    char exe_buf[PATH_MAX];
    bpt__module_object m;
    bpt__elf_file f;
    uint64_t *entries = NULL;
    size_t n = 0;
    int rc;
    if (!module_name || !visit || (module && !*module))
        return bpt__fail(BPT_EINVAL, "module scan: module_name and visit must not be NULL, module not empty");
    rc = bpt__module_open(module, exe_buf, &m, &f, module_name);
    if (rc == 0) rc = bpt__module_read_entries(&m, &f, &entries, &n);
    if (rc == 0) rc = bpt__module_visit_entries(&m, &f, entries, n, pad_bytes, visit, user);
    BPT_FREE(entries);
    bpt__elf_close(&f);
    return rc;
}

#if defined(BPT_NATIVE)
/* >>BTI guard: is the code at addr on a page the loader guarded with
   aarch64's branch target identification (PROT_BTI)? Then an indirect
   branch may enter the page only at a landing pad (bti c / bti j), or the
   CPU raises SIGILL. mprotect sets a page's protection whole, so a code
   write (site_native.c) must ask for PROT_BTI again each time, in its
   read+write+execute and in its read+execute: without it the page loses
   its guard for good. /proc/self/maps does not show the flag, so this asks
   what the loader asks (glibc, sysdeps/aarch64/dl-bti.c, _dl_bti_check):
   the CPU has BTI (AT_HWCAP2 has HWCAP2_BTI), and the object's
   PT_GNU_PROPERTY note has GNU_PROPERTY_AARCH64_FEATURE_1_AND with the BTI
   bit; then every executable PT_LOAD of the object is guarded. The kernel
   asks the same for the loader itself and for a static program (Linux,
   arch/arm64/kernel/process.c, arch_elf_adjust_prot). Code the program
   maps itself (a JIT) is taken as unguarded. Returns 1 or 0; 0 on x86-64. */
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP2_BTI
#  define HWCAP2_BTI (1UL << 17)
#endif
#ifndef PT_GNU_PROPERTY
#  define PT_GNU_PROPERTY 0x6474e553
#endif
#ifndef NT_GNU_PROPERTY_TYPE_0
#  define NT_GNU_PROPERTY_TYPE_0 5
#endif
#ifndef GNU_PROPERTY_AARCH64_FEATURE_1_AND
#  define GNU_PROPERTY_AARCH64_FEATURE_1_AND 0xc0000000u
#endif
#ifndef GNU_PROPERTY_AARCH64_FEATURE_1_BTI
#  define GNU_PROPERTY_AARCH64_FEATURE_1_BTI 1u
#endif

/* Does a PT_GNU_PROPERTY segment (in memory, n bytes) say BTI? Its notes
   are 8-aligned: a header, "GNU\0", then properties of type, size, data
   (each 8-aligned); every size is checked against what is left. */
static int bpt__gnu_property_bti(const unsigned char *p, size_t n) {
    while (n >= sizeof(ElfW(Nhdr))) {
        const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)(const void *)p;
        size_t name = (nh->n_namesz + 3u) & ~(size_t)3, desc = (nh->n_descsz + 7u) & ~(size_t)7, at;
        if (sizeof *nh + name > n || desc > n - sizeof *nh - name) return 0;
        if (nh->n_type == NT_GNU_PROPERTY_TYPE_0 && nh->n_namesz == 4 &&
            memcmp(p + sizeof *nh, "GNU", 4) == 0) {
            const unsigned char *d = p + sizeof *nh + name;
            for (at = 0; at + 8 <= nh->n_descsz;) {
                uint32_t type, size, bits;
                memcpy(&type, d + at, 4);
                memcpy(&size, d + at + 4, 4);
                if (size > nh->n_descsz - at - 8) return 0;
                if (type == GNU_PROPERTY_AARCH64_FEATURE_1_AND && size >= 4) {
                    memcpy(&bits, d + at + 8, 4);
                    return (bits & GNU_PROPERTY_AARCH64_FEATURE_1_BTI) != 0;
                }
                at += 8 + (((size_t)size + 7u) & ~(size_t)7);
            }
        }
        p += sizeof *nh + name + desc;
        n -= sizeof *nh + name + desc;
    }
    return 0;
}

typedef struct bpt__guard_query { uintptr_t addr; int guarded; } bpt__guard_query;

static int bpt__module_guard_visit(struct dl_phdr_info *info, size_t size, void *data) {
    bpt__guard_query *q = (bpt__guard_query *)data;
    const ElfW(Phdr) *prop = NULL;
    int i, mine = 0;
    (void)size;
    for (i = 0; i < (int)info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = (uintptr_t)info->dlpi_addr + (uintptr_t)ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && q->addr >= start && q->addr - start < ph->p_memsz)
            mine = 1;
        if (ph->p_type == PT_GNU_PROPERTY) prop = ph;
    }
    if (!mine) return 0;
    q->guarded = prop && bpt__gnu_property_bti((const unsigned char *)(uintptr_t)(info->dlpi_addr + prop->p_vaddr),
                                               (size_t)prop->p_memsz);
    return 1;
}

BPT__PRIVATE int bpt__module_code_guarded(const void *addr) {
    bpt__guard_query q;
    if (!(getauxval(AT_HWCAP2) & HWCAP2_BTI)) return 0;
    q.addr = (uintptr_t)addr;
    q.guarded = 0;
    dl_iterate_phdr(bpt__module_guard_visit, &q);
    return q.guarded;
}
#else
BPT__PRIVATE int bpt__module_code_guarded(const void *addr) {
    (void)addr;
    return 0;   /* BTI is aarch64's */
}
#endif
#endif /* BPT_NATIVE */

#if defined(BPT_NATIVE)
/* >>imports: the slots a module calls other modules through, from its
   dynamic relocations (System V gABI and the psABIs: Relocation):
   - R_X86_64_JUMP_SLOT / R_AARCH64_JUMP_SLOT: a .got.plt entry, which the
     module's PLT stub jumps through;
   - R_X86_64_GLOB_DAT / R_AARCH64_GLOB_DAT: a .got entry, which code built
     with -fno-plt calls through (and which a function's address taken
     across modules is read from);
   - R_X86_64_64 / R_AARCH64_ABS64 against a function, addend 0: a word of
     a table of function pointers in the module's data, which the program
     calls through (SQLite keeps pread64 and pwrite64 in such a table,
     aSyscall[], and calls them only through it).
   Each holds the target's address once bound. A JUMP_SLOT the dynamic
   linker has not bound yet (lazy binding: no -z now, no LD_BIND_NOW) points
   into the module's own .plt instead (x86-64: its stub's push; aarch64:
   PLT0); its target is then found as the linker would find it, by name and
   version: first in the global scope, then in the module's own dependencies
   (its local scope, for a library dlopened with RTLD_LOCAL), dlvsym(3). */
#include <dlfcn.h>
#if defined(__x86_64__)
#  define BPT__R_JUMP_SLOT R_X86_64_JUMP_SLOT
#  define BPT__R_GLOB_DAT R_X86_64_GLOB_DAT
#  define BPT__R_ABS64 R_X86_64_64
#else
#  define BPT__R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#  define BPT__R_GLOB_DAT R_AARCH64_GLOB_DAT
#  define BPT__R_ABS64 R_AARCH64_ABS64
#endif

/* A section's bytes, or NULL with *size 0 when the file has none of that
   type (type) and name (NULL: any). */
static const Elf64_Shdr *bpt__elf_section_find(const bpt__elf_file *f, uint32_t type, const char *name) {
    size_t i;
    for (i = 0; i < f->shnum; i++)
        if (f->sh[i].sh_type == type && (!name || strcmp(bpt__elf_section_name(f, &f->sh[i]), name) == 0))
            return &f->sh[i];
    return NULL;
}

/* The System V ELF hash (gABI, "Hash Table"), which glibc keeps of each
   version name. */
static uint32_t bpt__elf_hash(const char *name) {
    uint32_t h = 0, g;
    for (; *name; name++) {
        h = (h << 4) + (unsigned char)*name;
        if ((g = h & 0xf0000000u) != 0) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

/* The version a module asks of import symbol index `sym` (".gnu.version"
   entry, named in ".gnu.version_r"), or NULL: unversioned. Out-of-range
   data gives NULL: the lookup is then by name alone. So does a name whose
   ELF hash is 0 (the empty name, in a corrupt file): glibc takes the hash
   0 for "no version here" and then strcmp()s the NULL name of a symbol a
   versioned object defines unversioned (dl-lookup.c, check_match): a
   crash inside dlvsym. */
static const char *bpt__imports_version(const char *versym, size_t versym_size, const char *verneed,
                                        size_t verneed_size, size_t verneed_count, const char *dynstr,
                                        size_t dynstr_size, size_t sym) {
    Elf64_Half want;
    size_t off = 0, i;
    if (!versym || (sym + 1) * sizeof want > versym_size) return NULL;
    memcpy(&want, versym + sym * sizeof want, sizeof want);
    want &= 0x7fff;                             /* the hidden bit */
    if (want < 2 || !verneed) return NULL;      /* local or global: no version */
    for (i = 0; i < verneed_count && bpt__elf_in_bounds(off, sizeof(Elf64_Verneed), verneed_size); i++) {
        Elf64_Verneed vn;
        size_t aoff;
        unsigned k;
        memcpy(&vn, verneed + off, sizeof vn);
        for (k = 0, aoff = off + vn.vn_aux; k < vn.vn_cnt && bpt__elf_in_bounds(aoff, sizeof(Elf64_Vernaux), verneed_size); k++) {
            Elf64_Vernaux va;
            memcpy(&va, verneed + aoff, sizeof va);
            if (va.vna_other == want)
                return va.vna_name < dynstr_size && bpt__elf_hash(dynstr + va.vna_name) ? dynstr + va.vna_name : NULL;
            if (!va.vna_next) break;
            aoff += va.vna_next;
        }
        if (!vn.vn_next) break;
        off += vn.vn_next;
    }
    return NULL;
}

/* Where the dynamic linker would bind name@version for this module: the
   global scope, then the module's dependencies (path NULL: the main
   program, whose scope is the global one). 0 when nothing defines it. */
static uintptr_t bpt__imports_resolve(const char *path, const char *name, const char *version) {
    void *p = version ? dlvsym(RTLD_DEFAULT, name, version) : dlsym(RTLD_DEFAULT, name), *h;
    if (!p && path && (h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD)) != NULL) {
        p = version ? dlvsym(h, name, version) : dlsym(h, name);
        dlclose(h);
    }
    return (uintptr_t)p;
}

/* The import relocations of one SHT_RELA section, read in chunks. */
typedef struct bpt__imports_scan {
    const bpt__module_object *m;
    const bpt__elf_file *f;
    const char *dynstr, *versym, *verneed;
    size_t dynstr_size, versym_size, verneed_size, verneed_count;
    const Elf64_Sym *dynsym;
    size_t ndynsym;
    uintptr_t plt_lo, plt_hi;                   /* the module's .plt, where an unbound slot points */
    bpt__import_visit_fn visit;
    void *user;
} bpt__imports_scan;

static int bpt__imports_one(const bpt__imports_scan *sc, const Elf64_Rela *r) {
    uint32_t type = (uint32_t)ELF64_R_TYPE(r->r_info);
    size_t symix = (size_t)ELF64_R_SYM(r->r_info);
    const Elf64_Sym *sym;
    const char *name;
    uintptr_t value, target;
    void **slot;
    int lazy;
    unsigned st;
    if (type != BPT__R_JUMP_SLOT && type != BPT__R_GLOB_DAT && !(type == BPT__R_ABS64 && r->r_addend == 0))
        return 0;
    if (symix == 0 || symix >= sc->ndynsym) return 0;
    sym = &sc->dynsym[symix];
    st = ELF64_ST_TYPE(sym->st_info);
    if (st != STT_FUNC && st != STT_NOTYPE && st != STT_GNU_IFUNC) return 0;   /* data, TLS: not calls */
    if (type == BPT__R_ABS64 && st == STT_NOTYPE) return 0;   /* a table word: only a known function */
    if (sym->st_name == 0 || sym->st_name >= sc->dynstr_size || !sc->dynstr[sym->st_name]) return 0;
    name = sc->dynstr + sym->st_name;
    if (!bpt__module_segment(sc->m, r->r_offset, sizeof(void *), PF_R | PF_W) || (r->r_offset & 7))
        return bpt__fail(BPT_EINVAL, "%s: malformed ELF: the slot of %s at 0x%llx is not an aligned pointer "
                         "in a writable segment", sc->f->path, name, (unsigned long long)r->r_offset);
    slot = (void **)(sc->m->bias + (uintptr_t)r->r_offset);
    value = (uintptr_t)bpt__load_relaxed_ptr((bpt__atomic_ptr *)slot);
    lazy = type == BPT__R_JUMP_SLOT && value >= sc->plt_lo && value < sc->plt_hi;
    target = value;
    if (lazy) {
        const char *ver = bpt__imports_version(sc->versym, sc->versym_size, sc->verneed, sc->verneed_size,
                                               sc->verneed_count, sc->dynstr, sc->dynstr_size, symix);
        target = bpt__imports_resolve(sc->m->is_main ? NULL : sc->m->path, name, ver);
    }
    if (!target) return 0;   /* a weak import nothing defines, or one the linker would not bind either */
    return sc->visit(slot, name, target, lazy ? value : 0, sc->user);
}

/* bpt__module_imports: visit every import slot of a loaded module (>>imports).
   In: module, as bpt__module_scan takes it; visit and user, called per slot
   in relocation order; a negative return stops and is returned.
   Out: *module_name, the interned basename of the module's file (cut to
   127 bytes). Returns the number of slots visited, or bpt__module_scan's errors.
   Not under the code modification permission: the caller keeps the module
   loaded, and the lookups take the dynamic linker's lock, which a library's
   constructor holds while it may wait for the permission. */
BPT__PRIVATE int bpt__module_imports(const char *module, const char **module_name,
                                     bpt__import_visit_fn visit, void *user) {
    char exe_buf[PATH_MAX];
    bpt__module_object m;
    bpt__elf_file f;
    bpt__imports_scan sc;
    const Elf64_Shdr *dynsym, *s;
    char *dynsym_bytes = NULL, *dynstr = NULL, *versym = NULL, *verneed = NULL;
    size_t i;
    int rc, visited = 0;
    if (!module_name || !visit || (module && !*module))
        return bpt__fail(BPT_EINVAL, "module imports: module_name and visit must not be NULL, module not empty");
    memset(&sc, 0, sizeof sc);
    rc = bpt__module_open(module, exe_buf, &m, &f, module_name);
    dynsym = rc == 0 ? bpt__elf_section_find(&f, SHT_DYNSYM, NULL) : NULL;
    if (rc == 0 && dynsym) {
        if (dynsym->sh_entsize != sizeof(Elf64_Sym) || dynsym->sh_link == 0 || dynsym->sh_link >= f.shnum)
            rc = bpt__fail(BPT_EINVAL, "%s: malformed ELF: .dynsym", f.path);
        else if ((rc = bpt__elf_section_alloc(&f, dynsym, ".dynsym", &dynsym_bytes)) == 0 &&
                 (rc = bpt__elf_section_alloc(&f, &f.sh[dynsym->sh_link], ".dynstr", &dynstr)) == 0) {
            sc.dynsym = (const Elf64_Sym *)(const void *)dynsym_bytes;
            sc.ndynsym = (size_t)(dynsym->sh_size / sizeof(Elf64_Sym));
            sc.dynstr = dynstr;
            sc.dynstr_size = (size_t)f.sh[dynsym->sh_link].sh_size;
        }
    }
    if (rc == 0 && dynsym && (s = bpt__elf_section_find(&f, SHT_GNU_versym, NULL)) != NULL &&
        (rc = bpt__elf_section_alloc(&f, s, ".gnu.version", &versym)) == 0)
        sc.versym = versym, sc.versym_size = (size_t)s->sh_size;
    if (rc == 0 && dynsym && (s = bpt__elf_section_find(&f, SHT_GNU_verneed, NULL)) != NULL &&
        (rc = bpt__elf_section_alloc(&f, s, ".gnu.version_r", &verneed)) == 0)
        sc.verneed = verneed, sc.verneed_size = (size_t)s->sh_size, sc.verneed_count = s->sh_info;
    if (rc == 0 && (s = bpt__elf_section_find(&f, SHT_PROGBITS, ".plt")) != NULL) {
        sc.plt_lo = m.bias + (uintptr_t)s->sh_addr;
        sc.plt_hi = sc.plt_lo + (uintptr_t)s->sh_size;
    }
    sc.m = &m;
    sc.f = &f;
    sc.visit = visit;
    sc.user = user;
    /* Every SHT_RELA section against .dynsym: .rela.dyn and .rela.plt. */
    for (i = 0; rc == 0 && dynsym && i < f.shnum; i++) {
        const Elf64_Shdr *rs = &f.sh[i];
        Elf64_Rela chunk[128];
        uint64_t count, done;
        if (rs->sh_type != SHT_RELA || rs->sh_link != (uint32_t)(dynsym - f.sh)) continue;
        if (rs->sh_entsize != sizeof(Elf64_Rela) || rs->sh_size % sizeof(Elf64_Rela) != 0) {
            rc = bpt__fail(BPT_EINVAL, "%s: malformed ELF: %s entry size %llu", f.path,
                           bpt__elf_section_name(&f, rs), (unsigned long long)rs->sh_entsize);
            break;
        }
        count = rs->sh_size / sizeof(Elf64_Rela);
        for (done = 0; rc == 0 && done < count; ) {
            size_t n = count - done < 128 ? (size_t)(count - done) : 128, k;
            if ((rc = bpt__elf_pread(&f, rs->sh_offset + done * sizeof(Elf64_Rela), n * sizeof(Elf64_Rela),
                                     chunk, "dynamic relocations")) < 0)
                break;
            for (k = 0; k < n && rc == 0; k++) {
                rc = bpt__imports_one(&sc, &chunk[k]);
                if (rc > 0) { visited += rc; rc = 0; }
            }
            done += n;
        }
    }
    BPT_FREE(dynsym_bytes);
    BPT_FREE(dynstr);
    BPT_FREE(versym);
    BPT_FREE(verneed);
    bpt__elf_close(&f);
    return rc < 0 ? rc : visited;
}
#endif /* BPT_NATIVE */
