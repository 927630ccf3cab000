/* site_native.c: what native sites share on both architectures: making code
   pages writable in batches, the entry the stubs call, and the one writer the
   protocol uses for every kind of site. */
#include "internal.h"

#if defined(BPT_NATIVE)

static uintptr_t bpt__page_size(void) {
    static uintptr_t size;
    if (!size) size = (uintptr_t)sysconf(_SC_PAGESIZE);
    return size;
}

/* A noted page's low bit: the page is BTI-guarded (bpt__module_code_guarded,
   module.c), and every protection the batch gives it keeps PROT_BTI. */
#define BPT__PAGE_GUARDED ((uintptr_t)1)
#if defined(__aarch64__) && !defined(PROT_BTI)
#  define PROT_BTI 0x10   /* Linux, arch/arm64/include/uapi/asm/mman.h */
#endif

static int bpt__page_prot(uintptr_t noted, int prot) {
#if defined(__aarch64__)
    if (noted & BPT__PAGE_GUARDED) prot |= PROT_BTI;
#else
    (void)noted;
#endif
    return prot;
}

/* Note the pages of [addr, addr+len), guarded or not. Returns 0 or BPT_ENOMEM. */
static int bpt__batch_add(bpt__code_batch *b, const void *addr, size_t len, int guarded) {
    uintptr_t ps = bpt__page_size(), end = (uintptr_t)addr + len, p;
    for (p = (uintptr_t)addr & ~(ps - 1); p < end; p += ps) {
        uintptr_t noted = p | (guarded ? BPT__PAGE_GUARDED : 0);
        if (b->n && b->pages[b->n - 1] == noted) continue;
        if (b->n == b->cap) {
            int cap = b->cap ? b->cap * 2 : 16;
            uintptr_t *pages = (uintptr_t *)BPT_MALLOC(sizeof *pages * (size_t)cap);
            if (!pages) return BPT_ENOMEM;
            if (b->n) memcpy(pages, b->pages, sizeof *pages * (size_t)b->n);
            BPT_FREE(b->pages);
            b->pages = pages;
            b->cap = cap;
        }
        b->pages[b->n++] = noted;
    }
    return 0;
}

