/* session.h: what other parts use of trace sessions (session.c): the
   session itself, the table of live sessions, sending a record, and
   reading the per-thread buffers (drain, trace files). */

typedef struct bpt__lane bpt__lane;   /* one thread's buffer in one session (session.c) */

/* One trace session (OTP 27's trace:session_create): its tracer, its rate
   limit, its lanes and the patterns in force. */
struct bpt__session {
    uint64_t id;                  /* weak id: generation << 16 | slot */
    char name[64];
    bpt_tracer_fn tracer;
    void *tracer_user;
    int usdt;                     /* 1: records go to the bptrace USDT probes (probes.c) */
    int buffered;                 /* 1: records go to the lanes' chunks (no tracer, not usdt): the send's one test */
    uint32_t chunk_bytes, chunks; /* each lane's chunks, at its start */
    uint32_t max_chunks;          /* the most chunks a lane grows to (session.c >>growth) */
    int flight_recorder;          /* 1: a full lane overwrites its oldest unread chunk */
    int served;                   /* 1: a control client's (control.c): drained by a server thread */
    int orphan;                   /* 1: served, in a fork child: no one drains it, its lanes do not grow */
    int time_cpu;                 /* 1: call_time by thread CPU time (frames: BPT__FRAME_CPU) */
    uint64_t rate_max;
    uint64_t rate_window_ns;
    bpt__atomic_u32 dead;         /* destroy began: send nothing more */
    bpt__atomic_u32 limit_tripped;
    uint64_t window_base;         /* immutable: rate_window_ns's windows are counted from this time */
    bpt__atomic_u64 window;       /* the rate limit's count: with a window, its index << 32 | its
                                     count (bpt__rate_count); without, the count */
    bpt__atomic_u64 limited;
    bpt__atomic_u64 frames_skipped; /* calls whose return could not be traced (frames.c) */
    bpt__atomic_u64 lost_laneless;  /* messages lost for want of memory for their thread's lane
                                       (unmarked: bpt__session_send_nested) */
    bpt__atomic_ptr lane_dir[256];/* bpt__atomic_ptr[256]: lanes by thread record index [R1] */
    pthread_mutex_t drain_lock;
    uint32_t read_next;             /* under drain_lock: the lane the next read starts at */
    bpt__pattern_entry *patterns; /* set path only: the patterns in force, in order */
};

/* One thread's buffer in one session (session.c has the protocol: [R1]-[R4]).
   Declared here for the root record (root.c): an outside reader reports
   its counters. */
enum {
    BPT__GROW_BATCHES = 20,       /* batches double: 2 << 19 chunks is past any cap */
    BPT__LANES_PER_DIR = 256,     /* a session's lane_dir[i] points at 256 lane pointers */
    BPT__LANE_DIRS = 256,         /* 65536 thread records */
    BPT__LOSS_CONTEXTS = 4        /* contexts whose losses a full lane counts apart (>>losses) */
};
/* Records of a context (a thread and its process) lost since its last
   DROPPED record (>>losses in session.c). */
typedef struct bpt__loss {
    uint32_t tid;
    uint64_t process, n;
} bpt__loss;

/* The ring. Chunk number i (a count from 0) is in slot[i % cap]. The lane
   holds `budget` chunks: while a chunk is open (cur), those of numbers
   head+1-budget .. head, before its first one those of head-budget ..
   head-1. Opening chunk `next` reuses the chunk of next - budget, read by
   then [R3], and moves its pointer to slot next % cap; a grown lane adds a
   chunk there instead (budget + 1). The drainer reads only the slots of
   numbers tail .. opened-1, none of which the producer moves. */
