/* t_tracefile_hostile: trace files when a write fails partway, and files
   made to hurt the reader (review fixes).
     1. a write cut short in a file (RLIMIT_FSIZE: in the header, in a
        names block, in a records block) is taken back: the file ends at
        its last whole block and w->bytes is its size; once there is room
        a retry writes every record once, and the file reads back every
        call and return exactly once;
     2. a write cut short in a pipe (non-blocking, full) cannot be taken
        back: every later write returns BPT_EIO at once and writes nothing;
        the reader reads the whole blocks before the torn one, w->records
        messages, and ends cleanly;
     3. hostile files: 80,000 empty names blocks, 100,000 lanes, one names
        entry of id 4,194,303 in 168 bytes: each is read (or refused with
        BPT_EFORMAT) with allocations in proportion to its size, counted
        by BPT_MALLOC (the quadratic reader grew an array by one item a
        block: gigabytes in all; here a budget refuses what is past it, so
        that reader fails at once), and a reader over 100,000 lanes looks
        at a few slots of its lane table a block (the reader's probe count;
        a lookup linear in the lanes looked at 5,000,000,000 in all: 6 s
        for 20,000 lanes here, quadratic; counted, not timed);
     4. BPT_ENOMEM while reading loses nothing: with the k-th allocation
        refused, for every k, reading on after the error gives every
        message of the file;
     5. a directory: BPT_ENOENT, as the doc says;
     6. a corrupt record after sound ones in its block: a read with room
        for them all returns their messages, and the next read
        BPT_EFORMAT, as a read of one message at a time does (the read
        returned BPT_EFORMAT and threw away the messages it had decoded). */
#include <stddef.h>
static void *t_malloc(size_t n);
static void t_free(void *p);
#define BPT_MALLOC(n) t_malloc(n)
#define BPT_FREE(p) t_free(p)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* The allocator: counts while `counting`; refuses the fail_at-th counted
   allocation, and any past `budget` bytes in all (0: none). */
static int counting;
static unsigned long n_allocs, fail_at;
static unsigned long long alloc_bytes, budget;
static void *t_malloc(size_t n) {
    if (counting) {
        n_allocs++;
        alloc_bytes += n;
        if (n_allocs == fail_at || (budget && alloc_bytes > budget)) return NULL;
    }
    return malloc(n);
}
static void t_free(void *p) { free(p); }

static void count_start(unsigned long long bytes_budget, unsigned long refuse) {
    n_allocs = 0;
    alloc_bytes = 0;
    budget = bytes_budget;
    fail_at = refuse;
    counting = 1;
}
static void count_stop(void) { counting = 0; }

#define BP ((bpt_vm_word)0xB0B0)
static bpt_vm_word code[2];
static bpt_func *fn[2];
static uint64_t arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static const bpt_vm_ops ops = { arg, NULL, NULL };

/* A VM call of site s with a as both arguments, returning 2a. */
static void vm_call(int s, uint64_t a) {
    uint64_t frame[2] = { a, a };
    bpt_vm_token t = 0;
    bpt_vm_word w = BPT_VM_FETCH(&code[s]);
    if (w == BP) w = bpt_vm_breakpoint(fn[s], frame, &t);
    CHECK(w == (bpt_vm_word)(0x100 + s), "site %d executed %#lx", s, (unsigned long)w);
    if (t) bpt_vm_return(t, a * 2);
}

static bpt_session new_session(void) {
    bpt_session s;
    bpt_session_desc d;
    bpt_match mt;
    memset(&d, 0, sizeof d);
    memset(&mt, 0, sizeof mt);
    d.name = "hostile";
    CHECK_RC(bpt_session_create(&d, &s), 0);
    mt.actions = BPT_RETURN;
    CHECK_RC(bpt_trace_pattern(s, "tf:*/2", BPT_CALL, &mt), 2);
    return s;
}

static long long file_size(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? (long long)st.st_size : -1;
}