static int bpt__uintptr_cmp(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* The end of the run of consecutive pages, alike guarded, that starts at
   pages[i] (sorted): one mprotect per run, not per page. A call per page made a 50,000-function
   change take 15 ms and stall other threads 7.7 ms (the kernel's mm lock and
   TLB shootdowns); per run: 0.37 ms and 78 us (bench/pattern_scale). */
static int bpt__batch_run_end(const bpt__code_batch *b, int i, int n) {
    int j = i + 1;
    while (j < n && b->pages[j] == b->pages[j - 1] + bpt__page_size()) j++;   /* the same low bit too */
    return j;
}

/* mprotect the run pages[i..j) to prot, and PROT_BTI where guarded. */
static int bpt__batch_run_protect(const bpt__code_batch *b, int i, int j, int prot) {
    return mprotect((void *)(b->pages[i] & ~BPT__PAGE_GUARDED), bpt__page_size() * (size_t)(j - i),
                    bpt__page_prot(b->pages[i], prot));
}

static void bpt__batch_protect(const bpt__code_batch *b, int n, int prot) {
    int i, j;
    for (i = 0; i < n; i = j) {
        j = bpt__batch_run_end(b, i, n);
        bpt__batch_run_protect(b, i, j, prot);
    }
}

/* Make every noted page writable. Returns 0, or BPT_EPERM with every page
   back to read+execute and the reason in bpt_last_error. */
static int bpt__batch_open(bpt__code_batch *b, const char *who) {
    int i, j, k = 0;
    qsort(b->pages, (size_t)b->n, sizeof *b->pages, bpt__uintptr_cmp);
    for (i = 0; i < b->n; i++)
        if (!k || b->pages[k - 1] != b->pages[i]) b->pages[k++] = b->pages[i];
    b->n = k;
    for (i = 0; i < b->n; i = j) {
        j = bpt__batch_run_end(b, i, b->n);
        if (bpt__batch_run_protect(b, i, j, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
            int e = errno;
            bpt__batch_protect(b, j, PROT_READ | PROT_EXEC);   /* this run too: it may be half changed */
            return bpt__fail(BPT_EPERM, "%s: mprotect(%p, RWX) refused: %s (a read-only file mapping, "
                             "SELinux execmod, or a hardened kernel); nothing was changed",
                             who, (void *)(b->pages[i] & ~BPT__PAGE_GUARDED), strerror(e));
        }
    }
    return 0;
}

/* Back to read+execute: no page stays writable and executable (W^X). The
   page array stays allocated for the next batch (the caller frees it). */
static void bpt__batch_reprotect(bpt__code_batch *b) {
    bpt__batch_protect(b, b->n, PROT_READ | PROT_EXEC);
    b->n = 0;
}

static void bpt__batch_close(bpt__code_batch *b) {
    bpt__batch_reprotect(b);
    BPT_FREE(b->pages);
    b->pages = NULL;
    b->cap = 0;
}

/* >>own calls: bptrace's own calls through a traced slot. The hit path
   calls libc (mmap for a thread's first record, the futex wake, the clock
   where there is no cycle counter) through its module's GOT: with those
   slots traced, a hit would hit again, without end. So a thread notes
   while it runs bptrace's own code: a native entry's full path, a traced
   return (but the return route's plain return, which makes no call:
   frames.c), a VM breakpoint, the set path (under the code modification
   permission) and bptrace's own threads (the control server's). A slot
   reached meanwhile is not traced: the call goes straight on to its
   target. Not covered: a drainer's bpt_session_drain, the formatters and
   bpt_session_write, whose calls through traced slots are traced like the
   program's. A signal handler's call through a slot while its thread is
   inside bptrace goes untraced too; its calls through entries are traced
   as before. */
static BPT__THREAD_LOCAL unsigned bpt__in_bptrace;
BPT__HOT BPT__INTREGS int bpt__own_call(const bpt_func *f) { return f->slot_prot && bpt__in_bptrace; }
BPT__PRIVATE void bpt__own_enter(void) { bpt__in_bptrace++; }
BPT__PRIVATE void bpt__own_leave(void) { bpt__in_bptrace--; }

/* CP5, CL6 and CR7: unpin, and the result. */
BPT__HOT BPT__INTREGS int bpt__short_path_unpin(bpt__thread *rec, int done) {
    if (BPT__UNLIKELY(bpt__unpin_quiet(rec)))
        return done ? BPT__PATH_DONE_WAKE : BPT__PATH_FULL;   /* the full path's unpin wakes */
    return done ? BPT__PATH_DONE : BPT__PATH_FULL;
}

/* >>count path: the hit of a native entry whose active generation only
   counts (the COUNT shortcut, breakpoint.h), or does nothing (NONE), run
   by the entry stubs before they save the vector registers: this function
   and everything it inlines use the integer registers only (>>intregs in
   port.h; tests/count_path_check.sh checks the compiled code). It makes
   no call. On x86-64 it also keeps every integer register but rax
   (>>keeps regs in port.h), and the stub saves none of the others first.
   Anything it cannot finish that way it leaves untouched to the full
   path, bpt__native_entry, which the stub then calls with every argument
   register saved:
   The stub calls it only when the function's path_hint is
   BPT__HINT_COUNT: one generation counts or does nothing (breakpoint.h).
   A function that only traces calls goes to the call path (below), one
   that traces calls and their returns alone to the call-return path, one
   that only times its calls by the wall clock to the time path, one that
   mixes kinds to the full path at once.
   A slot never comes here (its hint is 0, bp.c): bptrace's own calls
   through it are left untraced by the full path (>>own calls).
   CP1. The thread has its record (the full path makes it on a first hit).
   CP2. Pin, and read the active index once [G2], as bpt__breakpoint does.
   CP3. The generation's shortcut is COUNT or NONE, and no return-traced
       frame is open on the thread (F0's settle, frames.c, needs the full
       path: it may send exception_from).
   CP4. Add one to the thread's own counter, if its page is mapped (the
       full path maps it).
   CP5. Unpin; a waiter sleeping on the futex is woken by the stub's second
       call, a system call being no place for the integer registers alone.
   Returns BPT__PATH_DONE, BPT__PATH_DONE_WAKE, or BPT__PATH_FULL having
   changed nothing but a pin it took back.
   On x86-64 the stub runs the common case itself first (>>count route in
   site_x86_64.c) and calls this for the rest. */
BPT__ASM_CALLED BPT__INTREGS BPT__KEEPS_REGS BPT__LINE_ALIGNED int bpt__native_count_path(bpt_func *f) {
    bpt__thread *rec = bpt__thread_self_or_null();
    const bpt__shortcut *sc;
    uint32_t kind;
    int done = 0;
    BPT_TEST_POINT("Count path: the C one");   /* t_count_path counts its entries (no call) */
    if (BPT__UNLIKELY(!rec)) return BPT__PATH_FULL;                      /* CP1 */
    bpt__pin_rec(rec);                                                    /* CP2 */
    sc = &f->shortcut[bpt__active_ix_load()];
    kind = sc->kind;
    if (BPT__LIKELY(rec->shadow_depth[BPT__STACK_NATIVE] == 0)) {         /* CP3 */
        if (BPT__LIKELY(kind == BPT__SHORTCUT_COUNT))                     /* CP4 */
            done = bpt__kind_count_try_add(rec, sc->count_dir, sc->count_off, sc->data);
        else done = kind == BPT__SHORTCUT_NONE;
    }
    return bpt__short_path_unpin(rec, done);                              /* CP5 */
}

/* >>call path: the hit of a native entry whose active generation traces
   calls for one session and asks for nothing but the call record (the
   CALL_PLAIN shortcut, breakpoint.h), or does nothing (NONE). As the count
   path: run by the entry stubs before they save the vector registers,
   with the integer registers only and no call (>>intregs in port.h;
   tests/count_path_check.sh checks it); unlike the count path it may
   clobber what a callee may, and the stub saves those registers, which it
   hands over as args. It writes the record straight into the
   thread's current chunk, where the full path builds it on the stack and
   copies it there (kind_call.c, session.c): the same record, the same
   protocol. Anything it cannot finish that way it leaves untouched to the
   full path. The stub calls it when the function's path_hint is
   BPT__HINT_CALL, with args pointing at the integer argument registers it
   saved (on aarch64 the whole bpt__regs frame) and sp, the function's
   stack pointer at entry (bpt__arch_entry_sp).
   CL1. The thread has its record (the full path makes it on a first hit).
   CL2. Pin, and read the active index once [G2], as bpt__breakpoint does.
   CL3. The generation's shortcut is CALL_PLAIN, and F0 would settle
       nothing: every frame open on the thread is a live caller's
       (bpt__native_frames_settled, frames.c; else the full path, which
       may send exception_from). NONE is done at once, when F0 would
       settle nothing too (as the count path's CP3: the full path sends a
       left frame's exception_from at any hit).
   CL4. The session is alive [S2], the thread is not inside a tracer of
       its own, and the clock is the CPU's counter (clock_gettime is a
       call): read it.
   CL5. Mark the thread's send [H1] (a signal handler's send nested on it
       leaves the lane alone); if none was open and the current chunk has
       room as it is (>>fits in session.c), write the record at its end and
       publish it with the chunk's fill [R2]; unmark. A first record, a
       full chunk, a stale anchor: the full path's send.
   CL6. Unpin, as CP5.
   Returns BPT__PATH_DONE, BPT__PATH_DONE_WAKE, or BPT__PATH_FULL having
   changed nothing but a pin it took back.
   The call-return path below is its twin for CALL_RETURN; each is a
   function of its own so that neither pays for the other's registers
   (one function for both saved 5 registers a call event, 164.9 -> 184.8
   instructions; callgrind, bench_overhead call). */

/* CL4 and CL5, for both paths: 1 when the call record is written.
   flags: the record's BPT__REC_CALL_NO_RETURN (the call path), or 0 (the
   call-return path: its return_from ends the call). */
BPT__HOT BPT__INTREGS int bpt__call_path_record(bpt__thread *rec, bpt_func *f, bpt__session *s,
                                                const uint64_t *args, uint16_t flags) {
    uint64_t ticks;
    bpt__lane *lane;
    int done = 0;
    if (BPT__LIKELY(!rec->in_tracer && !bpt__load_relaxed_u32(&s->dead) &&   /* CL4 [S2] */
                    bpt__now_ticks_counter(&ticks)) &&
        BPT__LIKELY(bpt__send_begin(rec))) {                                /* CL5 [H1] */
        if (BPT__LIKELY((lane = bpt__lane_room(s, rec, ticks, BPT__CALL_PLAIN_ROOM)) != NULL)) {
            bpt__lane_publish(lane, bpt__call_rec_plain(lane->wp, f, args, ticks, flags));   /* [R2] */
            done = 1;
        }
        bpt__send_end(rec);
    }
    return done;
}

BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_call_path(bpt_func *f, uint64_t *args, uintptr_t sp) {
    bpt__thread *rec = bpt__thread_self_or_null();
    const bpt__shortcut *sc;
    int done = 0;
    if (BPT__UNLIKELY(!rec)) return BPT__PATH_FULL;                       /* CL1 */
    bpt__pin_rec(rec);                                                    /* CL2 */
    sc = &f->shortcut[bpt__active_ix_load()];
    if (BPT__LIKELY(sc->kind == BPT__SHORTCUT_CALL_PLAIN) && BPT__LIKELY(bpt__native_frames_settled(rec, sp)))   /* CL3 */
        done = bpt__call_path_record(rec, f, ((const bpt__GenericBp *)sc->data)->session, args,
                                     BPT__REC_CALL_NO_RETURN);                                     /* CL4, CL5 */
    else
        done = sc->kind == BPT__SHORTCUT_NONE && bpt__native_frames_settled(rec, sp);
    return bpt__short_path_unpin(rec, done);                               /* CL6 */
}

/* >>call-return path: the call path's twin for a generation that traces
   calls and their returns for one session, asking for the call record and
   return_from alone (CALL_RETURN, breakpoint.h): the record, then the
   return frame, both as the full path makes them. The stub calls it when
   the function's path_hint is BPT__HINT_CALL_RETURN, as it calls the call
   path. The return takes the plain return (frames.c).
   CR1, CR2. As CL1, CL2.
   CR3. The shortcut is CALL_RETURN, F0 would settle nothing (as CL3), and
       a frame can be pushed here (bpt__native_frame_plain_ok: the shadow
       stack is mapped and has room, not a tail call, not a signed return
       address). NONE: as CL3.
   CR4, CR5. As CL4, CL5: the call record.
   CR6. Push the return frame and swap the return address for the
       trampoline (F1, bpt__native_frame_push_plain), after the record, as
       the full path does. If a signal handler filled the shadow stack
       since CR3, the frame is skipped and counted, as the full path's.
   CR7. Unpin, as CP5.
   Returns as the call path. */
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_call_return_path(bpt_func *f, uint64_t *args,
                                                                                 uintptr_t sp) {
    bpt__thread *rec = bpt__thread_self_or_null();
    uintptr_t *slot = BPT__ARCH_SHORT_RET_SLOT(args, sp);
    const bpt__shortcut *sc;
    unsigned ix;
    int done = 0;
    if (BPT__UNLIKELY(!rec)) return BPT__PATH_FULL;                       /* CR1 */
    bpt__pin_rec(rec);                                                    /* CR2 */
    ix = bpt__active_ix_load();
    sc = &f->shortcut[ix];
    if (BPT__LIKELY(sc->kind == BPT__SHORTCUT_CALL_RETURN) && BPT__LIKELY(bpt__native_frames_settled(rec, sp)) &&
        BPT__LIKELY(bpt__native_frame_plain_ok(rec, f, slot))) {                                  /* CR3 */
        const bpt__GenericBp *g = (const bpt__GenericBp *)sc->data;
        if ((done = bpt__call_path_record(rec, f, g->session, args, 0))) {                         /* CR4, CR5 */
            const bpt__ms *ms = (const bpt__ms *)g->data[ix].data[BPT__KIX_CALL];   /* the same generation [G2] */
            bpt__native_frame_push_plain(rec, f, g->session, ms->actions, ms->rettype, sp, slot, NULL, 0);   /* CR6 */
        }
    } else {
        done = sc->kind == BPT__SHORTCUT_NONE && bpt__native_frames_settled(rec, sp);
    }
    return bpt__short_path_unpin(rec, done);                               /* CR7 */
}

/* >>time path: the hit of a native entry whose active generation times
   calls (call_time) for one session by the wall clock and does nothing
   else (the TIME shortcut, breakpoint.h): count the call in the thread's
   table and push the frame whose return charges the call's own time, as
   the full path's call_time hit (kind_timem.c) and F1 do, with the
   integer registers alone and no call. The stub calls it when the
   function's path_hint is BPT__HINT_TIME, as it calls the call path. The
   return takes the timed return (frames.c).
   TM1, TM2. As CL1, CL2.
   TM3. The shortcut is TIME; F0 would settle nothing and a frame can be
       pushed (as CR3); the frame the new one pauses is the one below it,
       or none (bpt__timem_caller_at: a caller of another session or
       process needs the full path's walk); the clock is the CPU's
       counter: read it (a frame keeps its start in ticks, frames.c).
       NONE: as CL3.
   TM4. Count the call in the thread's table, if the table and the
       process's cell are there (bpt__timem_charge_try, timem.c; the full
       path makes them) and no charge of that table runs below [H1].
   TM5. Push the frame, pausing the caller at the same instant, and swap
       the return address for the trampoline (F1,
       bpt__native_frame_push_plain; skipped and counted as CR6's).
   TM6. Unpin, as CP5.
   Returns as the call path. */
BPT__ASM_CALLED BPT__INTREGS BPT__LINE_ALIGNED int bpt__native_time_path(bpt_func *f, uint64_t *args, uintptr_t sp) {
    bpt__thread *rec = bpt__thread_self_or_null();
    uintptr_t *slot = BPT__ARCH_SHORT_RET_SLOT(args, sp);
    const bpt__shortcut *sc;
    const bpt__GenericBp *g;
    bpt__frame_session *caller;
    uint64_t now;
    unsigned ix;
    int done = 0;
    if (BPT__UNLIKELY(!rec)) return BPT__PATH_FULL;                       /* TM1 */
    bpt__pin_rec(rec);                                                    /* TM2 */
    ix = bpt__active_ix_load();
    sc = &f->shortcut[ix];
    g = (const bpt__GenericBp *)sc->data;
    if (BPT__LIKELY(sc->kind == BPT__SHORTCUT_TIME) && BPT__LIKELY(bpt__native_frames_settled(rec, sp)) &&   /* TM3 */
        BPT__LIKELY(bpt__native_frame_plain_ok(rec, f, slot)) &&
        BPT__LIKELY(bpt__timem_caller_at(rec, rec->shadow_depth[BPT__STACK_NATIVE], g->session->id, rec->process,
                                         &caller)) &&
        BPT__LIKELY(bpt__now_ticks_counter(&now))) {
        if ((done = bpt__timem_charge_try((bpt__BpTimem *)g->data[ix].data[BPT__KIX_TIME], rec, rec->process, 1, 0, 0)))   /* TM4 */
            bpt__native_frame_push_plain(rec, f, g->session, BPT_TIME, BPT_ARG_I64, sp, slot, caller, now);   /* TM5 */
    } else {
        done = sc->kind == BPT__SHORTCUT_NONE && bpt__native_frames_settled(rec, sp);
    }
    return bpt__short_path_unpin(rec, done);                               /* TM6 */
}

/* The full path, with every argument register saved in regs: the general
   hit (hit.c), then the return frame; or only the wake a short path left
   to it (counted: BPT__PATH_DONE_WAKE, from any short path). */
BPT__ASM_CALLED void bpt__native_entry(bpt_func *f, bpt__regs *regs, int counted) {
    bpt__hit h;
    if (bpt__own_call(f)) return;   /* >>own calls */
    BPT_TEST_POINT("Full path: entered");   /* t_count_path counts its entries */
    bpt__own_enter();
    if (counted == BPT__PATH_DONE_WAKE) {
        bpt__progress_wake();
    } else {
        h.f = f;
        h.frame = regs;
        h.no_frame = 0;
        if (bpt__breakpoint(&h)) {
            if (h.nwant) bpt__native_frame_push(&h);
            bpt__unpin(h.rec);
        }
    }
    bpt__own_leave();
}
#else
BPT__PRIVATE void bpt__own_enter(void) {}   /* no slots without native sites */
BPT__PRIVATE void bpt__own_leave(void) {}
#endif /* BPT_NATIVE */

/* The page arrays of the protocol's writes, allocated at step 2 with room
   for every native site of the change (a site's word never crosses a
   page: it stays within a cache line, or is an aligned pointer), so that
   steps 5 and 9 allocate nothing: running out of memory must happen before
   anything changes. code and slots count fs[0..n)'s native code sites
   and slots (step 2 counts them in its pass). Slots' protections are read
   again here (slots.c; switch_off: the change switches nothing on, and
   forgets a slot whose page is gone). Returns 0, BPT_ENOMEM, or a slot's
   refusal (BPT_EINVAL: no longer mapped; BPT_ENOTSUP: no
   /proc/self/maps), with nothing changed. */
BPT__PRIVATE int bpt__sites_batch_prepare(bpt__sites_batch *sb, bpt_func **fs, int n, int code, int slots,
                                          int switch_off) {
    memset(sb, 0, sizeof *sb);
#if defined(BPT_NATIVE)
    if (slots) {
        int rc = bpt__slots_prot_refresh(fs, n, switch_off);   /* their pages as they are now (slots.c) */
        if (rc < 0) return rc;
    }
    if (code && !(sb->code.pages = (uintptr_t *)BPT_MALLOC(sizeof *sb->code.pages * (size_t)code)))
        return bpt__fail(BPT_ENOMEM, "no memory to batch %d code writes; nothing changed", code);
    sb->code.cap = code;
    if (slots && (!(sb->data.pages = (uintptr_t *)BPT_MALLOC(sizeof *sb->data.pages * (size_t)slots)) ||
                  !(sb->data.prot = (unsigned *)BPT_MALLOC(sizeof *sb->data.prot * (size_t)slots)))) {
        bpt__sites_batch_free(sb);
        return bpt__fail(BPT_ENOMEM, "no memory to batch %d slot writes; nothing changed", slots);
    }
    sb->data.cap = slots;
#else
    (void)fs; (void)n; (void)code; (void)slots; (void)switch_off;
#endif
    return 0;
}

BPT__PRIVATE void bpt__sites_batch_free(bpt__sites_batch *sb) {
    BPT_FREE(sb->code.pages);
    BPT_FREE(sb->data.pages);
    BPT_FREE(sb->data.prot);
    memset(sb, 0, sizeof *sb);
}

/* The word a site holds now: an aligned load of word_size bytes (only the
   set path, under the permission, ever writes it). */
static uint64_t bpt__site_read(const bpt_func *f) {
    if (f->word_size == 8) return bpt__load_relaxed_u64((bpt__atomic_u64 *)f->site);
    if (f->word_size == 4) return *(const volatile uint32_t *)f->site;
    return *(const volatile uint16_t *)f->site;
}

#if defined(BPT_NATIVE)
/* Make the pages of the read-only slots among fs[0..n) that this batch
   writes writable (read+write: data is never made executable), each once.
   Returns 0, or BPT_EPERM with every page given back its protection. */
static int bpt__slot_pages_open(bpt__slot_pages *d, bpt_func **fs, int n, int install) {
    uintptr_t ps = bpt__page_size();
    int i, k;
    for (i = 0; i < n; i++) {
        bpt_func *f = fs[i];
        uintptr_t page = (uintptr_t)f->site & ~(ps - 1);
        if (f->kind != BPT__SITE_NATIVE || !f->slot_prot || (f->page_prot & PROT_WRITE) || f->installed == install ||
            f->page_prot == BPT__SLOT_UNMAPPED)
            continue;   /* code, a writable slot, nothing to write, or nowhere to write it */
        for (k = 0; k < d->n && d->pages[k] != page; k++) {}
        if (k < d->n) continue;   /* opened already */
        if (mprotect((void *)page, ps, (int)f->page_prot | PROT_WRITE) != 0) {
            int e = errno;
            for (k = 0; k < d->n; k++) mprotect((void *)d->pages[k], ps, (int)d->prot[k]);
            d->n = 0;
            return bpt__fail(BPT_EPERM, "%s:%s: mprotect(%p, +write) of its slot's page refused: %s; "
                             "nothing was changed", f->module, f->name, (void *)page, strerror(e));
        }
        d->pages[d->n] = page;    /* fits: one page a slot at most (bpt__sites_batch_prepare) */
        d->prot[d->n++] = f->page_prot;
    }
    return 0;
}

/* A slot's one store, a compare-and-swap from the word bptrace expects
   there: a store of the program's between the check and the write is never
   overwritten (*seen: what the slot held, when it fails). An aligned 8-byte
   pointer, single-copy atomic on both architectures, so a call through the
   slot jumps to the old target or the new, never to a torn one. [SL1]
   Release (bpt__cas_u64 is acq_rel): the record and the
   trampoline it points at were complete long before (bpt__slots_register
   published them, page made read+execute and SYNC_CORE, before any slot
   could point there: slots.c, SL0); a thread that loads the new value reaches
   them through a control dependency, as it reaches a patched entry.
   A CAS that loses to a store the program has undone by the time the
   slot is read again (a hook saved and put back) tries again: the slot
   holds what bptrace expects. (It fell through to the code sites' writer,
   a 2- or 4-byte store: a torn pointer, found by review; t_slot_swap.) */
static int bpt__slot_swap(bpt_func *f, uint64_t expect, uint64_t w, uint64_t *seen) {
    for (;;) {
        BPT_TEST_POINT("slot_swap: before the CAS");
        if (bpt__cas_u64((bpt__atomic_u64 *)f->site, expect, w)) return 1;
        BPT_TEST_POINT("slot_swap: the CAS lost");
        if ((*seen = bpt__load_relaxed_u64((bpt__atomic_u64 *)f->site)) != expect) return 0;
    }
}

static void bpt__slot_pages_close(bpt__slot_pages *d) {
    int k;
    for (k = 0; k < d->n; k++) mprotect((void *)d->pages[k], bpt__page_size(), (int)d->prot[k]);
    d->n = 0;
}
#endif

/* The word a write puts at f's site (install: the breakpoint word; else
   the original), and the word it replaces. */
static uint64_t bpt__site_word(const bpt_func *f, int install) { return install ? f->bp_word : f->orig_word; }
static uint64_t bpt__site_replaced(const bpt_func *f, int install) { return bpt__site_word(f, !install); }

/* Does site f, which is to be written, hold the word it replaces (W1 and
   W1s below)? `now` is what it holds. Else says why in bpt_last_error and
   returns 0, having switched a slot off where nothing is lost by it. */
static int bpt__site_expected(bpt_func *f, int install, uint64_t now) {
    uint64_t w = bpt__site_word(f, install), expect = bpt__site_replaced(f, install);
    int forget;
    if (now == expect) return 1;
    if (f->slot_prot && !install && now == w) {
        /* A slot switched back behind bptrace's back (slots.c, SL3): off
           already, and the calls since went untraced. Said. */
        bpt__fail(BPT_ENOTPATCHABLE, "%s:%s/%d: its slot %p already held its target again: the dynamic linker "
                  "binding it lazily, or the program, wrote it while traced, and the calls through it since "
                  "were not traced", f->module, f->name, f->arity, f->site);
        f->installed = 0;
        return 0;
    }
    /* A slot switched off that no longer leads to its trampoline (the
       program stored another function there, or its module was unloaded
       and another mapped at the address) is off: nothing is lost if a call
       still reaches the trampoline, which stays, as its record does
       (slots.c, SL2), and runs it untraced. Else it could never be switched
       off, nor unregistered (found by review; t_slot_swap). A code site is
       left installed: its word may still be in place beside the foreign
       one. */
    forget = f->slot_prot && !install;
    bpt__fail(BPT_ENOTPATCHABLE, "%s:%s/%d: its site %p holds 0x%llx where bptrace expects 0x%llx: something "
              "else changed it (a debugger's breakpoint, another patcher%s); left alone%s", f->module, f->name,
              f->arity, f->site, (unsigned long long)now, (unsigned long long)expect,
              f->slot_prot ? ", the program itself, or the dynamic linker binding it lazily" : "",
              forget ? ", and its breakpoint is off" : "");
    if (forget) f->installed = 0;
    return 0;
}

/* Write the breakpoint word (install) or the original (uninstall) into
   every site of fs[0..n) that needs it: one batch (sb, prepared for these
   sites), each code page and each read-only slot page opened once. Before
   each store the writer checks that the site holds the word it replaces,
   as ftrace_modify_code does: a site that holds something else was
   changed behind bptrace's back (a debugger's breakpoint, another patcher,
   the dynamic linker binding a slot lazily: see bpt_register_imports) and
   is left alone. *written counts the sites written, and fs[0..*written)
   are they (fs is the caller's scratch, reordered); the caller waits
   after writes, with SYNC_CORE if *wrote_code: a slot is data, and needs
   no SYNC_CORE. Returns 0; BPT_EPERM (mprotect refused) with nothing
   written; or BPT_ENOTPATCHABLE when some site held an unexpected word
   (the others are written).
   In passes, each over the records it needs (>>working set in bp.c):
   W1. One pass over fs: keep the sites to write in fs[0..m), checking
       each code and VM site as it goes (a check only reads, and code
       pages are readable: no page need be open for it) and noting its
       code page; slots are kept unchecked.
   Then the code pages and the slots' pages are made writable.
   W1s. Only where slots were kept: swap each (its check and its write are
       one compare-and-swap), compacting fs[0..k).
   W2. Store the code and VM words (on aarch64 each with its cache
       maintenance).
   W3. Mark the records installed.
   Before, a pass noted the pages and another opened the slots' pages
   before the checks: three reads of 10,000 records' first lines where one
   does (step 5 or 9 of a change over 10,000 counted functions: 0.19 and
   0.19 ms instead of 0.21 and 0.21, bench/pattern_scale.c steps, no
   worker; step 5 0.29 instead of 0.32 with one). Stores are grouped apart
   from loads: while a thread runs the functions being switched off, it
   reads their records' first line at every call, and with one loop each
   site's stores (its word, its record's line) stood between the loads of
   the next site and record, which waited on them; grouped, the stores
   overlap and so do the loads (switching them off took step 9 0.63 ms
   with one loop and 0.45 with the first passes, one worker, 1613a23). */
BPT__PRIVATE int bpt__sites_write(bpt_func **fs, int n, int install, int *wrote_code, bpt__sites_batch *sb, int *written) {
    int i, m = 0, k, slots = 0, rc = 0;
    *written = 0;
    *wrote_code = 0;
    /* W1. */
    for (i = 0; i < n; i++) {
        bpt_func *f = fs[i];
        if (f->installed == install) continue;
#if defined(BPT_NATIVE)
        if (f->slot_prot) {
            fs[m++] = f;   /* checked and swapped at W1s, once its page is open */
            slots++;
            continue;
        }
#endif
        if (!bpt__site_expected(f, install, bpt__site_read(f))) {
            rc = BPT_ENOTPATCHABLE;
            continue;
        }
#if defined(BPT_NATIVE)
        if (f->kind == BPT__SITE_NATIVE)   /* fits: see bpt__sites_batch_prepare */
            bpt__batch_add(&sb->code, f->site, f->word_size, f->code_guarded);
#endif
        fs[m++] = f;
    }
#if defined(BPT_NATIVE)
    if (sb->code.n && bpt__batch_open(&sb->code, install ? "install breakpoints" : "uninstall breakpoints") < 0) {
        sb->code.n = 0;
        return BPT_EPERM;
    }
    if (slots && bpt__slot_pages_open(&sb->data, fs, m, install) < 0) {
        if (sb->code.n) bpt__batch_reprotect(&sb->code);
        return BPT_EPERM;
    }
    /* W1s. */
    for (i = k = 0; i < m && slots; i++) {
        bpt_func *f = fs[i];
        uint64_t now;
        if (f->slot_prot) {
            if (f->page_prot == BPT__SLOT_UNMAPPED) {
                /* Its page is gone (a switch-off only: bpt__slots_prot_refresh):
                   nothing to read or write, and nobody to call through it. Off. */
                rc = bpt__fail(BPT_ENOTPATCHABLE, "%s:%s/%d: its slot %p is no longer mapped (its module "
                               "unloaded without bpt_unregister_module?): nothing written, its breakpoint is off",
                               f->module, f->name, f->arity, f->site);
                if (!install) f->installed = 0;
                continue;
            }
            now = bpt__site_read(f);
            if (now == bpt__site_replaced(f, install))   /* written, or now is another word */
                (void)bpt__slot_swap(f, bpt__site_replaced(f, install), bpt__site_word(f, install), &now);
            if (!bpt__site_expected(f, install, now)) {
                rc = BPT_ENOTPATCHABLE;
                continue;
            }
        }
        fs[k++] = f;   /* a slot gets here only swapped: bpt__slot_swap wrote it */
    }
    if (!slots) k = m;   /* nothing to swap: fs[0..m) stands as W1 left it */
#else
    (void)sb;
    (void)slots;
    k = m;
#endif
    /* W2. The words, one store after another, each line asked for
       BPT__SET_AHEAD sites before (>>prefetch in port.h). */
    for (i = 0; i < k; i++) {
        bpt_func *f = fs[i];
        if (i + BPT__SET_AHEAD < k) BPT__PREFETCH_W(fs[i + BPT__SET_AHEAD]->site);
        if (f->kind == BPT__SITE_VM) bpt__site_vm_write(f, bpt__site_word(f, install));
#if defined(BPT_NATIVE)
        else if (!f->slot_prot) {
            bpt__arch_write_site((uint8_t *)f->site, bpt__site_word(f, install));
            *wrote_code = 1;
        }
#endif
    }
    /* W3. Then the records, the same way. */
    for (i = 0; i < k; i++) {
        if (i + BPT__SET_AHEAD < k) BPT__PREFETCH_W(fs[i + BPT__SET_AHEAD]);
        fs[i]->installed = install;
    }
    *written = k;
#if defined(BPT_NATIVE)
    if (sb->code.n) bpt__batch_reprotect(&sb->code);
    bpt__slot_pages_close(&sb->data);
#endif
    return rc;
}

#if defined(BPT_NATIVE)
/* Does the site hold another word than the layout's orig_word, the NOP it
   is to hold once registered? (x86-64 gcc: 90 90, to become 66 90.) */
static int bpt__site_renop_needed(const bpt__entry_layout *l) {
    uint64_t now = 0;
    memcpy(&now, l->site, l->word_size);   /* little-endian, as orig_word */
    return now != l->orig_word;
}

/* Fill the pre-entry padding of fs[0..n) (layouts ls) in one batch of code
   writes. Nothing executes the padding before a site is installed, so plain
   stores do; the icache is synced for aarch64 on this core, and every
   other core serializes at the first install's step 4 (padding_fresh,
   bp.c), before any word leads there. Where the compiler's entry
   NOP is not the layout's orig_word (gcc's two one-byte NOPs on x86-64), the
   site gets orig_word too, by the one aligned store that installs use: a
   thread may be running the function, and every word it can fetch, whole or
   mixed from old and new bytes, is a NOP (site_x86_64.c, >>renop). Returns 0
   or BPT_EPERM / BPT_ENOMEM / BPT_ENOTPATCHABLE (a record the padding cannot
   hold) with nothing written. */
BPT__PRIVATE int bpt__native_prepare(bpt_func **fs, bpt__entry_layout *ls, int n, const char *who) {
    bpt__code_batch batch = { NULL, 0, 0 };
    int i, rc;
    for (i = 0; i < n; i++)   /* the record pointer, read by the stub */
        if ((rc = bpt__arch_put_record(ls[i].pre, fs[i])) < 0) return rc;
    for (i = 0; i < n; i++) {   /* the padding and the site after it */
        uint8_t *pad = (uint8_t *)fs[i]->fn - BPT__PAD_BYTES;
        if (bpt__batch_add(&batch, pad, (size_t)(ls[i].site + ls[i].word_size - pad), fs[i]->code_guarded) < 0) {
            BPT_FREE(batch.pages);
            return bpt__fail(BPT_ENOMEM, "%s: no memory to batch %d code writes", who, n);
        }
    }
    if ((rc = bpt__batch_open(&batch, who)) < 0) {
        BPT_FREE(batch.pages);
        return rc;
    }
    for (i = 0; i < n; i++) {
        uint8_t *pad = (uint8_t *)fs[i]->fn - BPT__PAD_BYTES;
        memcpy(pad, ls[i].pre, BPT__PAD_BYTES);
        bpt__arch_sync_icache(pad, BPT__PAD_BYTES);
        if (bpt__site_renop_needed(&ls[i])) {
            bpt__arch_write_site(ls[i].site, ls[i].orig_word);
            bpt__arch_sync_icache(ls[i].site, ls[i].word_size);
        }
        fs[i]->padding_fresh = 1;
    }
    bpt__batch_close(&batch);
    return 0;
}
#endif
