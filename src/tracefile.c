/* tracefile.c: trace files (.bpt; the format is in api_session.h,
   >>tracefile). Writing is draining: bpt_session_write takes each thread's
   undrained records from the session's lanes (session.c) and writes them as
   they are, one block a run, with the names they use written before them;
   a thread's records it takes up mid-chunk, where another writer or a
   drain stopped, start with a copy of the context record in effect there
   (bpt__lane_read_resume), so that every file reads on its own.
   Reading decodes the blocks with record.c, as a drain does, but with the
   file's names and clock calibration. Both run off the hot path. */
#include "internal.h"
#include <sys/stat.h>
#include <sys/uio.h>

/* The header, as written (144 bytes, no padding). */
typedef struct bpt__file_header {
    char magic[8];
    uint32_t version, header_bytes, machine, pid, clock_source, reserved;
    uint64_t clock_hz, tick0, ns0, mul_whole, mul_frac, session;
    char name[64];
} bpt__file_header;
typedef char bpt__file_header_size[sizeof(bpt__file_header) == 144 ? 1 : -1];

static const char bpt__file_magic[8] = { 'B', 'P', 'T', 'R', 'A', 'C', 'E', 0 };
enum {
    BPT__BLOCK_NAMES = 'N', BPT__BLOCK_RECORDS = 'C',
    BPT__BLOCK_MAX = 1 << 26,     /* a reader refuses a larger block: corrupt */
    BPT__FILE_MAX_NAMES = 1 << 22 /* ids 1 .. this: names.c gives up to BPT__NAMES_PAGE * BPT__NAMES_PAGES */
};

#if defined(__x86_64__)
#  define BPT__ELF_MACHINE 62
#elif defined(__aarch64__)
#  define BPT__ELF_MACHINE 183
#else
#  define BPT__ELF_MACHINE 0
#endif

/* >>writer */

/* Write all of iov, retrying short writes and EINTR. 0, or -1 with errno;
   *done: the bytes that went out either way. */
static int bpt__writev_all(int fd, struct iovec *iov, int n, size_t *done) {
    *done = 0;
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        *done += (size_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len) { w -= (ssize_t)iov->iov_len; iov++; n--; }
        if (n > 0) { iov->iov_base = (char *)iov->iov_base + w; iov->iov_len -= (size_t)w; }
    }
    return 0;
}

/* A write that failed after `done` bytes of a block (or of the header):
   the file must end at a whole block, or a retry's whole block after the
   cut one would throw the reader out of step for good. A file (lseek and
   ftruncate work) is cut back to where the block began, its offset there
   (the offset after a write is the end of what it wrote, O_APPEND too): a
   retry writes the block again. Anything else (a pipe, a socket, or a
   refused ftruncate) keeps the torn block, which a reader takes as the
   stream's end: the writer is broken and writes no more. errno kept. */
static void bpt__write_failed(bpt_file_writer *w, size_t done) {
    int e = errno;
    off_t end;
    if (done > 0) {
        end = lseek(w->fd, 0, SEEK_CUR);
        if (end < 0 || (uint64_t)end < done || ftruncate(w->fd, end - (off_t)done) < 0 ||
            lseek(w->fd, end - (off_t)done, SEEK_SET) < 0)
            w->broken = 1;
    }
    errno = e;
}

/* All of iov, or -1 with errno and the file as it was (bpt__write_failed). */
static int bpt__write_whole(bpt_file_writer *w, struct iovec *iov, int n) {
    size_t done;
    if (bpt__writev_all(w->fd, iov, n, &done) == 0) {
        w->bytes += done;
        return 0;
    }
    bpt__write_failed(w, done);
    return -1;
}

/* One block: its tag and length, then the payload's pieces, in one writev. */
static int bpt__write_block(bpt_file_writer *w, uint32_t tag, struct iovec *parts, int nparts) {
    struct iovec iov[4];
    uint32_t head[2];
    size_t bytes = 0;
    int i;
    for (i = 0; i < nparts; i++) { iov[i + 1] = parts[i]; bytes += parts[i].iov_len; }
    head[0] = tag;
    head[1] = (uint32_t)bytes;
    iov[0].iov_base = head;
    iov[0].iov_len = sizeof head;
    return bpt__write_whole(w, iov, nparts + 1);
}

