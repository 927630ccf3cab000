/* t_imports_version: BPT_TEST_SHLIB(tests/lib_imports_version.c)
   bpt_register_imports on a library whose file names an empty version
   (found by review). The import scan reads the module's file, not its image:
   a library replaced on disk while loaded, or a corrupt file, is data to
   check, and a garbage file gives BPT_EINVAL or a lookup by name, never a
   crash. Here the loaded library A's file is replaced by a copy whose
   .gnu.version_r entry names "" (vna_name 0) and whose t_target import asks
   for that version. A second copy B, loaded RTLD_GLOBAL, defines t_target
   unversioned in an object with version tables: dlvsym(RTLD_DEFAULT,
   "t_target", "") crashed in glibc (check_match strcmp()s B's NULL version
   name, since "" hashes to 0 like "no version"). Now an empty version, or
   any name whose ELF hash is 0, is no version: the slot is found by name.
   Also bpt__imports_version on a hand-made table: a name hashing to 0. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>

#define HASH0_NAME "8xyiimp"   /* a name whose ELF hash is 0, as the empty name's (found by search) */

static unsigned char *read_file(const char *path, size_t *n) {
    struct stat st;
    unsigned char *b;
    int fd = open(path, O_RDONLY);
    if (fd < 0 || fstat(fd, &st) != 0 || !(b = (unsigned char *)malloc((size_t)st.st_size))) return NULL;
    *n = (size_t)st.st_size;
    if (read(fd, b, *n) != (ssize_t)*n) { free(b); b = NULL; }
    close(fd);
    return b;
}

/* Write b to path through a new file renamed over it, as a rebuild does. */
static int write_file(const char *path, const unsigned char *b, size_t n) {
    char tmp[4200];
    int fd, ok;
    snprintf(tmp, sizeof tmp, "%s.new", path);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0755)) < 0) return -1;
    ok = write(fd, b, n) == (ssize_t)n;
    close(fd);
    return ok && rename(tmp, path) == 0 ? 0 : -1;
}

/* In the file image b: the first .gnu.version_r name becomes "" and the
   version symbol `sym` asks for becomes that entry's. 0, or -1 if the
   file lacks a table. */
static int patch_empty_version(unsigned char *b, size_t n, const char *sym) {
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff), *dynsym = NULL, *versym = NULL, *verneed = NULL;
    Elf64_Verneed vn;
    Elf64_Vernaux va;
    size_t i, ix = 0;
    if (eh->e_shoff + (size_t)eh->e_shnum * sizeof *sh > n) return -1;
    for (i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type == SHT_DYNSYM) dynsym = &sh[i];
        if (sh[i].sh_type == SHT_GNU_versym) versym = &sh[i];
        if (sh[i].sh_type == SHT_GNU_verneed) verneed = &sh[i];
    }
    if (!dynsym || !versym || !verneed) return -1;
    for (i = 1; i < dynsym->sh_size / sizeof(Elf64_Sym); i++) {
        const Elf64_Sym *s = (const Elf64_Sym *)(b + dynsym->sh_offset) + i;
        if (strcmp((const char *)b + sh[dynsym->sh_link].sh_offset + s->st_name, sym) == 0) ix = i;
    }
    if (!ix) return -1;
    memcpy(&vn, b + verneed->sh_offset, sizeof vn);
    memcpy(&va, b + verneed->sh_offset + vn.vn_aux, sizeof va);
    printf("%s: version index %u (was %u), its name at dynstr offset 0 (was %u)\n", sym, (unsigned)va.vna_other,
           (unsigned)((Elf64_Half *)(b + versym->sh_offset))[ix], (unsigned)va.vna_name);
    ((Elf64_Half *)(b + versym->sh_offset))[ix] = va.vna_other;
    va.vna_name = 0;
    memcpy(b + verneed->sh_offset + vn.vn_aux, &va, sizeof va);
    return 0;
}

