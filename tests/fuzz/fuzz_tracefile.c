/* fuzz_tracefile: the trace file reader (bpt_trace_file_open/_read) on
   arbitrary bytes. A trace file comes from outside the process: a reader
   must never crash, read out of bounds or loop on one.

   Input: the file's bytes. The first byte also sets the batch size of the
   reads (1..16), so reads resume at every place in a block.

   Checks: open returns 0, BPT_EFORMAT or BPT_ENOMEM (nothing else); reads
   return a count within the batch, 0 at the end (and 0 again after it), or
   BPT_EFORMAT, after which every read returns BPT_EFORMAT; every message has
   a known type, names for the types that carry them, at most BPT_MAX_ARGS
   arguments, a NUL-terminated string area, and formats with bpt_format_dbg
   and the Chrome and folded writers. The seeds (corpus/tracefile/) are
   files bpt_session_write wrote:
     calls        version 1 (an older writer): one names block, one thread:
                  calls with a string, a double, a caller and a message,
                  returns of a string, exceptions, return_to, a process switch;
     v2_threads   version 2: two names blocks (functions registered between
                  two writes), 6 threads in 4 lanes, calls of 2 arguments
                  and their returns;
     v2_flight    version 2, a flight recorder of 2 chunks of 4 KiB that
                  overwrote: a DROPPED record of the writer's own, 4 threads.
   The version 2 seeds come from a 60-line program over the public API
   (bpt_register_vm, a session, threads calling, bpt_session_write twice). */
#define BPTRACE_IMPLEMENTATION
#include "../../bptrace.h"
#include "fuzz_common.h"
#include <sys/mman.h>

static void check_msg(const bpt_msg *m, bpt_chrome *chrome, bpt_folded *folded) {
    static char line[1024];
    int n;
    FUZZ_CHECK(m->type >= BPT_MSG_CALL && m->type <= BPT_MSG_RETURN_TO, "message type %d", m->type);
    if (m->type == BPT_MSG_CALL || m->type == BPT_MSG_RETURN_FROM || m->type == BPT_MSG_EXCEPTION_FROM)
        FUZZ_CHECK(m->module && m->name, "a %d message without names", m->type);
    FUZZ_CHECK(m->nargs <= BPT_MAX_ARGS, "%d arguments", m->nargs);
    FUZZ_CHECK(memchr(m->str, 0, sizeof m->str) != NULL, "the string area is not NUL-terminated");
    n = bpt_format_dbg(m, line, sizeof line);
    FUZZ_CHECK(n > 0 && strlen(line) == (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1),
               "bpt_format_dbg returned %d", n);
    FUZZ_CHECK(bpt_chrome_write(chrome, m) == 0, "bpt_chrome_write");
    FUZZ_CHECK(bpt_folded_add(folded, m) == 0, "bpt_folded_add");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static bpt_msg out[16];
    char path[64];
    int fd = memfd_create("bpt-fuzz", 0), rc, batch = size ? 1 + data[0] % 16 : 1, i, bad = 0;
    bpt_trace_file *f = NULL;
    bpt_chrome chrome;
    bpt_folded *folded = NULL;
    FILE *sink;
    FUZZ_CHECK(fd >= 0, "memfd_create");
    FUZZ_CHECK(write(fd, data, size) == (ssize_t)size, "write");
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    rc = bpt_trace_file_open(path, &f);
    if (rc != 0) {
        FUZZ_CHECK(rc == BPT_EFORMAT || rc == BPT_ENOMEM, "open returned %d", rc);
        close(fd);
        return 0;
    }
    sink = fopen("/dev/null", "w");
    FUZZ_CHECK(sink && bpt_chrome_open(&chrome, sink) == 0 && bpt_folded_new(&folded) == 0, "writers");
    for (;;) {
        rc = bpt_trace_file_read(f, out, batch);
        if (bad) { FUZZ_CHECK(rc == BPT_EFORMAT, "a read after a corrupt one returned %d", rc); break; }
        if (rc < 0) { FUZZ_CHECK(rc == BPT_EFORMAT || rc == BPT_ENOMEM, "read returned %d", rc); bad = rc == BPT_EFORMAT; if (!bad) break; continue; }
        FUZZ_CHECK(rc <= batch, "read %d of %d", rc, batch);
        if (rc == 0) { FUZZ_CHECK(bpt_trace_file_read(f, out, batch) == 0, "a read after the end"); break; }
        for (i = 0; i < rc; i++) check_msg(&out[i], &chrome, folded);
    }
    FUZZ_CHECK(bpt_trace_file_info(f, NULL, NULL, NULL) == 0, "info");
    /* The writers hold the messages' names: close them before the reader. */
    FUZZ_CHECK(bpt_chrome_close(&chrome) >= 0, "bpt_chrome_close");
    FUZZ_CHECK(bpt_folded_write(folded, sink) >= 0, "bpt_folded_write");
    bpt_folded_free(folded);
    bpt_trace_file_close(f);
    fclose(sink);
    close(fd);
    return 0;
}
