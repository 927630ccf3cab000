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
    uint32_t chunk_bytes, chunks; /* each lane's chunks, at its start */
    uint32_t max_chunks;          /* the most chunks a lane grows to (session.c >>growth) */
    int flight_recorder;          /* 1: a full lane overwrites its oldest unread chunk */
    int time_cpu;                 /* 1: call_time by thread CPU time (frames: BPT__FRAME_CPU) */
    uint64_t rate_max;
    uint64_t rate_window_ns;
    bpt__atomic_u32 dead;         /* destroy began: send nothing more */
    bpt__atomic_u32 limit_tripped;
    bpt__atomic_u64 window_start; /* rate limit window */
    bpt__atomic_u64 window_count;
    bpt__atomic_u64 limited;
    bpt__atomic_u64 frames_skipped; /* calls whose return could not be traced (frames.c) */
    bpt__atomic_u64 lost_laneless;  /* messages lost before their thread had a lane: a nested send
                                       while the lane was being made, or no memory for it */
    bpt__atomic_ptr lane_dir[256];/* bpt__atomic_ptr[256]: lanes by thread record index [R1] */
    pthread_mutex_t drain_lock;
    bpt__pattern_entry *patterns; /* set path only: the patterns in force, in order */
    /* bpt_session_wait [W1]: producers count the chunks they seal and wake
       the sleepers; far from the fields every record reads. */
    bpt__atomic_u32 sealed;       /* chunks sealed (and destroys begun): the futex word */
    bpt__atomic_u32 sleepers;     /* drainers asleep on it, or about to be */
};

/* The registry of live sessions. A slot's pointer is published with a
   release store and cleared before the session is freed after a wait, so a
   pinned reader that finds it may use it. */
struct bpt__sessions {
    bpt__atomic_ptr slot[BPT_MAX_SESSIONS];
    uint64_t generation[BPT_MAX_SESSIONS];    /* under the code modification permission */
};
BPT__DATA(struct bpt__sessions, bpt__sessions);   /* session.c */

/* What reads a session's lanes (bpt_session_drain, bpt_session_write):
   take gets a run of whole records of one lane and returns the bytes it
   used (fewer when its room is full); gap gets the count of records a
   flight recorder overwrote before the next run, and returns 0 when it has
   no room for the notice. The read counts in `records` the records taken
   (not context or DROPPED records). */
typedef struct bpt__lane_reader bpt__lane_reader;
struct bpt__lane_reader {
    uint32_t (*take)(bpt__lane_reader *rd, bpt__lane *lane, const unsigned char *p, uint32_t bytes);
    int (*gap)(bpt__lane_reader *rd, bpt__lane *lane, uint64_t count, uint64_t ticks);
    uint64_t records;
};

BPT__PRIVATE bpt__session *bpt__session_lookup(uint64_t id);   /* pinned or under the permission */
BPT__PRIVATE bpt__session *bpt__session_pin(bpt_session handle, const char *who, bpt__thread **rec, int *rc);
BPT__PRIVATE int bpt__session_alloc(const bpt_session_desc *d, bpt__session **out);
BPT__PRIVATE void bpt__session_free(bpt__session *s);
BPT__HOT int bpt__session_admit(bpt__session *s, bpt__thread *rec);
BPT__PRIVATE void bpt__msg_header(bpt_msg *m, unsigned type, uint64_t thread, uint64_t process,
                                  uint64_t ts_ns, uint64_t session);
BPT__PRIVATE void bpt__session_send(bpt__session *s, bpt__thread *rec, const bpt__rec *r);
BPT__PRIVATE void bpt__session_read(bpt__session *s, bpt__lane_reader *rd);   /* under drain_lock */
BPT__PRIVATE uint64_t bpt__lane_number(const bpt__lane *lane);
BPT__PRIVATE bpt__stream *bpt__lane_stream(bpt__lane *lane);
BPT__PRIVATE void bpt__sessions_atfork_child(void);
BPT__PRIVATE void bpt__session_wake(bpt__session *s);   /* [W1]: a chunk sealed, or the destroy began */

/* The USDT probes bptrace fires (probes.c). */
BPT__PRIVATE void bpt__probe_event(const bpt__session *s, const bpt__thread *rec, const bpt__rec *r);
BPT__PRIVATE uint64_t bpt__probe_change_id(void);   /* the change the protocol runs now (bp.c) */
