/* record.c: reading trace records. The hit path writes records (kind_call.c,
   frames.c, session.c) as compact as the event allows; everything that
   costs is done here, when they are read: names from ids, ticks to ns,
   strings copied into a message. The same code reads a live session's
   buffers (bpt_session_drain) and a trace file (bpt_trace_file_read). */
#include "internal.h"

/* The header of every message bptrace makes, in one place: its type, the
   thread and process it happened in, when (ns), and the session it goes to.
   The caller zeroed the message. */
BPT__PRIVATE void bpt__msg_header(bpt_msg *m, unsigned type, uint64_t thread, uint64_t process,
                                  uint64_t ts_ns, uint64_t session) {
    m->type = (uint16_t)type;
    m->thread = (uint32_t)thread;
    m->process = process;
    m->ts_ns = ts_ns;
    m->session = session;
}

BPT__PRIVATE uint32_t bpt__rec_bytes(const bpt__rec *r) {
    return (uint32_t)sizeof *r + 8u * r->words;
}

/* How many words a CALL record's info and first word say it has. */
static uint32_t bpt__rec_call_words(const bpt__rec *r, const uint64_t *w) {
    uint32_t n = r->info & BPT__REC_CALL_NARGS, words = 0;
    if (n) words = 1 + n + (uint32_t)((((w[0] >> 40) & 0xffff) + 7) / 8);
    if (r->info & BPT__REC_CALL_CALLER) words += 2;
    if (r->info & BPT__REC_CALL_USER) words += 1;
    return words;
}

/* The bytes of the record at p if it is sound (a type it knows, its words
   within avail, a CALL's parts adding up), else 0. Files are checked with
   it before anything is decoded; a live buffer holds only what the hit
   path wrote. */
BPT__PRIVATE int bpt__rec_check(const void *p, uint32_t avail) {
    const bpt__rec *r = (const bpt__rec *)p;
    const uint64_t *w = (const uint64_t *)(r + 1);
    uint32_t bytes;
    if (avail < sizeof *r) return 0;
    bytes = bpt__rec_bytes(r);
    if (bytes > avail) return 0;
    switch (r->type) {
    case BPT_MSG_CALL:
        if ((r->info & BPT__REC_CALL_NARGS) > BPT_MAX_ARGS || (r->info & ~(unsigned)BPT__REC_CALL_INFO)) return 0;
        if ((r->info & BPT__REC_CALL_NARGS) && (r->words == 0 || ((w[0] >> 40) & 0xffff) > BPT_MSG_STR_BYTES)) return 0;
        return bpt__rec_call_words(r, w) == r->words ? (int)bytes : 0;
    case BPT_MSG_RETURN_FROM:
        return r->words >= 1 && r->words <= BPT_MSG_STR_BYTES / 8 ? (int)bytes : 0;
    case BPT_MSG_EXCEPTION_FROM: case BPT_MSG_RETURN_TO: case BPT_MSG_DROPPED: case BPT_MSG_LIMIT:
        return r->words == 1 ? (int)bytes : 0;
    case BPT__REC_CONTEXT:   /* version 1 files: no anchor */
        return r->words == 1 || r->words == 2 ? (int)bytes : 0;
    default:
        return 0;
    }
}

static const char bpt__unknown_name[] = "?";

/* A function's entry: the id names a function, not a message (a file's
   record may say anything). */
/* A decoder of this process's own records, as they are read now: names
   from the live table, the clock's current calibration. */
BPT__PRIVATE void bpt__decoder_live(bpt__decoder *d, uint64_t session) {
    d->name = bpt__names_live;
    d->ctx = NULL;
    bpt__clock_cal_get(&d->cal);
    d->session = session;
}

static const bpt__name *bpt__rec_function(const bpt__decoder *d, uint32_t id) {
    const bpt__name *n = id ? d->name(d->ctx, id) : NULL;
    return n && n->arity >= 0 && n->module ? n : NULL;
}

/* Names of an id into a message's fields; an unknown id reads "?". */
static void bpt__rec_names(const bpt__decoder *d, uint32_t id, const char **module, const char **name, int *arity) {
    const bpt__name *n = bpt__rec_function(d, id);
    *module = n ? n->module : bpt__unknown_name;
    *name = n ? n->name : bpt__unknown_name;
    *arity = n ? n->arity : 0;
}

