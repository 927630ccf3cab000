/* tests/model/protocol.pml: a Promela model of bptrace's breakpoint protocol,
   for the model checker spin. README.md (next to this file) explains it;
   tests/model/run checks it.

   The processes, and where they live in the C code:

     Writer     one thread that runs the 13 steps of src/bp.c
                (bpt__protocol_run) a few times in a row. Each run switches one
                trace session's settings on one function f: on, off, or to
                another match spec.
     Reader(r)  NR threads that call f. A call fetches f's instruction word
                and, if it is the breakpoint, runs the hit path of src/hit.c
                (bpt__breakpoint): pin, read the active index once, walk f's
                GenericBp list, use data[ix], unpin. A call that was traced
                returns later (DESIGN section 7): a second pinned section that
                finds the sessions' GenericBps on f again, as call_time does
                at a return (src/frames.c, bpt__timem_charge_frame).
     pin, unpin and progress_wait: the epochs of src/progress.c.

   Spin runs every interleaving of these processes, one shared-memory access
   at a time, and checks the assertions in each. Spin's memory is sequentially
   consistent: the barrier pairs of the C code ([B1] [B2] [B3] in
   progress.c, and the release/acquire pairs named below) are what make the
   real accesses behave as they do here.

   What spin checks:
     (a) no reader touches a freed GenericBp;
     (b) a reader uses one generation consistently within one hit: nobody
         writes the half of data[] a running hit has chosen;
     (c) after the commit and its wait (step 8, or step 10 where step 8
         defers it), a call uses the new settings;
     (d) the original word is restored only when no session is active;
     and, spin's own check, no deadlock: a lost futex wake-up would leave the
     writer asleep forever once the readers are done.

   Mutants: this file with one thing broken, each chosen by a -D flag to spin
   (spin -DMUTANT_NO_STEP8_WAIT -a protocol.pml). Spin must reject each.
     MUTANT_NO_STEP8_WAIT         step 8's wait removed, and step 10 waits
                                  only after restoring the word: breaks (b)
     MUTANT_DEFERRED_WAIT_LOST    step 8 defers its wait for a switch-off,
                                  and step 10 waits only after restoring
                                  the word: breaks (b) when another
                                  session keeps the word
     MUTANT_NO_STEP12_WAIT        step 12's wait removed: breaks (a)
     MUTANT_FRAME_KEEPS_BP        the return frame keeps the call's GenericBp
                                  pointer, not a weak id: breaks (a)
     MUTANT_INSTALL_AFTER_COMMIT  step 5 installs no word; it is installed
                                  after the commit and its wait: breaks (c)
     MUTANT_UNINSTALL_OWN_FLAGS   step 9 looks at the changed session only,
                                  not the OR over sessions: breaks (d)
     MUTANT_WAKE_BEFORE_UNPIN     unpin looks at the futex word before it
                                  stores 0, not after ([B2]): deadlock
     MUTANT_PINW_AHEAD            the waiter stores a pin word one epoch
                                  ahead of its own: a pin made before the
                                  waiter's stores passes for one made
                                  after: breaks (b) (its shortest
                                  trail), and (a)
*/

/* ---- Size of the model (spin -DNAME=VALUE overrides) ----------------------- */

#ifndef NR
#define NR 2            /* reader threads */
#endif
#ifndef NCALLS
#define NCALLS 1        /* calls of f per reader (each may be followed by its return) */
#endif
#ifndef MAXRUNS
#define MAXRUNS 3       /* protocol runs (bpt_trace_pattern calls) of the writer */
#endif
#ifndef SIGNALS
#define SIGNALS 1       /* nested hits reader 0 may take from a signal handler */
#endif

#define NS 2            /* trace sessions: 0 and 1 */
#define NG MAXRUNS      /* GenericBp slots: at most one allocation per run */
#define NIL 255         /* a NULL pointer */

/* f's instruction word: the original, or the breakpoint (a VM's breakpoint
   opcode word, or the native short jmp to the stub). */
#define ORIG 0
#define BPWORD 1

