/* t_alloc_fail.c: allocation-failure injection (issue #9, part 3).

   BPT_MALLOC/BPT_FREE are a counting allocator that can refuse the Nth
   allocation after it is armed ("nth": only that one; "from": that one and
   every later one). For each path the test runs the call with N = 1, 2, 3, ...
   until it completes without reaching the refusal, each failing N in both
   modes, and checks what the docs promise (src/bpt_api.h; BPT_MALLOC: "a
   NULL return gives BPT_ENOMEM and changes nothing"):
     - the call returns BPT_ENOMEM (bpt_register_vm: also the documented
       "registered, but a remembered pattern could not be applied"), and
       bpt_last_error() was set by this failure (it is stamped before);
     - no allocation leaked and nothing changed: the count of live blocks is
       back where it was (interned strings and thread records are permanent
       by design and counted apart, and blocks on bptrace's free lists of
       breakpoints and counters are bptrace's, not a leak);
     - earlier settings still work exactly: a pattern set before counts calls
       exactly, a traced function still sends its messages, remembered
       patterns still apply to functions registered later, the words at the
       sites are what the settings say.
   Paths: bpt_session_create; bpt_trace_pattern on, with a match spec (args,
   message), pause, restart, off, and matching nothing; a remembered pattern
   replayed by bpt_register_vm; bpt_register_vm (also growing the registry's
   tables); bpt_session_destroy; bpt_trace_info(_each); a hit's first
   message (its ring) in a ring and a callback session, from the main thread
   and from a new thread; a return-trace hit's shadow stack; every API
   function from a new thread whose thread record cannot be allocated; and
   where the compiler has native sites: trace_pattern on/off and
   session_destroy on a native function (their code writes allocate),
   bpt_register_native and bpt_register_module reusing retired records, and
   bpt_unregister_module. A hit must never crash; the message it loses to a
   failed ring allocation must be counted (produced and dropped).

   Allocations are tagged with the bptrace.h line that made them (__LINE__ in
   BPT_MALLOC and BPT_HIT_MAP), so the permanent kinds (the intern table, thread records) are
   recognised by calibration at start, not by line numbers written here.
   T_ALLOC_VERBOSE=1 prints the line of every refused allocation.

   Output: one line per path: how many Ns failed, and the final result; one
   line per new-thread case (>>errors: every function may return BPT_ENOMEM
   on a thread's first call, when its record cannot be made). */
static void *t_malloc(unsigned long n, long tag);
static void t_free(void *p);
#define BPT_MALLOC(n) t_malloc((unsigned long)(n), (long)__LINE__)
#define BPT_FREE(p) t_free(p)
/* The hit path's memory (a thread's record, buffers, shadow stacks, count
   pages) goes through the same counting allocator, zero-filled as mmap's. */
static void *t_map(unsigned long n, long tag);
#define BPT_HIT_MAP(n) t_map((unsigned long)(n), (long)__LINE__)
#define BPT_HIT_UNMAP(p, n) t_free(p)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#ifndef BPT_MAX_SESSIONS
#define BPT_MAX_SESSIONS 64
#endif

/* ------------------------------------------------------------------------
   The allocator: a header before each block links it into a list of live
   blocks with its tag and sequence number. */
typedef struct t_hdr {
    struct t_hdr *prev, *next;
    unsigned long size;
    long seq, tag, magic;
} t_hdr;   /* 48 bytes: keeps malloc's 16-byte alignment */
typedef char t_hdr_keeps_alignment[sizeof(t_hdr) % 16 == 0 ? 1 : -1];
#define T_MAGIC 0x7a11f41L

enum { T_OFF = 0, T_NTH = 1, T_FROM = 2 };
static pthread_mutex_t t_lock = PTHREAD_MUTEX_INITIALIZER;
static t_hdr t_head = { &t_head, &t_head, 0, 0, 0, 0 };
static long t_seq, t_nlive;
static int t_mode;
static long t_fail_at, t_calls, t_injected;
static long t_refused_tag = -1;   /* the tag of the last refused allocation */
static long t_intern_tag = -1, t_record_tag = -1, t_count_tag = -1;
static int t_verbose;             /* T_ALLOC_VERBOSE=1: print each refused allocation's line */

static void *t_malloc(unsigned long n, long tag) {
    t_hdr *h;
    pthread_mutex_lock(&t_lock);
    if (t_mode != T_OFF) {
        t_calls++;
        if ((t_mode == T_NTH && t_calls == t_fail_at) || (t_mode == T_FROM && t_calls >= t_fail_at)) {
            t_injected++;
            t_refused_tag = tag;
            if (t_verbose) fprintf(stderr, "  (refused allocation %ld: bptrace.h:%ld, %lu bytes)\n", t_calls, tag, n);
            pthread_mutex_unlock(&t_lock);
            return NULL;
        }
    }
    h = (t_hdr *)malloc(sizeof *h + n);
    if (h) {
        h->size = n;
        h->seq = ++t_seq;
        h->tag = tag;
        h->magic = T_MAGIC;
        h->next = &t_head;
        h->prev = t_head.prev;
        t_head.prev->next = h;
        t_head.prev = h;
        t_nlive++;
    }
    pthread_mutex_unlock(&t_lock);
    return h ? (void *)(h + 1) : NULL;
}

static void *t_map(unsigned long n, long tag) {
    void *p = t_malloc(n, tag);
    if (p) memset(p, 0, n);
    return p;
}

static void t_free(void *p) {
    t_hdr *h;
    if (!p) return;
    h = (t_hdr *)p - 1;
    pthread_mutex_lock(&t_lock);
    if (h->magic != T_MAGIC) {
        pthread_mutex_unlock(&t_lock);
        fprintf(stderr, "t_alloc_fail.c: BPT_FREE of a block BPT_MALLOC did not return (or freed twice)\n");
        abort();
    }
    h->magic = 0;
    h->prev->next = h->next;
    h->next->prev = h->prev;
    t_nlive--;
    pthread_mutex_unlock(&t_lock);
    free(h);
}

static void t_arm(int mode, long n) {
    pthread_mutex_lock(&t_lock);
    t_mode = mode;
    t_fail_at = n;
    t_calls = 0;
    t_injected = 0;
    pthread_mutex_unlock(&t_lock);
}

/* Disarm; returns how many allocations were refused. */
static long t_disarm(void) {
    long k;
    pthread_mutex_lock(&t_lock);
    t_mode = T_OFF;
    k = t_injected;
    pthread_mutex_unlock(&t_lock);
    return k;
}

/* Live blocks: all but the permanent kinds (tag -2), or those of one tag. */
static long t_live_tag(long tag) {
    t_hdr *h;
    long k = 0;
    pthread_mutex_lock(&t_lock);
    for (h = t_head.next; h != &t_head; h = h->next)
        if (tag == -2 ? h->tag != t_intern_tag && h->tag != t_record_tag && h->tag != t_count_tag : h->tag == tag)
            k++;
    pthread_mutex_unlock(&t_lock);
    return k;
}
/* Blocks on bptrace's free lists (>>recycle in ptrset.c): GenericBps and
   BpCounts given back, kept for the next change, never freed. They are
   bptrace's, reachable, and not a leak: t_live leaves them out. */
static long t_recycled(void) {
    const bpt__recycle *lists[2] = { &bpt__bp_blocks, &bpt__count_blocks };
    long k = 0;
    int i;
    for (i = 0; i < 2; i++) {
        void *p = lists[i]->head;
        while (p) {
            k++;
            memcpy(&p, p, sizeof p);
        }
    }
    return k;
}
static long t_live(void) { return t_live_tag(-2) - t_recycled(); }

/* The tag of every live block newer than seq, if they all share one; -1 if
   there is none, -3 if they differ. Their number in *n. */
static long t_tag_since(long seq, long *n) {
    t_hdr *h;
    long tag = -1;
    *n = 0;
    pthread_mutex_lock(&t_lock);
    for (h = t_head.next; h != &t_head; h = h->next)
        if (h->seq > seq) {
            ++*n;
            tag = tag == -1 || tag == h->tag ? h->tag : -3;
        }
    pthread_mutex_unlock(&t_lock);
    return tag;
}
static long t_now_seq(void) {
    long s;
    pthread_mutex_lock(&t_lock);
    s = t_seq;
    pthread_mutex_unlock(&t_lock);
    return s;
}

/* ------------------------------------------------------------------------
   The fake VM: sites hold 0x1000 + i; BP is the breakpoint opcode. */
#define BP ((bpt_vm_word)0xB9B9B9u)
#define NSITES 320
#define ORIG(i) ((bpt_vm_word)(0x1000u + (unsigned)(i)))
enum { SITE_BASE = 0, SITE_C1 = 1, SITE_C2 = 2, SITE_PROBE = 3, SITE_R1 = 4, SITE_LATE = 5,
       SITE_VICTIM = 6, SITE_CALIB = 7, SITE_FILL = 16 };
static bpt_vm_word code[NSITES];
static uint64_t vm_arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static const bpt_vm_ops ops = { .arg = vm_arg };

static bpt_func *fbase, *fc1, *fc2;
static bpt_session S, S2;          /* "counter": COUNT on vm:base/1; "messages": CALL on vm:base/1 */
static uint64_t expect_base_count;
static int expect_funcs;
static const char *volatile current = "setup";