static int bpt__write_header(bpt_file_writer *w, const bpt__session *s) {
    bpt__file_header h;
    bpt__clock_cal cal;
    struct iovec iov;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, bpt__file_magic, sizeof h.magic);
    h.version = BPT_FILE_VERSION;
    h.header_bytes = sizeof h;
    h.machine = BPT__ELF_MACHINE;
    h.pid = (uint32_t)getpid();
    bpt__clock_cal_get(&cal);
    h.clock_source = cal.source;
    h.clock_hz = cal.hz;
    h.tick0 = cal.tick0;
    h.ns0 = cal.ns0;
    h.mul_whole = cal.mul_whole;
    h.mul_frac = cal.mul_frac;
    h.session = s->id;
    memcpy(h.name, s->name, sizeof h.name);
    iov.iov_base = &h;
    iov.iov_len = sizeof h;
    if (bpt__write_whole(w, &iov, 1) < 0) return -1;
    w->header_written = 1;
    return 0;
}

/* A name's length in a names block: at most 65,535 bytes (a longer match
   spec message is cut there). */
static uint16_t bpt__name_len(const char *text) {
    size_t n = text ? strlen(text) : 0;
    return (uint16_t)(n > 0xffff ? 0xffff : n);
}

/* The names the file does not have yet, up to every id given so far: a
   record read after this was made after its ids were given ([N1], [R2]). */
static int bpt__write_names(bpt_file_writer *w) {
    uint32_t upto = bpt__names_count(), id;
    size_t bytes = 0, at = 0;
    unsigned char *buf;
    struct iovec iov;
    int rc;
    if (upto <= w->names_written) return 0;
    for (id = w->names_written + 1; id <= upto; id++) {
        const bpt__name *n = bpt__names_get(id);
        bytes += 16 + ((size_t)bpt__name_len(n->module) + bpt__name_len(n->name) + 7) / 8 * 8;
    }
    if (!(buf = (unsigned char *)BPT_MALLOC(bytes))) return -2;
    memset(buf, 0, bytes);
    for (id = w->names_written + 1; id <= upto; id++) {
        const bpt__name *n = bpt__names_get(id);
        uint16_t ml = bpt__name_len(n->module), nl = bpt__name_len(n->name);
        int32_t arity = n->arity;
        memcpy(buf + at, &id, 4);
        memcpy(buf + at + 4, &arity, 4);
        memcpy(buf + at + 8, &ml, 2);
        memcpy(buf + at + 10, &nl, 2);
        if (ml) memcpy(buf + at + 16, n->module, ml);
        memcpy(buf + at + 16 + ml, n->name, nl);
        at += 16 + ((size_t)ml + nl + 7) / 8 * 8;
    }
    iov.iov_base = buf;
    iov.iov_len = bytes;
    rc = bpt__write_block(w, BPT__BLOCK_NAMES, &iov, 1);
    BPT_FREE(buf);
    if (rc == 0) w->names_written = upto;
    return rc;
}

typedef struct bpt__file_out {
    bpt__lane_reader rd;
    bpt_file_writer *w;
    int err;                      /* 0, BPT_EIO or BPT_ENOMEM */
    int saved_errno;
} bpt__file_out;

static int bpt__file_out_fail(bpt__file_out *fo, int rc) {
    fo->err = rc == -2 ? BPT_ENOMEM : BPT_EIO;
    fo->saved_errno = errno;
    return 0;
}

/* A run of records goes out whole, after the names it may use: every
   name given before it was read (bpt__write_names writes up to the
   latest). Nothing here looks at the records one by one. */
static uint32_t bpt__file_take(bpt__lane_reader *rd, bpt__lane *lane, const unsigned char *p, uint32_t bytes) {
    bpt__file_out *fo = (bpt__file_out *)(void *)rd;
    uint64_t number = bpt__lane_number(lane);
    struct iovec iov[2];
    int rc;
    if (fo->err) return 0;
    if ((rc = bpt__write_names(fo->w)) < 0) return (uint32_t)bpt__file_out_fail(fo, rc);
    iov[0].iov_base = &number;
    iov[0].iov_len = sizeof number;
    iov[1].iov_base = (void *)(uintptr_t)p;
    iov[1].iov_len = bytes;
    if (bpt__write_block(fo->w, BPT__BLOCK_RECORDS, iov, 2) < 0) return (uint32_t)bpt__file_out_fail(fo, -1);
    return bytes;
}

