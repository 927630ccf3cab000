/* site_vm.c: VM instruction-word sites.
   The interpreter registers the address of a function's first instruction
   word; installing a breakpoint stores the breakpoint opcode's word there,
   uninstalling stores the original back. */
#include "internal.h"

typedef char bpt__vm_word_is_64_bits[sizeof(bpt_vm_word) == sizeof(uint64_t) ? 1 : -1];

/* One aligned 8-byte store: single-copy atomic on x86-64 and aarch64, so a
   VM thread's BPT_VM_FETCH sees the old word or the new one, never a mix.
   [V1] It pairs with no acquire: a VM's fetch is a plain load. Its ordering
   with the GenericBp data comes from the waits around it (steps 4 and 6,
   10: [B1] in progress.c), not from this store. */
BPT__PRIVATE void bpt__site_vm_write(bpt_func *f, uint64_t w) {
    bpt__store_release_u64((bpt__atomic_u64 *)f->site, w);   /* [V1] */
}

BPT__PRIVATE int bpt__site_vm_check(const bpt_vm_word *word, bpt_vm_word bp_word) {
    if ((uintptr_t)word % sizeof(bpt_vm_word))
        return bpt__fail(BPT_EINVAL, "bpt_register_vm: first_word %p is not %d-byte aligned",
                         (const void *)word, (int)sizeof(bpt_vm_word));
    if (BPT_VM_FETCH(word) == bp_word)
        return bpt__fail(BPT_EINVAL, "bpt_register_vm: the breakpoint word equals the first "
                         "instruction word (or the site is already patched)");
    return 0;
}

bpt_vm_word bpt_vm_word_at(const bpt_func *f) {
    return f && f->kind == BPT__SITE_VM ? BPT_VM_FETCH((const bpt_vm_word *)f->site) : 0;
}