/* A GenericBp slot's life. A freed slot is never reused, so a stale pointer
   to it is caught at its first use. (A real allocator would hand the memory
   to someone else, and the stale reader would read their data: worse, and no
   easier to see.) */
#define UNUSED 0
#define LIVE 1
#define FREED 2

/* A session's settings on f as one number: 0 off, 1 call trace with return
   trace and match spec A, 2 the same with match spec B. The flags of a
   GenericBpData are 0 exactly when the settings are off. */
#define ANY 3           /* ghost: old or new settings are both allowed now */

/* ---- Shared memory: what the C code keeps ---------------------------------- */

byte word = ORIG;       /* *f->site: the one word that switches f between original and breakpoint */
byte gen_bp = NIL;      /* f->gen_bp: head of f's GenericBp list, one per session */
bit active_ix = 0;      /* bpt__active_ix: which half of data[] running code reads */

typedef GenericBp {
    byte state;         /* UNUSED, LIVE, FREED: the allocator's view */
    byte sess;          /* g->session: fixed at allocation */
    byte next;          /* g->next: walked by readers */
    byte to_insert;     /* g->to_insert: set path only; a further session parked at step 3 */
    byte flags[2];      /* g->data[0].flags, g->data[1].flags: the two generations */
};
GenericBp bp[NG];

/* Thread progress (src/progress.c). A thread record's state is
   (epoch << 16) | nest in C; here (epoch << 3) | nest: the model's epochs
   stay below 32 and nesting below 8. */
#define NEST(s)  ((s) & 7)
#define EPOCH(s) ((s) >> 3)
byte epoch = 1;         /* bpt__progress.epoch */
byte pinw = 1;          /* bpt__progress.pin_word's epoch: what a pin records (>>pin word) */
byte st[NR];            /* each reader's rec->state; 0: quiescent */
bit futex;              /* bpt__progress.futex: 1 while the waiter sleeps or is about to */

/* ---- Ghost state: not in the C code; only the assertions read it ----------- */

byte committed[NS];     /* (d): each session's settings as of the last commit */
byte must[NS];          /* (c): what a call must see now, or ANY */
bit stale[NR];          /* (c): a commit happened since reader r's call began */
byte users[2];          /* (b): running hits that chose data half 0, half 1 */

/* ---- Thread progress, the read side (bpt__pin, bpt__unpin) ----------------- */

/* Pin: one load of the thread's own state and one store, nothing atomic.
   Here the load is merged with the load of the pin word: only this thread
   writes its state, and what can run on the same thread in between, a signal
   handler, runs at the point the caller marks between pin_load and
   pin_store. A handler that pins and unpins there leaves the state as it
   found it, so the store loses no nesting level. (The C pin loads its
   state and the pin word apart, and its unpin looks at the futex word
   after its store: a handler may run between each. Splitting the steps
   here, with signal points there, also verified with 0 errors, -DSIGNALS=1
   -DMAXRUNS=2, 17 million states; kept merged, for the run's time.)
   [B1]: the store, then the light barrier, pairs with the waiter's pin
   word store, then its heavy barrier: either the waiter sees this pin, or
   this thread's later reads see every store the writer made before the
   wait. */
inline pin_load(r, s) {
    atomic {
        s = st[r];                              /* the one load of the own state */
        if
        :: NEST(s) == 0 -> s = (pinw << 3) | 1  /* acquire load of the pin word */
        :: else -> s = s + 1                    /* nested: keep the outer section's epoch */
        fi
    }
}
inline pin_store(r, s) {
    st[r] = s                                   /* the one store; [B1] light barrier after it */
}

/* Unpin (bpt__unpin, bpt__state_store_and_wake), once the caller has loaded
   s = st[r] (the one load; merged with the end of the hit). The last level
   stores 0 [B3]: a release that pairs with the waiter's acquire load of the
   state, so all the section's reads happen before whatever the waiter does
   next, a free for instance. Then [B2]: the light barrier and a look at the
   futex word. It pairs with the waiter's "announce sleep, heavy barrier,
   look at the state": of the two, at least one sees the other's store, so
   a wake-up is never lost. */
