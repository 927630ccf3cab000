/* t_probes: the USDT probes from inside the program (tests/probes/run
   attaches readelf, gdb and bpftrace from outside).
   - The program's own .note.stapsdt (read from /proc/self/exe) holds every
     bptrace probe, and the test's own BPT_PROBE, each with its semaphore in
     .probes and one register per argument.
   - A probe's arguments are evaluated only while its semaphore is raised:
     the test raises it itself, as a tool would.
   - A USDT session keeps no buffer: its events count as delivered, nothing
     is drained; with the call probe's semaphore raised its site runs (the
     NOP, with nothing attached) and the program goes on.
   - The probes' function address follows a name registered again elsewhere.
   - Misuse: usdt with a callback tracer (BPT_EINVAL); bpt_session_wait on a
     USDT session (BPT_EINVAL).
   - bptrace:session__destroy fires for a destroy that commits, not for
     one refused (no memory): the probe's NOP is made a trap, and a
     destroy is refused at each allocation in turn until it goes through
     (found by review: it fired before the protocol ran, so a refused
     destroy was announced).
   - Where probes are compiled out (tcc): a USDT session is BPT_ENOTSUP, and
     BPT_PROBE evaluates nothing. */
static void *t_malloc(unsigned long n);
#define BPT_MALLOC(n) t_malloc((unsigned long)(n))   /* refuses one allocation on demand */
#define BPT_FREE(p) free(p)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>

static int evaluated;
static long side_effect(long v) { evaluated++; return v; }

static int fail_in = -1;   /* >= 0: the allocation after that many more is refused */
static void *t_malloc(unsigned long n) {
    if (fail_in >= 0 && fail_in-- == 0) return NULL;
    return malloc(n);
}

#if BPT_PROBES
#include <elf.h>
#include <link.h>

/* One probe of the program's notes. */
typedef struct note_probe {
    char provider[32], name[32], args[160];
    uint64_t pc, sem;
} note_probe;

static note_probe probes[64];
static int nprobes;
static uint64_t probes_lo, probes_hi;   /* the .probes section's link-time addresses */

/* Read /proc/self/exe's .note.stapsdt and .probes: the SDT v3 notes. */
static int read_notes(void) {
    FILE *fp = fopen("/proc/self/exe", "rb");
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    char *names = NULL, *data = NULL;
    int i, ok = 0;
    if (!fp) return 0;
    if (fread(&eh, sizeof eh, 1, fp) != 1 || memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_shentsize != sizeof *sh)
        goto out;
    sh = (Elf64_Shdr *)calloc(eh.e_shnum, sizeof *sh);
    if (!sh || fseek(fp, (long)eh.e_shoff, SEEK_SET) || fread(sh, sizeof *sh, eh.e_shnum, fp) != eh.e_shnum) goto out;
    names = (char *)malloc(sh[eh.e_shstrndx].sh_size);
    if (!names || fseek(fp, (long)sh[eh.e_shstrndx].sh_offset, SEEK_SET) ||
        fread(names, 1, sh[eh.e_shstrndx].sh_size, fp) != sh[eh.e_shstrndx].sh_size)
        goto out;
    for (i = 0; i < eh.e_shnum; i++) {
        const char *nm = names + sh[i].sh_name;
        if (!strcmp(nm, ".probes")) {
            probes_lo = sh[i].sh_addr;
            probes_hi = sh[i].sh_addr + sh[i].sh_size;
        }
        if (!strcmp(nm, ".note.stapsdt")) {
            size_t at = 0;
            free(data);
            if (!(data = (char *)malloc(sh[i].sh_size)) || fseek(fp, (long)sh[i].sh_offset, SEEK_SET) ||
                fread(data, 1, sh[i].sh_size, fp) != sh[i].sh_size)
                goto out;
            while (at + 12 <= sh[i].sh_size && nprobes < 64) {   /* namesz, descsz, type; "stapsdt"; desc */
                uint32_t namesz, descsz, type;
                const char *desc, *p;
                note_probe *np = &probes[nprobes];
                memcpy(&namesz, data + at, 4);
                memcpy(&descsz, data + at + 4, 4);
                memcpy(&type, data + at + 8, 4);
                desc = data + at + 12 + ((namesz + 3) & ~3u);
                if (type == 3 && namesz == 8 && !memcmp(data + at + 12, "stapsdt", 8)) {
                    memcpy(&np->pc, desc, 8);
                    memcpy(&np->sem, desc + 16, 8);
                    p = desc + 24;
                    snprintf(np->provider, sizeof np->provider, "%s", p);
                    p += strlen(p) + 1;
                    snprintf(np->name, sizeof np->name, "%s", p);
                    p += strlen(p) + 1;
                    snprintf(np->args, sizeof np->args, "%s", p);
                    nprobes++;
                }
                at += 12 + ((namesz + 3) & ~3u) + ((descsz + 3) & ~3u);
            }
        }
    }
    ok = 1;
out:
    free(sh);
    free(names);
    free(data);
    fclose(fp);
    return ok;
}

