/* t_native_faults: native registration when the system or the caller says no.
   a. A BPT_TRACEABLE-shaped function in a page whose mprotect(RWX) is refused
      (a read-only MAP_SHARED file mapping): BPT_EPERM, a last error naming
      mprotect and errno, the code bytes untouched, nothing registered, and
      the page still not writable.
   b. W^X: after every batch of code writes (the protocol observer at the end
      of steps 5, 9 and 12, and after each bpt_register_native returns) no
      mapping of the process is both writable and executable, and the pages
      of the traced functions are r-x again. A dozen functions on two or more
      pages, through registration (with and without patterns in force),
      enabling, disabling and session destroy.
   c. bpt_register_native misuse: NULL fn, module, name or out; arity -1 and
      256; a name over the limit; the same function twice (BPT_EEXIST); a
      function without BPT_TRACEABLE, a pointer into the middle of an entry,
      libc's strlen and a PLT stub (BPT_ENOTPATCHABLE, no crash). None of
      them registers anything.
   Also passes with -DBPT_NO_MEMBARRIER (tests/run nomemb).
   On compilers without native support (tcc) it checks BPT_ENOTSUP, then
   skips (native_fixture.h). */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"

#if defined(BPT_NATIVE)
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- /proc/self/maps ---- */

typedef struct maps_report {
    int wx;                  /* mappings both writable and executable */
    char first_wx[256];
    int not_rx;              /* function pages that are not r-x */
    char first_not_rx[256];
} maps_report;

/* Scan /proc/self/maps: count w+x mappings, and check that each address in
   addrs[0..n) lies in an r-x mapping. Returns 0, or -1 if maps is unreadable. */
static int maps_scan(void *const *addrs, int n, maps_report *r) {
    FILE *fp = fopen("/proc/self/maps", "r");
    char line[512];
    int i, found[64] = { 0 };
    memset(r, 0, sizeof *r);
    if (!fp) return -1;
    while (fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3) continue;
        if (perms[1] == 'w' && perms[2] == 'x' && r->wx++ == 0)
            snprintf(r->first_wx, sizeof r->first_wx, "%.250s", line);
        for (i = 0; i < n && i < 64; i++) {
            uintptr_t a = (uintptr_t)addrs[i];
            if (a < lo || a >= hi) continue;
            found[i] = 1;
            if (strncmp(perms, "r-x", 3) != 0 && r->not_rx++ == 0)
                snprintf(r->first_not_rx, sizeof r->first_not_rx, "%.250s", line);
        }
    }
    fclose(fp);
    for (i = 0; i < n && i < 64; i++)
        if (!found[i] && r->not_rx++ == 0)
            snprintf(r->first_not_rx, sizeof r->first_not_rx, "%p is in no mapping\n", addrs[i]);
    return 0;
}

/* The maps line holding addr, without its newline. */
static void maps_line_of(const void *addr, char *out, size_t size) {
    FILE *fp = fopen("/proc/self/maps", "r");
    char line[512];
    snprintf(out, size, "(not found)");
    if (!fp) return;
    while (fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(out, size, "%.290s", line);
            break;
        }
    }
    fclose(fp);
}

/* ---- a. refused mprotect ---- */

