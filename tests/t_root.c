/* t_root: the root record (api_root.h) from inside the program; tests/bpt/run
   reads it from outside with bpt.
   - bpt_root_check accepts the program's own root, and refuses a copy with
     a wrong magic (BPT_EFORMAT), another version (BPT_ENOTSUP), too few
     bytes, a structure over 1 MiB, a field past its structure, a field in
     another structure, an array of the wrong length, a NULL root (BPT_EINVAL);
     each with a reason.
   - Its addresses lead where they say: the epoch and the thread records
     agree with bpt_thread_progress_stats, the registry's array with
     bpt_func_lookup, a function's fields read through the root's offsets.
   - [L1]: the layout count is even outside a change and odd inside one (the
     protocol observer runs under the permission), and each change moves it. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <string.h>

static uint64_t seq_now(void) { return *(const volatile uint64_t *)bpt_root.global[BPT_ROOT_G_SEQ].p; }
static int odd_steps, steps;
static void observe(int step, int did, uint64_t ns, void *user) {
    (void)step; (void)did; (void)ns; (void)user;
    steps++;
    odd_steps += (int)(seq_now() & 1);
}

static int refused(const bpt_root_record *r, size_t bytes, int code, const char *word) {
    char why[256];
    int rc = bpt_root_check(r, bytes, why, sizeof why);
    if (rc != code || !strstr(why, word)) {
        printf("bpt_root_check: %d (%s), expected %d with '%s'\n", rc, why, code, word);
        return 0;
    }
    return 1;
}

static bpt_vm_word code[1] = { 7 };   /* a VM function's first instruction word: every compiler has VM sites */

int main(void) {
    bpt_root_record r;
    char why[256];
    bpt_progress_stats ps;
    bpt_session s;
    bpt_func *f;
    uint64_t seq0;
    const unsigned char *fp;
    int rc;

    CHECK_RC(bpt_root_check(&bpt_root, sizeof bpt_root, why, sizeof why), 0);
    CHECK(!strcmp(bpt_root.bptrace_version, BPTRACE_VERSION), "version %s", bpt_root.bptrace_version);
    r = bpt_root; r.magic ^= 1;
    CHECK(refused(&r, sizeof r, BPT_EFORMAT, "magic"), "wrong magic");
    r = bpt_root; r.version = 99;
    CHECK(refused(&r, sizeof r, BPT_ENOTSUP, "version 99"), "other version");
    CHECK(refused(&bpt_root, sizeof bpt_root - 1, BPT_EFORMAT, "bytes"), "short read");
    r = bpt_root; r.struct_bytes[BPT_ROOT_S_THREAD] = 1u << 21;
    CHECK(refused(&r, sizeof r, BPT_EFORMAT, "size"), "oversized structure");
    r = bpt_root; r.field_off[BPT_ROOT_F_THREAD_NEXT] = r.struct_bytes[BPT_ROOT_S_THREAD] - 4;
    CHECK(refused(&r, sizeof r, BPT_EFORMAT, "past its structure"), "field past its structure");
    r = bpt_root; r.field_struct[BPT_ROOT_F_FUNC_NAME] = BPT_ROOT_S_THREAD;
    CHECK(refused(&r, sizeof r, BPT_EFORMAT, "not its own"), "field in another structure");
    r = bpt_root; r.field_bytes[BPT_ROOT_F_THREAD_COUNTS] -= 8;
    CHECK(refused(&r, sizeof r, BPT_EFORMAT, "wide"), "array of the wrong length");
    r = bpt_root; r.field_bytes[BPT_ROOT_F_THREAD_TID] = 3;
    CHECK(refused(&r, sizeof r, BPT_EFORMAT, "wide"), "a word of 3 bytes");
    r = bpt_root; r.consts[BPT_ROOT_C_NKINDS] = 17;
    CHECK(refused(&r, sizeof r, BPT_EFORMAT, "constant"), "constant out of range");
    CHECK_RC(bpt_root_check(NULL, 0, why, sizeof why), BPT_EINVAL);
    CHECK_RC(bpt_root_check(NULL, 0, NULL, 0), BPT_EINVAL);

    /* The addresses. */
    CHECK_RC(bpt_register_vm(&code[0], 99, "t_root", "plain", 1, NULL, &f), 0);
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_thread_progress_stats(&ps), 0);
    CHECK(*(const volatile uint64_t *)bpt_root.global[BPT_ROOT_G_EPOCH].p == ps.epoch, "epoch");
    CHECK(*(const volatile uint32_t *)bpt_root.global[BPT_ROOT_G_NTHREADS].p == ps.records, "records");
    CHECK(*(void *const volatile *)bpt_root.global[BPT_ROOT_G_THREADS].p != NULL, "a thread record");
    CHECK(*(const volatile uint32_t *)bpt_root.global[BPT_ROOT_G_NFUNCS].p == (uint32_t)bpt_func_count(), "funcs");
    fp = **(const unsigned char *const *const *)bpt_root.global[BPT_ROOT_G_FUNCS].p;
    CHECK(fp == (const unsigned char *)f, "the registry's first function");
    CHECK(!strcmp(*(const char *const *)(fp + bpt_root.field_off[BPT_ROOT_F_FUNC_NAME]), "plain"), "its name");
    CHECK(*(const int *)(fp + bpt_root.field_off[BPT_ROOT_F_FUNC_ARITY]) == 1, "its arity");

    /* [L1] */
    seq0 = seq_now();
    CHECK(!(seq0 & 1), "the layout count is even outside a change: %llu", (unsigned long long)seq0);
    CHECK_RC(bpt_set_protocol_observer(observe, NULL), 0);
    rc = bpt_trace_pattern(s, "t_root:plain/1", BPT_COUNT, NULL);
    CHECK(rc == 1, "pattern: %d", rc);
    CHECK(steps > 0 && odd_steps == steps, "odd in each of the %d steps: %d", steps, odd_steps);
    CHECK(seq_now() > seq0 && !(seq_now() & 1), "moved and even after: %llu", (unsigned long long)seq_now());
    CHECK_RC(bpt_set_protocol_observer(NULL, NULL), 0);
    CHECK_RC(bpt_session_destroy(s), 0);
    CHECK_RC(bpt_unregister(f), 0);
    return CHECK_DONE();
}
