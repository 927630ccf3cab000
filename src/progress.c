/* progress.c: thread progress, the epoch mechanism every wait of the protocol uses.
   (ERTS erl_thr_progress.c for managed threads; liburcu urcu-memb for the
   pinned read side of unmanaged ones.)

   Each thread that ever pins owns a thread record. Its state word says where
   the thread is:
       state == 0                   quiescent: holds no reference
       state == (epoch << 16) | n   pinned n deep since the thread read epoch
       state == (epoch << 16) | ONLINE | n
                                    a managed thread online since it last
                                    acknowledged epoch, inside n pins
   (n < 2^15, ONLINE = 1 << 15.) A managed online thread moves the epoch
   forward at each bpt_thread_progress(); its pins only count n, which
   refuses a report made inside a section. So pin and unpin treat both kinds
   of thread alike, with no test of which kind they run on: a managed
   thread's state is never 0 or 1 in its low 16 bits, and only those two
   values start and end a section (the pin's and the unpin's common
   branch; every other value only counts).

   A waiter advances the global epoch to E and waits until every record is
   quiescent or carries an epoch >= E. Such a thread started its current
   section after the waiter's stores, and sees them.

   The barrier pairs (each named where it is used):
   [B1] pin:    store state; light barrier; read breakpoint data
        waiter: advance the epoch (then the pin word); heavy barrier; read states
        Either the waiter sees the pin, or the reader sees every store the
        waiter made before advancing the epoch.
   [B2] unpin:  release-store 0; light barrier; read the futex word
        waiter: set bit 0 of the futex word; heavy barrier; re-read the state
        Either the waiter sees the unpin, or the unpinner sees the waiter
        asleep and wakes it: no lost wake-up.
   [B3] the waiter's acquire load of a state pairs with the release store
        that ended the section (unpin, progress, offline, exit), so all the
        reader's accesses happen before whatever the waiter does next (a free).
   The light barrier is a compiler barrier once membarrier(PRIVATE_EXPEDITED)
   is registered (the heavy barrier then runs a full barrier on every running
   thread); otherwise both sides use a full fence.

   >>pin word. A pin does not read the epoch itself: it reads pin_word,
   the state it stores made ready (epoch << 16 | 1), with BPT__PIN_FENCE
   (bit 63) set while pins must fence, so that one load and one test
   replace a shift, an or, and a load and test of light_pins. Init clears
   the flag once membarrier is registered; each waiter stores the new word
   after it advanced the epoch, with a release that pairs with the pin's
   acquire load. A pin that reads the word before that store records the
   old epoch, and the waiter waits for its section to end, as for any pin
   that came before the advance: later, never earlier. Bit 63 is epoch bit
   47 in a state: past 2^47 waits (4.5 years of waits back to back at one
   a microsecond) every pin would fence and record an older epoch than the
   waiter's: slower, never unsafe.

   The unpin's side of the same flag is BPT__FUTEX_FENCE in the futex
   word, set from the start and cleared by init once membarrier is
   registered: the unpin's one look at the futex word [B2] then also says
   whether it must fence first. While the flag is set that look is never
   0, so the unpin fences and looks again; the waiters and the wake keep
   the flag as they set and clear bit 0. */
#include "internal.h"

#define BPT__WAIT_SPINS 200

BPT__ASM_READ_DECL(struct bpt__progress_state bpt__progress)
BPT__ASM_READ struct bpt__progress_state bpt__progress = {   /* read by the count route too */
    1, (uint64_t)1 << BPT__NEST_BITS | 1 | BPT__PIN_FENCE, BPT__FUTEX_FENCE, NULL, 0, 0, 0,
    PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0
};

static pthread_once_t bpt__progress_once = PTHREAD_ONCE_INIT;

#if !defined(BPT__TLS_BY_KEY)
BPT__ASM_READ_DECL(BPT__THREAD_LOCAL bpt__thread *bpt__tls_thread)
BPT__ASM_READ BPT__THREAD_LOCAL bpt__thread *bpt__tls_thread;   /* read by the count route too */
#endif

BPT__HOT BPT__INTREGS bpt__thread *bpt__thread_self_or_null(void) {
#if defined(BPT__TLS_BY_KEY)
    return (bpt__thread *)pthread_getspecific(bpt__progress.key);
#else
    return bpt__tls_thread;
#endif
}