static void refused_mprotect(void) {
#if defined(__x86_64__)
    enum { OFF = 24 };
    static const unsigned char body[] = { 0x90, 0x90, 0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3 };   /* nop nop; mov eax,42; ret */
#else
    enum { OFF = 32 };
    static const unsigned char body[] = { 0x1f, 0x20, 0x03, 0xd5,     /* nop */
                                          0x40, 0x05, 0x80, 0x52,     /* mov w0, #42 */
                                          0xc0, 0x03, 0x5f, 0xd6 };   /* ret */
#endif
    unsigned char image[64], now[64], onfile[64];
    char path[] = "/tmp/bpt_faults_XXXXXX", line[300];
    const char *tmpdir_note = "";
    int fd, i, n0, n1, exec = 1, rc;
    unsigned char *map;
    bpt_func *f = NULL;

    memset(image, 0xCC, sizeof image);   /* int3 (x86) / filler after the function */
#if defined(__x86_64__)
    memset(image, 0x90, OFF);
#else
    for (i = 0; i < OFF; i += 4) memcpy(image + i, body, 4);   /* 8 NOP words */
#endif
    memcpy(image + OFF, body, sizeof body);
    fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
    if (fd < 0) return;
    CHECK(write(fd, image, sizeof image) == (ssize_t)sizeof image, "write: %s", strerror(errno));
    close(fd);
    fd = open(path, O_RDONLY);
    unlink(path);
    CHECK(fd >= 0, "open O_RDONLY: %s", strerror(errno));
    if (fd < 0) return;
    map = (unsigned char *)mmap(NULL, sizeof image, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {   /* noexec /tmp: a read-only mapping is refused just the same */
        exec = 0;
        tmpdir_note = " (PROT_EXEC refused, e.g. noexec /tmp: mapped PROT_READ only)";
        map = (unsigned char *)mmap(NULL, sizeof image, PROT_READ, MAP_SHARED, fd, 0);
    }
    CHECK(map != MAP_FAILED, "mmap: %s", strerror(errno));
    if (map == MAP_FAILED) { close(fd); return; }
    maps_line_of(map, line, sizeof line);
    printf("a. fake entry in a read-only shared file mapping%s:\n   %s\n", tmpdir_note, line);
    if (exec) {
        int (*fake)(void) = (int (*)(void))(uintptr_t)(map + OFF);
        CHECK(fake() == 42, "the fake function runs and returns 42");
    }

    n0 = bpt_func_count();
    rc = bpt_register_native(map + OFF, "faults", "readonly", 0, &f);
    printf("   bpt_register_native: %d (%s)\n   last error: %s\n", rc, bpt_strerror(rc), bpt_last_error());
    CHECK(rc == BPT_EPERM, "expected BPT_EPERM, got %d", rc);
    CHECK(strstr(bpt_last_error(), "mprotect") != NULL, "the last error names mprotect: %s", bpt_last_error());
    CHECK(strstr(bpt_last_error(), strerror(EACCES)) != NULL, "the last error gives errno (%s): %s",
          strerror(EACCES), bpt_last_error());
    n1 = bpt_func_count();
    CHECK(n1 == n0, "function count %d -> %d", n0, n1);
    for (i = 0; i < (int)sizeof image; i++) now[i] = code_byte(map, i);
    CHECK(pread(fd, onfile, sizeof onfile, 0) == (ssize_t)sizeof onfile, "pread");
    CHECK(memcmp(now, onfile, sizeof now) == 0 && memcmp(now, image, sizeof now) == 0,
          "the mapping's bytes changed");
    /* Nothing was registered: a second try is refused the same way, not BPT_EEXIST. */
    CHECK_RC(bpt_register_native(map + OFF, "faults", "readonly", 0, &f), BPT_EPERM);
    maps_line_of(map, line, sizeof line);
    CHECK(strstr(line, exec ? " r-xs " : " r--s ") != NULL, "the mapping's permissions changed: %s", line);
    printf("   after: %s\n", line);
    if (exec) {
        int (*fake)(void) = (int (*)(void))(uintptr_t)(map + OFF);
        CHECK(fake() == 42, "the fake function still runs");
    }
    munmap(map, sizeof image);
    close(fd);
}

/* ---- b. W^X ---- */

/* A dozen functions on two pages at least: the first of each group starts a page. */
#define WX_FN(name, k, attr) BPT_TRACEABLE attr long name(long x) { return x * (k) + 1; }
WX_FN(wx_a0, 2, __attribute__((aligned(4096))))
WX_FN(wx_a1, 3, )
WX_FN(wx_a2, 4, )
WX_FN(wx_a3, 5, )
WX_FN(wx_a4, 6, )
WX_FN(wx_a5, 7, )
WX_FN(wx_b0, 8, __attribute__((aligned(4096))))
WX_FN(wx_b1, 9, )
WX_FN(wx_b2, 10, )
WX_FN(wx_b3, 11, )
WX_FN(wx_b4, 12, )
WX_FN(wx_b5, 13, )
enum { NWX = 12 };
static long (*const wx_fns[NWX])(long) = { wx_a0, wx_a1, wx_a2, wx_a3, wx_a4, wx_a5,
                                           wx_b0, wx_b1, wx_b2, wx_b3, wx_b4, wx_b5 };
static const char *const wx_names[NWX] = { "a0", "a1", "a2", "a3", "a4", "a5", "b0", "b1", "b2", "b3", "b4", "b5" };
static void *wx_addr[NWX];
static bpt_func *wx_funcs[NWX];

static struct {
    int checks, observer_checks, wx, not_rx, unreadable;
    char first_wx[300], first_not_rx[300];
} wxr;

static void wx_check(const char *when) {
    maps_report r;
    wxr.checks++;
    if (maps_scan(wx_addr, NWX, &r) < 0) { wxr.unreadable++; return; }
    if (r.wx && wxr.wx++ == 0) snprintf(wxr.first_wx, sizeof wxr.first_wx, "%.40s: %.250s", when, r.first_wx);
    if (r.not_rx && wxr.not_rx++ == 0)
        snprintf(wxr.first_not_rx, sizeof wxr.first_not_rx, "%.40s: %.250s", when, r.first_not_rx);
}

/* The observer runs under the permission at the end of each step; steps 5
   and 9 end with their batch closed, 12 ends the change. */
static void wx_observer(int step, int did, uint64_t ns, void *user) {
    static const char *const when[14] = { NULL, NULL, NULL, NULL, NULL, "after step 5", NULL, NULL, NULL,
                                          "after step 9", NULL, NULL, "after step 12", NULL };
    (void)did; (void)ns; (void)user;
    if (step != 5 && step != 9 && step != 12) return;
    wxr.observer_checks++;
    wx_check(when[step]);
}

/* Does fn's entry word hold the breakpoint (x86-64: EB FC, or EB F8 after
   endbr64; aarch64: a B), after
   an endbr64 / bti c / paciasp if there is one? */
static int bp_installed(const void *fn) {
#if defined(__x86_64__)
    int at = code_byte(fn, 0) == 0xF3 && code_byte(fn, 1) == 0x0F && code_byte(fn, 2) == 0x1E ? 4 : 0;
    return code_byte(fn, at) == 0xEB && code_byte(fn, at + 1) == (at ? 0xF8 : 0xFC);
#else
    uint32_t w = (uint32_t)code_byte(fn, 0) | (uint32_t)code_byte(fn, 1) << 8 | (uint32_t)code_byte(fn, 2) << 16 |
                 (uint32_t)code_byte(fn, 3) << 24;
    int at = w == 0xD503245Fu || w == 0xD503233Fu ? 4 : 0;
    return (code_byte(fn, at + 3) & 0xFC) == 0x14;   /* B imm26: top six bits 000101 */
#endif
}

static void wx_register(int i) {
    CHECK_RC(bpt_register_native(wx_addr[i], "wx", wx_names[i], 1, &wx_funcs[i]), 0);
    wx_check("after bpt_register_native");
}

static int wx_calls_ok(long x) {
    int i, ok = 1;
    for (i = 0; i < NWX; i++) {
        long (*volatile fp)(long) = wx_fns[i];
        ok &= fp(x) == x * (i + 2) + 1;
    }
    return ok;
}

static void write_xor_execute(void) {
    bpt_session s, s2;
    bpt_info info;
    maps_report base;
    char line[300], prev[300];
    unsigned char before[NWX][8], now[8];
    uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), pages[NWX];
    int i, j, npages = 0, baseline_rc;

    for (i = 0; i < NWX; i++) {
        uintptr_t p = (uintptr_t)wx_fns[i] & ~(ps - 1);
        wx_addr[i] = (void *)(uintptr_t)wx_fns[i];
        for (j = 0; j < npages && pages[j] != p; j++) {}
        if (j == npages) pages[npages++] = p;
    }
    for (i = 0; i < NWX; i++)
        for (j = 0; j < 8; j++) before[i][j] = code_byte(wx_addr[i], j);
    for (i = 0; i < NWX; i++) entry_as_registered(before[i]);   /* what every switch off must leave */
    printf("b. W^X: %d functions on %d pages\n", NWX, npages);
    CHECK(npages >= 2, "the functions share one page");
    baseline_rc = maps_scan(wx_addr, NWX, &base);
    CHECK(baseline_rc == 0, "/proc/self/maps is readable");
    CHECK(base.wx == 0, "a w+x mapping before bptrace did anything: %s", base.first_wx);
    CHECK(base.not_rx == 0, "a function page is not r-x before bptrace did anything: %s", base.first_not_rx);
    CHECK(wx_calls_ok(5), "results before registration");

    CHECK_RC(bpt_set_protocol_observer(wx_observer, NULL), 0);
    /* Registration with no pattern in force: only the padding is written,
       and on x86-64 gcc's entry NOP made one instruction. */
    for (i = 0; i < 6; i++) wx_register(i);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    /* Enabling. */
    CHECK_RC(bpt_trace_pattern(s, "wx:a*/_", BPT_COUNT, NULL), 6);
    wx_check("after enabling wx:a*");
    /* A pattern in force for functions not registered yet: registration installs them. */
    CHECK_RC(bpt_trace_pattern(s, "wx:b*/_", BPT_COUNT, NULL), 0);
    for (i = 6; i < NWX; i++) wx_register(i);
    for (i = 0; i < NWX; i++) CHECK(bp_installed(wx_addr[i]), "%s: the breakpoint is installed", wx_names[i]);
    CHECK(wx_calls_ok(7), "results with every breakpoint installed");
    for (i = 0; i < NWX; i++) {
        CHECK_RC(bpt_trace_info(s, wx_funcs[i], BPT_INFO_COUNT, &info), 0);
        CHECK(info.count == 1, "%s counted %llu", wx_names[i], (unsigned long long)info.count);
    }
    /* Disabling half, a second session on everything, destroying it with its breakpoints. */
    CHECK_RC(bpt_trace_pattern(s, "wx:a*/_", BPT_OFF, NULL), 6);
    CHECK_RC(bpt_session_create(NULL, &s2), 0);
    CHECK_RC(bpt_trace_pattern(s2, "wx:_/_", BPT_CALL | BPT_COUNT, NULL), NWX);
    CHECK(wx_calls_ok(9), "results with two sessions");
    CHECK_RC(bpt_session_destroy(s2), 0);
    wx_check("after destroying a session");
    CHECK_RC(bpt_session_destroy(s), 0);
    wx_check("after destroying the last session");
    CHECK_RC(bpt_set_protocol_observer(NULL, NULL), 0);
    CHECK(wx_calls_ok(11), "results after everything is off");
    for (i = 0; i < NWX; i++) {
        for (j = 0; j < 8; j++) now[j] = code_byte(wx_addr[i], j);
        CHECK(memcmp(now, before[i], 8) == 0, "%s: entry bytes are not the registered, untraced ones", wx_names[i]);
        CHECK_RC(bpt_unregister(wx_funcs[i]), 0);
    }
    printf("   %d maps checks (%d from the observer at steps 5, 9, 12): %d with a w+x mapping, %d with a "
           "function page not r-x, %d unreadable\n", wxr.checks, wxr.observer_checks, wxr.wx, wxr.not_rx,
           wxr.unreadable);
    CHECK(wxr.observer_checks >= 3 * 6, "the observer ran at steps 5, 9 and 12 (%d checks)", wxr.observer_checks);
    CHECK(wxr.wx == 0, "a mapping was writable and executable %s", wxr.first_wx);
    CHECK(wxr.not_rx == 0, "a traced function's page was not r-x %s", wxr.first_not_rx);
    CHECK(wxr.unreadable == 0, "/proc/self/maps unreadable");
    prev[0] = '\0';
    for (j = 0; j < npages; j++) {   /* the mappings holding the functions, each once */
        maps_line_of((void *)pages[j], line, sizeof line);
        if (strcmp(line, prev) != 0) printf("   %s\n", line);
        memcpy(prev, line, sizeof prev);
    }
}

