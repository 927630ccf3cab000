/* t_unregister_busy: BPT_TEST_CONCURRENCY
   bpt_unregister of a traced function says BPT_EBUSY and names the session
   that traces it, while another thread creates and destroys that session
   (issue #17, item 5). The message used to be made after the code
   modification permission was released, reading the session's name while
   a concurrent bpt_session_destroy freed it: ASAN reported a
   heap-use-after-free, TSAN the race. Claims, over 3,000 rounds:
   - every bpt_unregister returns BPT_EBUSY (with the session's name in its
     message) or 0 (nobody traced the function at that moment; it is
     registered again), never anything else, and nothing crashes;
   - under ASAN and TSAN (tests/run), no report. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <string.h>

#define BP ((bpt_vm_word)0xB5B5)
static bpt_vm_word word = 0x1234;
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;   /* tcc has no <stdatomic.h> */
static int stop;
static int stopped(void) {
    int v;
    pthread_mutex_lock(&stop_lock);
    v = stop;
    pthread_mutex_unlock(&stop_lock);
    return v;
}

static void *churn(void *arg) {
    int i = 0;
    (void)arg;
    while (!stopped()) {
        bpt_session_desc d;
        bpt_session s;
        char name[32];
        memset(&d, 0, sizeof d);
        snprintf(name, sizeof name, "busy-%d", i++);
        d.name = name;
        if (bpt_session_create(&d, &s) != 0) continue;
        bpt_trace_pattern(s, "u:f/0", BPT_COUNT, NULL);   /* 0 while f is unregistered */
        bpt_session_destroy(s);
    }
    return NULL;
}

int main(void) {
    pthread_t t;
    int i, busy = 0, freed = 0, other = 0, named = 1;
    long rounds = check_scale(3000);
    bpt_func *f;
    CHECK_RC(bpt_register_vm(&word, BP, "u", "f", 0, NULL, &f), 0);
    CHECK_RC(pthread_create(&t, NULL, churn, NULL), 0);
    for (i = 0; i < rounds; i++) {
        int rc = bpt_unregister(f);
        if (rc == BPT_EBUSY) {
            busy++;
            if (!strstr(bpt_last_error(), "traced by session 'busy-")) named = 0;
        } else if (rc == 0) {
            freed++;
            CHECK_RC(bpt_register_vm(&word, BP, "u", "f", 0, NULL, &f), 0);
        } else {
            other++;
        }
    }
    pthread_mutex_lock(&stop_lock);
    stop = 1;
    pthread_mutex_unlock(&stop_lock);
    pthread_join(t, NULL);
    printf("%ld rounds: %d BPT_EBUSY, %d unregistered (no session traced f then), %d other\n", rounds, busy,
           freed, other);
    CHECK(other == 0, "%d results other than BPT_EBUSY and 0", other);
    CHECK(named, "a BPT_EBUSY message did not name the session");
    return CHECK_DONE();
}