/* The list of records, for readers of every thread's data (kind_count.c):
   push-only, each record complete before it is published. */
BPT__PRIVATE bpt__thread *bpt__thread_records(void) {
    return (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records);
}

/* The light side of the asymmetric barrier pairs [B1] [B2] is inline in
   the pin and the unpin: a compiler barrier once membarrier is registered,
   a fence otherwise, chosen by a flag the pin and the unpin load anyway
   (>>pin word).
   The heavy side [B1] [B2]: after it, every thread's earlier stores are
   visible to us and our earlier stores to every thread. */
BPT__PRIVATE void bpt__heavy_barrier(void) {
    bpt__fence_seq_cst();
    if (bpt__load_relaxed_u32(&bpt__progress.light_pins))
        bpt__membarrier(BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* Take a retired record, or make a new one. Records are never freed: a
   waiter may be walking the list at any time. */
static bpt__thread *bpt__thread_create(void) {
    bpt__thread *rec;
    void *raw;
    size_t size;
    bpt__progress_ensure_init();
    for (rec = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records); rec; rec = rec->next) {
        if (bpt__load_relaxed_u32(&rec->in_use) == 0 && bpt__cas_u32(&rec->in_use, 0, 1))
            break;   /* acquire: sees everything the previous owner did */
    }
    if (!rec) {
        /* A whole number of cache lines, cache-line aligned: no false sharing
           between one thread's pins and another's. */
        size = (sizeof(bpt__thread) + BPT__CACHE_LINE - 1) & ~(size_t)(BPT__CACHE_LINE - 1);
        raw = BPT_HIT_MAP(size + BPT__CACHE_LINE);   /* a first pin may be a hit's: no malloc */
        if (!raw) return NULL;
        rec = (bpt__thread *)(((uintptr_t)raw + BPT__CACHE_LINE) & ~(uintptr_t)(BPT__CACHE_LINE - 1));
        memset(rec, 0, sizeof *rec);
        bpt__store_relaxed_u32(&rec->in_use, 1);
        rec->index = bpt__fetch_add_u32(&bpt__progress.nrecords, 1);
        do {   /* push: next is written before the release CAS publishes rec */
            rec->next = (bpt__thread *)bpt__load_relaxed_ptr(&bpt__progress.records);
        } while (!bpt__cas_ptr(&bpt__progress.records, rec->next, rec));
    }
    rec->tid = bpt__gettid();
    rec->self = pthread_self();
    rec->managed = rec->in_tracer = rec->holds_permission = 0;
    rec->sending = 0;   /* its owner may have died inside a send: a fork child's other threads */
    rec->process = rec->tid;
    rec->shadow_depth[0] = 0;   /* a dead owner's frames mean nothing */
    rec->shadow_depth[1] = 0;
    rec->shadow_filling[0] = 0;
    rec->shadow_filling[1] = 0;
    rec->alt_lo = rec->alt_hi = 0;
#if defined(BPT_NATIVE)
    bpt__altstack_note(rec);   /* before a handler disarms it (frames.c) */
#endif
    rec->timem_depth = 0;
    rec->timem_walking = 0;
#if !defined(BPT__SIGNAL_ATOMIC_INC)
    rec->counting = 0;
#endif
    rec->errmsg[0] = '\0';
    bpt__store_relaxed_u64(&rec->state, 0);
#if !defined(BPT__TLS_BY_KEY)
    bpt__tls_thread = rec;
#endif
    pthread_setspecific(bpt__progress.key, rec);   /* arms the exit destructor */
    return rec;
}

/* The calling thread's record, created on first use; NULL only if memory ran out. */
BPT__PRIVATE bpt__thread *bpt__thread_self(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    return BPT__LIKELY(rec != NULL) ? rec : bpt__thread_create();
}

/* End a section: publish the new state [B3]. Returns nonzero when a waiter
   sleeps on the futex: the caller then wakes it (bpt__progress_wake). The
   wake, a system call, is left to the caller so that the count path can
   end its section with the integer registers alone (>>intregs in port.h). */
BPT__HOT BPT__INTREGS int bpt__state_store(bpt__thread *rec, uint64_t state) {
    uint32_t futex;
    bpt__store_release_u64(&rec->state, state);          /* [B3] pairs with the waiter's acquire load */
    bpt__compiler_barrier();                             /* [B2] light barrier, if membarrier is registered */
    futex = bpt__load_relaxed_u32(&bpt__progress.futex);
    if (BPT__LIKELY(futex == 0)) return 0;               /* no sleeper, and no fence needed */
    if (futex & BPT__FUTEX_FENCE) {                      /* no membarrier (>>pin word) */
        bpt__fence_seq_cst();                            /* [B2] light barrier: a fence */
        futex = bpt__load_relaxed_u32(&bpt__progress.futex);
    }
    return BPT__UNLIKELY((futex & 1) != 0);
}

/* The futex word with no sleeper: 0, or the fence flag (>>pin word). */
static uint32_t bpt__futex_idle(void) {
    return bpt__load_relaxed_u32(&bpt__progress.futex) & BPT__FUTEX_FENCE;
}

/* Wake the waiters that sleep until some section ends [B2]. */
BPT__NOINLINE void bpt__progress_wake(void) {
    bpt__store_relaxed_u32(&bpt__progress.futex, bpt__futex_idle());
    bpt__fetch_add_u64(&bpt__progress.futex_wakes, 1);
    bpt__futex_wake(&bpt__progress.futex, INT_MAX);
}

BPT__PRIVATE void bpt__state_store_and_wake(bpt__thread *rec, uint64_t state) {
    if (bpt__state_store(rec, state)) bpt__progress_wake();
}

/* The read side, on a thread that has its record. One load of the thread's
   own state and one store: a signal handler that pins in between restores
   the state before the interrupted code resumes, so the store never loses
   a nesting level. */
BPT__HOT BPT__INTREGS void bpt__pin_rec(bpt__thread *rec) {
    uint64_t s = bpt__load_relaxed_u64(&rec->state);
    if (BPT__LIKELY((s & BPT__NEST_MASK) == 0)) {   /* quiescent: the section starts here */
        /* The acquire pairs with the waiter's release of the pin word
           (>>pin word): a section that reads the new epoch in it sees the
           waiter's earlier stores. */
        s = bpt__load_acquire_u64(&bpt__progress.pin_word);
        if (BPT__LIKELY(!(s & BPT__PIN_FENCE))) {
            bpt__store_relaxed_u64(&rec->state, s);
            bpt__compiler_barrier();           /* [B1] light barrier: membarrier is registered */
        } else {
            bpt__store_relaxed_u64(&rec->state, s & ~BPT__PIN_FENCE);
            bpt__fence_seq_cst();              /* [B1] light barrier: no membarrier */
        }
    } else {   /* nested, or a managed online thread: its reports cover it */
        if (BPT__UNLIKELY((s & BPT__PINS) == BPT__PINS)) BPT__TRAP();   /* one more would carry into ONLINE */
        bpt__store_relaxed_u64(&rec->state, s + 1);
    }
}

/* The same, making the thread's record on its first pin. */
BPT__HOT bpt__thread *bpt__pin(void) {
    bpt__thread *rec = bpt__thread_self();
    if (rec) bpt__pin_rec(rec);
    return rec;
}

/* Unpin without the wake: nonzero when the caller must call
   bpt__progress_wake (see bpt__state_store). */
BPT__HOT BPT__INTREGS int bpt__unpin_quiet(bpt__thread *rec) {
    uint64_t s = bpt__load_relaxed_u64(&rec->state);
    if (BPT__LIKELY((s & BPT__NEST_MASK) == 1))   /* the end of an unmanaged thread's section */
        return bpt__state_store(rec, 0);
    if (s & BPT__PINS)
        bpt__store_relaxed_u64(&rec->state, s - 1);
    /* else no pin is open: an unbalanced unpin, ignored, never a crash */
    return 0;
}

BPT__HOT void bpt__unpin(bpt__thread *rec) {
    if (rec && BPT__UNLIKELY(bpt__unpin_quiet(rec))) bpt__progress_wake();
}

BPT__PRIVATE int bpt__thread_pinned(const bpt__thread *rec) {
    return rec && (bpt__load_relaxed_u64((bpt__atomic_u64 *)&rec->state) & BPT__PINS) != 0;
}

/* The owner's view: is it a managed thread, online? */
static int bpt__online(const bpt__thread *rec) {
    return (bpt__load_relaxed_u64((bpt__atomic_u64 *)&rec->state) & BPT__ONLINE) != 0;
}

/* A managed online thread about to block inside bptrace (on the
   permission, or on another waiter) goes offline first, as ERTS threads do
   in erts_thr_progress_prepare_wait: otherwise a waiter holding what it
   blocks on would wait for its next bpt_thread_progress() forever.
   bpt__block_end brings it back online. */
BPT__PRIVATE void bpt__block_begin(bpt__thread *rec) {
    if (rec && bpt__online(rec) && !rec->offline_to_block) {
        bpt_thread_progress_offline();
        rec->offline_to_block = 1;
    }
}

BPT__PRIVATE void bpt__block_end(bpt__thread *rec) {
    if (rec && rec->offline_to_block) {
        rec->offline_to_block = 0;
        bpt_thread_progress_online();
    }
}

/* How many thread records exist: every index is below it (acquire: a
   record's index is published with the record). */
BPT__PRIVATE uint32_t bpt__threads_count(void) {
    return bpt__load_acquire_u32(&bpt__progress.nrecords);
}

void bpt_thread_progress_pin(void) { (void)bpt__pin(); }

void bpt_thread_progress_unpin(void) { bpt__unpin(bpt__thread_self_or_null()); }

static void bpt__thread_exit_destructor(void *arg) {
    bpt__thread *rec = (bpt__thread *)arg;
    rec->managed = 0;
    /* Quiescent from now on, even if it exited pinned: it will never touch
       breakpoint data again. */
    bpt__state_store_and_wake(rec, 0);
#if !defined(BPT__TLS_BY_KEY)
    bpt__tls_thread = NULL;
#endif
    bpt__store_release_u32(&rec->in_use, 0);   /* pairs with the CAS that reuses it */
}

/* After fork() only the forking thread exists in the child: retire every
   other record, or the child's first wait would wait for ghosts. Called by
   the fork child handler (locks.c), with every lock of bptrace held. */
BPT__PRIVATE void bpt__progress_atfork_child(bpt__thread *self) {
    bpt__thread *rec;
    for (rec = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records); rec; rec = rec->next) {
        if (rec == self) continue;
        bpt__store_relaxed_u64(&rec->state, 0);
        bpt__store_relaxed_u32(&rec->in_use, 0);
    }
    /* The forking thread has a new id in the child, and so has its process
       unless the host named another (bpt_process_switch), and so have the
       frames it pushed in that process, which run on in the child. */
    if (self) {
        uint32_t parent_tid = self->tid;
        self->tid = bpt__gettid();
        if (self->process == parent_tid) self->process = self->tid;
        bpt__frames_atfork_child(self, parent_tid, self->tid);
    }
    bpt__store_relaxed_u32(&bpt__progress.futex, bpt__futex_idle());
    pthread_mutex_init(&bpt__progress.wait_lock, NULL);
}