#if defined(BPT_NATIVE)
static uint32_t elf_hash(const char *s) {   /* the gABI's, as glibc's _dl_elf_hash */
    uint32_t h = 0, g;
    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        if ((g = h & 0xf0000000u) != 0) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

static int count_slot(void **slot, const char *name, uintptr_t target, uintptr_t unbound, void *user) {
    (void)slot; (void)target; (void)user;
    printf("  slot %s%s\n", name, unbound ? " (unbound)" : "");
    return 1;
}
#endif

int main(int argc, char **argv) {
    char dir[] = "/tmp/bpt_t_imports_version.XXXXXX", a[256], b[256];
    unsigned char *img;
    size_t n = 0;
    bpt_func *f;
    int rc;
    if (argc < 2) { fprintf(stderr, "usage: %s LIB\n", argv[0]); return 1; }
#if !defined(BPT_NATIVE)
    return CHECK_SKIP("no native support (tcc or BPT_NO_NATIVE): bpt_register_imports is BPT_ENOTSUP");
#else
    /* A name whose ELF hash is 0 ("" and others) is no version. */
    {
        static const char dynstr[] = "\0GLIBC_2.2.5\0" HASH0_NAME;
        Elf64_Half versym[2] = { 1, 2 };
        struct { Elf64_Verneed vn; Elf64_Vernaux va; } vr;
        memset(&vr, 0, sizeof vr);
        vr.vn.vn_cnt = 1;
        vr.vn.vn_aux = sizeof vr.vn;
        vr.va.vna_other = 2;
        CHECK(elf_hash(HASH0_NAME) == 0 && elf_hash("GLIBC_2.2.5") != 0, "the hashes");
        vr.va.vna_name = 1;
        CHECK(bpt__imports_version((const char *)versym, sizeof versym, (const char *)&vr, sizeof vr, 1, dynstr,
                                   sizeof dynstr, 1) == dynstr + 1, "a version name is the version");
        vr.va.vna_name = 0;
        CHECK(!bpt__imports_version((const char *)versym, sizeof versym, (const char *)&vr, sizeof vr, 1, dynstr,
                                    sizeof dynstr, 1), "the empty name is no version");
        vr.va.vna_name = 13;
        CHECK(!bpt__imports_version((const char *)versym, sizeof versym, (const char *)&vr, sizeof vr, 1, dynstr,
                                    sizeof dynstr, 1), "a name hashing to 0 is no version");
    }
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    snprintf(a, sizeof a, "%s/libtiv_a.so", dir);
    snprintf(b, sizeof b, "%s/libtiv_b.so", dir);
    if (!(img = read_file(argv[1], &n)) || write_file(a, img, n) < 0 || write_file(b, img, n) < 0) {
        perror(argv[1]);
        return 1;
    }
    /* B in the global scope first, then A with its slots unbound. */
    CHECK(dlopen(b, RTLD_NOW | RTLD_GLOBAL) != NULL, "dlopen B: %s", dlerror());
    CHECK(dlopen(a, RTLD_LAZY | RTLD_LOCAL) != NULL, "dlopen A: %s", dlerror());
    CHECK(patch_empty_version(img, n, "t_target") == 0, "the library has no version tables or no t_target");
    CHECK(write_file(a, img, n) == 0, "replacing A's file");
    fflush(stdout);   /* the crash was in the scan's lookups, which bpt_register_imports runs first */
    rc = bpt_register_imports("libtiv_a.so", NULL);
    printf("bpt_register_imports(libtiv_a.so) = %d %s\n", rc, rc < 0 ? bpt_last_error() : "");
    if (rc == BPT_ENOTSUP) {   /* a shadow stack: refused before the scan, so the scan alone */
        const char *mod;
        printf("no slots here (%s): the scan alone\n", bpt_last_error());
        rc = bpt__module_imports("libtiv_a.so", &mod, count_slot, NULL);
        CHECK(rc >= 1, "bpt__module_imports(libtiv_a.so) = %d (%s)", rc, bpt_last_error());
    } else {
        CHECK(rc >= 1, "the slots of A registered: %d (%s)", rc, bpt_last_error());
        CHECK_RC(bpt_func_lookup("libtiv_a.so", "t_target", 0, &f), 0);
    }
    free(img);
    unlink(a); unlink(b); rmdir(dir);
    return CHECK_DONE();
#endif
}