/* A CALL's arguments, caller and message. */
static void bpt__rec_decode_call(const bpt__decoder *d, const bpt__rec *r, bpt_msg *m) {
    const uint64_t *w = (const uint64_t *)(r + 1);
    uint32_t n = r->info & BPT__REC_CALL_NARGS, i;
    const bpt__name *fn = bpt__rec_function(d, r->id);
    bpt__rec_names(d, r->id, &m->module, &m->name, &m->arity);
    m->format = fn ? fn->format : NULL;
    m->no_return = (r->info & BPT__REC_CALL_NO_RETURN) != 0;
    if (n) {
        uint32_t strbytes = (uint32_t)((w[0] >> 40) & 0xffff);
        m->nargs = (uint16_t)n;
        for (i = 0; i < n; i++) {
            m->argtype[i] = (uint8_t)((w[0] >> (4 * i)) & 0xf);
            m->args[i] = w[1 + i];
        }
        memcpy(m->str, &w[1 + n], strbytes);
        m->str[sizeof m->str - 1] = '\0';
        w += 1 + n + (strbytes + 7) / 8;
    }
    if (r->info & BPT__REC_CALL_CALLER) {
        m->caller = w[0];
        if (w[1] && w[1] <= 0xffffffffu)
            bpt__rec_names(d, (uint32_t)w[1], &m->caller_module, &m->caller_name, &m->caller_arity);
        w += 2;
    }
    if (r->info & BPT__REC_CALL_USER) {
        const bpt__name *u = w[0] <= 0xffffffffu ? d->name(d->ctx, (uint32_t)w[0]) : NULL;
        m->user = u && u->arity < 0 ? u->name : NULL;   /* a message's entry, not a function's */
    }
}

BPT__PRIVATE void bpt__stream_init(bpt__stream *st) { memset(st, 0, sizeof *st); }

/* The stamp of a record of stream st that read `ticks`: from the stream's
   anchor (clock.h), or the calibration's own pair before the first one;
   never earlier than the stream's last stamp (two anchors' conversions of
   neighbouring records can differ by the rate's error over one span). */
BPT__PRIVATE uint64_t bpt__stream_ns(const bpt__decoder *d, bpt__stream *st, uint64_t ticks) {
    uint64_t ns = st->anchored ? bpt__clock_anchored_ns(&d->cal, st->anchor_tick, st->anchor_ns, ticks)
                               : bpt__clock_cal_ns(&d->cal, ticks);
    if (ns < st->last_ns) ns = st->last_ns;
    st->last_ns = ns;
    return ns;
}

/* Decode one sound record of stream st. A context record updates st (its
   thread, process and anchor) and gives no message (0); any other fills m
   (1). */
BPT__PRIVATE int bpt__rec_decode(const bpt__decoder *d, bpt__stream *st, const bpt__rec *r, bpt_msg *m) {
    const uint64_t *w = (const uint64_t *)(r + 1);
    if (r->type == BPT__REC_CONTEXT) {
        st->tid = r->id;
        st->process = w[0];
        if (r->words >= 2) {
            st->anchored = 1;
            st->anchor_tick = r->ticks;
            st->anchor_ns = w[1];
        }
        return 0;
    }
    memset(m, 0, sizeof *m);
    bpt__msg_header(m, r->type, st->tid, st->process, bpt__stream_ns(d, st, r->ticks), d->session);
    switch (r->type) {
    case BPT_MSG_CALL:
        bpt__rec_decode_call(d, r, m);
        break;
    case BPT_MSG_RETURN_FROM:
        bpt__rec_names(d, r->id, &m->module, &m->name, &m->arity);
        m->value_type = (uint8_t)r->info;
        if (r->info == BPT_ARG_STR) {
            memcpy(m->str, w, 8u * r->words);
            m->str[sizeof m->str - 1] = '\0';
        } else {
            m->value = w[0];
        }
        break;
    case BPT_MSG_EXCEPTION_FROM:
        bpt__rec_names(d, r->id, &m->module, &m->name, &m->arity);
        m->exception_class = r->info ? "throw" : "unwind";
        m->value = w[0];
        break;
    case BPT_MSG_RETURN_TO:
        if (r->id) bpt__rec_names(d, r->id, &m->module, &m->name, &m->arity);
        m->caller = w[0];
        break;
    default:   /* DROPPED, LIMIT */
        m->value = w[0];
    }
    return 1;
}