/* A record no longer holds a waiter for epoch `target` back. */
BPT__PRIVATE int bpt__state_done(uint64_t s, uint64_t target) {
    return s == 0 || (s >> BPT__NEST_BITS) >= target;
}

static void bpt__wait_for_record(bpt__thread *rec, uint64_t target) {
    int spins = 0;
    while (!bpt__state_done(bpt__load_acquire_u64(&rec->state), target)) {   /* [B3] */
        if (++spins < BPT__WAIT_SPINS) {
            bpt__cpu_relax();
            continue;
        }
        BPT_TEST_POINT("progress wait: about to announce a sleep");   /* t_progress_withdraw */
        /* Sleep. Announce it, then look again after the heavy barrier [B2]:
           an unpin that came before it is seen here, and one after it sees
           the announcement and wakes us. */
        uint32_t asleep = 1 | bpt__futex_idle();
        bpt__store_seq_cst_u32(&bpt__progress.futex, asleep);
        bpt__heavy_barrier();
        if (bpt__state_done(bpt__load_acquire_u64(&rec->state), target)) break;
        bpt__fetch_add_u64(&bpt__progress.futex_sleeps, 1);
        bpt__futex_wait(&bpt__progress.futex, asleep);
    }
    /* Withdraw a sleep announced and not slept: the second look above found
       the section ended by an unpin that came before the announcement, and
       so woke nobody (or futex_wait returned early). Left standing, the
       announcement made the next end of a section anywhere pay a futex
       wake for nobody, and a short path hand its hit to the full path for
       it. One waiter at a time (wait_lock): nobody else sleeps on the word,
       and the next sleep announces afresh [B2]. */
    if (BPT__UNLIKELY(bpt__load_relaxed_u32(&bpt__progress.futex) & 1))
        bpt__store_relaxed_u32(&bpt__progress.futex, bpt__futex_idle());
}

