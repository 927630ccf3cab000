/* intern.c: interned strings. Module and function names, and match spec
   messages, are copied once and kept for the life of the process, so a trace
   message can name its function after the function is gone. Only the set
   path interns (under its own lock); the hit path only reads the pointers. */
#include "internal.h"

typedef struct bpt__interned {
    struct bpt__interned *next;
    uint32_t hash;
    char text[1];
} bpt__interned;

enum { BPT__INTERN_BUCKETS = 1024 };
static bpt__interned *bpt__intern_table[BPT__INTERN_BUCKETS];
BPT__SHARED pthread_mutex_t bpt__intern_lock = PTHREAD_MUTEX_INITIALIZER;   /* 3rd in the lock order (locks.c) */

/* A key for a table's keyed hash: its address and the monotonic clock,
   mixed (registry.h). */
BPT__PRIVATE uint64_t bpt__hash_seed(const void *table) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ((uint64_t)(uintptr_t)table * UINT64_C(0x9e3779b97f4a7c15)) ^ (uint64_t)ts.tv_nsec ^
           ((uint64_t)ts.tv_sec << 32);
}

/* x under key seed: splitmix64's finalizer (Steele, Lea and Flood), whose
   every output bit depends on every input bit. A key of two fields hashes
   one under the seed before it meets the other (format.c): combined first,
   by any fixed invertible step, inputs chosen to combine to one value
   collide under every seed (found by review). */
BPT__PRIVATE uint64_t bpt__hash_u64(uint64_t x, uint64_t seed) {
    x ^= seed;
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

BPT__PRIVATE uint32_t bpt__hash_str(const char *s) {
    uint32_t h = 2166136261u;   /* FNV-1a */
    while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
    return h;
}

/* The interned copy of text, or NULL when memory ran out. */
BPT__PRIVATE const char *bpt__intern(const char *text) {
    uint32_t h = bpt__hash_str(text);
    size_t len = strlen(text);
    bpt__interned *e;
    bpt__progress_ensure_init();   /* registers the fork handlers that cover this lock */
    pthread_mutex_lock(&bpt__intern_lock);
    for (e = bpt__intern_table[h % BPT__INTERN_BUCKETS]; e; e = e->next)
        if (e->hash == h && strcmp(e->text, text) == 0) break;
    if (!e && (e = (bpt__interned *)BPT_MALLOC(sizeof *e + len)) != NULL) {
        e->hash = h;
        memcpy(e->text, text, len + 1);
        e->next = bpt__intern_table[h % BPT__INTERN_BUCKETS];
        bpt__intern_table[h % BPT__INTERN_BUCKETS] = e;
    }
    pthread_mutex_unlock(&bpt__intern_lock);
    return e ? e->text : NULL;
}
