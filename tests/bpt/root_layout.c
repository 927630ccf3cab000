/* tests/bpt/root_layout.c: where check.py patches a target's root record
   to make the bad ones (offsets in bpt_root_record, from this header). */
#include <stddef.h>
#include <stdio.h>
#include "bptrace.h"

int main(void) {
    printf("version %zu\nstruct_bytes %zu\nfield_off %zu\nthread_next %d\nthread_tid %d\nthread %d\n",
           offsetof(bpt_root_record, version), offsetof(bpt_root_record, struct_bytes),
           offsetof(bpt_root_record, field_off), BPT_ROOT_F_THREAD_NEXT, BPT_ROOT_F_THREAD_TID, BPT_ROOT_S_THREAD);
    return 0;
}