/* Records a flight recorder overwrote: a DROPPED record of its own. */
static int bpt__file_gap(bpt__lane_reader *rd, bpt__lane *lane, uint64_t count, uint64_t ticks) {
    uint64_t rec[3];
    bpt__rec r;
    r.ticks = ticks;
    r.type = BPT_MSG_DROPPED;
    r.words = 1;
    r.info = 0;
    r.id = 0;
    memcpy(rec, &r, sizeof r);
    rec[2] = count;
    return bpt__file_take(rd, lane, (const unsigned char *)rec, sizeof rec) == sizeof rec;
}

/* The writer's reader id, given on its first write: unique in the process
   (any session's writers, on any thread: an atomic count), so that each
   file is a stream of its own to the lanes it reads (session.h,
   bpt__lane_reader): a new writer's file gets each thread's context where
   it takes up the thread's records. A writer zeroed anew is a new one. */
static bpt__atomic_u64 bpt__file_writers;
static uint64_t bpt__file_writer_id(bpt_file_writer *w) {
    if (!w->reader) w->reader = bpt__fetch_add_u64(&bpt__file_writers, 1) + BPT__READER_DRAIN + 1;
    return w->reader;
}

int bpt_session_write(bpt_session handle, bpt_file_writer *w) {
    bpt__file_out fo;
    bpt__thread *rec;
    bpt__session *s;
    int rc;
    if (!w || w->fd < 0) return bpt__fail(BPT_EINVAL, "bpt_session_write: w is NULL or its fd is < 0");
    if (w->broken)
        return bpt__fail(BPT_EIO, "bpt_session_write: fd %d ends in a block an earlier write cut short and could "
                         "not take back (not a regular file, or ftruncate failed): this writer writes no more", w->fd);
    if (!(s = bpt__session_pin(handle, "bpt_session_write", &rec, &rc))) return rc;
    fo.rd.take = bpt__file_take;
    fo.rd.gap = bpt__file_gap;
    fo.w = w;
    fo.err = 0;
    fo.saved_errno = 0;
    fo.rd.records = 0;
    fo.rd.id = bpt__file_writer_id(w);
    pthread_mutex_lock(&s->drain_lock);
    if (!w->header_written && bpt__write_header(w, s) < 0) bpt__file_out_fail(&fo, -1);
    if (!fo.err) bpt__session_read(s, &fo.rd);
    pthread_mutex_unlock(&s->drain_lock);
    bpt__unpin(rec);
    w->records += fo.rd.records;
    if (fo.err == BPT_ENOMEM) return bpt__fail(BPT_ENOMEM, "bpt_session_write: no memory for the names block");
    if (fo.err && w->broken)
        return bpt__fail(BPT_EIO, "bpt_session_write: write to fd %d failed partway: %s; the cut block could not "
                         "be taken back (not a regular file, or ftruncate failed): the stream ends there, and "
                         "this writer writes no more", w->fd, strerror(fo.saved_errno));
    if (fo.err) return bpt__fail(BPT_EIO, "bpt_session_write: write to fd %d failed: %s (the file still ends at a "
                                 "whole block; the records not written stay in the buffers: call again)",
                                 w->fd, strerror(fo.saved_errno));
    return (int)(fo.rd.records > INT_MAX ? INT_MAX : fo.rd.records);
}

/* >>reader */

struct bpt__file_lane { uint64_t lane; bpt__stream st; };

enum {
    BPT__FILE_NO_STREAM = -1, BPT__FILE_TOO_MANY = -2,
    /* The writer gives a file's names in id order from 1 (the n-th entry
       has id n): a reader refuses an id more than this past the entries
       before it, so that a small file cannot make it allocate for 4M
       names (corrupt). */
    BPT__FILE_NAMES_AHEAD = 1024,
    BPT__FILE_MAX_LANES = 1 << 28   /* more lanes than any session has: corrupt */
};

