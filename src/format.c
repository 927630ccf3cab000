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

/* One value, as its type says; i64 through the site's formatter if it has
   one. A STR value is an offset into m->str, where the hit copied it. */
static void bpt__format_value(bpt__buf *b, const bpt_msg *m, uint64_t v, int type) {
    char tmp[128];
    double d;
    switch (type) {
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
            bpt__format_value(&b, m, m->args[i], m->argtype[i]);
        }
        bpt__bprintf(&b, ")");
        if (m->nargs < m->arity) bpt__bprintf(&b, "/%d", m->arity);   /* args not shown */
        if (m->user) bpt__bprintf(&b, " (%s)", m->user);
        if (m->caller_module) bpt__bprintf(&b, " (caller %s:%s/%d)", m->caller_module, m->caller_name, m->caller_arity);
        else if (m->caller) bpt__bprintf(&b, " (caller 0x%llx)", (unsigned long long)m->caller);
        break;
    case BPT_MSG_RETURN_FROM:   /* dbg: returned from m:f/a -> value */
        bpt__bprintf(&b, "returned from %s:%s/%d -> ", m->module, m->name, m->arity);
        bpt__format_value(&b, m, m->value, m->value_type);
        break;
    case BPT_MSG_EXCEPTION_FROM:   /* dbg: exception_from m:f/a {class,value} */
        bpt__bprintf(&b, "exception_from %s:%s/%d {%s,", m->module, m->name, m->arity,
                     m->exception_class ? m->exception_class : "error");
        bpt__format_value(&b, m, m->value, BPT_ARG_I64);
        bpt__bprintf(&b, "}");
        break;
    case BPT_MSG_RETURN_TO:   /* dbg: returning to m:f/a */
        if (m->module) bpt__bprintf(&b, "returning to %s:%s/%d", m->module, m->name, m->arity);
        else if (m->caller) bpt__bprintf(&b, "returning to 0x%llx", (unsigned long long)m->caller);
        else bpt__bprintf(&b, "returning to undefined");
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

/* >>profile: tprof's table. Largest value first; ties by name. */
static int bpt__profile_cmp(const void *a, const void *b) {
    const bpt_profile_row *x = (const bpt_profile_row *)a, *y = (const bpt_profile_row *)b;
    int c;
    if (x->value != y->value) return x->value < y->value ? 1 : -1;
    if ((c = strcmp(x->module ? x->module : "", y->module ? y->module : "")) != 0) return c;
    if ((c = strcmp(x->name ? x->name : "", y->name ? y->name : "")) != 0) return c;
    return x->process < y->process ? -1 : x->process > y->process;
}

int bpt_format_profile(bpt_profile_row *rows, int n, int memory, char *buf, size_t size) {
    bpt__buf b;
    uint64_t total = 0, calls = 0;
    int i, procs = 0;
    char fn[300];
    if ((!rows && n > 0) || n < 0 || (!buf && size))
        return bpt__fail(BPT_EINVAL, "bpt_format_profile: rows NULL with n %d, n < 0, or buf NULL", n);
    b.p = buf;
    b.size = size;
    b.len = 0;
    if (size) buf[0] = '\0';
    if (n > 1) qsort(rows, (size_t)n, sizeof *rows, bpt__profile_cmp);
    for (i = 0; i < n; i++) {
        total += rows[i].value;
        calls += rows[i].calls;
        procs |= rows[i].process != 0;
    }
    bpt__bprintf(&b, "%-44s %10s %12s %10s  [    %%]\n", procs ? "PROCESS  FUNCTION" : "FUNCTION", "CALLS",
                 memory ? "BYTES" : "TIME(us)", memory ? "PER CALL" : "PER CALL");
    for (i = 0; i < n; i++) {
        const bpt_profile_row *r = &rows[i];
        double pct = total ? 100.0 * (double)r->value / (double)total : 0.0;
        if (procs) snprintf(fn, sizeof fn, "<%llu>  %s:%s/%d", (unsigned long long)r->process,
                            r->module ? r->module : "?", r->name ? r->name : "?", r->arity);
        else snprintf(fn, sizeof fn, "%s:%s/%d", r->module ? r->module : "?", r->name ? r->name : "?", r->arity);
        if (memory)
            bpt__bprintf(&b, "%-44s %10llu %12llu %10.1f  [%5.1f]\n", fn, (unsigned long long)r->calls,
                         (unsigned long long)r->value, r->calls ? (double)r->value / (double)r->calls : 0.0, pct);
        else
            bpt__bprintf(&b, "%-44s %10llu %12.1f %10.2f  [%5.1f]\n", fn, (unsigned long long)r->calls,
                         (double)r->value / 1e3, r->calls ? (double)r->value / 1e3 / (double)r->calls : 0.0, pct);
    }
    if (memory)
        bpt__bprintf(&b, "%-44s %10llu %12llu %10s  [100.0]\n", "", (unsigned long long)calls,
                     (unsigned long long)total, "");
    else
        bpt__bprintf(&b, "%-44s %10llu %12.1f %10s  [100.0]\n", "", (unsigned long long)calls, (double)total / 1e3, "");
    return (int)b.len;
}