static bpt_vm_word hit(bpt_func *f, int site, uint64_t a0) {
    uint64_t frame[4] = { a0, a0 + 1, a0 + 2, a0 + 3 };
    bpt_vm_word w = BPT_VM_FETCH(&code[site]);
    if (w == BP) w = bpt_vm_breakpoint(f, frame, NULL);
    CHECK(w == ORIG(site), "%s: calling site %d executed 0x%lx, expected its original 0x%lx", current, site,
          (unsigned long)w, (unsigned long)ORIG(site));
    return w;
}

static uint64_t count_of(bpt_session s, bpt_func *f, unsigned *flags, int *paused) {
    bpt_info info;
    int rc;
    memset(&info, 0, sizeof info);
    rc = bpt_trace_info(s, f, BPT_INFO_COUNT | BPT_INFO_FLAGS, &info);
    CHECK(rc == 0, "%s: bpt_trace_info returned %d (%s)", current, rc, bpt_last_error());
    if (flags) *flags = info.flags;
    if (paused) *paused = info.count_paused;
    return info.count;
}

static int drain_calls(bpt_session s, bpt_msg *out, int max, int *notices) {
    bpt_msg buf[64];
    int n = bpt_session_drain(s, buf, 64), i, k = 0;
    CHECK(n >= 0, "%s: bpt_session_drain returned %d (%s)", current, n, bpt_last_error());
    if (notices) *notices = 0;
    for (i = 0; i < n; i++) {
        if (buf[i].type == BPT_MSG_CALL && k < max) out[k++] = buf[i];
        else if (buf[i].type == BPT_MSG_DROPPED && notices) *notices += (int)buf[i].value;
    }
    return k;
}

/* The state set up first still works exactly: vm:base/1 counted by S and
   traced by S2, the function set unchanged. */
static void verify(const char *after) {
    bpt_msg m[8];
    bpt_func *lk = NULL;
    bpt_session_counts st;
    uint64_t c;
    unsigned flags = 0;
    int i, n;
    for (i = 0; i < 3; i++) hit(fbase, SITE_BASE, 7);
    expect_base_count += 3;
    c = count_of(S, fbase, &flags, NULL);
    CHECK(c == expect_base_count && flags == BPT_COUNT, "after %s: vm:base/1 counted %lu (flags 0x%x), expected %lu",
          after, (unsigned long)c, flags, (unsigned long)expect_base_count);
    n = drain_calls(S2, m, 8, NULL);
    CHECK(n == 3, "after %s: vm:base/1 sent %d call messages, expected 3", after, n);
    for (i = 0; i < n; i++)
        CHECK(m[i].module && strcmp(m[i].module, "vm") == 0 && m[i].name && strcmp(m[i].name, "base") == 0 &&
              m[i].nargs == 1 && m[i].args[0] == 7, "after %s: message %d is not vm:base(7)", after, i);
    CHECK(BPT_VM_FETCH(&code[SITE_BASE]) == BP, "after %s: vm:base/1 lost its breakpoint word", after);
    CHECK(bpt_func_count() == expect_funcs, "after %s: %d functions registered, expected %d", after,
          bpt_func_count(), expect_funcs);
    CHECK(bpt_func_lookup("vm", "base", 1, &lk) == 0 && lk == fbase, "after %s: vm:base/1 not found", after);
    CHECK(bpt_session_stats(S, &st) == 0 && strcmp(st.name, "counter") == 0, "after %s: session S gone", after);
    CHECK(bpt_session_stats(S2, &st) == 0 && strcmp(st.name, "messages") == 0 && st.dropped == 0,
          "after %s: session S2 gone or dropping", after);
}

/* bpt_last_error() is stamped before each call, so a failure that leaves it
   alone is caught. */
#define MARK "t_alloc_fail-marker"
static void stamp_last_error(void) {
    bpt_func *x = NULL;
    CHECK(bpt_func_lookup(MARK, MARK, 0, &x) == BPT_ENOENT, "marker lookup did not fail");
}
static int last_error_fresh(const char *le) {
    return le && le[0] && !strstr(le, MARK);
}

static const char *code_name(int rc) {
#define T_NAME(name, value, text) if (rc == (value)) return #name;
    BPT_ERRORS(T_NAME)
#undef T_NAME
    return rc > 0 ? "(a count)" : "(not a BPT_E*)";
}

/* ------------------------------------------------------------------------
   The driver. For N = 1, 2, ...: setup (unarmed), the call with the Nth
   allocation failing, checks, cleanup (unarmed). Each N that fails runs
   again with every allocation from the Nth on failing. The first N the call
   completes without reaching is its success; the driver returns its code. */
typedef struct tpath {
    const char *name;
    void (*setup)(void);
    int (*call)(void);
    void (*on_fail)(int rc);      /* the state after an injected failure */
    int (*partial)(int rc);       /* non-NULL and true: a documented partial result (live count may differ) */
    void (*cleanup)(int rc, long injected);
} tpath;

static int t_max_n = 400;
static void run_once(const tpath *p, int mode, int n, int *rc_out, long *inj_out, int *interned) {
    long live0 = t_live(), live1, rec1, inj, interns;
    int rc, partial;
    const char *le;
    if (p->setup) p->setup();
    live1 = t_live();
    rec1 = t_live_tag(t_record_tag);
    stamp_last_error();
    interns = t_live_tag(t_intern_tag);
    t_arm(mode, n);
    rc = p->call();
    inj = t_disarm();
    *interned = t_live_tag(t_intern_tag) != interns;
    if (inj) {
        le = bpt_last_error();
        partial = p->partial && p->partial(rc);
        CHECK(rc == BPT_ENOMEM, "%s [%s N=%d]: an allocation failed, the call returned %d (%s), expected "
              "BPT_ENOMEM; last error: %s", p->name, mode == T_NTH ? "nth" : "from", n, rc, code_name(rc), le);
        CHECK(last_error_fresh(le), "%s [%s N=%d]: bpt_last_error() not set by the failure: '%s'", p->name,
              mode == T_NTH ? "nth" : "from", n, le);
        if (!partial)
            CHECK(t_live() == live1, "%s [%s N=%d]: live allocations %ld before the call, %ld after it "
                  "(a leak, or a change to the state)", p->name, mode == T_NTH ? "nth" : "from", n, live1, t_live());
        CHECK(t_live_tag(t_record_tag) == rec1, "%s [%s N=%d]: a thread record was allocated", p->name,
              mode == T_NTH ? "nth" : "from", n);
        if (p->on_fail) p->on_fail(rc);
        verify(p->name);
    }
    if (p->cleanup) p->cleanup(rc, inj);
    if (p->setup && p->cleanup)
        CHECK(t_live() == live0, "%s [%s N=%d]: live allocations %ld before setup, %ld after cleanup (a leak)",
              p->name, mode == T_NTH ? "nth" : "from", n, live0, t_live());
    *rc_out = rc;
    *inj_out = inj;
}

static int run_path(const tpath *p) {
    int n, rc = 0, rc2, fails = 0, done = 0, tries = 0, interned, interned2;
    long inj, inj2;
    current = p->name;
    alarm(120);
    for (n = 1; n <= t_max_n && tries < 4 * t_max_n && !done; n++, tries++) {
        run_once(p, T_NTH, n, &rc, &inj, &interned);
        if (!inj) { done = 1; break; }
        fails++;
        /* A name interned by this attempt is not allocated again: the
           allocations after it moved up, so fail the same N again (and
           only then from N: it might otherwise fail nothing, and succeed). */
        if (interned) { n--; continue; }
        run_once(p, T_FROM, n, &rc2, &inj2, &interned2);
        CHECK(inj2 > 0, "%s [from N=%d]: no allocation failed, yet the same call failed at nth N", p->name, n);
        if (interned2) n--;
    }
    alarm(0);
    CHECK(done, "%s: the call still reached an injected failure at N=%d", p->name, t_max_n);
    printf("%-58s %2d failing N, then %d (%s)\n", p->name, fails, rc, rc < 0 ? code_name(rc) : rc ? "a count" : "ok");
    return rc;
}

/* ------------------------------------------------------------------------
   Section: bpt_session_create. */
static bpt_session created;
static int call_session_create(void) {
    bpt_session_desc d;
    memset(&d, 0, sizeof d);
    d.name = "created";
    d.chunk_bytes = 4096;   /* the smallest buffer */
    d.chunks = 2;
    created.id = 0xdeadull;
    return bpt_session_create(&d, &created);
}
static void fail_session_create(int rc) {
    (void)rc;
    CHECK(created.id == 0xdeadull, "bpt_session_create: *out written on failure");
}

/* ------------------------------------------------------------------------
   Section: bpt_trace_pattern on session T over vm:c1/1 and vm:c2/2, in a
   chain: count on, call trace with a match spec, pause, restart, off. A
   model of T's settings says what every check expects. */
static bpt_session T;
static struct {
    unsigned flags;               /* BPT_CALL | BPT_COUNT */
    int paused;
    uint64_t c1, c2;
} model;
static int probe_k;
#define T_MESSAGE "t_alloc_fail message"

static int even_first(const uint64_t *args, int n, void *user) {
    (void)user;
    return n > 0 && args[0] % 2 == 0;
}

/* T's settings are the model's: info, words, counting, messages, and the
   remembered patterns (a new function that the pattern matches gets them). */