struct bpt_trace_file {
    FILE *in;
    bpt__file_header h;
    bpt__decoder dec;
    bpt__name *names;             /* by id; module and name point into `strings` blocks */
    uint32_t nnames;              /* room in names (a power of two, or 0) */
    uint64_t names_read;          /* the entries of the names blocks taken in */
    char **strings;               /* every names block's text, freed at close */
    uint32_t nstrings, strings_cap;
    uint32_t head[2];             /* the block being read: its tag, its payload's bytes */
    int stage;                    /* 0: a block's head is next; 1: its payload; 2: the payload is in `block` */
    int ended;                    /* the file ends in a block cut short: reads return 0 */
    unsigned char *block;         /* the last block's payload; reused (block_cap bytes) */
    uint32_t block_cap;
    uint32_t block_bytes, pos;    /* the records block being decoded: its bytes, the next record's offset */
    uint64_t lane;                /* its lane */
    int stream;                   /* its lane's index in streams, or BPT__FILE_NO_STREAM (not looked up yet) */
    int last_stream;              /* the index found last, tried first (or BPT__FILE_NO_STREAM) */
    struct bpt__file_lane *streams;   /* each lane's context, in the order of their first blocks */
    uint32_t nstreams, streams_cap;
    uint32_t *lane_index;         /* open addressing: lane -> its index in streams + 1; 0: empty */
    uint32_t lane_index_cap;      /* a power of two, at least twice nstreams; or 0 */
    uint64_t seed;                /* the lane hash's key: a file cannot pick lanes that all collide */
    uint64_t probes;              /* lane-table slots looked at, rehashing aside: what a lookup
                                     costs (t_tracefile_hostile counts it) */
    int corrupt;                  /* 1: every read from now on is BPT_EFORMAT */
    const char *corrupt_why;      /* what was found corrupt, for bpt_last_error */
};

static const bpt__name *bpt__file_name(void *ctx, uint32_t id) {
    bpt_trace_file *f = (bpt_trace_file *)ctx;
    return id < f->nnames && f->names[id].name ? &f->names[id] : NULL;
}

/* An array of n items of `size` bytes grown to `to` items (BPT_MALLOC has
   no realloc), the new items zeroed; NULL: no memory, the old one kept.
   Callers grow by doubling: a file of n blocks costs O(n) copying. */
static void *bpt__grow_to(void *old, size_t n, size_t to, size_t size) {
    unsigned char *p = (unsigned char *)BPT_MALLOC(to * size);
    if (!p) return NULL;
    if (n) memcpy(p, old, n * size);
    memset(p + n * size, 0, (to - n) * size);
    BPT_FREE(old);
    return p;
}

/* The lane hash, keyed by the reader (registry.h). */
static uint32_t bpt__file_lane_hash(const bpt_trace_file *f, uint64_t lane) {
    return (uint32_t)bpt__hash_u64(lane, f->seed);
}

/* The index in streams of lane `lane`'s stream, added on its first block:
   O(1) expected whatever the lanes (one lookup per records block).
   BPT__FILE_NO_STREAM: no memory (nothing lost: a retry looks again);
   BPT__FILE_TOO_MANY: more lanes than BPT__FILE_MAX_LANES (corrupt). */
