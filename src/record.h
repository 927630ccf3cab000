/* record.h: what other parts use of trace records (record.c) and of the
   name table (names.c). A record is what a traced thread writes for one
   event: 16 bytes of header, then 8-byte words only where the event carries
   more (the layout is public: >>tracefile in api_session.h). Names and ns
   are resolved when a record is read, never on the hit path. */

/* The header every record starts with. */
typedef struct bpt__rec {
    uint64_t ticks;               /* the clock's counter (bpt__now_ticks) */
    uint8_t type;                 /* enum bpt_msg_type, or BPT__REC_CONTEXT */
    uint8_t words;                /* 8-byte words that follow */
    uint16_t info;                /* per type (>>tracefile) */
    uint32_t id;                  /* a name id, or the thread id (context) */
} bpt__rec;

enum {
    BPT__REC_CONTEXT = 15,        /* the thread and process of the records after it, and an anchor */
    BPT__REC_CALL_NARGS = 0x0f,   /* CALL info: argument count */
    BPT__REC_CALL_CALLER = 0x10,  /* CALL info: caller address and id follow */
    BPT__REC_CALL_USER = 0x20,    /* CALL info: a match spec message id follows */
    BPT__REC_CALL_NO_RETURN = 0x40,   /* CALL info: no RETURN_FROM will end it: its session does
                                         not trace its return (neither BPT_RETURN nor
                                         BPT_EXCEPTION), or cannot (bpt__hit_frame_room) (version 3) */
    BPT__REC_CALL_INFO = 0x7f,    /* CALL info: every bit a record may set */
    BPT__REC_MAX_WORDS = 1 + BPT_MAX_ARGS + BPT_MSG_STR_BYTES / 8 + 2 + 1,
    BPT__REC_MAX_BYTES = (int)sizeof(bpt__rec) + 8 * BPT__REC_MAX_WORDS,
    /* What a plain call record is written with (>>plain call in kind_call.c):
       the header, the types word, every argument's */
    BPT__CALL_PLAIN_ROOM = (int)sizeof(bpt__rec) + 8 * (1 + BPT_MAX_ARGS),
    /* A return_from of one word (the plain return, frames.c) */
    BPT__RETURN_PLAIN_BYTES = (int)sizeof(bpt__rec) + 8
};

/* Room for the largest record, built on the stack before it is sent. */
typedef struct bpt__recbuf {
    bpt__rec h;
    uint64_t w[BPT__REC_MAX_WORDS];
} bpt__recbuf;

/* One entry of the name table: a function's names, or (arity -1) a match
   spec's message in `name`. Immutable once published. */
typedef struct bpt__name {
    const char *module, *name;    /* interned */
    int arity;
    bpt_format_fn format;         /* a VM site's argument formatter, or NULL */
    bpt__atomic_u64 addr;         /* native: the entry address of the function registered
                                     last under this id (a re-registration stores it,
                                     relaxed); 0: a VM function. bpt__names_addr reads it */
    int held;                     /* native: a function registered at addr holds the id (names.c;
                                     writers only, under the intern lock) */
} bpt__name;

/* Names (names.c): ids from 1; 0 names nothing. bpt__names_id runs on the
   set path (under the code modification permission); bpt__names_get
   anywhere, for an id a record holds. */
BPT__PRIVATE int bpt__names_id(const char *module, const char *name, int arity, bpt_format_fn format,
                               const void *addr, uint32_t *id);
BPT__PRIVATE void bpt__names_release(uint32_t id, const void *addr);
BPT__PRIVATE const char *bpt__names_why(int rc);
BPT__PRIVATE const bpt__name *bpt__names_get(uint32_t id);
BPT__PRIVATE uint32_t bpt__names_count(void);
BPT__PRIVATE uint64_t bpt__names_addr(uint32_t id);   /* the entry address, or 0 (the USDT probes' arg1) */
BPT__PRIVATE const bpt__name *bpt__names_live(void *ctx, uint32_t id);   /* a decoder's name source */

/* How a reader turns a record into a message: names by id, ticks into ns. */
typedef struct bpt__decoder {
    const bpt__name *(*name)(void *ctx, uint32_t id);
    void *ctx;
    bpt__clock_cal cal;
    uint64_t session;
} bpt__decoder;
/* One thread's stream, as far as it was read: whom its records are of,
   the anchor its stamps are converted from (clock.h), and the last stamp
   given (a stream's stamps never go back). */
typedef struct bpt__stream {
    uint32_t tid;
    int anchored;                 /* 0: no anchor read yet; the calibration's own pair serves */
    uint64_t process;
    uint64_t anchor_tick, anchor_ns, last_ns;
} bpt__stream;

/* Records (record.c). */
BPT__PRIVATE void bpt__decoder_live(bpt__decoder *d, uint64_t session);   /* live names, the current calibration */
BPT__PRIVATE uint32_t bpt__rec_bytes(const bpt__rec *r);
BPT__PRIVATE int bpt__rec_check(const void *p, uint32_t avail);   /* bytes of a sound record, or 0 */
BPT__PRIVATE int bpt__rec_decode(const bpt__decoder *d, bpt__stream *st, const bpt__rec *r, bpt_msg *m);
BPT__PRIVATE uint64_t bpt__stream_ns(const bpt__decoder *d, bpt__stream *st, uint64_t ticks);
BPT__PRIVATE void bpt__stream_init(bpt__stream *st);