/* ---- c. misuse ---- */

__attribute__((noinline)) long plain(long a) { return a * 2 + 1; }
BPT_TRACEABLE long traceable(long a) { return a * 3 + 1; }

/* The first PLT stub of the executable, from its section headers, or NULL. */
static int first_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    *(uintptr_t *)data = (uintptr_t)info->dlpi_addr;
    return 1;   /* the first is the executable */
}
static void *find_plt_stub(const char **section) {
    int fd = open("/proc/self/exe", O_RDONLY);
    struct stat st;
    unsigned char *img;
    void *stub = NULL;
    uintptr_t base = 0;
    *section = "";
    if (fd < 0) return NULL;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(Elf64_Ehdr) &&
        (img = (unsigned char *)mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) != MAP_FAILED) {
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
        size_t size = (size_t)st.st_size;
        if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
            eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) <= size && eh->e_shstrndx < eh->e_shnum) {
            const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
            const char *names = (const char *)img + sh[eh->e_shstrndx].sh_offset;
            int i, pass;
            dl_iterate_phdr(first_object, &base);
            /* .plt.sec holds the stubs the code calls (IBT); else .plt after its header entry. */
            for (pass = 0; pass < 2 && !stub; pass++)
                for (i = 0; i < eh->e_shnum; i++) {
                    const char *n = names + sh[i].sh_name;
                    size_t skip = pass == 0 ? 0 : (eh->e_machine == EM_AARCH64 ? 32 : 16);
                    if (strcmp(n, pass == 0 ? ".plt.sec" : ".plt") != 0 || sh[i].sh_size <= skip) continue;
                    stub = (void *)(base + sh[i].sh_addr + skip);
                    *section = pass == 0 ? ".plt.sec" : ".plt";
                    break;
                }
        }
        munmap(img, size);
    }
    close(fd);
    return stub;
}