struct bpt__lane {
    uint64_t number;              /* the thread record's index: the file's lane number */
    uint32_t chunks, chunk_bytes; /* immutable: the chunks it starts with (0: a callback
                                     session's lane, counters only), and their size */
    uint32_t cap;                 /* immutable: slots in the ring, the most chunks it may hold */
    bpt__atomic_ptr *slot;        /* immutable: the ring's cap slots, after the lane */
    /* Producer side: the owner thread only. */
    uint64_t head;                /* the chunk being written (a count; in slot[head % cap]) */
    struct bpt__chunk *cur;       /* that chunk (NULL before the first record) */
    unsigned char *wp, *wend;     /* where the next record goes in it, and where records end:
                                     the chunk's last BPT__KEPT_BYTES are kept for a loss's mark */
    uint32_t ctx_tid;             /* the context of the records after wp */
    uint64_t ctx_process;
    uint64_t anchor_tick;         /* the counter's reading in the stream's latest anchor (clock.h) */
    uint64_t anchor_span;         /* ticks an anchor serves (bpt__clock_anchor_span) */
    uint64_t anchor_ns;           /* a callback session's lane: the anchor's ns */
    bpt__loss unreported[BPT__LOSS_CONTEXTS];   /* records lost since the last DROPPED record,
                                     by context */
    uint32_t nunreported;         /* contexts in unreported[] (>>losses) */
    uint64_t lost_marked;         /* `lost` as far as it was counted in unreported[] */
    bpt__atomic_u32 budget;       /* chunks the lane holds (written by the owner; read by stats) */
    uint32_t spare_left;          /* chunks of the last batch not yet used */
    unsigned char *spare;         /* the next of them */
    void *batch[BPT__GROW_BATCHES]; /* the batches mapped while growing (freed with the lane), */
    uint32_t batch_chunks[BPT__GROW_BATCHES];   /* their chunks, */
    bpt__atomic_u32 nbatch;       /* and how many: release-stored after the two [R4] */
    bpt__atomic_u64 opened;       /* head + 1 once chunk head is open: release-stored [R2] */
    bpt__atomic_u64 written;      /* owner counters (bpt__owner_inc_u64): records put in chunks, */
    bpt__atomic_u64 dropped;      /* lost to a full buffer, */
    bpt__atomic_u64 overwritten;  /* taken back by a flight recorder, */
    bpt__atomic_u64 delivered;    /* and given to the callback tracer or the USDT probe */
    bpt__atomic_u64 lost;         /* dropped by a nested send (a signal handler interrupting its
                                     own thread's send): atomic, the owner may be mid-update */
    char pad[BPT__CACHE_LINE];
    /* Consumer side: whoever holds the tail's BUSY bit. */
    bpt__atomic_u64 tail;         /* the chunk being read << 1 | BPT__TAIL_BUSY [R3] */
    uint32_t rpos;                /* bytes of chunk tail already read */
    uint32_t rrec;                /* produced records of chunk tail already read */
    uint64_t rmarked;             /* the counts of chunk tail's DROPPED records already read */
    uint64_t unreported_overwritten;   /* records taken back and not yet marked in what was read */
    uint64_t last_ticks;          /* the last record read: the time of a gap's DROPPED */
    uint32_t rctx;                /* while rpos > 0: the offset in chunk tail of the last context
                                     record read, the one in effect at rpos (bpt__lane_read_resume) */
    uint64_t rreader;             /* the reader that read last (bpt__lane_reader.id; 0: none yet) */
    bpt__stream stream;           /* the drainer's decoding context */
    bpt__atomic_u64 drained;      /* records read (drained or written to a file) */
};

/* bpt_session_wait's words of one slot [W1]: producers count the chunks
   they seal and wake the sleepers. In the table, not in the session: a
   drainer sleeps unpinned, and its futex word must outlive a destroy. */
typedef struct bpt__wake_words {
    bpt__atomic_u32 sealed;       /* chunks sealed (and destroys begun) by the slot's sessions: the futex word */
    bpt__atomic_u32 sleepers;     /* drainers asleep on it, or about to be */
} bpt__wake_words;

/* The registry of live sessions. A slot's pointer is published with a
   release store and cleared before the session is freed after a wait, so a
   pinned reader that finds it may use it. */
struct bpt__sessions {
    bpt__atomic_ptr slot[BPT_MAX_SESSIONS];
    uint64_t generation[BPT_MAX_SESSIONS];    /* under the code modification permission */
    char pad[BPT__CACHE_LINE];    /* a seal's count stays off the lines every hit reads (slot) */
    bpt__wake_words wake[BPT_MAX_SESSIONS]; /* never freed: a sleeper's word (>>wait) */
};
BPT__DATA(struct bpt__sessions, bpt__sessions);   /* session.c */