inline unpin_store(r, s) {
    if
    :: NEST(s) == 1 ->
#ifndef MUTANT_WAKE_BEFORE_UNPIN
        st[r] = 0;                              /* release store [B3]; light barrier [B2] */
        if
        :: futex == 1 -> futex = 0              /* futex_wake: the waiter looks again */
        :: else
        fi
#else
        if                                      /* MUTANT: the look comes first ... */
        :: futex == 1 -> futex = 0
        :: else
        fi;
        st[r] = 0                               /* ... and the store after it */
#endif
    :: else -> st[r] = s - 1
    fi;
    s = 0
}

/* ---- Thread progress, the waiter (bpt__progress_wait) ---------------------- */

/* A waiter for epoch t may pass a record in state s. */
#define DONE(s, t) ((s) == 0 || EPOCH(s) >= (t))

/* Advance the epoch to t, [B1] heavy barrier; then, for each record, wait
   until it is quiescent or pinned at an epoch >= t: such a thread began its
   section after the advance, so it sees every store the writer made before
   the wait. A waiter may spin (here: stay at the loop head until DONE
   holds) or sleep: announce it (futex = 1), [B2] heavy barrier, look at the
   state once more, then futex_wait(&futex, 1), which returns at once if the
   word is no longer 1, and otherwise when an unpin resets it and wakes it.
   Done with a record, it withdraws an announcement the second look made
   needless (the unpin came before it and woke nobody).
   (The C waiter waits on 1 | BPT__FUTEX_FENCE: that flag, how sections end
   without membarrier, never changes once set, and is not modelled; this
   model is sequentially consistent, so which fence a pin takes cannot
   show here. t_progress and the nomemb, TSAN and aarch64 runs cover it.) */
inline progress_wait() {
    atomic { epoch++; t = epoch; assert(epoch < 32) };   /* fetch_add */
#ifndef MUTANT_PINW_AHEAD
    pinw = t;                                   /* the pin word, a separate release store; [B1] heavy barrier after it */
#else
    pinw = t + 1;                               /* MUTANT: a pin word ahead of the waiter's epoch */
#endif
    w = 0;
    do
    :: w < NR ->
        do
        :: DONE(st[w], t) -> break              /* [B3] acquire load of the state */
        :: !DONE(st[w], t) ->
            futex = 1;                          /* announce; [B2] heavy barrier */
            if
            :: DONE(st[w], t) -> break
            :: else -> (futex != 1)             /* futex_wait: asleep until woken */
            fi
        od;
        futex = 0;                              /* withdraw an announcement not slept on */
        w++
    :: else -> break
    od;
    w = 0
}

/* ---- The hit path (src/hit.c) ---------------------------------------------- */

/* The body of bpt__breakpoint: read the active index once, walk f's list and
   read data[ix] of each GenericBp. e0, e1 receive what sessions 0 and 1 say.
   users[] is the ghost of (b): the hit has chosen half ix until it ends. */
inline walk(ix, g, e0, e1) {
    atomic { ix = active_ix; users[ix]++ };     /* acquire load: pairs with step 7's release store */
    g = gen_bp;                                 /* acquire load: pairs with the stores of steps 2, 5, 11 */
    do
    :: g == NIL -> break
    :: g != NIL ->
        atomic {
            assert(bp[g].state == LIVE);        /* (a) */
            if                                  /* data[ix]: the one generation of this hit */
            :: bp[g].sess == 0 -> e0 = bp[g].flags[ix]
            :: else -> e1 = bp[g].flags[ix]
            fi;
#ifdef MUTANT_FRAME_KEEPS_BP
            if
            :: bp[g].flags[ix] != 0 -> kept = g /* MUTANT: the frame will keep this pointer */
            :: else
            fi;
#endif
            g = bp[g].next                      /* acquire load of g->next */
        }
    od
}

/* A signal handler's hit, nested in reader 0's own hit: a whole pin, walk and
   unpin of its own, with its own locals, that nothing interrupts again.
   Reader 0 takes at most SIGNALS of them, at any of three points of its
   call: between pin's load and store, in the middle of the hit, and between
   unpin's load and store. The handler's call of f fetches the word first. */