static void misuse(void) {
    size_t (*volatile strlen_p)(const char *) = strlen;
    bpt_func *f = NULL, *f2 = NULL;
    char longname[200];
    const char *plt_section;
    void *plt;
    unsigned char before[8];
    int n0, i;

    printf("c. misuse\n");
    for (i = 0; i < 8; i++) before[i] = code_byte((void *)traceable, i);
    entry_as_registered(before);   /* registered once below, then unregistered */
    n0 = bpt_func_count();
    CHECK_RC(bpt_register_native(NULL, "m", "null", 0, &f), BPT_EINVAL);
    printf("   NULL fn: %s\n", bpt_last_error());
    CHECK_RC(bpt_register_native((void *)traceable, NULL, "n", 0, &f), BPT_EINVAL);
    CHECK_RC(bpt_register_native((void *)traceable, "m", NULL, 0, &f), BPT_EINVAL);
    CHECK_RC(bpt_register_native((void *)traceable, "m", "n", 0, NULL), BPT_EINVAL);
    CHECK_RC(bpt_register_native((void *)traceable, "m", "arity", 256, &f), BPT_EINVAL);
    printf("   arity 256: %s\n", bpt_last_error());
    CHECK_RC(bpt_register_native((void *)traceable, "m", "arity", -1, &f), BPT_EINVAL);
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    CHECK_RC(bpt_register_native((void *)traceable, "m", longname, 1, &f), BPT_ELIMIT);
    CHECK(bpt_func_count() == n0, "nothing registered by the invalid calls");

    CHECK_RC(bpt_register_native((void *)traceable, "m", "traceable", 1, &f), 0);
    CHECK_RC(bpt_register_native((void *)traceable, "m", "again", 1, &f2), BPT_EEXIST);
    printf("   twice: %s\n", bpt_last_error());
    CHECK(bpt_func_count() == n0 + 1, "one registration");

    CHECK_RC(bpt_register_native((void *)plain, "m", "plain", 1, &f2), BPT_ENOTPATCHABLE);
    printf("   plain function: %s\n", bpt_last_error());
#if defined(__x86_64__)
    CHECK_RC(bpt_register_native((unsigned char *)(uintptr_t)traceable + 1, "m", "mid_entry", 1, &f2), BPT_ENOTPATCHABLE);
#else
    CHECK_RC(bpt_register_native((unsigned char *)(uintptr_t)traceable + 2, "m", "mid_entry", 1, &f2), BPT_ENOTPATCHABLE);
#endif
    printf("   inside an entry: %s\n", bpt_last_error());
    CHECK_RC(bpt_register_native((void *)(uintptr_t)strlen_p, "libc", "strlen", 1, &f2), BPT_ENOTPATCHABLE);
    printf("   strlen: %s\n", bpt_last_error());
    plt = find_plt_stub(&plt_section);
    if (plt) {
        CHECK_RC(bpt_register_native(plt, "m", "plt_stub", 0, &f2), BPT_ENOTPATCHABLE);
        printf("   PLT stub (first of %s): %s\n", plt_section, bpt_last_error());
    } else {
        printf("   no PLT in this executable (-fno-plt or static): PLT stub case not run\n");
    }
    CHECK(bpt_func_count() == n0 + 1, "no refused function was registered: %d", bpt_func_count());
    CHECK(strlen_p("four") == 4 && plain(20) == 41, "refused functions still run");
    CHECK_RC(bpt_unregister(f), 0);
    CHECK_RC(bpt_unregister(f), BPT_ENOENT);
    for (i = 0; i < 8; i++) CHECK(code_byte((void *)traceable, i) == before[i], "entry byte %d is not the registered, untraced one", i);
    {
        long (*volatile tp)(long) = traceable;
        CHECK(tp(4) == 13, "traceable still runs");
    }
}