/* What reads a session's lanes (bpt_session_drain, bpt_session_write):
   take gets a run of whole records of one lane and returns the bytes it
   used (fewer when its room is full); gap gets the count of records a
   flight recorder overwrote before the next run, and returns 0 when it has
   no room for the notice. The read counts in `records` the records taken
   (not context or DROPPED records). `id` names the reader's stream: every
   drain of a session is one (BPT__READER_DRAIN: they decode into the
   lanes' own stream), each file writer another; a lane read last by
   another stream gives this one the context in effect first
   (bpt__lane_read_resume). */
typedef struct bpt__lane_reader bpt__lane_reader;
struct bpt__lane_reader {
    uint32_t (*take)(bpt__lane_reader *rd, bpt__lane *lane, const unsigned char *p, uint32_t bytes);
    int (*gap)(bpt__lane_reader *rd, bpt__lane *lane, uint64_t count, uint64_t ticks);
    uint64_t records;
    uint64_t id;                  /* BPT__READER_DRAIN, or a file writer's (bpt__file_writer_id) */
};
enum { BPT__READER_DRAIN = 1 };   /* a file writer's id is above it; a lane's rreader 0 is no reader */

/* A session's id: its slot in bpt__sessions.slot in the low 16 bits, the
   slot's generation above (session_life.c). */
enum { BPT__SESSION_SLOT_BITS = 16 };
BPT__HOT uint32_t bpt__session_slot(uint64_t id) { return (uint32_t)(id & ((1u << BPT__SESSION_SLOT_BITS) - 1)); }
BPT__HOT bpt__session *bpt__session_lookup(uint64_t id);   /* pinned or under the permission */
BPT__PRIVATE bpt__session *bpt__session_pin(bpt_session handle, const char *who, bpt__thread **rec, int *rc);
BPT__PRIVATE int bpt__session_alloc(const bpt_session_desc *d, bpt__session **out);
BPT__PRIVATE int bpt__session_create(const bpt_session_desc *desc, bpt_session *out, int served);
BPT__PRIVATE void bpt__session_free(bpt__session *s);
BPT__HOT int bpt__session_admit(bpt__session *s, bpt__thread *rec);
BPT__PRIVATE void bpt__msg_header(bpt_msg *m, unsigned type, uint64_t thread, uint64_t process,
                                  uint64_t ts_ns, uint64_t session);
BPT__PRIVATE void bpt__session_send(bpt__session *s, bpt__thread *rec, const bpt__rec *r);
/* A send's parts, for the call path (site_native.c), which writes its
   record in place with the integer registers alone (>>intregs, port.h):
   mark the thread's send [H1] (0: one is open already), find room as it
   is in a session that buffers (NULL: the full path's send must run),
   publish what was written at the lane's wp, unmark. */
BPT__HOT BPT__INTREGS int bpt__send_begin(bpt__thread *rec);
BPT__HOT BPT__INTREGS bpt__lane *bpt__lane_room(bpt__session *s, const bpt__thread *rec, uint64_t ticks,
                                                uint32_t room);
BPT__HOT BPT__INTREGS void bpt__lane_publish(bpt__lane *lane, uint32_t bytes);
BPT__HOT BPT__INTREGS void bpt__send_end(bpt__thread *rec);
BPT__PRIVATE void bpt__session_read(bpt__session *s, bpt__lane_reader *rd);   /* under drain_lock */
BPT__PRIVATE uint64_t bpt__lane_number(const bpt__lane *lane);
BPT__PRIVATE bpt__stream *bpt__lane_stream(bpt__lane *lane);
BPT__PRIVATE void bpt__sessions_atfork_child(void);
BPT__PRIVATE void bpt__session_wake(bpt__session *s);   /* [W1]: a chunk sealed, or the destroy began */

/* The USDT probes bptrace fires (probes.c). */
BPT__PRIVATE void bpt__probe_event(const bpt__session *s, const bpt__thread *rec, const bpt__rec *r);
BPT__PRIVATE uint64_t bpt__probe_change_id(void);   /* the change the protocol runs now (bp.c) */