static char tmpdir[256];
static void temp_path(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", tmpdir, name); }

/* Read a whole file: the calls' first arguments counted in seen[] (calls
   of arguments below nseen), returns checked against them. Returns the
   messages, or the first error; *msgs: messages before it. */
static int read_calls(bpt_trace_file *f, int *seen, int nseen, int *returns, long *msgs) {
    bpt_msg m[37];
    int k, i;
    *msgs = 0;
    while ((k = bpt_trace_file_read(f, m, 37)) > 0) {
        for (i = 0; i < k; i++) {
            if (m[i].type == BPT_MSG_CALL && m[i].nargs == 2 && m[i].args[0] < (uint64_t)nseen) seen[m[i].args[0]]++;
            if (m[i].type == BPT_MSG_RETURN_FROM) (*returns)++;
        }
        *msgs += k;
    }
    return k;
}

/* 1. A write cut short in a file, at three places, then a retry. */
static void partial_file(void) {
    enum { N = 400 };
    static const rlim_t limits[3] = { 100, 170, 700 };   /* in the header, the names block, the records */
    static const long long ends[3] = { 0, 144, 200 };    /* the file and w.bytes after each */
    char path[300];
    bpt_session s = new_session();
    bpt_file_writer w;
    bpt_trace_file *f;
    struct rlimit old, rl;
    int seen[N], returns = 0, i, rc;
    long msgs;
    temp_path(path, sizeof path, "partial.bpt");
    memset(&w, 0, sizeof w);
    w.fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    CHECK(w.fd >= 0, "open %s", path);
    for (i = 0; i < N / 2; i++) vm_call(i & 1, (uint64_t)i);
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    for (i = 0; i < 3; i++) {
        rl = old;
        rl.rlim_cur = limits[i];   /* the disk is full past here */
        CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0, "setrlimit %d", (int)limits[i]);
        rc = bpt_session_write(s, &w);
        CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0, "setrlimit back");
        CHECK_RC(rc, BPT_EIO);
        CHECK(strstr(bpt_last_error(), "call again") != NULL, "the error says to retry: %s", bpt_last_error());
        printf("write cut at %d bytes: %d; w.bytes %llu, the file %lld bytes\n", (int)limits[i], rc,
               (unsigned long long)w.bytes, file_size(w.fd));
        CHECK(w.bytes == (uint64_t)ends[i] && file_size(w.fd) == ends[i],
              "w.bytes %llu, file %lld, expected both %lld", (unsigned long long)w.bytes, file_size(w.fd), ends[i]);
        CHECK(w.records == 0, "w.records %llu", (unsigned long long)w.records);
    }
    rc = bpt_session_write(s, &w);
    CHECK(rc == N / 2 * 2, "the retry wrote %d records, expected %d (%s)", rc, N / 2 * 2, bpt_last_error());
    for (i = N / 2; i < N; i++) vm_call(i & 1, (uint64_t)i);
    CHECK_RC(bpt_session_write(s, &w), N / 2 * 2);
    printf("after the retry and a second write: w.bytes %llu, w.records %llu, the file %lld bytes\n",
           (unsigned long long)w.bytes, (unsigned long long)w.records, file_size(w.fd));
    CHECK(w.bytes == (uint64_t)file_size(w.fd), "w.bytes %llu, the file %lld", (unsigned long long)w.bytes,
          file_size(w.fd));
    CHECK(w.records == 2 * N, "w.records %llu", (unsigned long long)w.records);
    close(w.fd);
    CHECK_RC(bpt_session_destroy(s), 0);

    memset(seen, 0, sizeof seen);
    CHECK_RC(bpt_trace_file_open(path, &f), 0);
    rc = read_calls(f, seen, N, &returns, &msgs);
    bpt_trace_file_close(f);
    printf("read back: %ld messages, %d returns (last read %d)\n", msgs, returns, rc);
    CHECK_RC(rc, 0);
    CHECK(msgs == 2 * N && returns == N, "%ld messages, %d returns; expected %d and %d", msgs, returns, 2 * N, N);
    for (rc = 0, i = 0; i < N; i++) rc += seen[i] != 1;
    CHECK(rc == 0, "%d calls not read exactly once (call 0: %d times)", rc, seen[0]);
}