static const note_probe *find_probe(const char *provider, const char *name) {
    int i;
    for (i = 0; i < nprobes; i++)
        if (!strcmp(probes[i].provider, provider) && !strcmp(probes[i].name, name)) return &probes[i];
    return NULL;
}

/* Whether args is n arguments, each "8@" and one register of this architecture. */
static int args_are_registers(const char *args, int n) {
    int k = 0;
    while (*args) {
        const char *end = strchr(args, ' ');
        size_t len = end ? (size_t)(end - args) : strlen(args);
        char one[32];
        snprintf(one, sizeof one, "%.*s", (int)len, args);
#if defined(__x86_64__)
        if (strncmp(one, "8@%r", 4) && strncmp(one, "8@%e", 4)) return 0;
#else
        if (strncmp(one, "8@x", 3) || one[3] < '0' || one[3] > '9') return 0;
#endif
        k++;
        args += len + (end ? 1 : 0);
    }
    return k == n;
}

/* The load bias of the main program: a link-time address plus it is where
   the address is now (what a tool adds to a note's semaphore). */
static int bias_cb(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    *(uintptr_t *)data = info->dlpi_addr;
    return 1;   /* the first object is the main program */
}
static volatile unsigned short *semaphore(const note_probe *p) {
    uintptr_t bias = 0;
    dl_iterate_phdr(bias_cb, &bias);
    return (volatile unsigned short *)(bias + (uintptr_t)p->sem);
}

/* Every probe of provider bptrace, with its argument count (examples/bptrace.d). */
static const struct { const char *name; int nargs; } bptrace_probes[] = {
    { "call", 6 }, { "return", 6 }, { "exception", 6 }, { "return_to", 6 },
    { "step", 5 }, { "pattern__start", 3 }, { "pattern__done", 5 },
    { "session__create", 3 }, { "session__destroy", 2 },
    { "progress__wait__start", 3 }, { "progress__wait__done", 4 },
    { "drop", 3 }, { "user_trace", 8 },
};

static void check_notes(void) {
    size_t i;
    const note_probe *p;
    CHECK(read_notes(), "read the notes of /proc/self/exe");
    printf("%d probe notes; .probes at %#llx..%#llx\n", nprobes, (unsigned long long)probes_lo,
           (unsigned long long)probes_hi);
    for (i = 0; i < sizeof bptrace_probes / sizeof bptrace_probes[0]; i++) {
        p = find_probe("bptrace", bptrace_probes[i].name);
        CHECK(p != NULL, "no note for bptrace:%s", bptrace_probes[i].name);
        if (!p) continue;
        printf("  bptrace:%-22s %s\n", p->name, p->args);
        CHECK(args_are_registers(p->args, bptrace_probes[i].nargs), "bptrace:%s has arguments '%s', not %d registers",
              p->name, p->args, bptrace_probes[i].nargs);
        CHECK(p->sem >= probes_lo && p->sem + 2 <= probes_hi, "bptrace:%s's semaphore %#llx is not in .probes",
              p->name, (unsigned long long)p->sem);
        CHECK(p->pc != 0, "bptrace:%s has no address", p->name);
    }
    p = find_probe("t_probes", "gated");
    CHECK(p && args_are_registers(p->args, 2), "the test's own probe t_probes:gated, 2 registers: %s",
          p ? p->args : "(missing)");
}

/* BPT_PROBE evaluates its arguments only while its semaphore is up. */
static void gated(long v) { BPT_PROBE(t_probes, gated, side_effect(v), v + 1); }

/* bptrace:session__destroy, seen in process: its NOP becomes a trap
   (int3; brk on aarch64, stepped over by the handler), with the semaphore
   up so that the site runs, as a tool's uprobe would see it. */
