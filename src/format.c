/* format.c: trace messages as text, off the hot path (the drainer's or the
   tracer callback's thread). dbg's line shapes, recon_trace's timestamps. */

static int64_t bpt__realtime_offset_ns;   /* CLOCK_REALTIME - CLOCK_MONOTONIC, once */
static pthread_once_t bpt__format_once = PTHREAD_ONCE_INIT;

static void bpt__format_init(void) {
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    bpt__realtime_offset_ns = (int64_t)((uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec) -
                              (int64_t)bpt__now_ns();
}

/* Append to a bounded buffer, remembering the length it wanted (snprintf's contract). */
typedef struct bpt__buf { char *p; size_t size, len; } bpt__buf;

static void bpt__bprintf(bpt__buf *b, const char *fmt, ...) {
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(b->len < b->size ? b->p + b->len : NULL, b->len < b->size ? b->size - b->len : 0, fmt, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
}

/* recon_trace's clock: local wall time, HH:MM:SS.microseconds. */
static void bpt__format_time(bpt__buf *b, uint64_t mono_ns) {
    int64_t ns = (int64_t)mono_ns + bpt__realtime_offset_ns;
    time_t secs = (time_t)(ns / 1000000000);
    struct tm tm;
    localtime_r(&secs, &tm);
    bpt__bprintf(b, "%02d:%02d:%02d.%06ld", tm.tm_hour, tm.tm_min, tm.tm_sec, (long)(ns % 1000000000 / 1000));
}

/* One argument, as its type says; i64 through the site's formatter if it has one. */
static void bpt__format_arg(bpt__buf *b, const bpt_msg *m, int i) {
    char tmp[128];
    uint64_t v = m->args[i];
    double d;
    switch (m->argtype[i]) {
    case BPT_ARG_U64: bpt__bprintf(b, "%llu", (unsigned long long)v); break;
    case BPT_ARG_PTR: bpt__bprintf(b, "0x%llx", (unsigned long long)v); break;
    case BPT_ARG_STR: bpt__bprintf(b, "\"%s\"", v < sizeof m->str ? m->str + v : ""); break;
    case BPT_ARG_F64: memcpy(&d, &v, sizeof d); bpt__bprintf(b, "%g", d); break;
    default:
        if (m->format) {
            m->format(tmp, sizeof tmp, v);
            bpt__bprintf(b, "%s", tmp);
        } else {
            bpt__bprintf(b, "%lld", (long long)v);
        }
    }
}

int bpt_format_dbg(const bpt_msg *m, char *buf, size_t size) {
    bpt__buf b;
    int i;
    if (!m || (!buf && size)) return bpt__fail(BPT_EINVAL, "bpt_format_dbg: m or buf is NULL");
    pthread_once(&bpt__format_once, bpt__format_init);
    b.p = buf;
    b.size = size;
    b.len = 0;
    if (size) buf[0] = '\0';
    bpt__format_time(&b, m->ts_ns);
    bpt__bprintf(&b, " (<%llu>) ", (unsigned long long)m->process);
    switch (m->type) {
    case BPT_MSG_CALL:
        bpt__bprintf(&b, "call %s:%s(", m->module, m->name);
        for (i = 0; i < m->nargs; i++) {
            if (i) bpt__bprintf(&b, ",");
            bpt__format_arg(&b, m, i);
        }
        bpt__bprintf(&b, ")");
        if (m->nargs < m->arity) bpt__bprintf(&b, "/%d", m->arity);   /* args not shown */
        if (m->user) bpt__bprintf(&b, " (%s)", m->user);
        break;
    case BPT_MSG_DROPPED:
        bpt__bprintf(&b, "dropped %llu messages (ring full)", (unsigned long long)m->value);
        break;
    case BPT_MSG_LIMIT:
        bpt__bprintf(&b, "rate limit tripped (%llu messages): the session stopped tracing",
                     (unsigned long long)m->value);
        break;
    default:
        bpt__bprintf(&b, "unknown message type %u", (unsigned)m->type);
    }
    return (int)b.len;
}