/* 2. A write cut short in a pipe: the writer is broken. */
static void partial_pipe(void) {
    enum { N = 4000 };   /* some 240 KB: past a pipe's 64 KiB, the last block that fits cut short */
    bpt_session s = new_session();
    bpt_file_writer w;
    bpt_trace_file *f;
    int p[2], i, rc, queued = -1, after = -1, seen[1], returns = 0;
    long msgs;
    uint64_t bytes;
    CHECK(pipe(p) == 0, "pipe");
    CHECK(fcntl(p[1], F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK");
    memset(&w, 0, sizeof w);
    w.fd = p[1];
    for (i = 0; i < N; i++) vm_call(i & 1, (uint64_t)i);
    rc = bpt_session_write(s, &w);
    printf("a write to a full pipe: %d (%s); w.bytes %llu, w.records %llu\n", rc, bpt_last_error(),
           (unsigned long long)w.bytes, (unsigned long long)w.records);
    CHECK_RC(rc, BPT_EIO);
    CHECK(strstr(bpt_last_error(), "writes no more") != NULL, "the error says the writer is done: %s",
          bpt_last_error());
    CHECK(ioctl(p[0], FIONREAD, &queued) == 0 && queued > 0 && (uint64_t)queued > w.bytes,
          "the pipe holds %d bytes, w.bytes %llu: a torn block after them", queued, (unsigned long long)w.bytes);
    bytes = w.bytes;
    rc = bpt_session_write(s, &w);
    CHECK_RC(rc, BPT_EIO);
    CHECK(strstr(bpt_last_error(), "earlier write") != NULL, "the error says why: %s", bpt_last_error());
    CHECK(ioctl(p[0], FIONREAD, &after) == 0 && after == queued && w.bytes == bytes,
          "a broken writer wrote: %d bytes queued, then %d", queued, after);
    close(p[1]);
    CHECK_RC(bpt_trace_file_fdopen(p[0], &f), 0);
    rc = read_calls(f, seen, 0, &returns, &msgs);
    printf("read from the pipe: %ld messages (w.records %llu), last read %d\n", msgs,
           (unsigned long long)w.records, rc);
    CHECK_RC(rc, 0);
    CHECK(msgs == (long)w.records && msgs > 0, "%ld messages, w.records %llu", msgs, (unsigned long long)w.records);
    CHECK_RC(bpt_trace_file_read(f, NULL, 0), 0);
    bpt_trace_file_close(f);
    close(p[0]);
    CHECK_RC(bpt_session_destroy(s), 0);
}

/* 3. Hostile files, built in memory. */
static unsigned char *img;
static size_t img_len, img_cap;
static void put(const void *p, size_t n) {
    if (img_len + n > img_cap) {
        img_cap = (img_len + n) * 2;
        img = (unsigned char *)realloc(img, img_cap);
        if (!img) abort();
    }
    memcpy(img + img_len, p, n);
    img_len += n;
}
static void put32(uint32_t v) { put(&v, 4); }
static void put64(uint64_t v) { put(&v, 8); }
static void put_header(void) {
    unsigned char h[144];
    uint32_t v[4] = { 2, 144, 62, 1 };   /* version, header_bytes, machine, pid */
    uint64_t one = 1;
    memset(h, 0, sizeof h);
    memcpy(h, "BPTRACE", 8);
    memcpy(h + 8, v, sizeof v);
    memcpy(h + 56, &one, 8);   /* mul_whole */
    img_len = 0;
    put(h, sizeof h);
}
/* A records block of lane `lane`: one context record. */
static void put_lane_block(uint64_t lane) {
    unsigned char rec[8] = { 15, 2, 0, 0, 1, 0, 0, 0 };   /* context: 2 words, tid 1 */
    put32('C');
    put32(8 + 32);
    put64(lane);
    put64(0);
    put(rec, 8);
    put64(1);
    put64(0);
}
static void write_img(const char *path) {
    FILE *o = fopen(path, "wb");
    CHECK(o && fwrite(img, 1, img_len, o) == img_len && fclose(o) == 0, "writing %s", path);
}

/* Read path to its end under the budget: the last read's result. */
static int read_counted(const char *path, const char *what, long *msgs, uint64_t *probes) {
    bpt_trace_file *f;
    bpt_msg m[16];
    int rc, k;
    unsigned long long bud = 8ull * img_len + (1u << 20);
    *msgs = 0;
    *probes = 0;
    count_start(bud, 0);
    rc = bpt_trace_file_open(path, &f);
    if (rc == 0) {
        while ((k = bpt_trace_file_read(f, m, 16)) > 0) *msgs += k;
        rc = k;
        *probes = f->probes;
        bpt_trace_file_close(f);
    }
    count_stop();
    printf("%s: %zu bytes: read %d (%s), %ld messages; %lu allocations, %llu bytes in all (budget %llu); "
           "%llu lane-table probes\n", what, img_len, rc, rc < 0 ? bpt_last_error() : "", *msgs, n_allocs, alloc_bytes,
           bud, (unsigned long long)*probes);
    CHECK(alloc_bytes <= bud && n_allocs < 1000, "%s: %lu allocations, %llu bytes: not in proportion to the file",
          what, n_allocs, alloc_bytes);
    return rc;
}

static void hostile(void) {
    enum { NAMES_BLOCKS = 80000, LANES = 100000 };
    char path[300];
    long msgs;
    uint64_t probes;
    int i;
    temp_path(path, sizeof path, "hostile.bpt");

    put_header();
    for (i = 0; i < NAMES_BLOCKS; i++) { put32('N'); put32(0); }
    write_img(path);
    CHECK_RC(read_counted(path, "80,000 empty names blocks", &msgs, &probes), 0);

    put_header();
    put32('N');
    put32(16);
    put32((1u << 22) - 1);   /* id */
    put32(0);                /* arity */
    put32(0);                /* no module, no name */
    put32(0);
    write_img(path);
    CHECK_RC(read_counted(path, "a names entry of id 4,194,303", &msgs, &probes), BPT_EFORMAT);
    {
        bpt_trace_file *f;
        bpt_msg m[4];
        CHECK_RC(bpt_trace_file_open(path, &f), 0);
        CHECK_RC(bpt_trace_file_read(f, m, 4), BPT_EFORMAT);
        CHECK_RC(bpt_trace_file_read(f, m, 4), BPT_EFORMAT);   /* and from then on */
        bpt_trace_file_close(f);
    }

    /* 100,000 lanes, a block each: a few probes a block (the table is kept at
       most half full, and the lanes' hash is keyed per reader). */
    put_header();
    for (i = 0; i < LANES; i++) put_lane_block((uint64_t)i * 977 + 3);
    write_img(path);
    CHECK_RC(read_counted(path, "100,000 lanes", &msgs, &probes), 0);
    CHECK(probes <= 4ull * LANES, "100,000 lanes: %llu probes of the lane table, %.2f a block: not a lookup in "
          "constant time", (unsigned long long)probes, (double)probes / LANES);
    free(img);
    img = NULL;
    img_len = img_cap = 0;
}

/* 6. A corrupt record (type 99) after a context and three DROPPED records
   in one block: the three messages, then BPT_EFORMAT, whatever the batch. */
static void corrupt_tail(void) {
    static const unsigned char ctx[8] = { 15, 2, 0, 0, 7, 0, 0, 0 }, drop[8] = { 2, 1, 0, 0, 0, 0, 0, 0 },
                               bad[8] = { 99, 0, 0, 0, 0, 0, 0, 0 };
    char path[300];
    int batch, i;
    temp_path(path, sizeof path, "hostile.bpt");
    put_header();
    put32('C');
    put32(8 + 32 + 3 * 24 + 16);
    put64(3);                                      /* the lane */
    put64(0); put(ctx, 8); put64(1); put64(0);     /* thread 7, process 1 */
    for (i = 0; i < 3; i++) { put64(10 + (uint64_t)i); put(drop, 8); put64(100 + (uint64_t)i); }
    put64(20); put(bad, 8);
    write_img(path);
    for (batch = 1; batch <= 16; batch *= 4) {
        bpt_trace_file *f;
        bpt_msg m[16];
        int rc, got = 0, ok = 1;
        CHECK_RC(bpt_trace_file_open(path, &f), 0);
        while ((rc = bpt_trace_file_read(f, m, batch)) > 0) {
            for (i = 0; i < rc; i++)
                ok &= m[i].type == BPT_MSG_DROPPED && m[i].thread == 7 && m[i].value == 100 + (uint64_t)(got + i);
            got += rc;
        }
        printf("a corrupt record after 3 sound ones, read %d at a time: %d messages, then %d (%s)\n", batch, got, rc,
               bpt_last_error());
        CHECK(got == 3 && ok, "read %d at a time: %d messages of 3 (in order, whole: %d)", batch, got, ok);
        CHECK(rc == BPT_EFORMAT, "read %d at a time: the read at the corrupt record returned %d", batch, rc);
        CHECK_RC(bpt_trace_file_read(f, m, batch), BPT_EFORMAT);   /* and from then on */
        bpt_trace_file_close(f);
    }
    free(img);
    img = NULL;
    img_len = img_cap = 0;
}

/* 4. BPT_ENOMEM in a read loses nothing: the k-th allocation refused. */
static void enomem(void) {
    enum { N = 400 };
    char path[300];
    int k, full_msgs = -1;
    temp_path(path, sizeof path, "partial.bpt");
    for (k = 0; k < 40; k++) {
        bpt_trace_file *f;
        bpt_msg m[16];
        int rc, nomem = 0, seen[N], returns = 0, i, ok = 1;
        long msgs = 0;
        memset(seen, 0, sizeof seen);
        CHECK_RC(bpt_trace_file_open(path, &f), 0);
        count_start(0, (unsigned long)k);   /* k 0: nothing refused */
        for (;;) {
            rc = bpt_trace_file_read(f, m, 16);
            if (rc == BPT_ENOMEM && nomem++ < 3) continue;
            if (rc <= 0) break;
            for (i = 0; i < rc; i++) {
                if (m[i].type == BPT_MSG_CALL && m[i].args[0] < N) seen[m[i].args[0]]++;
                if (m[i].type == BPT_MSG_RETURN_FROM) returns++;
            }
            msgs += rc;
        }
        count_stop();
        bpt_trace_file_close(f);
        if (k == 0) full_msgs = (int)msgs;
        for (i = 0; i < N; i++) ok &= seen[i] == 1;
        CHECK(rc == 0 && msgs == full_msgs && returns == N && ok && nomem <= 1,
              "the %d-th allocation refused: read %d, %ld messages of %d, %d returns, every call once: %d, "
              "%d BPT_ENOMEM", k, rc, msgs, full_msgs, returns, ok, nomem);
        if (k > 0 && !nomem) {
            printf("BPT_ENOMEM at each of the reader's %d allocations, then every message\n", k - 1);
            break;
        }
    }
    CHECK(full_msgs == 2 * N, "%d messages", full_msgs);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    bpt_trace_file *f;
    int i;
    signal(SIGXFSZ, SIG_IGN);   /* a write past RLIMIT_FSIZE fails with EFBIG instead */
    snprintf(tmpdir, sizeof tmpdir, "%s/bpt-hostile-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    for (i = 0; i < 2; i++) {
        code[i] = (bpt_vm_word)(0x100 + i);
        CHECK_RC(bpt_register_vm(&code[i], BP, "tf", i ? "g" : "f", 2, &ops, &fn[i]), 0);
    }
    partial_file();
    partial_pipe();
    hostile();
    enomem();
    CHECK_RC(bpt_trace_file_open(tmpdir, &f), BPT_ENOENT);   /* 5. a directory */
    corrupt_tail();                                          /* 6. */
    {
        char path[300];
        temp_path(path, sizeof path, "partial.bpt");
        unlink(path);
        temp_path(path, sizeof path, "hostile.bpt");
        unlink(path);
        rmdir(tmpdir);
    }
    return CHECK_DONE();
}