#include <sys/mman.h>
#include <signal.h>
#include <ucontext.h>
static volatile int destroy_traps;
static void on_trap(int sig, siginfo_t *si, void *ctx) {
    (void)sig;
    (void)si;
#  if defined(__aarch64__)
    ((ucontext_t *)ctx)->uc_mcontext.pc += 4;   /* past the brk, which stands for the NOP */
#  else
    (void)ctx;   /* int3 stands for the one-byte NOP: the thread resumes after it */
#  endif
    destroy_traps++;
}
static int patch_site(unsigned char *at, const void *insn, size_t n) {
    uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), page = (uintptr_t)at & ~(ps - 1);
    size_t len = (size_t)((uintptr_t)at + n - page);
    if (mprotect((void *)page, len, PROT_READ | PROT_WRITE | PROT_EXEC)) return 0;
    memcpy(at, insn, n);
    __builtin___clear_cache((char *)at, (char *)at + n);
    return mprotect((void *)page, len, PROT_READ | PROT_EXEC) == 0;
}
static uint64_t d_arg(const void *frame, int i) { (void)frame; (void)i; return 0; }
static const bpt_vm_ops d_ops = { d_arg, NULL, NULL };
static bpt_vm_word d_word = 0x100;
static void check_destroy_announced(void) {
    const note_probe *p = find_probe("bptrace", "session__destroy");
    uintptr_t bias = 0;
    struct sigaction sa, old;
    unsigned char *site, saved[4];
#  if defined(__aarch64__)
    static const uint32_t trap = 0xd4200000u;   /* brk #0 */
    size_t n = 4;
#  else
    static const unsigned char trap = 0xcc;     /* int3 */
    size_t n = 1;
#  endif
    bpt_session s;
    bpt_func *f;
    int k, rc, refused = 0;
    if (!p) return;
    dl_iterate_phdr(bias_cb, &bias);
    site = (unsigned char *)(bias + (uintptr_t)p->pc);
    memcpy(saved, site, n);
    CHECK_RC(bpt_register_vm(&d_word, 0xBEEF, "t_probes", "doomed", 0, &d_ops, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "t_probes:doomed/0", BPT_CALL | BPT_COUNT, NULL), 1);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTRAP, &sa, &old);
    if (!patch_site(site, &trap, n)) {
        CHECK(0, "the probe's site could not be made a trap: %s", strerror(errno));
        return;
    }
    *semaphore(p) = 1;
    for (k = 0;; k++) {   /* refuse the destroy's first allocation, then its second, ... */
        int before = destroy_traps;
        fail_in = k;
        rc = bpt_session_destroy(s);
        fail_in = -1;
        if (rc != BPT_ENOMEM) break;
        refused++;
        CHECK(destroy_traps == before, "a destroy refused at its allocation %d fired bptrace:session__destroy", k);
    }
    *semaphore(p) = 0;
    patch_site(site, saved, n);
    sigaction(SIGTRAP, &old, NULL);
    printf("session__destroy: %d destroys refused, then one went through (%d): the probe fired %d time(s)\n",
           refused, rc, destroy_traps);
    CHECK(rc == 0 && destroy_traps == 1, "the destroy that went through: rc %d, the probe fired %d times", rc,
          destroy_traps);
    CHECK(refused > 1, "destroys refused inside the protocol, not only before it: %d", refused);
    CHECK_RC(bpt_unregister(f), 0);
}

static void check_gating(void) {
    const note_probe *p = find_probe("t_probes", "gated");
    volatile unsigned short *sem;
    int i;
    evaluated = 0;
    for (i = 0; i < 1000; i++) gated(i);
    CHECK(evaluated == 0, "arguments evaluated %d times with nothing attached", evaluated);
    if (!p) return;
    sem = semaphore(p);
    CHECK(*sem == 0, "the semaphore is %u before anyone raised it", (unsigned)*sem);
    *sem = 1;   /* as a tool does when it attaches */
    for (i = 0; i < 1000; i++) gated(i);
    *sem = 0;
    CHECK(evaluated == 1000, "arguments evaluated %d times of 1000 while attached", evaluated);
}
#endif

#if defined(BPT_NATIVE) && BPT_PROBES
BPT_TRACEABLE __attribute__((noinline)) long usdt_target(long a) {
    __asm__ __volatile__("");
    return a + 1;
}