static void check_T(const char *when) {
    bpt_msg m[8];
    bpt_func *probe = NULL;
    unsigned flags = 0;
    int paused = 0, n, i, counting = (model.flags & BPT_COUNT) && !model.paused;
    uint64_t c;
    char name[32];
    c = count_of(T, fc1, &flags, &paused);
    CHECK(flags == model.flags && paused == model.paused && c == model.c1,
          "%s: vm:c1/1 in T: flags 0x%x paused %d count %lu, expected 0x%x %d %lu", when, flags, paused,
          (unsigned long)c, model.flags, model.paused, (unsigned long)model.c1);
    c = count_of(T, fc2, &flags, &paused);
    CHECK(flags == model.flags && paused == model.paused && c == model.c2,
          "%s: vm:c2/2 in T: flags 0x%x paused %d count %lu, expected 0x%x %d %lu", when, flags, paused,
          (unsigned long)c, model.flags, model.paused, (unsigned long)model.c2);
    CHECK((BPT_VM_FETCH(&code[SITE_C1]) == BP) == (model.flags != 0),
          "%s: vm:c1/1's word is 0x%lx with flags 0x%x", when, (unsigned long)code[SITE_C1], model.flags);
    hit(fc1, SITE_C1, 2);
    hit(fc1, SITE_C1, 3);
    hit(fc2, SITE_C2, 4);
    if (counting) { model.c1 += 2; model.c2 += 1; }
    CHECK(count_of(T, fc1, NULL, NULL) == model.c1 && count_of(T, fc2, NULL, NULL) == model.c2,
          "%s: after 3 calls: counts %lu %lu, expected %lu %lu", when, (unsigned long)count_of(T, fc1, NULL, NULL),
          (unsigned long)count_of(T, fc2, NULL, NULL), (unsigned long)model.c1, (unsigned long)model.c2);
    n = drain_calls(T, m, 8, NULL);
    CHECK(n == (model.flags & BPT_CALL ? 2 : 0), "%s: T sent %d call messages, expected %d", when, n,
          model.flags & BPT_CALL ? 2 : 0);
    for (i = 0; i < n && i < 8; i++)
        CHECK(m[i].args[0] % 2 == 0 && m[i].nargs == 3 && m[i].argtype[1] == BPT_ARG_U64 &&
              m[i].argtype[2] == BPT_ARG_PTR && m[i].user && strcmp(m[i].user, T_MESSAGE) == 0,
              "%s: message %d does not carry the match spec (nargs %d, user %s)", when, i, m[i].nargs,
              m[i].user ? m[i].user : "NULL");
    /* The remembered patterns, on a new function */
    snprintf(name, sizeof name, "cprobe%d", probe_k++);
    CHECK_RC(bpt_register_vm(&code[SITE_PROBE], BP, "vm", name, 0, &ops, &probe), 0);
    if (!probe) return;
    count_of(T, probe, &flags, &paused);
    CHECK(flags == model.flags && paused == model.paused, "%s: a function registered now gets flags 0x%x "
          "paused %d from T's remembered patterns, expected 0x%x %d", when, flags, paused, model.flags, model.paused);
    if (flags) {
        snprintf(name, sizeof name, "vm:cprobe%d/0", probe_k - 1);
        CHECK_RC(bpt_trace_pattern(T, name, BPT_OFF, NULL), 1);
    }
    CHECK_RC(bpt_unregister(probe), 0);
}

static void fail_T(int rc) { (void)rc; check_T(current); }

static int call_T_count(void) { return bpt_trace_pattern(T, "vm:c*/_", BPT_COUNT, NULL); }
static int call_T_call(void) {
    bpt_match ms;
    memset(&ms, 0, sizeof ms);
    ms.pred = even_first;
    ms.message = T_MESSAGE;
    ms.args = "i64,u64,ptr";
    return bpt_trace_pattern(T, "vm:c*/_", BPT_CALL, &ms);
}
static int call_T_pause(void) { return bpt_trace_pattern(T, "vm:c*/_", BPT_COUNT | BPT_PAUSE, NULL); }
static int call_T_restart(void) { return bpt_trace_pattern(T, "vm:c*/_", BPT_COUNT | BPT_RESTART, NULL); }
static int call_T_off(void) { return bpt_trace_pattern(T, "vm:c*/_", BPT_OFF, NULL); }
static int call_T_nomatch(void) { return bpt_trace_pattern(T, "vm:nomatch*/_", BPT_COUNT, NULL); }

/* ------------------------------------------------------------------------
   Section: bpt_register_vm, plain (no pattern applies). */
static bpt_func *reg_out, reg_sentinel;
static int reg_site = SITE_R1;
static const char *reg_name = "r1";
static int call_register(void) {
    reg_out = &reg_sentinel;
    return bpt_register_vm(&code[reg_site], BP, "vm", reg_name, 1, &ops, &reg_out);
}
static void fail_register(int rc) {
    bpt_func *lk = NULL;
    (void)rc;
    CHECK(reg_out == &reg_sentinel, "bpt_register_vm %s: *out written on failure", reg_name);
    CHECK(bpt_func_lookup("vm", reg_name, 1, &lk) == BPT_ENOENT, "bpt_register_vm %s: registered after ENOMEM",
          reg_name);
    CHECK(BPT_VM_FETCH(&code[reg_site]) == ORIG(reg_site), "bpt_register_vm %s: the site's word changed", reg_name);
}

/* The registry's tables grow: the 33rd function grows the pointer sets, the
   257th the function array too. Every earlier function stays valid. */
static bpt_func *fillers[NSITES];
static int nfillers;
static void fill_to(int total) {   /* registered functions, counting base, c1, c2 */
    char name[32];
    while (expect_funcs < total) {
        snprintf(name, sizeof name, "fill%d", nfillers);
        CHECK_RC(bpt_register_vm(&code[SITE_FILL + nfillers], BP, "vm", name, 1, &ops, &fillers[nfillers]), 0);
        nfillers++;
        expect_funcs++;
    }
}
static void check_fillers(int rc) {
    bpt_func *lk = NULL, *dup = NULL;
    bpt_info info;
    int i;
    char name[32];
    fail_register(rc);
    for (i = 0; i < nfillers; i++) {
        snprintf(name, sizeof name, "fill%d", i);
        CHECK(bpt_func_lookup("vm", name, 1, &lk) == 0 && lk == fillers[i], "registry growth: %s lost", name);
        CHECK(bpt_trace_info(S, fillers[i], BPT_INFO_FLAGS, &info) == 0, "registry growth: %s no longer a record",
              name);
    }
    CHECK(bpt_register_vm(&code[SITE_FILL], BP, "vm", "dup", 1, &ops, &dup) == BPT_EEXIST,
          "registry growth: a registered site is no longer known");
}

/* ------------------------------------------------------------------------
   Section: a pattern remembered by a session, replayed on a later
   registration. Each N gets its own session with two remembered patterns
   (count on, call trace with a match spec). If the failure comes while
   applying them, bpt_register_vm documents BPT_ENOMEM with *out set: the
   function is registered, the patterns maybe not all applied; applying them
   again with bpt_trace_pattern works. */
static bpt_session R;
static int late_counted;          /* expect_funcs counts vm:late1/1 (a partial registration) */
#define LATE_MESSAGE "late message"
static void setup_late(void) {
    bpt_session_desc d;
    bpt_match ms;
    memset(&d, 0, sizeof d);
    d.name = "replay";
    CHECK_RC(bpt_session_create(&d, &R), 0);
    memset(&ms, 0, sizeof ms);
    ms.message = LATE_MESSAGE;
    ms.args = "u64";
    CHECK_RC(bpt_trace_pattern(R, "vm:late*/_", BPT_COUNT, NULL), 0);
    CHECK_RC(bpt_trace_pattern(R, "vm:late*/_", BPT_CALL, &ms), 0);
}
static int call_late(void) {
    reg_out = &reg_sentinel;
    return bpt_register_vm(&code[SITE_LATE], BP, "vm", "late1", 1, &ops, &reg_out);
}
static int partial_late(int rc) { (void)rc; return reg_out != &reg_sentinel; }
static void late_works(const char *when) {
    bpt_msg m[4];
    unsigned flags = 0;
    int n;
    uint64_t c;
    hit(reg_out, SITE_LATE, 41);
    c = count_of(R, reg_out, &flags, NULL);
    CHECK(flags == (BPT_COUNT | BPT_CALL) && c == 1, "%s: vm:late1/1 flags 0x%x count %lu, expected both, 1",
          when, flags, (unsigned long)c);
    n = drain_calls(R, m, 4, NULL);
    CHECK(n == 1 && m[0].user && strcmp(m[0].user, LATE_MESSAGE) == 0 && m[0].nargs == 1 &&
          m[0].argtype[0] == BPT_ARG_U64 && m[0].args[0] == 41, "%s: vm:late1/1 sent %d messages, expected 1 with "
          "the match spec's message and u64 argument", when, n);
}
static void fail_late(int rc) {
    bpt_func *lk = NULL;
    unsigned flags = 0;
    (void)rc;
    if (reg_out == &reg_sentinel) {   /* failed before registering: nothing registered */
        CHECK(bpt_func_lookup("vm", "late1", 1, &lk) == BPT_ENOENT, "replay: vm:late1/1 registered, *out unset");
        CHECK(BPT_VM_FETCH(&code[SITE_LATE]) == ORIG(SITE_LATE), "replay: the site's word changed");
        return;
    }
    /* Registered; the patterns applied in order until the failure. */
    expect_funcs++;
    late_counted = 1;
    CHECK(bpt_func_lookup("vm", "late1", 1, &lk) == 0 && lk == reg_out, "replay: *out set but not registered");
    count_of(R, reg_out, &flags, NULL);
    CHECK(flags == 0 || flags == BPT_COUNT, "replay: after the failure vm:late1/1 has flags 0x%x (expected "
          "none, or the first pattern's BPT_COUNT)", flags);
    CHECK((BPT_VM_FETCH(&code[SITE_LATE]) == BP) == (flags != 0), "replay: word 0x%lx with flags 0x%x",
          (unsigned long)code[SITE_LATE], flags);
    /* "apply it again with bpt_trace_pattern" */
    {
        bpt_match ms;
        memset(&ms, 0, sizeof ms);
        ms.message = LATE_MESSAGE;
        ms.args = "u64";
        CHECK_RC(bpt_trace_pattern(R, "vm:late*/_", BPT_COUNT, NULL), 1);
        CHECK_RC(bpt_trace_pattern(R, "vm:late*/_", BPT_CALL, &ms), 1);
    }
    late_works("replay, patterns applied again");
}
static void cleanup_late(int rc, long injected) {
    if (!injected) {
        CHECK(rc == 0 && reg_out != &reg_sentinel, "replay: the registration returned %d", rc);
        if (rc == 0) late_works("replay");
    }
    CHECK_RC(bpt_session_destroy(R), 0);
    if (reg_out != &reg_sentinel) CHECK_RC(bpt_unregister(reg_out), 0);
    if (late_counted) expect_funcs--;
    late_counted = 0;
}

