/* session.h: what other parts use of trace sessions (session.c): the
   session itself, the table of live sessions, and sending a message. */

/* One trace session (OTP 27's trace:session_create): its tracer, its rate
   limit, its lanes and the patterns in force. */
struct bpt__session {
    uint64_t id;                  /* weak id: generation << 16 | slot */
    char name[64];
    bpt_tracer_fn tracer;
    void *tracer_user;
    uint32_t ring_size;
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
    bpt__atomic_ptr lanes[BPT_MAX_THREADS + 1];   /* the last is the overflow lane */
    bpt__atomic_u32 overflow_busy;
    pthread_mutex_t drain_lock;
    bpt__pattern_entry *patterns; /* set path only: the patterns in force, in order */
};

/* The registry of live sessions. A slot's pointer is published with a
   release store and cleared before the session is freed after a wait, so a
   pinned reader that finds it may use it. */
struct bpt__sessions {
    bpt__atomic_ptr slot[BPT_MAX_SESSIONS];
    uint64_t generation[BPT_MAX_SESSIONS];    /* under the code modification permission */
};
BPT__DATA(struct bpt__sessions, bpt__sessions);   /* session.c */

BPT__PRIVATE bpt__session *bpt__session_lookup(uint64_t id);   /* pinned or under the permission */
BPT__PRIVATE int bpt__session_alloc(const bpt_session_desc *d, bpt__session **out);
BPT__PRIVATE void bpt__session_free(bpt__session *s);
BPT__PRIVATE int bpt__session_admit(bpt__session *s, bpt__thread *rec, uint64_t now);
BPT__PRIVATE void bpt__msg_header(bpt_msg *m, unsigned type, uint64_t thread, uint64_t process,
                                  uint64_t ts_ns, uint64_t session);
BPT__PRIVATE void bpt__session_send(bpt__session *s, bpt__thread *rec, const bpt_msg *m);
BPT__PRIVATE void bpt__sessions_atfork_child(void);