/* Serialize every thread's instruction stream where membarrier SYNC_CORE is
   missing: a signal to each live thread. Returning from a signal handler is
   context synchronizing (iret on x86-64, eret on aarch64). */
static void bpt__sync_core_handler(int sig) {
    bpt__thread *rec = bpt__thread_self_or_null();
    (void)sig;
    if (rec) bpt__fetch_add_u32(&rec->sync_ack, 1);
}

/* Once per process, on the first use of thread progress. */
static void bpt__progress_init(void) {
    pthread_key_create(&bpt__progress.key, bpt__thread_exit_destructor);
    /* light_pins is set only after registration succeeded: a reader that
       sees it knows every later heavy barrier reaches it. */
    if (bpt__membarrier_register(BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED,
                                 BPT__MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)) {
        bpt__store_release_u32(&bpt__progress.light_pins, 1);
        /* >>pin word: no fence from here on. No pin has run yet (a pin
           needs a record, made after this), and no wait (it inits first). */
        bpt__store_release_u64(&bpt__progress.pin_word,
                               bpt__load_relaxed_u64(&bpt__progress.pin_word) & ~BPT__PIN_FENCE);
        bpt__store_release_u32(&bpt__progress.futex, 0);
    }
    if (bpt__membarrier_register(BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,
                                 BPT__MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE)) {
        bpt__store_release_u32(&bpt__progress.sync_core, 1);
    } else {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = bpt__sync_core_handler;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(BPT__SYNC_CORE_SIGNAL, &sa, NULL);
    }
    bpt__locks_init();   /* the fork handlers (locks.c) */
    bpt__clock_calibrate();   /* before any hit (clock.c) */
}