inline signal_point() {
    if
    :: atomic { r == 0 && sigs < SIGNALS && word == BPWORD -> sigs++ } ->
        pin_load(r, s2);
        pin_store(r, s2);
        walk(ix2, g2, h0, h1);
        atomic { users[ix2]--; h0 = 0; h1 = 0; ix2 = 0; s2 = st[r] };
        unpin_store(r, s2)
    :: true
    fi
}

/* (c): a call during which no commit happened, and that ends after step 8
   of the last run, saw exactly the committed settings: the word was the
   breakpoint if a session was on, and data[ix] said what the settings were.
   Then the call pushes a return frame for the sessions that traced it. */
inline check_c_and_push_frame() {
    assert(stale[r] || must[0] == ANY || e0 == must[0]);   /* (c) */
    assert(stale[r] || must[1] == ANY || e1 == must[1]);   /* (c) */
    frame = (e0 != 0 -> 1 : 0) | (e1 != 0 -> 2 : 0);
    e0 = 0; e1 = 0; n++
}

proctype Reader(byte r) {
    byte n;             /* calls made */
    byte s;             /* pin's and unpin's copy of st[r] */
    bit ix;             /* the active index, read once per hit */
    byte g;             /* the GenericBp this thread stands on */
    byte e0, e1;        /* what the hit found for session 0, 1 (0: nothing) */
    byte frame;         /* the return frame: bit i set if session i traces the return */
    byte sigs, s2, g2, h0, h1;   /* reader 0's signal handler */
    bit ix2;
#ifdef MUTANT_FRAME_KEEPS_BP
    byte kept = NIL;
#endif

    do
    :: n < NCALLS ->
        /* A call of f. The thread fetches f's word before any pin (the CPU
           executes it, or the VM fetches it, and only then enters bptrace),
           so it may stall after the fetch for as long as it likes. */
        if
        :: atomic { word == BPWORD -> stale[r] = 0 } ->
            /* bpt__breakpoint: pin, read the index once, walk, unpin. */
            pin_load(r, s);
            signal_point();                     /* a handler hits between pin's load and store */
            pin_store(r, s);
            walk(ix, g, e0, e1);
            signal_point();                     /* a handler hits in the middle of the hit */
            atomic {
                users[ix]--; ix = 0;            /* ghost (b): the hit is done with data[] */
                check_c_and_push_frame();
                s = st[r]                       /* unpin's one load */
            };
            signal_point();                     /* a handler hits between unpin's load and store */
            unpin_store(r, s)
        :: atomic { word != BPWORD -> stale[r] = 0; check_c_and_push_frame() }   /* the original: untraced */
        fi;
        if
        :: frame != 0 ->
            /* The return, some time later, with nothing pinned in between.
               The frame keeps f and the sessions' weak ids, never a GenericBp
               pointer: that may be freed meanwhile. A second pinned section
               finds the sessions' GenericBps on f again and uses their active
               generation: call_time charges the call's time there
               (bpt__timem_charge_frame in src/frames.c). */
            pin_load(r, s);
            pin_store(r, s);
#ifndef MUTANT_FRAME_KEEPS_BP
            walk(ix, g, e0, e1);
#else
            atomic { ix = active_ix; users[ix]++ };
            atomic { assert(bp[kept].state == LIVE); e0 = bp[kept].flags[ix]; kept = NIL };   /* (a) */
#endif
            atomic { users[ix]--; e0 = 0; e1 = 0; ix = 0; frame = 0; s = st[r] };
            unpin_store(r, s)
        :: else
        fi
    :: else -> break
    od
}

/* ---- The set path: the 13 steps (src/bp.c, bpt__protocol_run) ------------- */

