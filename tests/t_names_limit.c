/* t_names_limit: the name table's limit, made small for this build
   (BPT__NAMES_PAGES 2: 2048 ids; 4M by default). Found by review:
   - at the limit, registration and match spec messages said BPT_ENOMEM
     ("no memory"); now BPT_ELIMIT, with a message that says the table is
     full;
   - a bpt_trace_pattern refused (a destroyed session: BPT_ESESSION; a
     pinned caller: BPT_EDEADLK) gave its message an id all the same, and
     ids are never given back; now a refused call takes none. */
#define BPT__NAMES_PAGES 2
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <string.h>

static bpt_vm_word code[4] = { 1, 2, 3, 4 };

int main(void) {
    bpt_session s, dead;
    bpt_match m;
    bpt_func *f;
    char msg[32];
    uint32_t before;
    int i, rc = 0;
    CHECK_RC(bpt_session_create(NULL, &s), 0);
    CHECK_RC(bpt_session_create(NULL, &dead), 0);
    CHECK_RC(bpt_session_destroy(dead), 0);
    CHECK_RC(bpt_register_vm(&code[0], 0xB9, "vm", "f", 0, NULL, &f), 0);
    memset(&m, 0, sizeof m);

    /* Refused calls give their message no id. */
    before = bpt__names_count();
    for (i = 0; i < 100; i++) {
        snprintf(msg, sizeof msg, "refused %d", i);
        m.message = msg;
        CHECK_RC(bpt_trace_pattern(dead, "vm:f/_", BPT_CALL, &m), BPT_ESESSION);
        bpt_thread_progress_pin();
        rc = bpt_trace_pattern(s, "vm:f/_", BPT_CALL, &m);
        bpt_thread_progress_unpin();
        CHECK(rc == BPT_EDEADLK, "pinned: %d (%s)", rc, bpt_last_error());
    }
    CHECK(bpt__names_count() == before, "refused calls took %u ids", bpt__names_count() - before);

    /* Every id given: each distinct message takes one, for good. */
    for (i = 0; i < 3000; i++) {
        snprintf(msg, sizeof msg, "m%d", i);
        m.message = msg;
        if ((rc = bpt_trace_pattern(s, "vm:f/_", BPT_CALL, &m)) < 0) break;
        CHECK_RC(bpt_trace_pattern(s, "vm:f/_", BPT_CALL | BPT_OFF, NULL), 1);
    }
    printf("after %d messages: %d (%s), %u ids\n", i, rc, bpt_last_error(), bpt__names_count());
    CHECK(rc == BPT_ELIMIT, "the full table: %d (%s), expected BPT_ELIMIT", rc, bpt_strerror(rc));
    CHECK(strstr(bpt_last_error(), "name table is full") != NULL, "message: %s", bpt_last_error());
    CHECK(bpt__names_count() == 2048, "%u ids given", bpt__names_count());
    /* Known names still work; a new one is refused with BPT_ELIMIT. */
    m.message = "m7";
    CHECK_RC(bpt_trace_pattern(s, "vm:f/_", BPT_CALL, &m), 1);
    rc = bpt_register_vm(&code[1], 0xB9, "vm", "g", 0, NULL, &f);
    printf("bpt_register_vm(vm:g/0): %d (%s)\n", rc, bpt_last_error());
    CHECK(rc == BPT_ELIMIT, "register with the table full: %d (%s)", rc, bpt_strerror(rc));
    CHECK(strstr(bpt_last_error(), "name table is full") != NULL, "message: %s", bpt_last_error());
    CHECK_RC(bpt_register_vm(&code[2], 0xB9, "vm", "f", 0, NULL, &f), 0);   /* a name with an id */
    CHECK_RC(bpt_session_destroy(s), 0);
    return CHECK_DONE();
}
