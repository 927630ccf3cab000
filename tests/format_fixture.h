/* format_fixture.h: what the formatter tests (t_format, t_format_drops)
   share: hand-made messages, and reading back what a writer wrote. Include
   it after bptrace.h and check.h. */
#ifndef BPT_FORMAT_FIXTURE_H
#define BPT_FORMAT_FIXTURE_H
#include <string.h>

/* A message of module "m", arity 1, at ts_us microseconds (a DROPPED one
   names no function). */
static inline bpt_msg msg(int type, uint32_t tid, const char *name, uint64_t ts_us) {
    bpt_msg m;
    memset(&m, 0, sizeof m);
    m.type = (uint16_t)type;
    m.thread = tid;
    m.module = type == BPT_MSG_DROPPED ? NULL : "m";
    m.name = name;   /* interned in real messages: one pointer per name */
    m.arity = 1;
    m.ts_ns = ts_us * 1000;
    return m;
}

/* How many times `what` occurs in text. */
static inline long count(const char *text, const char *what) {
    long n = 0;
    const char *p = text;
    while ((p = strstr(p, what)) != NULL) { n++; p += strlen(what); }
    return n;
}

/* Everything written to f so far, NUL-terminated (the caller frees it). */
static inline char *slurp(FILE *f) {
    long n;
    char *buf;
    fflush(f);
    n = ftell(f);
    rewind(f);
    buf = (char *)calloc(1, (size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) buf[0] = '\0';
    return buf;
}
#endif
