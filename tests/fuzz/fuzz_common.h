/* fuzz_common.h: what the libFuzzer targets share (include it after
   bptrace.h). An invariant that fails calls abort(), which libFuzzer
   reports as a crash with the input that caused it.

   The reference parsers below are written from the doc comments in
   src/bpt_api.h, not from src/pattern.c, so the targets test the parsers
   against what the docs promise:
     pattern   "module:function/arity": module is everything before the
               first ':', function everything between it and the one '/'
               after it (it may hold ':'); no second '/'. Each of
               module and function is 1..127 bytes, a glob where '*' matches
               any run of characters and '_' alone matches anything. arity is
               '_' or '*' (any) or a decimal 0..255.
     arg spec  a comma-separated list of i64, u64, ptr, str, f64, at most
               8 (BPT_MAX_ARGS); "" is no spec.
     ret spec  one of i64, u64, ptr, str, f64 (NULL: i64). */
#ifndef BPT_FUZZ_COMMON_H
#define BPT_FUZZ_COMMON_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void fuzz_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s:%d: INVARIANT VIOLATED: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n  bpt_last_error: %s\n", bpt_last_error());
    abort();
}
#define FUZZ_CHECK(cond, ...) do { if (!(cond)) fuzz_fail(__FILE__, __LINE__, #cond, __VA_ARGS__); } while (0)

/* Is rc one of the BPT_E* codes? */
static inline int fuzz_is_code(int rc) {
#define FUZZ_CODE(name, value, text) if (rc == (value)) return 1;
    BPT_ERRORS(FUZZ_CODE)
#undef FUZZ_CODE
    return 0;
}

/* An input as a NUL-terminated string (its bytes up to the first NUL). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
    char *s = (char *)malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* ---- reference pattern ---- */
enum { FUZZ_NAME_MAX = 127 };
typedef struct fuzz_mfa {
    char module[FUZZ_NAME_MAX + 1], function[FUZZ_NAME_MAX + 1];
    int arity;                    /* -1: any */
} fuzz_mfa;

/* Glob match by dynamic programming (no backtracking, no recursion). */
static inline int fuzz_glob(const char *p, const char *s) {
    size_t np = strlen(p), ns = strlen(s), i, j;
    unsigned char row[FUZZ_NAME_MAX + 2], next[FUZZ_NAME_MAX + 2];
    /* row[j]: p[0..i) matches s[0..j) */
    if (ns > FUZZ_NAME_MAX) return 0;
    memset(row, 0, sizeof row);
    row[0] = 1;
    for (i = 0; i < np; i++) {
        memset(next, 0, sizeof next);
        for (j = 0; j <= ns; j++) {
            if (p[i] == '*') next[j] = row[j] || (j > 0 && next[j - 1]);
            else next[j] = j > 0 && row[j - 1] && p[i] == s[j - 1];
        }
        memcpy(row, next, sizeof row);
    }
    return row[ns];
}

/* 1 and *out if text is a well-formed pattern by the doc, else 0. */
static inline int fuzz_parse_pattern(const char *text, fuzz_mfa *out) {
    const char *colon = strchr(text, ':'), *slash, *a;
    size_t ml, fl;
    int arity = 0, digits = 0;
    if (!colon) return 0;
    slash = strchr(colon + 1, '/');
    if (!slash || strchr(slash + 1, '/')) return 0;
    ml = (size_t)(colon - text);
    fl = (size_t)(slash - colon - 1);
    if (ml == 0 || fl == 0 || ml > FUZZ_NAME_MAX || fl > FUZZ_NAME_MAX) return 0;
    memcpy(out->module, text, ml);
    out->module[ml] = '\0';
    memcpy(out->function, colon + 1, fl);
    out->function[fl] = '\0';
    if (strcmp(out->module, "_") == 0) strcpy(out->module, "*");
    if (strcmp(out->function, "_") == 0) strcpy(out->function, "*");
    a = slash + 1;
    if (strcmp(a, "_") == 0 || strcmp(a, "*") == 0) { out->arity = -1; return 1; }
    for (; *a; a++, digits++) {
        if (*a < '0' || *a > '9') return 0;
        arity = arity * 10 + (*a - '0');
        if (arity > 255) return 0;
    }
    if (!digits) return 0;
    out->arity = arity;
    return 1;
}

static inline int fuzz_mfa_match(const fuzz_mfa *p, const char *module, const char *name, int arity) {
    return (p->arity < 0 || p->arity == arity) && fuzz_glob(p->module, module) && fuzz_glob(p->function, name);
}

/* ---- reference argument spec: the count (0..8), or -1 if malformed ---- */
static inline int fuzz_type_of(const char *p, size_t len) {
    static const char *const names[] = { "i64", "u64", "ptr", "str", "f64" };
    int k;
    for (k = 0; k < 5; k++)
        if (len == 3 && memcmp(p, names[k], 3) == 0) return k;
    return -1;
}
static inline int fuzz_parse_argspec(const char *text, uint8_t *types) {
    const char *p = text;
    int n = 0;
    if (!*text) return 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int k = fuzz_type_of(p, len);
        if (k < 0 || n == 8) return -1;
        types[n++] = (uint8_t)k;
        if (!comma) return n;
        p = comma + 1;
    }
}
#endif