static int bpt__file_stream(bpt_trace_file *f, uint64_t lane) {
    uint32_t mask = f->lane_index_cap - 1, k, i;
    if (f->last_stream != BPT__FILE_NO_STREAM && f->streams[f->last_stream].lane == lane) return f->last_stream;
    if (f->lane_index_cap)
        for (k = bpt__file_lane_hash(f, lane) & mask; (i = f->lane_index[k]) != 0; k = (k + 1) & mask) {
            f->probes++;
            if (f->streams[i - 1].lane == lane) return f->last_stream = (int)(i - 1);
        }
    if (f->nstreams >= BPT__FILE_MAX_LANES) return BPT__FILE_TOO_MANY;
    if (f->nstreams == f->streams_cap) {   /* a new lane: room for it first */
        uint32_t cap = f->streams_cap ? f->streams_cap * 2 : 16;
        struct bpt__file_lane *grown;
        if (!(grown = (struct bpt__file_lane *)bpt__grow_to(f->streams, f->nstreams, cap, sizeof *grown)))
            return BPT__FILE_NO_STREAM;
        f->streams = grown;
        f->streams_cap = cap;
    }
    if ((f->nstreams + 1) * 2 > f->lane_index_cap) {
        uint32_t cap = f->lane_index_cap ? f->lane_index_cap * 2 : 64, j;
        uint32_t *ix = (uint32_t *)BPT_MALLOC(cap * sizeof *ix);
        if (!ix) return BPT__FILE_NO_STREAM;
        memset(ix, 0, cap * sizeof *ix);
        mask = cap - 1;
        for (j = 0; j < f->nstreams; j++) {
            for (k = bpt__file_lane_hash(f, f->streams[j].lane) & mask; ix[k]; k = (k + 1) & mask) {}
            ix[k] = j + 1;
        }
        BPT_FREE(f->lane_index);
        f->lane_index = ix;
        f->lane_index_cap = cap;
    }
    for (k = bpt__file_lane_hash(f, lane) & mask; f->lane_index[k]; k = (k + 1) & mask) f->probes++;
    f->lane_index[k] = f->nstreams + 1;
    f->streams[f->nstreams].lane = lane;
    bpt__stream_init(&f->streams[f->nstreams].st);
    return f->last_stream = (int)f->nstreams++;
}

/* The reader stops at what: every read from now on is BPT_EFORMAT. */
static void bpt__file_stop(bpt_trace_file *f, const char *what) {
    f->corrupt = 1;
    f->corrupt_why = what;
}

static int bpt__file_corrupt(bpt_trace_file *f, const char *what) {
    bpt__file_stop(f, what);
    return bpt__fail(BPT_EFORMAT, "bpt_trace_file_read: %s", what);
}

/* Take in the names block in f->block: each entry checked against the
   block's end, its strings copied into one text allocation, NUL-terminated
   (room: the block's bytes and two NULs for each entry of at least 16
   bytes). A block without entries costs nothing. After BPT_ENOMEM it may
   be taken in again: an entry taken twice is the same entry. */
static int bpt__file_names(bpt_trace_file *f) {
    const unsigned char *block = f->block;
    uint32_t bytes = f->head[1], at = 0, k = 0;
    char *text;
    if (bytes < 16) return 0;
    if (f->nstrings == f->strings_cap) {
        uint32_t cap = f->strings_cap ? f->strings_cap * 2 : 16;
        char **grown = (char **)bpt__grow_to(f->strings, f->nstrings, cap, sizeof *grown);
        if (!grown) return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for the names");
        f->strings = grown;
        f->strings_cap = cap;
    }
    if (!(text = (char *)BPT_MALLOC(bytes + 2 * (bytes / 16) + 1)))
        return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for a names block of %u bytes", bytes);
    f->strings[f->nstrings++] = text;
    for (; at + 16 <= bytes; k++) {
        uint32_t id;
        int32_t arity;
        uint16_t ml, nl;
        memcpy(&id, block + at, 4);
        memcpy(&arity, block + at + 4, 4);
        memcpy(&ml, block + at + 8, 2);
        memcpy(&nl, block + at + 10, 2);
        if (id == 0 || id > BPT__FILE_MAX_NAMES || at + 16 + (uint32_t)ml + nl > bytes)
            return bpt__file_corrupt(f, "a name entry is out of bounds");
        if (id > f->names_read + k + 1 + BPT__FILE_NAMES_AHEAD)
            return bpt__file_corrupt(f, "a name's id is far past the names before it (a writer gives them in order)");
        if (id >= f->nnames) {   /* doubling, as far as the entries read allow */
            uint32_t to = f->nnames ? f->nnames : 256;
            bpt__name *grown;
            while (to <= id) to *= 2;
            if (!(grown = (bpt__name *)bpt__grow_to(f->names, f->nnames, to, sizeof *grown)))
                return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for the names");
            f->names = grown;
            f->nnames = to;
        }
        memcpy(text, block + at + 16, ml);
        text[ml] = '\0';
        memcpy(text + ml + 1, block + at + 16 + ml, nl);
        text[ml + 1 + nl] = '\0';
        f->names[id].module = arity < 0 ? NULL : text;
        f->names[id].name = text + ml + 1;
        f->names[id].arity = arity;
        f->names[id].format = NULL;
        bpt__store_relaxed_u64(&f->names[id].addr, 0);   /* a file names functions, not addresses */
        text += ml + nl + 2;
        at += 16 + ((uint32_t)ml + nl + 7) / 8 * 8;
    }
    f->names_read += k;
    return 0;
}

