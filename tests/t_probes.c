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
   - Where probes are compiled out (tcc): a USDT session is BPT_ENOTSUP, and
     BPT_PROBE evaluates nothing. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"
#include <string.h>

static int evaluated;
static long side_effect(long v) { evaluated++; return v; }

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