BPT__PRIVATE void bpt__progress_ensure_init(void) {
    pthread_once(&bpt__progress_once, bpt__progress_init);
}

/* Is the thread running or runnable ('R' in /proc/self/task/TID/stat)? A
   thread that is not (blocked in the kernel: futex, sigwait, I/O) passes
   through the kernel's scheduler before it runs user code again, so it
   cannot run stale instructions; membarrier SYNC_CORE itself targets only
   running threads. Unknown (no /proc) counts as running. */
static int bpt__thread_running(uint32_t tid) {
    char path[64], buf[512], *close_paren;
    ssize_t n;
    int fd;
    snprintf(path, sizeof path, "/proc/self/task/%u/stat", (unsigned)tid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) return errno != ENOENT;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 1;
    buf[n] = '\0';
    close_paren = strrchr(buf, ')');   /* the name may hold spaces and ')' */
    return !close_paren || close_paren[1] != ' ' || close_paren[2] == 'R';
}

static void bpt__sync_core_by_signal(bpt__thread *self) {
    bpt__thread *rec, *head = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records);
    /* Signal every live thread first, then collect the acknowledgements: the
       threads run their handlers in parallel, in one scheduling round. */
    for (rec = head; rec; rec = rec->next) {
        rec->sync_expect = ~0u;
        if (rec == self || !bpt__load_acquire_u32(&rec->in_use)) continue;
        rec->sync_expect = bpt__load_acquire_u32(&rec->sync_ack);
        if (pthread_kill(rec->self, BPT__SYNC_CORE_SIGNAL) != 0) rec->sync_expect = ~0u;   /* exited meanwhile */
    }
    for (rec = head; rec; rec = rec->next) {
        int spins = 0;
        if (rec->sync_expect == ~0u) continue;
        /* A thread that blocks the signal (sigwait, a fully masked pause)
           never acknowledges: stop waiting once it is seen not running. */
        while (bpt__load_acquire_u32(&rec->sync_ack) == rec->sync_expect && bpt__load_acquire_u32(&rec->in_use)) {
            if (++spins % 64 == 0 && !bpt__thread_running(rec->tid)) break;
            sched_yield();
        }
    }
}