/* The next records block into f; 1: it is ready, 0: the end (or a block
   cut short: the file ends at its last whole block), < 0: an error. The
   stages make BPT_ENOMEM resumable: the next call goes on from the head
   or payload it had read (a stream's bytes cannot be read twice). */
static int bpt__file_next_block(bpt_trace_file *f) {
    if (f->ended) return 0;
    for (;;) {
        int rc;
        if (f->stage == 0) {
            size_t got = fread(f->head, 1, sizeof f->head, f->in);
            if (got != sizeof f->head) {   /* the end; a head cut short ends the file for good */
                if (got) f->ended = 1;
                return 0;
            }
            if (f->head[1] > BPT__BLOCK_MAX || f->head[1] % 8 ||
                (f->head[0] != BPT__BLOCK_NAMES && f->head[0] != BPT__BLOCK_RECORDS) ||
                (f->head[0] == BPT__BLOCK_RECORDS && f->head[1] < 8))
                return bpt__file_corrupt(f, "a block's tag or length is not one this reader knows");
            f->stage = 1;
        }
        if (f->stage == 1) {
            f->block_bytes = f->pos = 0;
            if (f->head[1] > f->block_cap) {   /* the buffer, reused, grows by doubling */
                uint32_t cap = f->block_cap ? f->block_cap : 4096;
                unsigned char *p;
                while (cap < f->head[1]) cap *= 2;
                if (!(p = (unsigned char *)BPT_MALLOC(cap)))
                    return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for a block of %u bytes",
                                     f->head[1]);
                BPT_FREE(f->block);
                f->block = p;
                f->block_cap = cap;
            }
            if (f->head[1] && fread(f->block, f->head[1], 1, f->in) != 1) { f->ended = 1; return 0; }
            f->stage = 2;
        }
        if (f->head[0] == BPT__BLOCK_NAMES) {
            if ((rc = bpt__file_names(f)) < 0) return rc;
            f->stage = 0;
            continue;
        }
        f->stage = 0;
        memcpy(&f->lane, f->block, 8);
        f->block_bytes = f->head[1];
        f->pos = 8;
        f->stream = BPT__FILE_NO_STREAM;
        return 1;
    }
}

/* A reader over in (which it owns from here, closed on failure too). */
static int bpt__trace_file_start(FILE *in, const char *what, const char *who, bpt_trace_file **out) {
    bpt_trace_file *f;
    if (!(f = (bpt_trace_file *)BPT_MALLOC(sizeof *f))) {
        fclose(in);
        return bpt__fail(BPT_ENOMEM, "%s: no memory for the reader", who);
    }
    memset(f, 0, sizeof *f);
    f->in = in;
    f->stream = f->last_stream = BPT__FILE_NO_STREAM;
    f->seed = bpt__hash_seed(f);
    if (fread(&f->h, sizeof f->h, 1, in) != 1 || memcmp(f->h.magic, bpt__file_magic, 8) != 0 ||
        f->h.version < 1 || f->h.version > BPT_FILE_VERSION || f->h.header_bytes != sizeof f->h) {
        bpt_trace_file_close(f);
        return bpt__fail(BPT_EFORMAT, "%s: %s is not a bptrace trace file of version 1 to %d",
                         who, what, BPT_FILE_VERSION);
    }
    f->h.name[sizeof f->h.name - 1] = '\0';
    f->dec.name = bpt__file_name;
    f->dec.ctx = f;
    f->dec.cal.source = f->h.clock_source;
    f->dec.cal.hz = f->h.clock_hz;
    f->dec.cal.tick0 = f->h.tick0;
    f->dec.cal.ns0 = f->h.ns0;
    f->dec.cal.mul_whole = f->h.mul_whole;
    f->dec.cal.mul_frac = f->h.mul_frac;
    f->dec.session = f->h.session;
    *out = f;
    return 0;
}

