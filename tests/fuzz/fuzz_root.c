/* fuzz_root: the outside reader (examples/bpt/reader.h) on a target whose
   root record and data are arbitrary. bpt reads another process's memory,
   which may be corrupt, of another version, or changing: the reader must
   never crash, read outside what it was given, leak, or loop without end.

   Input: a memory image, segments of  u64 address, u32 length, bytes ; the
   first segment starts with the root record. A read that is not inside one
   segment fails as process_vm_readv fails on an unmapped address.

   Checks: rd_open returns 0 or an error (bpt_root_check's, or a failed
   read); after a 0, the snapshot (threads, functions, breakpoints, counts),
   every thread's two shadow stacks and the sessions read to the end or stop
   with an error; every string they return is NUL-terminated.

   The seed (corpus/root/live) is this program's own memory as the reader
   saw it: BPT_FUZZ_ROOT_SEED=FILE fuzz-root writes it (VM functions counted
   and traced with return trace by two sessions, one call still running on
   the VM shadow stack, patterns switched on and off). */
#define _GNU_SOURCE   /* process_vm_readv */
#define BPTRACE_IMPLEMENTATION
#include "../../bptrace.h"
#include "fuzz_common.h"
#include "../../examples/bpt/reader.h"
#include <sys/uio.h>
#include <unistd.h>

typedef struct seg { uint64_t addr; uint32_t len; const uint8_t *bytes; } seg;
typedef struct image { seg segs[512]; int n; } image;

static int image_read(rd_target *t, uint64_t addr, void *buf, size_t n) {
    const image *im = (const image *)t->user;
    int i;
    for (i = 0; i < im->n; i++) {
        const seg *s = &im->segs[i];
        if (addr >= s->addr && addr - s->addr <= s->len && n <= s->len - (addr - s->addr)) {
            memcpy(buf, s->bytes + (addr - s->addr), n);
            return RD_OK;
        }
    }
    return RD_EFAULT;
}

static void walk(rd_target *t) {
    rd_snapshot s;
    rd_session *ss;
    uint32_t i, j, n, nss;
    uint64_t frames[64];
    int moved, torn, w;
    memset(&s, 0, sizeof s);
    (void)rd_snapshot_take(t, &s, 2);
    for (i = 0; i < s.nfuncs; i++) {
        FUZZ_CHECK(memchr(s.funcs[i].module, 0, sizeof s.funcs[i].module) && memchr(s.funcs[i].name, 0, sizeof s.funcs[i].name),
                   "function %u's names are not terminated", i);
        FUZZ_CHECK(memchr(s.funcs[i].sessions, 0, sizeof s.funcs[i].sessions) != NULL, "session names not terminated");
    }
    for (i = 0; i < s.nthreads && i < 16; i++)   /* each stack is a walk of its own budget */
        for (w = 0; w < 2; w++) {
            if (rd_stack(t, &s.threads[i], w, frames, &n, 64, &moved) == 0) FUZZ_CHECK(n <= 64, "%u frames", n);
            for (j = 0; j < n; j++) (void)rd_func_at(&s, frames[j]);
        }
    rd_snapshot_free(&s);
    if (rd_sessions(t, &ss, &nss, &torn, 2) == 0) {
        for (i = 0; i < nss; i++) {
            FUZZ_CHECK(memchr(ss[i].name, 0, sizeof ss[i].name) != NULL, "session name not terminated");
            for (j = 0; j < ss[i].npatterns; j++)
                FUZZ_CHECK(memchr(ss[i].patterns[j].module, 0, 128) && memchr(ss[i].patterns[j].function, 0, 128),
                           "pattern not terminated");
        }
        rd_sessions_free(ss, nss);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static image im;
    rd_target t;
    char why[256];
    size_t p = 0;
    im.n = 0;
    while (im.n < 512 && size - p >= 12) {
        seg *s = &im.segs[im.n++];
        memcpy(&s->addr, data + p, 8);
        memcpy(&s->len, data + p + 8, 4);
        p += 12;
        if (s->len > size - p) s->len = (uint32_t)(size - p);
        s->bytes = data + p;
        p += s->len;
    }
    if (!im.n) return 0;
    memset(&t, 0, sizeof t);
    t.read = image_read;
    t.user = &im;
    t.reads_max = 1u << 14;
    t.bytes_max = 16u << 20;
    t.mem_max = 16u << 20;
    if (rd_open(&t, im.segs[0].addr, why, sizeof why) == 0) walk(&t);
    else FUZZ_CHECK(memchr(why, 0, sizeof why) != NULL, "reason not terminated");
    return 0;
}

/* ---- The seed: this process's memory as the reader reads it ---- */

static image seed;
static uint8_t seed_bytes[1 << 22];
static size_t seed_used;

static int live_read(rd_target *t, uint64_t addr, void *buf, size_t n) {
    struct iovec local = { buf, n }, remote = { (void *)(uintptr_t)addr, n };
    int i;
    (void)t;
    /* Our own memory, read as bpt reads a target's: a string's 64-byte run
       may pass the end of its allocation (mapped, but not ours to memcpy). */
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)n) return RD_EFAULT;
    for (i = 0; i < seed.n; i++)
        if (seed.segs[i].addr == addr && seed.segs[i].len >= n) return RD_OK;
    if (seed.n < 512 && seed_used + n <= sizeof seed_bytes) {
        memcpy(seed_bytes + seed_used, buf, n);
        seed.segs[seed.n].addr = addr;
        seed.segs[seed.n].len = (uint32_t)n;
        seed.segs[seed.n].bytes = seed_bytes + seed_used;
        seed.n++;
        seed_used += n;
    }
    return RD_OK;
}