static int bpt__progress_wait(int sync_core) {
    bpt__thread *self = bpt__thread_self_or_null(), *rec;
    uint64_t target, t0;
    int sync_by_ipi;
    const char *who = sync_core ? "bpt_thread_progress_wait_sync_core" : "bpt_thread_progress_wait";
    if (self && self->in_tracer) return bpt__fail(BPT_EDEADLK, "%s: called from inside a tracer callback", who);
    if (bpt__thread_pinned(self)) return bpt__fail(BPT_EDEADLK, "%s: called while pinned: it would wait for itself", who);
    /* The permission holder may wait (the protocol does); nobody else
       waits for it, since readers never take the permission. */
    bpt__progress_ensure_init();
    bpt__block_begin(self);
    pthread_mutex_lock(&bpt__progress.wait_lock);
    /* The acq_rel increment releases every store made before the wait to a
       managed thread that reads the new epoch (bpt_thread_progress, the
       going offline). Pins read the pin word instead: its release, next,
       pairs with their acquire. */
    target = bpt__fetch_add_u64(&bpt__progress.epoch, 1) + 1;
    /* >>pin word: pins record the new epoch from here on. One waiter at a
       time (wait_lock), so the words are stored in epoch order. */
    bpt__store_release_u64(&bpt__progress.pin_word, target << BPT__NEST_BITS | 1 |
                           (bpt__load_relaxed_u64(&bpt__progress.pin_word) & BPT__PIN_FENCE));
    t0 = bpt__now_ns();
    BPT_PROBE(bptrace, progress__wait__start, bpt__gettid(), target, sync_core);
    /* [B1] pairs with the pin's light barrier. A wait that serializes the
       instruction streams makes it with membarrier SYNC_CORE, which is also
       the full barrier on every running thread that PRIVATE_EXPEDITED is
       (membarrier(2)): one round of IPIs for [B1] and the serialization
       (a sleep's announcement [B2] makes its own), where a heavy barrier here and
       SYNC_CORE after the records' wait took two, each about 14 us on a
       KVM guest with one other thread running (twice a step 6 or 10 of
       the protocol). Serializing first serializes no less: the code was
       written before the call, and a stream serialized after that fetches
       it anew. Without SYNC_CORE, the signals come after the records'
       wait, as each thread's handler runs when it runs. */
    sync_by_ipi = sync_core && bpt__load_relaxed_u32(&bpt__progress.sync_core);
    if (sync_by_ipi) {
        bpt__fence_seq_cst();
        /* A refused call (ENOMEM for the kernel's CPU mask, a seccomp rule
           added since init) gave neither: [B1] by the heavy barrier, and
           the streams by the signals (found by review). */
        if (bpt__membarrier(BPT__MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) != 0) {   /* [B1] */
            sync_by_ipi = 0;
            bpt__heavy_barrier();
        }
    } else {
        bpt__heavy_barrier();                   /* [B1] */
    }
    for (rec = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records); rec; rec = rec->next) {
        if (rec == self) continue;              /* not pinned (checked above) */
        bpt__wait_for_record(rec, target);
    }
    if (sync_core && !sync_by_ipi) bpt__sync_core_by_signal(self);
    bpt__fetch_add_u64(&bpt__progress.waits, 1);
    if (sync_core) bpt__fetch_add_u64(&bpt__progress.sync_core_waits, 1);
    BPT_PROBE(bptrace, progress__wait__done, bpt__gettid(), target, sync_core, bpt__now_ns() - t0);
    pthread_mutex_unlock(&bpt__progress.wait_lock);
    if (self && !self->holds_permission) bpt__block_end(self);   /* the permission holder stays offline until release */
    return 0;
}

int bpt_thread_progress_wait(void) { return bpt__progress_wait(0); }

int bpt_thread_progress_wait_sync_core(void) { return bpt__progress_wait(1); }

int bpt_thread_progress_register_managed(void) {
    bpt__thread *rec = bpt__thread_self();
    if (!rec) return bpt__fail(BPT_ENOMEM, "bpt_thread_progress_register_managed: no memory for the thread record");
    if (bpt__thread_pinned(rec))
        return bpt__fail(BPT_EINVAL, "bpt_thread_progress_register_managed: called while pinned");
    rec->managed = 1;
    bpt_thread_progress_online();
    return 0;
}