int bpt_trace_file_open(const char *path, bpt_trace_file **out) {
    FILE *in;
    struct stat st;
    if (!path || !out) return bpt__fail(BPT_EINVAL, "bpt_trace_file_open: path or out is NULL");
    if (!(in = fopen(path, "rb")))
        return bpt__fail(BPT_ENOENT, "bpt_trace_file_open: %s: %s", path, strerror(errno));
    if (fstat(fileno(in), &st) == 0 && S_ISDIR(st.st_mode)) {   /* fopen opens one; its reads fail */
        fclose(in);
        return bpt__fail(BPT_ENOENT, "bpt_trace_file_open: %s: %s", path, strerror(EISDIR));
    }
    return bpt__trace_file_start(in, path, "bpt_trace_file_open", out);
}

int bpt_trace_file_fdopen(int fd, bpt_trace_file **out) {
    FILE *in;
    int own;
    if (fd < 0 || !out) return bpt__fail(BPT_EINVAL, "bpt_trace_file_fdopen: fd %d < 0, or out is NULL", fd);
    if ((own = dup(fd)) < 0 || !(in = fdopen(own, "rb"))) {
        int e = errno;
        if (own >= 0) close(own);
        return bpt__fail(BPT_EIO, "bpt_trace_file_fdopen: fd %d: %s", fd, strerror(e));
    }
    return bpt__trace_file_start(in, "the stream", "bpt_trace_file_fdopen", out);
}

int bpt_trace_file_read(bpt_trace_file *f, bpt_msg *out, int max) {
    int n = 0, rc;
    if (!f || max < 0 || (max > 0 && !out))
        return bpt__fail(BPT_EINVAL, "bpt_trace_file_read: f is NULL, or out is NULL, or max (%d) < 0", max);
    if (f->corrupt) return bpt__fail(BPT_EFORMAT, "bpt_trace_file_read: the file is corrupt: %s", f->corrupt_why);
    while (n < max) {
        const bpt__rec *r;
        int bytes;
        if (f->pos >= f->block_bytes) {
            /* A block is used up: return what there is before reading the
               next, which a live stream (fdopen) may not have sent yet. */
            if (n > 0) return n;
            if ((rc = bpt__file_next_block(f)) <= 0) return rc;
        }
        r = (const bpt__rec *)(const void *)(f->block + f->pos);
        if (!(bytes = bpt__rec_check(r, f->block_bytes - f->pos))) {
            /* The sound records before it in its block are the file's: the
               messages decoded from them go out now, and the next call
               says BPT_EFORMAT (this one's error threw them away, as many
               as out had room for; found by review). */
            if (n > 0) {
                bpt__file_stop(f, "a record is corrupt");
                return n;
            }
            return bpt__file_corrupt(f, "a record is corrupt");
        }
        /* Once a block, at its first record (n is 0 there: nothing is lost). */
        if (f->stream < 0 && (f->stream = bpt__file_stream(f, f->lane)) < 0) {
            if (f->stream == BPT__FILE_TOO_MANY) return bpt__file_corrupt(f, "more threads than a session has");
            return bpt__fail(BPT_ENOMEM, "bpt_trace_file_read: no memory for a thread's state");
        }
        n += bpt__rec_decode(&f->dec, &f->streams[f->stream].st, r, &out[n]);
        f->pos += (uint32_t)bytes;
    }
    return n;
}

int bpt_trace_file_info(bpt_trace_file *f, uint32_t *pid, bpt_clock *clock, char name[64]) {
    if (!f) return bpt__fail(BPT_EINVAL, "bpt_trace_file_info: f is NULL");
    if (pid) *pid = f->h.pid;
    if (clock) {
        clock->source = f->h.clock_source == 1 ? "tsc" : f->h.clock_source == 2 ? "cntvct" : "clock_gettime";
        clock->hz = f->h.clock_hz;
    }
    if (name) memcpy(name, f->h.name, sizeof f->h.name);
    return 0;
}

void bpt_trace_file_close(bpt_trace_file *f) {
    uint32_t i;
    if (!f) return;
    if (f->in) fclose(f->in);
    for (i = 0; i < f->nstrings; i++) BPT_FREE(f->strings[i]);
    BPT_FREE(f->strings);
    BPT_FREE(f->names);
    BPT_FREE(f->streams);
    BPT_FREE(f->lane_index);
    BPT_FREE(f->block);
    BPT_FREE(f);
}
