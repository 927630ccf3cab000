/* t_control_alloc: the control server (>>control) when allocations fail.
   BPT_MALLOC refuses every allocation while the test says so (from any
   thread: the server's threads make the calls that fail):
     1. STREAM with no memory for its buffer: "ERR ..." (not "OK stream"
        and a closed connection), and the connection goes on;
     2. a client leaves while its session cannot be destroyed: the session
        is kept and destroyed at the next client's departure (it stayed for
        good, its breakpoint set, and bpt_control_stop said 0);
     3. the same at bpt_control_stop: it returns the destroy's BPT_ENOMEM;
        a later bpt_control_stop, with memory again, destroys the session
        and returns 0; then BPT_ENOENT.
   BPT_TEST_CONCURRENCY: tests/run runs it under TSAN too. */
static void *t_malloc(unsigned long n);
#define BPT_MALLOC(n) t_malloc((unsigned long)(n))
#define BPT_FREE(p) free(p)
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static pthread_mutex_t t_lock = PTHREAD_MUTEX_INITIALIZER;
static int t_failing;    /* under t_lock: refuse every allocation */
static long t_refused;   /* under t_lock: allocations refused */
static void *t_malloc(unsigned long n) {
    int fail;
    pthread_mutex_lock(&t_lock);
    fail = t_failing;
    t_refused += fail;
    pthread_mutex_unlock(&t_lock);
    return fail ? NULL : malloc(n);
}

#include "control_fixture.h"

static char address[64];

static void failing(int on) {
    pthread_mutex_lock(&t_lock);
    t_failing = on;
    pthread_mutex_unlock(&t_lock);
}

static long refused(void) {
    long n;
    pthread_mutex_lock(&t_lock);
    n = t_refused;
    pthread_mutex_unlock(&t_lock);
    return n;
}

/* A client whose session counts t:f: the site holds the breakpoint. */
static int client(void) {
    char buf[256];
    int fd = ctl_dial(address);
    CHECK(fd >= 0, "cannot connect to %s", address);
    if (fd < 0) return -1;
    CHECK(!strncmp(ctl_ask(fd, "HELLO 1", buf, sizeof buf, NULL), "OK bptrace ", 11), "HELLO: %s", buf);
    CHECK(!strcmp(ctl_ask(fd, "PATTERN count t:f/_", buf, sizeof buf, NULL), "OK 1"), "PATTERN: %s", buf);
    CHECK(bpt_vm_word_at(fn) == BP, "the site holds %#lx", (unsigned long)bpt_vm_word_at(fn));
    return fd;
}

/* Until `n` allocations were refused (at most 10 s). */
static void refusals(long n) {
    for (int i = 0; i < 10000 && refused() < n; i++) usleep(1000);
}

static void stream_without_memory(void) {
    char buf[256];
    int fd = client();
    if (fd < 0) return;
    failing(1);
    ctl_ask(fd, "STREAM", buf, sizeof buf, NULL);
    failing(0);
    CHECK(!strncmp(buf, "ERR -2 ", 7), "STREAM with no memory: '%s'", buf);
    if (!strncmp(buf, "ERR ", 4))   /* (a stream would take the next request for hang-up polling) */
        CHECK(!strcmp(ctl_ask(fd, "PATTERN count t:f/_", buf, sizeof buf, NULL), "OK 1"), "after it: '%s'", buf);
    close(fd);
    CHECK(word_becomes(WORD), "the site holds %#lx after the client left", (unsigned long)bpt_vm_word_at(fn));
}

static void left_over_to_next_client(void) {
    long before = refused();
    int fd = client(), other;
    if (fd < 0) return;
    failing(1);
    close(fd);   /* its thread's session destroy fails, twice (once more from the list) */
    refusals(before + 2);
    failing(0);
    other = client();   /* its departure destroys the session left over, and its own */
    if (other >= 0) close(other);
    CHECK(word_becomes(WORD), "the site holds %#lx: the departed client's session stayed",
          (unsigned long)bpt_vm_word_at(fn));
}

static void left_over_to_stop(void) {
    int fd = client();
    if (fd < 0) return;
    failing(1);
    close(fd);
    CHECK_RC(bpt_control_stop(), BPT_ENOMEM);   /* its retry fails too */
    failing(0);
    CHECK(bpt_vm_word_at(fn) == BP, "the site holds %#lx", (unsigned long)bpt_vm_word_at(fn));
    CHECK_RC(bpt_control_stop(), 0);
    CHECK(bpt_vm_word_at(fn) == WORD, "the site holds %#lx after the second stop", (unsigned long)bpt_vm_word_at(fn));
    CHECK_RC(bpt_control_stop(), BPT_ENOENT);
}

int main(void) {
    bpt_control_desc d;
    CHECK_RC(bpt_register_vm(&code, BP, "t", "f", 1, &ops, &fn), 0);
    snprintf(address, sizeof address, "@bpt-t-control-alloc-%d", (int)getpid());
    memset(&d, 0, sizeof d);
    d.path = address;
    CHECK_RC(bpt_control_start(&d), 0);
    stream_without_memory();
    left_over_to_next_client();
    left_over_to_stop();
    return CHECK_DONE();
}