static void make_seed(const char *path) {
    static bpt_vm_word code[3] = { 1, 2, 3 };
    bpt_func *f[3];
    bpt_session a, b;
    bpt_session_desc d;
    bpt_vm_token tok;
    rd_target t;
    char why[256];
    FILE *out;
    int i;
    FUZZ_CHECK(bpt_register_vm(&code[0], 9, "m", "f", 1, NULL, &f[0]) == 0, "register");
    FUZZ_CHECK(bpt_register_vm(&code[1], 9, "m", "g", 2, NULL, &f[1]) == 0, "register");
    FUZZ_CHECK(bpt_register_vm(&code[2], 9, "n", "h", 0, NULL, &f[2]) == 0, "register");
    memset(&d, 0, sizeof d);
    d.name = "counts";
    FUZZ_CHECK(bpt_session_create(&d, &a) == 0, "session");
    d.name = "calls";
    FUZZ_CHECK(bpt_session_create(&d, &b) == 0, "session");
    FUZZ_CHECK(bpt_trace_pattern(a, "m:*/_", BPT_COUNT, NULL) == 2, "pattern");
    FUZZ_CHECK(bpt_trace_pattern(b, "*:*/_", BPT_CALL | BPT_RETURN, NULL) == 3, "pattern");
    FUZZ_CHECK(bpt_trace_pattern(b, "n:h/0", BPT_CALL | BPT_OFF, NULL) == 1, "pattern");
    for (i = 0; i < 5; i++) (void)bpt_vm_breakpoint(f[1], NULL, &tok), bpt_vm_return(tok, 0);
    (void)bpt_vm_breakpoint(f[0], NULL, &tok);   /* still running: a VM frame */
    memset(&t, 0, sizeof t);
    t.read = live_read;
    FUZZ_CHECK(rd_open(&t, (uint64_t)(uintptr_t)&bpt_root, why, sizeof why) == 0, "own root: %s", why);
    walk(&t);
    /* The image alone, read back as the fuzzer reads inputs, says what was done. */
    {
        rd_target r;
        rd_snapshot sn;
        rd_session *ss;
        uint32_t nss, n, k, me = 0;
        uint64_t frames[4];
        int moved, torn;
        memset(&r, 0, sizeof r);
        memset(&sn, 0, sizeof sn);
        r.read = image_read;
        r.user = &seed;
        FUZZ_CHECK(rd_open(&r, seed.segs[0].addr, why, sizeof why) == 0, "seed root: %s", why);
        FUZZ_CHECK(rd_snapshot_take(&r, &sn, 1) == 0 && !sn.torn, "seed snapshot: %s", r.what);
        FUZZ_CHECK(sn.nfuncs == 3 && !strcmp(sn.funcs[1].name, "g") && sn.funcs[1].counted && sn.funcs[1].count == 5,
                   "seed: m:g/2 counted 5 times (%u functions)", sn.nfuncs);
        FUZZ_CHECK(!strcmp(sn.funcs[1].sessions, "counts,calls") || !strcmp(sn.funcs[1].sessions, "calls,counts"),
                   "seed: m:g/2 in both sessions: %s", sn.funcs[1].sessions);
        for (k = 0; k < sn.nthreads; k++)
            if (sn.threads[k].in_use) me = k;
        FUZZ_CHECK(rd_stack(&r, &sn.threads[me], 1, frames, &n, 4, &moved) == 0 && n == 1 &&
                   frames[0] == (uint64_t)(uintptr_t)f[0], "seed: m:f/1 running on the VM stack (%u frames)", n);
        rd_snapshot_free(&sn);
        FUZZ_CHECK(rd_sessions(&r, &ss, &nss, &torn, 1) == 0 && nss == 2 && ss[1].npatterns == 2 &&
                   !strcmp(ss[1].patterns[1].function, "h") && (ss[1].patterns[1].flags & BPT_OFF),
                   "seed: two sessions, the second with its two patterns");
        rd_sessions_free(ss, nss);
    }
    FUZZ_CHECK((out = fopen(path, "wb")) != NULL, "open %s", path);
    for (i = 0; i < seed.n; i++) {
        fwrite(&seed.segs[i].addr, 8, 1, out);
        fwrite(&seed.segs[i].len, 4, 1, out);
        fwrite(seed.segs[i].bytes, 1, seed.segs[i].len, out);
    }
    fclose(out);
    fprintf(stderr, "fuzz-root: wrote %d segments, %zu bytes, to %s\n", seed.n, seed_used, path);
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    if (getenv("BPT_FUZZ_ROOT_SEED")) make_seed(getenv("BPT_FUZZ_ROOT_SEED"));
    return 0;
}