/* ------------------------------------------------------------------------
   Section: bpt_session_destroy. Each N gets a session D that counts and
   traces vm:c1/1 (with a match spec), counts vm:c2/2, and holds 2 messages. */
static bpt_session D;
static void setup_destroy(void) {
    bpt_session_desc d;
    bpt_match ms;
    memset(&d, 0, sizeof d);
    d.name = "doomed";
    d.chunk_bytes = 4096;   /* the smallest buffer */
    d.chunks = 2;
    CHECK_RC(bpt_session_create(&d, &D), 0);
    memset(&ms, 0, sizeof ms);
    ms.message = "doomed message";
    CHECK_RC(bpt_trace_pattern(D, "vm:c1/1", BPT_COUNT | BPT_CALL, &ms), 1);
    CHECK_RC(bpt_trace_pattern(D, "vm:c2/2", BPT_COUNT, NULL), 1);
    hit(fc1, SITE_C1, 10);
    hit(fc1, SITE_C1, 11);
}
static int call_destroy(void) { return bpt_session_destroy(D); }
static void fail_destroy(int rc) {
    bpt_session_counts st;
    bpt_msg m[8];
    unsigned flags = 0;
    int n;
    (void)rc;
    CHECK(bpt_session_stats(D, &st) == 0 && strcmp(st.name, "doomed") == 0 && st.produced == 2,
          "session_destroy ENOMEM: the session is not unchanged (stats)");
    CHECK(count_of(D, fc1, &flags, NULL) == 2 && flags == (BPT_COUNT | BPT_CALL),
          "session_destroy ENOMEM: vm:c1/1 in D: flags 0x%x", flags);
    hit(fc1, SITE_C1, 12);
    CHECK(count_of(D, fc1, NULL, NULL) == 3, "session_destroy ENOMEM: D no longer counts vm:c1/1");
    n = drain_calls(D, m, 8, NULL);
    CHECK(n == 3 && m[2].user && strcmp(m[2].user, "doomed message") == 0,
          "session_destroy ENOMEM: D drained %d messages, expected its 2 and a new one", n);
    CHECK(BPT_VM_FETCH(&code[SITE_C1]) == BP, "session_destroy ENOMEM: vm:c1/1 lost its breakpoint word");
}
static void cleanup_destroy(int rc, long injected) {
    bpt_session_counts st;
    if (injected) {
        CHECK_RC(bpt_session_destroy(D), 0);
    } else {
        CHECK(rc == 0, "session_destroy returned %d", rc);
    }
    CHECK(bpt_session_stats(D, &st) == BPT_ESESSION, "session_destroy: the session is still alive");
    CHECK(bpt_session_destroy(D) == BPT_ESESSION, "session_destroy: a double destroy did not give BPT_ESESSION");
    CHECK(BPT_VM_FETCH(&code[SITE_C1]) == ORIG(SITE_C1), "session_destroy: vm:c1/1's word was not restored");
}

/* ------------------------------------------------------------------------
   Section: trace_info and trace_info_each (no allocation expected). */
static int info_each_calls;
static void info_each_fn(const bpt_func *f, const char *m, const char *n, int a, const bpt_info *i, void *u) {
    (void)f; (void)m; (void)n; (void)a; (void)u;
    if (i->count == expect_base_count) info_each_calls++;
}
static int call_info_each(void) {
    info_each_calls = 0;
    return bpt_trace_info_each(S, "vm:_/_", BPT_INFO_COUNT | BPT_INFO_FLAGS, info_each_fn, NULL);
}
static int call_info(void) {
    bpt_info info;
    int rc = bpt_trace_info(S, fbase, BPT_INFO_COUNT | BPT_INFO_FLAGS, &info);
    return rc < 0 ? rc : (int)info.count;
}

/* ------------------------------------------------------------------------
   Threads that make their first bptrace call with an allocation failing.
   They stay parked until the end: an exited thread's record is reused by
   the next thread, which would then allocate none. */
typedef struct job {
    const char *name;
    int (*fn)(void);
    int fail_at;
    int rc;
    long injected;
    char err[320];
    int done;
    pthread_t th;
} job;
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;
static int park_release;
static job *parked[64];
static int nparked;

static void *job_main(void *arg) {
    job *j = (job *)arg;
    CHECK(bpt_last_error()[0] == '\0', "%s: a new thread's bpt_last_error() is '%s'", j->name, bpt_last_error());
    t_arm(T_NTH, j->fail_at);
    j->rc = j->fn();
    j->injected = t_disarm();
    snprintf(j->err, sizeof j->err, "%s", bpt_last_error());
    pthread_mutex_lock(&park_lock);
    j->done = 1;
    pthread_cond_broadcast(&park_cond);
    while (!park_release) pthread_cond_wait(&park_cond, &park_lock);
    pthread_mutex_unlock(&park_lock);
    return NULL;
}

static void run_job(job *j) {
    current = j->name;
    alarm(60);
    CHECK(nparked < 64, "too many parked threads");
    if (nparked >= 64) return;
    parked[nparked++] = j;
    if (pthread_create(&j->th, NULL, job_main, j) != 0) {
        CHECK(0, "pthread_create failed");
        nparked--;
        return;
    }
    pthread_mutex_lock(&park_lock);
    while (!j->done) pthread_cond_wait(&park_cond, &park_lock);
    pthread_mutex_unlock(&park_lock);
    alarm(0);
}

static void release_jobs(void) {
    int i;
    pthread_mutex_lock(&park_lock);
    park_release = 1;
    pthread_cond_broadcast(&park_cond);
    pthread_mutex_unlock(&park_lock);
    for (i = 0; i < nparked; i++) pthread_join(parked[i]->th, NULL);
}

/* The calls of the record-failure table. */
static bpt_session job_session;
static bpt_func *victim;
static void job_observer(int step, int did, uint64_t ns, void *user) { (void)step; (void)did; (void)ns; (void)user; }
static int j_session_create(void) { bpt_session s; return bpt_session_create(NULL, &s); }
static int j_session_destroy(void) { return bpt_session_destroy(job_session); }
static int j_trace_pattern(void) { return bpt_trace_pattern(S, "vm:base/1", BPT_COUNT | BPT_RESTART, NULL); }
static int j_trace_pattern_ms(void) {   /* the match spec is its 1st allocation, the record its 2nd */
    bpt_match ms;
    memset(&ms, 0, sizeof ms);
    ms.pred = even_first;
    return bpt_trace_pattern(S2, "vm:base/1", BPT_CALL, &ms);
}
static int j_register_vm(void) { bpt_func *f; return bpt_register_vm(&code[SITE_R1], BP, "vm", "jobreg", 0, &ops, &f); }
static int j_unregister(void) { return bpt_unregister(victim); }
static int j_trace_info(void) { bpt_info i; return bpt_trace_info(S, fbase, BPT_INFO_COUNT, &i); }
static int j_trace_info_each(void) { return bpt_trace_info_each(S, "vm:_/_", BPT_INFO_COUNT, info_each_fn, NULL); }
static int j_func_lookup(void) { bpt_func *f; return bpt_func_lookup("vm", "base", 1, &f); }
static int j_func_count(void) { return bpt_func_count(); }
static int j_drain(void) { bpt_msg m[4]; return bpt_session_drain(S2, m, 4); }
static int j_stats(void) { bpt_session_counts st; return bpt_session_stats(S, &st); }
static int j_observer(void) { return bpt_set_protocol_observer(job_observer, NULL); }
static int j_register_managed(void) { return bpt_thread_progress_register_managed(); }