/* e. A thread that has a bptrace thread record and then blocks every
   signal (as a sigwait thread does) must not hold up a code write: without
   membarrier SYNC_CORE, bptrace serializes threads with a signal, and this
   one never takes it. Before the fix the write waited for it forever. */
BPT_TRACEABLE static long masked_target(long x) { return x * 7; }
static pthread_mutex_t masked_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t masked_cond = PTHREAD_COND_INITIALIZER;
static int masked_ready, masked_done;

static void *masked_thread(void *arg) {
    sigset_t all;
    (void)arg;
    bpt_thread_progress_pin();     /* now it has a record, so the fallback signals it */
    bpt_thread_progress_unpin();
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&masked_lock);
    masked_ready = 1;
    pthread_cond_broadcast(&masked_cond);
    while (!masked_done) pthread_cond_wait(&masked_cond, &masked_lock);   /* blocked, signals masked */
    pthread_mutex_unlock(&masked_lock);
    return NULL;
}

static void blocked_signal_thread(void) {
    pthread_t th;
    bpt_func *f;
    bpt_session s;
    long (*volatile fp)(long) = masked_target;
    uint64_t t0;
    pthread_create(&th, NULL, masked_thread, NULL);
    pthread_mutex_lock(&masked_lock);
    while (!masked_ready) pthread_cond_wait(&masked_cond, &masked_lock);
    pthread_mutex_unlock(&masked_lock);
    alarm(60);   /* a hang fails the test instead of the whole run */
    t0 = bpt__now_ns();
    CHECK_RC(bpt_register_native((void *)masked_target, "faults", "masked_target", 1, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "faults:masked_target/1", BPT_COUNT, NULL), 1);
    CHECK(fp(3) == 21, "traced result");
    CHECK_RC(bpt_trace_pattern(s, "faults:masked_target/1", BPT_OFF, NULL), 1);
    alarm(0);
    printf("e: code writes with a thread blocking every signal: %.1f ms\n", (double)(bpt__now_ns() - t0) / 1e6);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(f), 0);
    pthread_mutex_lock(&masked_lock);
    masked_done = 1;
    pthread_cond_broadcast(&masked_cond);
    pthread_mutex_unlock(&masked_lock);
    pthread_join(th, NULL);
}

int main(void) {
    bpt_progress_stats ps;
    CHECK_RC(bpt_thread_progress_stats(&ps), 0);
    printf("thread progress: membarrier %d, sync_core %d\n", ps.membarrier, ps.sync_core);
    refused_mprotect();
    write_xor_execute();
    misuse();
    blocked_signal_thread();
    return CHECK_DONE();
}
#else
NATIVE_UNSUPPORTED_MAIN("no native registration to refuse")
#endif