proctype Writer() {
    byte runs;          /* protocol runs so far */
    byte sess, v;       /* this run: the session, and its new settings */
    bit act, stg;       /* the active and the staging index, as the writer knows them */
    byte g, p, all;
    bit installed;      /* f->installed: set path only */
    bit fresh, installs, uninstalls, unlinked;
    bit deferred;       /* step 8 left its wait to step 10 */
    byte t, w;          /* progress_wait's */

    /* Each atomic block ends with at most one store a reader can see. Only
       the writer writes f's word, list and GenericBps, so its own reads of
       them, and its private bookkeeping, need no interleaving. */
    do
    :: runs < MAXRUNS ->
        atomic {
            /* Step 1: seize the code modification permission. There is one
               writer here; the permission only serialises writers. */

            /* The change this run makes: session sess gets settings v (one
               bpt_trace_pattern call). Every change of what is set can be
               chosen, up to renaming: the first session switched on is
               session 0, and a session switched on gets match spec 1. */
            if
            :: sess = 0
            :: runs > 0 -> sess = 1
            fi;
            if
            :: committed[sess] == 0 -> v = 1                    /* on */
            :: committed[sess] != 0 -> v = 0                    /* off */
            :: committed[sess] != 0 -> v = 3 - committed[sess]  /* the other match spec */
            fi;
            act = active_ix; stg = 1 - act;
            g = gen_bp;                                         /* bpt__find_bp */
            do
            :: g != NIL && bp[g].sess != sess -> g = bp[g].next
            :: else -> break
            od;

            /* Step 2: allocate a GenericBp for a session new on f, both
               generations disabled (flags 0). Nothing shared is touched. */
            fresh = 0;
            if
            :: g == NIL ->
                g = 0;
                do
                :: bp[g].state != UNUSED -> g++
                :: else -> break
                od;
                assert(g < NG);
                bp[g].state = LIVE; bp[g].sess = sess; bp[g].next = NIL;
                bp[g].to_insert = NIL; bp[g].flags[0] = 0; bp[g].flags[1] = 0;
                fresh = 1
            :: else
            fi
        };

        /* Step 3: link a fresh GenericBp (bpt__link), then stage: write the
           new settings into the staging generation. The first session on f
           writes the list head (a release store: nobody reaches the
           GenericBp before step 5 installs the word). A further session is
           parked in the head's to_insert, already pointing at the head, and
           published at step 5 with one store. Running hits read the active
           generation. None reads staging: the last run's step 8 waited for
           every hit that had chosen it. */
        atomic {
            if
            :: fresh ->
                if
                :: gen_bp == NIL -> gen_bp = g                  /* release store of the head */
                :: else -> bp[g].next = gen_bp; bp[gen_bp].to_insert = g
                fi
            :: else
            fi;
            assert(users[stg] == 0);                            /* (b) */
            bp[g].flags[stg] = v;
            installs = (!installed && v != 0)
        };

        /* Step 4: wait for thread progress, so that every thread sees what
           steps 2 and 3 wrote before the word leads it there (a VM's fetch of
           the word is not an acquire load). Only when step 5 installs. */
        if
        :: installs -> progress_wait()
        :: else
        fi;

        /* Step 5: publish a parked GenericBp of a further session (one
           release store of the head: the GenericBp is complete, its active
           generation disabled), and install the breakpoint word (one aligned
           store) if no session had installed it. */
        atomic {
            if
            :: bp[gen_bp].to_insert != NIL ->
                p = gen_bp;
                gen_bp = bp[p].to_insert;                       /* release store of the head */
                bp[p].to_insert = NIL; p = 0
            :: else
            fi
        };
#ifndef MUTANT_INSTALL_AFTER_COMMIT
        if
        :: installs -> word = BPWORD; installed = 1             /* the word: one aligned store */
        :: else
        fi;
#endif

        /* Step 6: wait, so that every thread runs the new word before the
           commit: the switch is "as atomic as possible". */
        if
        :: installs -> progress_wait()
        :: else
        fi;

        /* Step 7: commit: flip the active index, one release store. It pairs
           with the hit's acquire load of the index: a hit that reads the new
           index sees what step 3 staged. */
        atomic {
            active_ix = stg;
            act = stg; stg = 1 - act;
            committed[sess] = v; must[sess] = ANY;              /* ghost (d), (c) */
            t = 0;                                              /* ghost (c): running calls are stale */
            do
            :: t < NR -> stale[t] = 1; t++
            :: else -> break
            od;
            t = 0
        };

        /* Step 8: wait, so that no thread still reads the old generation:
           step 11 overwrites the old generation, and the next run's step 3
           writes it again. Where the change switches the session off (v is
           0: step 9 may restore the word), step 8 leaves its wait to step
           10, and one wait serves both (>>deferred wait in src/bp.c):
           nothing a call does depends on the word once fetched. */
        if
        :: v == 0 -> deferred = 1
        :: else ->
#ifndef MUTANT_NO_STEP8_WAIT
            progress_wait();
#endif
            skip
        fi;

        /* Step 9: uninstall: restore the original word if no session's
           active generation has a flag left (the OR over sessions is 0). */
        atomic {
            must[sess] = v;                                     /* ghost (c): the new settings hold */
            if
            :: installed ->
                all = 0; p = gen_bp;
                do
                :: p != NIL ->
#ifndef MUTANT_UNINSTALL_OWN_FLAGS
                    all = all | bp[p].flags[act];
#else
                    all = all | (bp[p].sess == sess -> bp[p].flags[act] : 0);   /* MUTANT */
#endif
                    p = bp[p].next
                :: else -> break
                od;
                p = 0;
                if
                :: all == 0 ->
                    assert(committed[0] == 0 && committed[1] == 0);   /* (d) */
                    word = ORIG;                                /* the word: one aligned store */
                    installed = 0; uninstalls = 1
                :: else
                fi;
                all = 0
            :: else
            fi
        };

#ifdef MUTANT_INSTALL_AFTER_COMMIT
        if                                                      /* MUTANT: step 5's word store, late */
        :: installs -> word = BPWORD; installed = 1
        :: else
        fi;
#endif

        /* Step 10: wait after restoring the word (for native sites it also
           serializes every CPU's instruction stream), and step 8's wait if
           step 8 deferred it, whether or not step 9 restored the word. The
           wait after restoring cannot catch a thread that fetched the word
           before step 9 and has not pinned yet: such a thread is not
           pinned, so the waiter does not see it. That thread is safe
           anyway: it reads the list head only after it pins, and step 12
           waits for it if it then stands on an unlinked GenericBp. */
        if
        :: uninstalls -> progress_wait()
#if !defined(MUTANT_DEFERRED_WAIT_LOST) && !defined(MUTANT_NO_STEP8_WAIT)
        :: !uninstalls && deferred -> progress_wait()
#endif
        :: else
        fi;

        /* Step 11: consolidate: copy the active generation into staging, so
           both are equal again. If the session is now off, unlink its
           GenericBp with one release store into its predecessor (the head or
           the previous g->next). A thread walking the list may still stand
           on it: it is freed only after step 12's wait. */
        atomic {
            assert(users[stg] == 0);                            /* (b) */
            bp[g].flags[stg] = bp[g].flags[act]
        };
        atomic {
            if
            :: bp[g].flags[act] == 0 ->
                if
                :: gen_bp == g -> gen_bp = bp[g].next           /* release store of the head */
                :: else ->
                    p = gen_bp;
                    do
                    :: bp[p].next != g -> p = bp[p].next
                    :: else -> break
                    od;
                    bp[p].next = bp[g].next;                    /* release store of p->next */
                    p = 0
                fi;
                unlinked = 1
            :: else
            fi
        };

        /* Step 12: wait, because readers may still walk the list that step
           11 changed: a call that fetched the word before step 9 and pinned
           late, or a return, which walks the list without passing the word.
           Then free what was unlinked. */
        if
        :: unlinked ->
#ifndef MUTANT_NO_STEP12_WAIT
            progress_wait();
#endif
            skip
        :: else
        fi;
        atomic {
            if
            :: unlinked -> bp[g].state = FREED                  /* BPT_FREE(g) */
            :: else
            fi;
            /* Step 13: release the permission. */
            runs++; g = 0; v = 0; sess = 0; installs = 0; uninstalls = 0; unlinked = 0; deferred = 0
        }
    :: else -> break
    od
}

init {
    byte i;
    atomic {
        do
        :: i < NR -> run Reader(i); i++
        :: else -> break
        od;
        run Writer()
    }
}