/* ------------------------------------------------------------------------
   Section: a hit's first message to a session allocates the thread's ring
   (its lane). When that fails the hit must not crash, must still count, and
   the lost message must be counted (produced and dropped). */
static bpt_session H;
static int cb_calls;
static void cb_tracer(const bpt_msg *m, void *user) { (void)user; if (m->type == BPT_MSG_CALL) cb_calls++; }
static void hit_session(int callback) {
    bpt_session_desc d;
    memset(&d, 0, sizeof d);
    d.name = callback ? "hits-callback" : "hits";
    d.chunk_bytes = 4096;   /* the smallest buffer */
    d.chunks = 2;
    d.tracer = callback ? cb_tracer : NULL;
    CHECK_RC(bpt_session_create(&d, &H), 0);
    CHECK_RC(bpt_trace_pattern(H, "vm:c1/1", BPT_COUNT | BPT_CALL, NULL), 1);
    cb_calls = 0;
}

/* After one hit whose message was (lost > 0) or was not lost: the count, the
   counters' balance, and that the next hit's message gets through. */
static void check_hit_session(const char *when, int callback, int lost, int counted_hits) {
    bpt_session_counts st;
    bpt_msg m[8];
    int n, notices = 0;
    uint64_t c = count_of(H, fc1, NULL, NULL);
    CHECK(c == (uint64_t)counted_hits, "%s: call_count %lu after %d hits", when, (unsigned long)c, counted_hits);
    CHECK_RC(bpt_session_stats(H, &st), 0);
    if (lost)
        CHECK(st.produced == 1 && st.dropped == 1, "%s: the message lost to the failed ring allocation is not "
              "counted: produced %lu dropped %lu delivered %lu (expected 1 produced, 1 dropped)", when,
              (unsigned long)st.produced, (unsigned long)st.dropped, (unsigned long)st.delivered);
    /* The next hit allocates the ring and gets its message through. */
    hit(fc1, SITE_C1, 5);
    n = callback ? cb_calls : drain_calls(H, m, 8, &notices);
    CHECK(n == (lost ? 1 : 2), "%s: %d messages arrived, expected %d", when, n, lost ? 1 : 2);
    CHECK_RC(bpt_session_stats(H, &st), 0);
    CHECK(st.produced == st.delivered + st.dropped, "%s: produced %lu != delivered %lu + dropped %lu", when,
          (unsigned long)st.produced, (unsigned long)st.delivered, (unsigned long)st.dropped);
    CHECK(count_of(H, fc1, NULL, NULL) == (uint64_t)counted_hits + 1, "%s: the next hit was not counted", when);
}

/* In a new thread: N = 1 fails the thread record, N = 2 its page of
   counters, N = 3 and on its ring. */
static int hit_thread_n;
static int j_hit(void) { hit(fc1, SITE_C1, (uint64_t)hit_thread_n); return 0; }

/* Return trace: a VM hit that asks for a frame takes it from the thread's
   shadow stack, allocated on its first use. When that fails the call's
   return goes untraced (token 0), counted in frames_skipped. */
static bpt_vm_token ret_token;
static int j_ret_hit(void) {
    uint64_t frame[4] = { 8, 9, 10, 11 };
    bpt_vm_token tok = 0xdeadbeefull;
    bpt_vm_word w = BPT_VM_FETCH(&code[SITE_C1]);
    if (w == BP) w = bpt_vm_breakpoint(fc1, frame, &tok);
    CHECK(w == ORIG(SITE_C1), "return trace: the hit returned 0x%lx", (unsigned long)w);
    ret_token = tok;
    if (tok) bpt_vm_return(tok, 99);
    return 0;
}

#if defined(BPT_NATIVE)
/* ------------------------------------------------------------------------
   Section: native sites. Their code writes batch the pages they touch in an
   allocated array (site_native.c): allocations that happen at steps 5 and 9,
   after the settings were staged and committed. */
static volatile int nsink;
BPT_TRACEABLE int nleaf(int x) { nsink = x; return x + 1; }
BPT_TRACEABLE int nleaf2(int x) { nsink = x; return x + 2; }
static int (*volatile call_nleaf)(int) = nleaf;
static int (*volatile call_nleaf2)(int) = nleaf2;
BPT_TRACEABLE int ncaller(int x) { return call_nleaf(x) + 1; }   /* not a tail call */
static int (*volatile call_ncaller)(int) = ncaller;
static bpt_func *fn1, *fn2;
static bpt_session NS, ND;
static uint64_t ns_count;
static unsigned ns_flags;

static void check_native(const char *when) {
    unsigned flags = 0;
    uint64_t c = count_of(NS, fn1, &flags, NULL);
    CHECK(flags == ns_flags && c == ns_count, "%s: nat:leaf/1 in NS: flags 0x%x count %lu, expected 0x%x %lu "
          "", when, flags, (unsigned long)c, ns_flags,
          (unsigned long)ns_count);
    CHECK(call_nleaf(1) == 2 && call_nleaf(2) == 3, "%s: nleaf computes wrong", when);
    if (ns_flags & BPT_COUNT) ns_count += 2;
    c = count_of(NS, fn1, NULL, NULL);
    CHECK(c == ns_count, "%s: nat:leaf/1 counted %lu, expected %lu", when, (unsigned long)c, (unsigned long)ns_count);
    ns_count = c;   /* resynchronise, so one failure is reported once */
}
static int call_native_on(void) { return bpt_trace_pattern(NS, "nat:leaf/1", BPT_COUNT, NULL); }
static int call_native_off(void) { return bpt_trace_pattern(NS, "nat:leaf/1", BPT_OFF, NULL); }
static void fail_native(int rc) { (void)rc; check_native(current); }
/* A failure that changed the state anyway: put it back for the next N. */
static void cleanup_native_on(int rc, long injected) {
    unsigned flags = 0;
    (void)rc;
    if (injected && (count_of(NS, fn1, &flags, NULL), flags)) {
        CHECK_RC(bpt_trace_pattern(NS, "nat:leaf/1", BPT_OFF, NULL), 1);
        ns_flags = 0;
        ns_count = 0;
    }
}
static void cleanup_native_off(int rc, long injected) {
    unsigned flags = 0;
    (void)rc;
    if (injected && (count_of(NS, fn1, &flags, NULL), !flags)) {
        CHECK_RC(bpt_trace_pattern(NS, "nat:leaf/1", BPT_COUNT, NULL), 1);
        ns_flags = BPT_COUNT;
        ns_count = 0;
    }
}

static void setup_native_destroy(void) {
    bpt_session_desc d;
    memset(&d, 0, sizeof d);
    d.name = "native-doomed";
    CHECK_RC(bpt_session_create(&d, &ND), 0);
    CHECK_RC(bpt_trace_pattern(ND, "nat:leaf2/1", BPT_COUNT, NULL), 1);
    CHECK(call_nleaf2(1) == 3, "nleaf2 computes wrong");
}
static int call_native_destroy(void) { return bpt_session_destroy(ND); }
static void fail_native_destroy(int rc) {
    bpt_session_counts st;
    unsigned flags = 0;
    uint64_t c;
    (void)rc;
    CHECK(bpt_session_stats(ND, &st) == 0, "native session_destroy ENOMEM: the session is gone");
    c = count_of(ND, fn2, &flags, NULL);
    CHECK(flags == BPT_COUNT && c == 1, "native session_destroy ENOMEM: the session is not unchanged: "
          "nat:leaf2/1 has flags 0x%x count %lu, expected BPT_COUNT, 1", flags, (unsigned long)c);
    CHECK(call_nleaf2(1) == 3, "nleaf2 computes wrong");
    c = count_of(ND, fn2, NULL, NULL);
    CHECK(c == 2 || flags != BPT_COUNT, "native session_destroy ENOMEM: nat:leaf2/1 no longer counted (%lu)",
          (unsigned long)c);
}
static void cleanup_native_destroy(int rc, long injected) {
    if (injected) CHECK_RC(bpt_session_destroy(ND), 0);
    else CHECK(rc == 0, "native session_destroy returned %d", rc);
}

/* A native record is retired by bpt_unregister, never freed (a thread may
   still read it through the function's padding); registering the function
   again reuses it. A failing re-registration must retire it again. */
static int call_native_register(void) {
    reg_out = &reg_sentinel;
    return bpt_register_native((void *)nleaf2, "nat", "leaf2", 1, &reg_out);
}
/* The whole executable: its patchable functions are nleaf and nleaf2, both
   retired before, so their records are reused. ENOMEM: "nothing is
   registered". */