BPT_TRACEABLE __attribute__((noinline)) long reused_a(long a) { return a + 2; }
BPT_TRACEABLE __attribute__((noinline)) long reused_b(long a) { return a + 3; }

/* The probes' function address (arg1) follows a name registered again at
   another address (a library loaded anew): it was the first one's. */
static void check_reregistered_addr(void) {
    bpt_func *fa = native_reg((void *)reused_a, "t_probes", "reused", 1), *fb;
    uint32_t fid;
    if (!fa) return;
    fid = fa->fid;
    CHECK(bpt__names_addr(fid) == (uint64_t)(uintptr_t)reused_a, "the address of reused_a");
    CHECK_RC(bpt_unregister(fa), 0);
    if (!(fb = native_reg((void *)reused_b, "t_probes", "reused", 1))) return;
    CHECK(fb->fid == fid, "one name, one id: %u and %u", fid, fb->fid);
    CHECK(bpt__names_addr(fid) == (uint64_t)(uintptr_t)reused_b, "the name's address is now reused_b's");
    CHECK_RC(bpt_unregister(fb), 0);
}

/* A USDT session: no buffer; events counted as delivered, with the call
   probe's site run while its semaphore is up. */
static void check_usdt_session(void) {
    bpt_session_desc d;
    bpt_session_counts c;
    bpt_session s;
    bpt_msg m[4];
    bpt_func *f = native_reg((void *)usdt_target, "t_probes", "usdt_target", 1);
    const note_probe *call = find_probe("bptrace", "call"), *ret = find_probe("bptrace", "return");
    long i, sum = 0;
    memset(&d, 0, sizeof d);
    d.usdt = 1;
    if (!f) return;
    CHECK_RC(bpt_session_create(&d, &s), 0);
    CHECK_RC(bpt_trace_pattern(s, "t_probes:usdt_target/1", BPT_CALL | BPT_RETURN, NULL), 1);
    for (i = 0; i < 100; i++) sum += usdt_target(i);
    if (call && ret) {   /* the sites run, as with a tool attached (here the NOP does nothing) */
        *semaphore(call) = 1;
        *semaphore(ret) = 1;
        for (i = 0; i < 100; i++) sum += usdt_target(i);
        *semaphore(call) = 0;
        *semaphore(ret) = 0;
    } else {
        for (i = 0; i < 100; i++) sum += usdt_target(i);
    }
    CHECK(sum == 2 * 5050, "the traced function's results: %ld", sum);
    CHECK_RC(bpt_session_stats(s, &c), 0);
    printf("usdt session: produced %llu, delivered %llu, dropped %llu\n", (unsigned long long)c.produced,
           (unsigned long long)c.delivered, (unsigned long long)c.dropped);
    CHECK(c.produced == 400 && c.delivered == 400 && c.dropped == 0, "200 calls and 200 returns, all delivered");
    CHECK_RC(bpt_session_drain(s, m, 4), 0);
    CHECK_RC(bpt_session_wait(s, 1000), BPT_EINVAL);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK(usdt_target(1) == 2, "the function runs after the session is gone");
}
#endif

static void tracer(const bpt_msg *m, void *user) { (void)m; (void)user; }

int main(void) {
    bpt_session_desc d;
    bpt_session s;
    memset(&d, 0, sizeof d);
    d.usdt = 1;
    d.tracer = tracer;
    CHECK_RC(bpt_session_create(&d, &s), BPT_EINVAL);
    printf("usdt with a tracer: %s\n", bpt_last_error());
    d.tracer = NULL;
    bpt_user_trace(1, 2, 3, 4, "s1", NULL, NULL, NULL);   /* nothing attached: returns at once */
#if BPT_PROBES
    check_notes();
    check_gating();
    check_destroy_announced();
#  if defined(BPT_NATIVE)
    check_usdt_session();
    check_reregistered_addr();
#  else
    printf("no native sites here: the USDT session's events are not checked\n");
#  endif
#else
    /* Compiled out: nothing is evaluated, and a USDT session is refused. */
    evaluated = 0;
    BPT_PROBE(t_probes, gated, side_effect(1), 2);
    CHECK(evaluated == 0, "a compiled-out probe evaluated its arguments");
    CHECK_RC(bpt_session_create(&d, &s), BPT_ENOTSUP);
    printf("probes compiled out: %s\n", bpt_last_error());
#endif
    return CHECK_DONE();
}
