/* tests/bpt/long_names.c FILE: a trace file for `bpt report` (tests/bpt/run,
   bpt-report-long-names): 40 functions whose names are 120 bytes long, each
   called once and returned from, traced with call and return. Their table
   lines are longer than the room bpt guessed for them (160 bytes a row). */
#define BPTRACE_IMPLEMENTATION
#include "bptrace.h"
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { N = 40, NAME = 120 };
#define BP ((bpt_vm_word)0xB0B0)
#define WORD ((bpt_vm_word)0x101)
static bpt_vm_word code[N];
static bpt_func *fn[N];
static uint64_t arg(const void *frame, int i) { return ((const uint64_t *)frame)[i]; }
static const bpt_vm_ops ops = { arg, NULL, NULL };

int main(int argc, char **argv) {
    bpt_session s;
    bpt_session_desc d;
    bpt_file_writer w;
    char name[NAME + 16];
    if (argc != 2) return 2;
    for (int i = 0; i < N; i++) {
        code[i] = WORD;
        memset(name, 'a' + i % 26, NAME);
        snprintf(name + NAME, 16, "_%d", i);
        if (bpt_register_vm(&code[i], BP, "long", name, 1, &ops, &fn[i]) < 0) { puts(bpt_last_error()); return 1; }
    }
    memset(&d, 0, sizeof d);
    if (bpt_session_create(&d, &s) < 0 || bpt_trace_pattern(s, "long:_/_", BPT_CALL | BPT_RETURN, NULL) != N) {
        puts(bpt_last_error());
        return 1;
    }
    for (int i = 0; i < N; i++) {
        uint64_t frame[1] = { (uint64_t)i };
        bpt_vm_token t = 0;
        if (BPT_VM_FETCH(&code[i]) == BP && bpt_vm_breakpoint(fn[i], frame, &t) != WORD) return 1;
        if (t) bpt_vm_return(t, 0);
    }
    memset(&w, 0, sizeof w);
    if ((w.fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) { perror(argv[1]); return 1; }
    if (bpt_session_write(s, &w) != 2 * N) { puts(bpt_last_error()); return 1; }
    close(w.fd);
    return 0;
}