static char exe_base[512];
static int module_funcs;          /* registered functions before the call */
static int call_register_module(void) { return bpt_register_module(NULL); }
static void fail_register_module(int rc) {
    bpt_func *lk = NULL;
    (void)rc;
    CHECK(bpt_func_count() == module_funcs, "register_module ENOMEM: %d functions registered, expected %d",
          bpt_func_count(), module_funcs);
    CHECK(bpt_func_lookup(exe_base, "nleaf", 1, &lk) == BPT_ENOENT && bpt_func_lookup(exe_base, "nleaf", 0, &lk)
          == BPT_ENOENT, "register_module ENOMEM: nleaf registered");
    CHECK(call_nleaf(5) == 6 && call_nleaf2(5) == 7, "nleaf, nleaf2 compute wrong after a failed registration");
}
static int call_unregister_module(void) { return bpt_unregister_module(exe_base); }
/* A failure that removed nleaf's breakpoint anyway: put it back for the next N. */
static void cleanup_unregister_module(int rc, long injected) {
    bpt_func *lk = NULL;
    bpt_info info;
    (void)rc;
    if (injected && bpt_func_lookup(exe_base, "nleaf", 0, &lk) == 0 &&
        bpt_trace_info(NS, lk, BPT_INFO_FLAGS, &info) == 0 && !info.flags)
        CHECK_RC(bpt_trace_pattern(NS, "_:nleaf/_", BPT_COUNT, NULL), 1);
}
static void fail_unregister_module(int rc) {
    bpt_func *lk = NULL;
    bpt_info info;
    (void)rc;
    CHECK(bpt_func_lookup(exe_base, "nleaf", 0, &lk) == 0 && bpt_trace_info(NS, lk, BPT_INFO_FLAGS, &info) == 0 &&
          info.flags == BPT_COUNT, "unregister_module ENOMEM: nleaf's breakpoint in NS was removed (flags 0x%x)",
          lk ? info.flags : 0);
    CHECK(bpt_func_lookup(exe_base, "nleaf", 0, &lk) == 0 && bpt_func_lookup(exe_base, "nleaf2", 0, &lk) == 0,
          "unregister_module ENOMEM: the module's functions are gone");
    CHECK(call_nleaf(5) == 6 && call_nleaf2(5) == 7, "nleaf, nleaf2 compute wrong after a failed unregistration");
}

static void fail_native_register(int rc) {
    bpt_func *lk = NULL;
    (void)rc;
    CHECK(reg_out == &reg_sentinel, "bpt_register_native: *out written on failure");
    CHECK(bpt_func_lookup("nat", "leaf2", 1, &lk) == BPT_ENOENT, "bpt_register_native: registered after ENOMEM");
    CHECK(call_nleaf2(5) == 7, "nleaf2 computes wrong after a failed registration");
}
#endif

/* ------------------------------------------------------------------------ */
static void on_alarm(int sig) {
    static const char msg[] = "t_alloc_fail.c: CHECK failed: watchdog: no progress within the time limit in: ";
    const char *c = current;
    ssize_t r;
    (void)sig;
    r = write(2, msg, sizeof msg - 1);
    r = write(2, c, strlen(c));
    r = write(2, "\n", 1);
    (void)r;
    _exit(3);
}