void bpt_thread_progress(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    /* Inside a pinned section (a hit, a tracer callback, a signal handler on
       a hit) the thread still holds breakpoint data: not a quiescent point. */
    if (!rec || (bpt__load_relaxed_u64(&rec->state) & (BPT__ONLINE | BPT__PINS)) != BPT__ONLINE) return;
    /* Quiescent point: every earlier access is released before the new epoch
       is acknowledged [B3]; the acquire of the epoch makes later reads see
       the waiter's stores. */
    bpt__state_store_and_wake(rec, bpt__load_acquire_u64(&bpt__progress.epoch) << BPT__NEST_BITS | BPT__ONLINE);
}

void bpt_thread_progress_offline(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    /* Online, and not inside a section: see above. */
    if (!rec || (bpt__load_relaxed_u64(&rec->state) & (BPT__ONLINE | BPT__PINS)) != BPT__ONLINE) return;
    bpt__state_store_and_wake(rec, 0);
}

void bpt_thread_progress_online(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    /* A managed thread, offline and outside any pinned section (a section's
       older epoch must stay in the state until it ends). */
    if (!rec || !rec->managed || bpt__load_relaxed_u64(&rec->state) != 0) return;
    /* As a pin [B1]: the state must be visible before the thread reads any
       breakpoint data. A full fence: going online is rare. */
    bpt__store_relaxed_u64(&rec->state, bpt__load_acquire_u64(&bpt__progress.epoch) << BPT__NEST_BITS | BPT__ONLINE);
    bpt__fence_seq_cst();
}

int bpt_thread_progress_stats(bpt_progress_stats *out) {
    bpt__thread *rec;
    if (!out) return bpt__fail(BPT_EINVAL, "bpt_thread_progress_stats: out is NULL");
    bpt__progress_ensure_init();
    memset(out, 0, sizeof *out);
    out->epoch = bpt__load_relaxed_u64(&bpt__progress.epoch);
    out->waits = bpt__load_relaxed_u64(&bpt__progress.waits);
    out->sync_core_waits = bpt__load_relaxed_u64(&bpt__progress.sync_core_waits);
    out->futex_sleeps = bpt__load_relaxed_u64(&bpt__progress.futex_sleeps);
    out->futex_wakes = bpt__load_relaxed_u64(&bpt__progress.futex_wakes);
    out->records = bpt__load_relaxed_u32(&bpt__progress.nrecords);
    for (rec = (bpt__thread *)bpt__load_acquire_ptr(&bpt__progress.records); rec; rec = rec->next)
        out->threads += bpt__load_relaxed_u32(&rec->in_use);
    out->membarrier = (int)bpt__load_relaxed_u32(&bpt__progress.light_pins);
    out->sync_core = (int)bpt__load_relaxed_u32(&bpt__progress.sync_core);
    return 0;
}

/* >>errors: the message of the calling thread's last failure. */
static const char *bpt__error_text(int code) {
    switch (code) {
#define BPT__ERROR_CASE(name, value, text) case value: return text;
    BPT_ERRORS(BPT__ERROR_CASE)
#undef BPT__ERROR_CASE
    default: return "unknown error";
    }
}

const char *bpt_strerror(int code) { return bpt__error_text(code); }

/* A thread whose record could not be allocated has nowhere to keep its
   message: it gets this fixed one (per thread where __thread exists; on
   tcc, shared, which only ever holds this one text). */
static const char bpt__no_record_msg[] =
    "out of memory: no memory for this thread's record (its first bptrace call); nothing changed";
#if defined(BPT__TLS_BY_KEY)
static const char *volatile bpt__norec_error;
#else
static BPT__THREAD_LOCAL const char *bpt__norec_error;
#endif

const char *bpt_last_error(void) {
    bpt__thread *rec = bpt__thread_self_or_null();
    return rec ? rec->errmsg : bpt__norec_error ? bpt__norec_error : "";
}

/* Record why a call failed and return its code, so that failure paths read
   `return bpt__fail(BPT_EPATTERN, "...", ...);`. */
BPT__PRIVATE int bpt__fail(int code, const char *fmt, ...) {
    bpt__thread *rec = bpt__thread_self();
    if (rec) {
        va_list ap;
        int n = snprintf(rec->errmsg, sizeof rec->errmsg, "%s: ", bpt__error_text(code));
        if (n < 0 || (size_t)n >= sizeof rec->errmsg) n = 0;
        va_start(ap, fmt);
        vsnprintf(rec->errmsg + n, sizeof rec->errmsg - (size_t)n, fmt, ap);
        va_end(ap);
    } else {
        bpt__norec_error = bpt__no_record_msg;
    }
    return code;
}