int main(void) {
    struct sigaction sa;
    bpt_session_desc d;
    bpt_func *calib = NULL;
    long seq, n, tag, baseline, retired = 0;
    int i, rc, alive;

    setvbuf(stdout, NULL, _IOLBF, 0);
    t_verbose = getenv("T_ALLOC_VERBOSE") != NULL;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    for (i = 0; i < NSITES; i++) code[i] = ORIG(i);

    /* ---- calibration: which bptrace.h lines make the permanent blocks ---- */
    seq = t_now_seq();
    bpt_thread_progress_pin();
    bpt_thread_progress_unpin();
    t_record_tag = t_tag_since(seq, &n);
    CHECK(n == 1 && t_record_tag >= 0, "calibration: the main thread's first pin made %ld blocks (tag %ld), "
          "expected its thread record", n, t_record_tag);
    /* The first registration also makes the registry's tables: do it first. */
    CHECK_RC(bpt_register_vm(&code[SITE_BASE], BP, "vm", "base", 1, &ops, &fbase), 0);
    CHECK_RC(bpt_register_vm(&code[SITE_C1], BP, "vm", "c1", 1, &ops, &fc1), 0);
    CHECK_RC(bpt_register_vm(&code[SITE_C2], BP, "vm", "c2", 2, &ops, &fc2), 0);
    expect_funcs = 3;
    {   /* A thread's first count maps a page of its counters (BPT_HIT_MAP),
           kept for its record's life: permanent too. */
        bpt_session cs;
        CHECK_RC(bpt_session_create(NULL, &cs), 0);
        CHECK_RC(bpt_trace_pattern(cs, "vm:base/1", BPT_COUNT, NULL), 1);
        seq = t_now_seq();
        hit(fbase, SITE_BASE, 1);
        t_count_tag = t_tag_since(seq, &n);
        CHECK(n == 1 && t_count_tag >= 0 && t_count_tag != t_record_tag, "calibration: a first count made %ld "
              "blocks (tag %ld), expected a page of counters", n, t_count_tag);
        CHECK_RC(bpt_session_destroy(cs), 0);
    }
    seq = t_now_seq();
    CHECK_RC(bpt_register_vm(&code[SITE_CALIB], BP, "calibration-module", "calibration-name", 0, &ops, &calib), 0);
    CHECK_RC(bpt_unregister(calib), 0);
    t_intern_tag = t_tag_since(seq, &n);
    CHECK(n == 2 && t_intern_tag >= 0 && t_intern_tag != t_record_tag, "calibration: registering and "
          "unregistering new names left %ld blocks (tag %ld), expected the 2 interned names", n, t_intern_tag);
    printf("calibration: thread records from bptrace.h:%ld, interned strings from bptrace.h:%ld, "
           "count pages from bptrace.h:%ld\n", t_record_tag, t_intern_tag, t_count_tag);
    /* The baseline of bptrace's own tables with 3 functions and no session */
    baseline = t_live();

    /* ---- the state every failure must leave intact ---- */
    memset(&d, 0, sizeof d);
    d.name = "counter";
    CHECK_RC(bpt_session_create(&d, &S), 0);
    d.name = "messages";
    CHECK_RC(bpt_session_create(&d, &S2), 0);
    CHECK_RC(bpt_trace_pattern(S, "vm:base/1", BPT_COUNT, NULL), 1);
    CHECK_RC(bpt_trace_pattern(S2, "vm:base/1", BPT_CALL, NULL), 1);
    verify("setup");
    alive = 2;

    /* ---- bpt_session_create ---- */
    {
        static const tpath p = { "session_create", NULL, call_session_create, fail_session_create, NULL, NULL };
        rc = run_path(&p);
        CHECK(rc == 0, "session_create: %d", rc);
        T = created;
        alive++;
    }

    /* ---- bpt_trace_pattern: the chain on T ---- */
    memset(&model, 0, sizeof model);
    check_T("before the chain");
    {
        static const tpath pc = { "trace_pattern vm:c*/_ COUNT", NULL, call_T_count, fail_T, NULL, NULL };
        static const tpath pm = { "trace_pattern vm:c*/_ CALL + match spec, args, message", NULL, call_T_call,
                                  fail_T, NULL, NULL };
        static const tpath pp = { "trace_pattern vm:c*/_ COUNT|PAUSE", NULL, call_T_pause, fail_T, NULL, NULL };
        static const tpath pr = { "trace_pattern vm:c*/_ COUNT|RESTART", NULL, call_T_restart, fail_T, NULL, NULL };
        static const tpath po = { "trace_pattern vm:c*/_ OFF", NULL, call_T_off, fail_T, NULL, NULL };
        static const tpath pn = { "trace_pattern vm:nomatch*/_ COUNT (no function)", NULL, call_T_nomatch,
                                  fail_T, NULL, NULL };
        CHECK_RC(run_path(&pc), 2);
        model.flags = BPT_COUNT;
        check_T("after COUNT");
        CHECK_RC(run_path(&pm), 2);
        model.flags = BPT_COUNT | BPT_CALL;
        check_T("after CALL with a match spec");
        CHECK_RC(run_path(&pp), 2);
        model.paused = 1;
        check_T("after PAUSE");
        CHECK_RC(run_path(&pr), 2);
        model.paused = 0;
        model.c1 = model.c2 = 0;
        check_T("after RESTART");
        CHECK_RC(run_path(&po), 2);
        memset(&model, 0, sizeof model);
        check_T("after OFF");
        CHECK_RC(run_path(&pn), 0);
        CHECK_RC(bpt_trace_pattern(T, "vm:nomatch*/_", BPT_OFF, NULL), 0);
    }

    /* ---- bpt_register_vm ---- */
    {
        static const tpath p = { "register_vm (new names)", NULL, call_register, fail_register, NULL, NULL };
        static const tpath pg = { "register_vm (growing the registry's tables)", NULL, call_register,
                                  check_fillers, NULL, NULL };
        static const tpath pl = { "register_vm replaying remembered patterns", setup_late, call_late, fail_late,
                                  partial_late, cleanup_late };
        CHECK_RC(run_path(&p), 0);
        CHECK_RC(bpt_unregister(reg_out), 0);
        /* 33 functions grow the pointer sets; 257 the function array too. */
        fill_to(32);
        reg_site = NSITES - 2;
        reg_name = "grow33";
        CHECK_RC(run_path(&pg), 0);
        CHECK_RC(bpt_unregister(reg_out), 0);
        fill_to(256);
        reg_site = NSITES - 1;
        reg_name = "grow257";
        CHECK_RC(run_path(&pg), 0);
        CHECK_RC(bpt_unregister(reg_out), 0);
        for (i = 0; i < nfillers; i++) CHECK_RC(bpt_unregister(fillers[i]), 0);
        expect_funcs -= nfillers;
        nfillers = 0;
        verify("unregistering the fillers");
        run_path(&pl);
    }

    /* ---- bpt_session_destroy ---- */
    {
        static const tpath p = { "session_destroy", setup_destroy, call_destroy, fail_destroy, NULL, cleanup_destroy };
        run_path(&p);
    }

    /* ---- trace_info, trace_info_each: nothing to allocate ---- */
    {
        static const tpath pi = { "trace_info", NULL, call_info, NULL, NULL, NULL };
        static const tpath pe = { "trace_info_each", NULL, call_info_each, NULL, NULL, NULL };
        rc = run_path(&pi);
        CHECK(rc == (int)expect_base_count, "trace_info: count %d, expected %lu", rc, (unsigned long)expect_base_count);
        rc = run_path(&pe);
        CHECK(rc == 1 && info_each_calls == 1, "trace_info_each: %d reported, %d with the right count", rc,
              info_each_calls);
    }

    /* ---- hits: the first message's ring allocation fails ---- */
    {
        int cb, k;
        long live0, inj;
        for (cb = 0; cb <= 1; cb++) {
            for (k = 1; k <= 8; k++) {
                current = cb ? "hit: ring allocation (callback session)" : "hit: ring allocation";
                live0 = t_live();
                hit_session(cb);
                t_arm(T_NTH, k);
                hit(fc1, SITE_C1, 1);
                inj = t_disarm();
                check_hit_session(current, cb, inj > 0, 1);
                CHECK_RC(bpt_session_destroy(H), 0);
                CHECK(t_live() == live0, "%s [N=%d]: live allocations %ld before, %ld after (a leak)", current, k,
                      live0, t_live());
                verify(current);
                if (!inj) {
                    printf("%-58s %2d failing N, then ok\n", current, k - 1);
                    break;
                }
            }
        }
        /* From a new thread: its record (N = 1), its page of counters (N = 2),
           then its ring (N = 3 and on: the lane directory, the lane). */
        for (k = 1; k <= 8; k++) {
            static job jobs[8];
            job *j = &jobs[k - 1];
            live0 = t_live();
            hit_session(0);
            memset(j, 0, sizeof *j);
            j->name = "hit from a new thread";
            j->fn = j_hit;
            j->fail_at = k;
            hit_thread_n = k;
            run_job(j);
            if (k == 1 && j->injected) {
                /* No thread record: the thread cannot pin, so the hit runs untraced. */
                uint64_t c = count_of(H, fc1, NULL, NULL);
                printf("hit from a new thread whose record allocation fails: call_count %lu (the call is %s)\n",
                       (unsigned long)c, c ? "counted" : "neither counted nor reported");
                hit(fc1, SITE_C1, 1);
                CHECK(count_of(H, fc1, NULL, NULL) == c + 1, "after a failed thread record, counting broke");
            } else {   /* a refused page of counters spills the count: no message is lost */
                check_hit_session("hit from a new thread", 0, j->injected > 0 && t_refused_tag != t_count_tag, 1);
            }
            CHECK_RC(bpt_session_destroy(H), 0);
            CHECK(t_live() == live0, "hit from a new thread [N=%d]: live allocations %ld before, %ld after", k,
                  live0, t_live());
            verify("hit from a new thread");
            if (!j->injected) {
                printf("%-58s %2d failing N, then ok\n", "hit from a new thread (record, counters, ring)", k - 1);
                break;
            }
        }
    }

    /* ---- return trace: the shadow stack of a new thread ---- */
    {
        static job jobs[8];
        int k, saw_shadow_failure = 0;
        long live0, delta;
        for (k = 1; k <= 8; k++) {
            job *j = &jobs[k - 1];
            bpt_session_counts st;
            bpt_msg m[8];
            int nm, i, calls = 0, returns = 0;
            live0 = t_live();
            memset(&d, 0, sizeof d);
            d.name = "returns";
            d.chunk_bytes = 4096;   /* the smallest buffer */
            d.chunks = 2;
            CHECK_RC(bpt_session_create(&d, &H), 0);
            CHECK_RC(bpt_trace_pattern(H, "vm:c1/1", BPT_CALL | BPT_RETURN, NULL), 1);
            memset(j, 0, sizeof *j);
            j->name = "return trace from a new thread";
            j->fn = j_ret_hit;
            j->fail_at = k;
            ret_token = 0;
            run_job(j);
            CHECK_RC(bpt_session_stats(H, &st), 0);
            nm = bpt_session_drain(H, m, 8);
            for (i = 0; i < nm; i++) {
                calls += m[i].type == BPT_MSG_CALL;
                returns += m[i].type == BPT_MSG_RETURN_FROM && m[i].value == 99;
            }
            if (ret_token) {
                CHECK(st.frames_skipped == 0 && (returns == 1 || j->injected), "return trace [N=%d]: a frame "
                      "was pushed, yet %d return messages, %lu skipped", k, returns,
                      (unsigned long)st.frames_skipped);
            } else if (j->injected && calls == 1) {
                /* the refused allocation was the shadow stack */
                saw_shadow_failure = 1;
                CHECK(st.frames_skipped == 1 && returns == 0, "return trace [N=%d]: no shadow stack: "
                      "frames_skipped %lu (expected 1), %d return messages", k,
                      (unsigned long)st.frames_skipped, returns);
            }
            CHECK_RC(bpt_session_destroy(H), 0);
            /* A shadow stack is kept for the life of its thread record */
            delta = t_live() - live0;
            CHECK(delta == (ret_token != 0), "return trace [N=%d]: live allocations changed by %ld, expected "
                  "%d (the thread's shadow stack)", k, delta, ret_token != 0);
            baseline += delta;
            verify("return trace");
            if (!j->injected) {
                CHECK(ret_token != 0 && calls == 1 && returns == 1, "return trace: no failure, yet token %lx, "
                      "%d calls, %d returns", (unsigned long)ret_token, calls, returns);
                printf("%-58s %2d failing N, then ok\n", "return trace from a new thread (record, ring, frames)",
                       k - 1);
                break;
            }
        }
        CHECK(saw_shadow_failure, "return trace: no N failed the shadow stack allocation");
    }

    /* ---- every call from a new thread whose thread record cannot be made ---- */
    {
        static job jobs[] = {
            { "new thread: session_create", j_session_create, 1, 0, 0, "", 0, 0 },
            { "new thread: session_destroy", j_session_destroy, 1, 0, 0, "", 0, 0 },
            { "new thread: trace_pattern", j_trace_pattern, 1, 0, 0, "", 0, 0 },
            { "new thread: trace_pattern with a match spec (its 2nd)", j_trace_pattern_ms, 2, 0, 0, "", 0, 0 },
            { "new thread: register_vm", j_register_vm, 1, 0, 0, "", 0, 0 },
            { "new thread: unregister", j_unregister, 1, 0, 0, "", 0, 0 },
            { "new thread: trace_info", j_trace_info, 1, 0, 0, "", 0, 0 },
            { "new thread: trace_info_each", j_trace_info_each, 1, 0, 0, "", 0, 0 },
            { "new thread: func_lookup", j_func_lookup, 1, 0, 0, "", 0, 0 },
            { "new thread: func_count", j_func_count, 1, 0, 0, "", 0, 0 },
            { "new thread: session_drain", j_drain, 1, 0, 0, "", 0, 0 },
            { "new thread: session_stats", j_stats, 1, 0, 0, "", 0, 0 },
            { "new thread: set_protocol_observer", j_observer, 1, 0, 0, "", 0, 0 },
            { "new thread: thread_progress_register_managed", j_register_managed, 1, 0, 0, "", 0, 0 },
        };
        int k;
        bpt_func *lk = NULL;
        bpt_msg m[4];
        CHECK_RC(bpt_session_create(NULL, &job_session), 0);
        CHECK_RC(bpt_register_vm(&code[SITE_VICTIM], BP, "vm", "victim", 0, &ops, &victim), 0);
        expect_funcs++;
        hit(fbase, SITE_BASE, 7);   /* a message for the drain that fails */
        expect_base_count++;
        for (k = 0; k < (int)(sizeof jobs / sizeof jobs[0]); k++) {
            job *j = &jobs[k];
            long live0 = t_live();
            run_job(j);
            printf("%-58s -> %-12s %s\n", j->name, code_name(j->rc), j->err);
            CHECK(j->injected > 0, "%s: no allocation was refused (it did not allocate its record?)", j->name);
            CHECK(j->rc == BPT_ENOMEM, "%s: returned %d (%s), expected BPT_ENOMEM", j->name, j->rc, code_name(j->rc));
            CHECK(j->err[0] != '\0', "%s: bpt_last_error() is empty after the failure", j->name);
            CHECK(t_live() == live0, "%s: live allocations %ld before, %ld after", j->name, live0, t_live());
        }
        {
            bpt_session_counts st;
            CHECK(bpt_session_stats(job_session, &st) == 0, "session_destroy ENOMEM: the session is gone");
        }
        CHECK(bpt_func_lookup("vm", "victim", 0, &lk) == 0 && lk == victim, "unregister ENOMEM: victim gone");
        CHECK(bpt_func_lookup("vm", "jobreg", 0, &lk) == BPT_ENOENT, "register_vm ENOMEM: registered");
        CHECK(bpt_session_drain(S2, m, 4) == 1, "the drain that failed lost a message");
        CHECK(count_of(S, fbase, NULL, NULL) == expect_base_count, "trace_pattern RESTART ENOMEM: the count was reset");
        CHECK_RC(bpt_set_protocol_observer(NULL, NULL), 0);
        CHECK_RC(bpt_session_destroy(job_session), 0);
        CHECK_RC(bpt_unregister(victim), 0);
        expect_funcs--;
        verify("the new-thread table");
    }

#if defined(BPT_NATIVE)
    /* ---- native sites ---- */
    {
        static const tpath pon = { "native: trace_pattern COUNT", NULL, call_native_on, fail_native, NULL,
                                   cleanup_native_on };
        static const tpath poff = { "native: trace_pattern OFF", NULL, call_native_off, fail_native, NULL,
                                    cleanup_native_off };
        static const tpath pd = { "native: session_destroy", setup_native_destroy, call_native_destroy,
                                  fail_native_destroy, NULL, cleanup_native_destroy };
        static const tpath preg = { "native: register_native (reusing its retired record)", NULL,
                                    call_native_register, fail_native_register, NULL, NULL };
        bpt_func *lk = NULL;
        long native_live0 = t_live();
        CHECK_RC(bpt_register_native((void *)nleaf, "nat", "leaf", 1, &fn1), 0);
        CHECK_RC(bpt_register_native((void *)nleaf2, "nat", "leaf2", 1, &fn2), 0);
        expect_funcs += 2;
        memset(&d, 0, sizeof d);
        d.name = "native";
        CHECK_RC(bpt_session_create(&d, &NS), 0);
        check_native("native: before");
        /* Caller names come from an index of the native functions, rebuilt
           when one comes or goes. bpt_unregister allocates the new one
           before it changes anything: when it cannot, it fails and the
           function stays registered, and named. (Before the fix the old
           index stayed after a successful unregistration and still named
           the retired record as the caller.) */
        {
            bpt_session NC;
            bpt_func *fcaller = NULL, *lkc;
            bpt_msg m[8];
            const char *before = NULL, *during = NULL, *after = NULL;
            long inj;
            int n, i;
            current = "native: caller names after bpt_unregister";
            CHECK_RC(bpt_register_native((void *)ncaller, "nat", "caller", 1, &fcaller), 0);
            CHECK_RC(bpt_session_create(NULL, &NC), 0);
            CHECK_RC(bpt_trace_pattern(NC, "nat:leaf/1", BPT_CALL | BPT_CALLER, NULL), 1);
            CHECK(call_ncaller(1) == 3, "ncaller computes wrong");
            n = bpt_session_drain(NC, m, 8);
            for (i = 0; i < n; i++) if (m[i].type == BPT_MSG_CALL) before = m[i].caller_name;
            CHECK(before && strcmp(before, "caller") == 0, "the call of nleaf from ncaller names '%s' as its "
                  "caller, expected 'caller'", before ? before : "NULL");
            t_arm(T_NTH, 1);
            rc = bpt_unregister(fcaller);
            inj = t_disarm();
            CHECK(inj == 1 && rc == BPT_ENOMEM, "bpt_unregister(nat:caller/1) with its first allocation "
                  "refused: %ld refused, returned %d (%s), expected BPT_ENOMEM", inj, rc, bpt_last_error());
            CHECK(bpt_func_lookup("nat", "caller", 1, &lkc) == 0 && lkc == fcaller,
                  "bpt_unregister(nat:caller/1) failed, yet the function is no longer registered");
            CHECK(call_ncaller(1) == 3, "ncaller computes wrong");
            n = bpt_session_drain(NC, m, 8);
            for (i = 0; i < n; i++) if (m[i].type == BPT_MSG_CALL) during = m[i].caller_name;
            CHECK(during && strcmp(during, "caller") == 0, "after a failed bpt_unregister, the caller is "
                  "named '%s', expected 'caller'", during ? during : "NULL");
            CHECK_RC(bpt_unregister(fcaller), 0);
            CHECK(call_ncaller(1) == 3, "ncaller computes wrong");
            n = bpt_session_drain(NC, m, 8);
            for (i = 0; i < n; i++) if (m[i].type == BPT_MSG_CALL) after = m[i].caller_name;
            CHECK(!after || strcmp(after, "caller") != 0, "after bpt_unregister(nat:caller/1), calls from it "
                  "still name it as their caller (a stale address index reaching its retired record)");
            printf("%-58s %s\n", "native: caller names after bpt_unregister",
                   after && strcmp(after, "caller") == 0 ? "still named (stale index)" : "ok");
            CHECK_RC(bpt_session_destroy(NC), 0);
        }
        CHECK_RC(run_path(&pon), 1);
        ns_flags = BPT_COUNT;
        check_native("native: after COUNT");
        CHECK_RC(run_path(&poff), 1);
        ns_flags = 0;
        ns_count = 0;   /* switched off: the count is gone */
        check_native("native: after OFF");
        run_path(&pd);
        /* A failed uninstall may have left nleaf2's word in place: a pattern
           on it and off again restores it, so it can be unregistered. */
        CHECK_RC(bpt_trace_pattern(NS, "nat:leaf2/1", BPT_COUNT, NULL), 1);
        CHECK_RC(bpt_trace_pattern(NS, "nat:leaf2/1", BPT_OFF, NULL), 1);
        CHECK_RC(bpt_unregister(fn2), 0);
        expect_funcs--;
        rc = run_path(&preg);
        CHECK(rc == 0, "register_native: %d", rc);
        if (rc == 0) {
            expect_funcs++;
            CHECK(bpt_func_lookup("nat", "leaf2", 1, &lk) == 0 && lk == reg_out, "register_native: lookup");
            CHECK_RC(bpt_unregister(reg_out), 0);
            expect_funcs--;
        }
        CHECK_RC(bpt_unregister(fn1), 0);
        expect_funcs--;
        /* The module: both records retired now, so both are reused. */
        {
            static const tpath pm = { "native: register_module(NULL) (reusing retired records)", NULL,
                                      call_register_module, fail_register_module, NULL, NULL };
            static const tpath pu = { "native: unregister_module", NULL, call_unregister_module,
                                      fail_unregister_module, NULL, cleanup_unregister_module };
            char path[512];
            ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
            const char *b;
            path[len > 0 ? len : 0] = '\0';
            b = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
            snprintf(exe_base, sizeof exe_base, "%s", b);
            module_funcs = bpt_func_count();
            rc = run_path(&pm);
            CHECK(rc >= 2 && bpt_func_lookup(exe_base, "nleaf", 0, &lk) == 0 &&
                  bpt_func_lookup(exe_base, "nleaf2", 0, &lk) == 0, "register_module(NULL) of %s: %d (%s)",
                  exe_base, rc, rc < 0 ? bpt_last_error() : "");
            if (rc > 0) expect_funcs += rc;
            verify("register_module");
            CHECK_RC(bpt_trace_pattern(NS, "_:nleaf/_", BPT_COUNT, NULL), 1);   /* a breakpoint to remove */
            rc = run_path(&pu);
            CHECK(rc >= 2, "unregister_module %s: %d (%s)", exe_base, rc, rc < 0 ? bpt_last_error() : "");
            if (rc > 0) expect_funcs -= rc;
        }
        CHECK_RC(bpt_session_destroy(NS), 0);
        /* Native records are retired, never freed: nleaf's, nleaf2's and
           ncaller's; and the address index of native functions stays. */
        retired = t_live() - native_live0;
        CHECK(retired == 4, "native sites: %ld blocks more than before them, expected the 3 "
              "retired records and the address index", retired);
        verify("native sites");
    }
#else
    printf("native sites: not on this compiler (BPT_NATIVE undefined)\n");
#endif

    /* ---- no failed session_create kept a slot ---- */
    {
        bpt_session many[BPT_MAX_SESSIONS + 1];
        int created_n = 0;
        current = "sessions up to BPT_MAX_SESSIONS";
        alarm(120);
        while (created_n <= BPT_MAX_SESSIONS && (rc = bpt_session_create(NULL, &many[created_n])) == 0) created_n++;
        CHECK(rc == BPT_ELIMIT && created_n == BPT_MAX_SESSIONS - alive, "with %d sessions alive %d more could be "
              "created (then %s), expected %d: a failed create kept a slot", alive, created_n, code_name(rc),
              BPT_MAX_SESSIONS - alive);
        for (i = 0; i < created_n; i++) CHECK_RC(bpt_session_destroy(many[i]), 0);
        alarm(0);
    }

    /* ---- teardown: every block bptrace made is freed but its own tables ---- */
    verify("all paths");
    CHECK_RC(bpt_session_destroy(T), 0);
    CHECK_RC(bpt_session_destroy(S), 0);
    CHECK_RC(bpt_session_destroy(S2), 0);
    CHECK(t_live() == baseline + retired, "teardown: %ld live allocations with the same 3 functions and no "
          "session (and %ld blocks kept for native functions), %ld at the start (a leak)", t_live(), retired, baseline);
    CHECK_RC(bpt_unregister(fbase), 0);
    CHECK_RC(bpt_unregister(fc1), 0);
    CHECK_RC(bpt_unregister(fc2), 0);
    release_jobs();
    tag = t_live_tag(t_record_tag);
    printf("teardown: %ld live blocks besides interned strings (%ld) and thread records (%ld)\n", t_live(),
           t_live_tag(t_intern_tag), tag);
    return CHECK_DONE();
}
