/* gameloop.c - call_time in a game's frame loop, switched on and off while
   the job threads run.

   WHAT IT DEMONSTRATES
       How a game engine (or any frame-based program with a job system)
       embeds bptrace's thread progress and native tracing:
       - the job threads are *managed* threads, as BEAM's schedulers are:
         each calls bpt_thread_progress_register_managed() once, reports a
         quiescent point with bpt_thread_progress() once per frame, when it
         holds no reference into bptrace, and goes offline
         (bpt_thread_progress_offline) before it sleeps between frames. In
         exchange its breakpoint hits pin nothing: a hit costs no atomic
         store to the thread's state;
       - the systems (physics, AI, culling) are plain C functions marked
         BPT_TRACEABLE and registered with bpt_register_native();
       - every N frames the main thread switches call_time (BPT_TIME) on or
         off for all of them with one bpt_trace_pattern() *while the jobs of
         a frame run*. The pattern's thread progress waits end when each job
         thread reaches its next frame boundary: nobody is stopped, and the
         frame time printed beside shows it;
       - after each traced frame the main thread reads call_time with
         bpt_trace_info() (the jobs are idle then, so the collection's waits
         return at once) and prints the frame's own time per system.

   CHECKS (exit status 1 if one fails)
       - every fully traced frame counts exactly the calls the frame made
         (jobs per system, and one ai_score per entity);
       - the world after the run is bit-identical to a single-threaded,
         untraced run of the same frames: tracing changed nothing;
       - every entry word is the original after the last switch off.

   BUILD (from the repository root; gcc or clang on x86-64 or aarch64)
       gcc -std=c11 -O2 -Wall -Wextra -pthread examples/gameloop.c -o gameloop -lm
       (make build/gameloop does the same.)

   RUN
       ./gameloop                        120 frames, tracing toggled every 20
       ./gameloop --frames 60 --toggle 10 --workers 4 --entities 20000

   OPTIONS
       --frames N     frames to run (120)
       --toggle N     switch tracing on or off every N frames (20)
       --workers N    job threads (the online CPUs, at least 2)
       --entities N   entities in the world (16384)
       --quiet 1      print only the summary */

#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_WORKERS = 32, CHUNK = 512, MAX_CHUNKS = 4096 };

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ the world */

struct world {
    int n;
    float *x, *y, *vx, *vy;   /* position, velocity */
    float *goal;              /* AI: the heading it wants */
    unsigned char *visible;   /* culling result */
};

/* The systems. Each job runs one system over one chunk [lo, hi) of the
   entities and touches only that chunk, so the jobs of a frame can run in
   any order on any thread and the result stays the same. */

BPT_TRACEABLE void physics_integrate(struct world *w, int lo, int hi, float dt)
{
    int i;
    for (i = lo; i < hi; i++) {
        w->vx[i] += cosf(w->goal[i]) * dt;
        w->vy[i] += sinf(w->goal[i]) * dt - 0.1f * dt;
        w->x[i] += w->vx[i] * dt;
        w->y[i] += w->vy[i] * dt;
    }
}

BPT_TRACEABLE void physics_collide(struct world *w, int lo, int hi)
{
    int i, k;
    for (i = lo; i < hi; i++) {
        if (w->y[i] < 0.0f) {          /* the ground */
            w->y[i] = -w->y[i];
            w->vy[i] = -0.8f * w->vy[i];
        }
        for (k = i + 1; k < hi && k < i + 8; k++) {   /* near neighbours within the chunk */
            float dx = w->x[k] - w->x[i], dy = w->y[k] - w->y[i];
            if (dx * dx + dy * dy < 0.01f) {
                float t = w->vx[i];
                w->vx[i] = w->vx[k];
                w->vx[k] = t;
            }
        }
    }
}

/* How much entity i wants heading h: called once per entity by ai_think,
   so that call_time shows a callee's own time apart from its caller's. */
BPT_TRACEABLE float ai_score(const struct world *w, int i, float h)
{
    float s = 0.0f;
    int k;
    for (k = 0; k < 16; k++)
        s += sinf(h + 0.39f * (float)k) * cosf(w->x[i] * 0.01f + (float)k);
    return s;
}

BPT_TRACEABLE void ai_think(struct world *w, int lo, int hi)
{
    int i;
    for (i = lo; i < hi; i++) {
        float h = w->goal[i], best = ai_score(w, i, h);
        float alt = h + 0.25f, s;
        if ((s = sinf(alt) * cosf(w->y[i] * 0.01f)) > best * 0.5f)   /* a cheap look around */
            w->goal[i] = alt + s * 0.01f;
    }
}

BPT_TRACEABLE void cull_visible(struct world *w, int lo, int hi)
{
    int i;
    for (i = lo; i < hi; i++)
        w->visible[i] = w->x[i] > -50.0f && w->x[i] < 50.0f && w->y[i] < 80.0f;
}

static void world_init(struct world *w, int n)
{
    int i;
    w->n = n;
    w->x = calloc((size_t)n, sizeof *w->x);
    w->y = calloc((size_t)n, sizeof *w->y);
    w->vx = calloc((size_t)n, sizeof *w->vx);
    w->vy = calloc((size_t)n, sizeof *w->vy);
    w->goal = calloc((size_t)n, sizeof *w->goal);
    w->visible = calloc((size_t)n, 1);
    if (!w->x || !w->y || !w->vx || !w->vy || !w->goal || !w->visible) {
        fprintf(stderr, "gameloop: out of memory for %d entities\n", n);
        exit(2);
    }
    for (i = 0; i < n; i++) {
        w->x[i] = (float)(i % 200) - 100.0f;
        w->y[i] = (float)(i / 200) * 0.5f;
        w->goal[i] = (float)i * 0.618f;
    }
}

static void world_free(struct world *w)
{
    free(w->x);
    free(w->y);
    free(w->vx);
    free(w->vy);
    free(w->goal);
    free(w->visible);
}

static int world_same(const struct world *a, const struct world *b)
{
    size_t f = (size_t)a->n * sizeof(float);
    return memcmp(a->x, b->x, f) == 0 && memcmp(a->y, b->y, f) == 0 && memcmp(a->vx, b->vx, f) == 0 &&
           memcmp(a->vy, b->vy, f) == 0 && memcmp(a->goal, b->goal, f) == 0 &&
           memcmp(a->visible, b->visible, (size_t)a->n) == 0;
}

/* One job: one system over one chunk. */
enum { SYS_INTEGRATE, SYS_COLLIDE, SYS_THINK, SYS_CULL, NSYS };

static void run_job(struct world *w, int sys, int lo, int hi)
{
    switch (sys) {
    case SYS_INTEGRATE: physics_integrate(w, lo, hi, 1.0f / 60.0f); break;
    case SYS_COLLIDE: physics_collide(w, lo, hi); break;
    case SYS_THINK: ai_think(w, lo, hi); break;
    default: cull_visible(w, lo, hi); break;
    }
}

/* A frame's jobs, in this order per chunk: integrate, collide, think, cull.
   A job is a chunk: one thread runs the four systems over it in order, so
   no two threads touch the same entity. */
static void run_chunk(struct world *w, int chunk)
{
    int lo = chunk * CHUNK, hi = lo + CHUNK < w->n ? lo + CHUNK : w->n, sys;
    for (sys = 0; sys < NSYS; sys++)
        run_job(w, sys, lo, hi);
}

/* ------------------------------------------------------- the job system */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    uint64_t frame;              /* the frame being run; workers wait for a new one */
    int stop;
    int nchunks;
    atomic_int next;             /* the next chunk to take */
    atomic_int finished;         /* chunks done this frame */
    int idle;                    /* workers that finished the frame's chunks */
    int nworkers;
    struct world *w;
} js = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0, 0, 0, NULL };

static atomic_int worker_errors;

/* A job thread. Between frames it is offline (it sleeps on a condition
   variable); during a frame it is online and takes chunks; at the end of its
   share of the frame it reports a quiescent point: that is what ends the
   waits of a bpt_trace_pattern the main thread makes meanwhile. */
static void *worker_main(void *arg)
{
    uint64_t seen = 0;
    (void)arg;
    if (bpt_thread_progress_register_managed() != 0) {
        fprintf(stderr, "gameloop: bpt_thread_progress_register_managed: %s\n", bpt_last_error());
        atomic_fetch_add(&worker_errors, 1);
        return NULL;
    }
    for (;;) {
        int c;
        bpt_thread_progress_offline();          /* about to sleep: waiters must not wait for us */
        pthread_mutex_lock(&js.lock);
        while (!js.stop && js.frame == seen)
            pthread_cond_wait(&js.go, &js.lock);
        seen = js.frame;
        if (js.stop) {
            pthread_mutex_unlock(&js.lock);
            break;
        }
        pthread_mutex_unlock(&js.lock);
        bpt_thread_progress_online();           /* running traced code again */
        while ((c = atomic_fetch_add(&js.next, 1)) < js.nchunks) {
            run_chunk(js.w, c);
            atomic_fetch_add(&js.finished, 1);
        }
        bpt_thread_progress();                  /* quiescent: once per frame */
        pthread_mutex_lock(&js.lock);
        if (++js.idle == js.nworkers)
            pthread_cond_signal(&js.done);
        pthread_mutex_unlock(&js.lock);
    }
    return NULL;
}

static void frame_start(void)
{
    pthread_mutex_lock(&js.lock);
    atomic_store(&js.next, 0);
    atomic_store(&js.finished, 0);
    js.idle = 0;
    js.frame++;
    pthread_cond_broadcast(&js.go);
    pthread_mutex_unlock(&js.lock);
}

static void frame_wait(void)
{
    pthread_mutex_lock(&js.lock);
    while (js.idle < js.nworkers)
        pthread_cond_wait(&js.done, &js.lock);
    pthread_mutex_unlock(&js.lock);
}

/* ---------------------------------------------------------------- main */

static const struct {
    void *fn;
    const char *name;
    int arity;
    const char *label;
} systems[] = {
    { (void *)physics_integrate, "physics_integrate", 4, "integrate" },
    { (void *)physics_collide, "physics_collide", 3, "collide" },
    { (void *)ai_think, "ai_think", 3, "think" },
    { (void *)ai_score, "ai_score", 3, "score" },
    { (void *)cull_visible, "cull_visible", 3, "cull" },
};
enum { NFUNCS = sizeof systems / sizeof systems[0] };

/* The session's running call_time totals of every system: calls and own
   ns. 0, or -1 with the error printed. */
static int read_totals(bpt_session s, bpt_func *const *fn, uint64_t *calls, uint64_t *ns)
{
    int k;
    for (k = 0; k < NFUNCS; k++) {
        bpt_info info;
        memset(&info, 0, sizeof info);
        if (bpt_trace_info(s, fn[k], BPT_INFO_TIME, &info) != 0) {
            fprintf(stderr, "gameloop: bpt_trace_info(%s): %s\n", systems[k].name, bpt_last_error());
            return -1;
        }
        calls[k] = info.calls;
        ns[k] = info.time_ns;
    }
    return 0;
}

static int parse_opt(int argc, char **argv, int *i, const char *name, int lo, int hi, int *out)
{
    char *end;
    long v;
    if (strcmp(argv[*i], name) != 0)
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "gameloop: %s needs a value\n", name);
        exit(2);
    }
    errno = 0;
    v = strtol(argv[*i + 1], &end, 10);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, "gameloop: %s wants %d..%d\n", name, lo, hi);
        exit(2);
    }
    *out = (int)v;
    *i += 1;
    return 1;
}

int main(int argc, char **argv)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int frames = 120, toggle = 20, nent = 16384, quiet = 0;
    int nworkers = ncpu < 2 ? 2 : ncpu > MAX_WORKERS ? MAX_WORKERS : (int)ncpu;
    int i, k, f, traced = 0, failed = 0, traced_frames = 0, checked_frames = 0, toggles = 0;
    pthread_t th[MAX_WORKERS];
    bpt_func *fn[NFUNCS];
    uint64_t prev_calls[NFUNCS], prev_ns[NFUNCS], total_calls[NFUNCS], total_ns[NFUNCS];
    unsigned char entry[NFUNCS][8];   /* each function's first bytes, before any tracing */
    uint64_t frame_ns_traced = 0, frame_ns_untraced = 0, max_toggle_frame_ns = 0;
    int untraced_frames = 0;
    bpt_session s;
    bpt_session_desc desc;
    struct world w, ref;

    for (i = 1; i < argc; i++) {
        if (parse_opt(argc, argv, &i, "--frames", 1, 100000, &frames) ||
            parse_opt(argc, argv, &i, "--toggle", 1, 100000, &toggle) ||
            parse_opt(argc, argv, &i, "--workers", 1, MAX_WORKERS, &nworkers) ||
            parse_opt(argc, argv, &i, "--entities", 1, MAX_CHUNKS * CHUNK, &nent) ||
            parse_opt(argc, argv, &i, "--quiet", 0, 1, &quiet))
            continue;
        fprintf(stderr, "usage: %s [--frames N] [--toggle N] [--workers N] [--entities N] [--quiet 0|1]\n", argv[0]);
        return 2;
    }

    for (k = 0; k < NFUNCS; k++) {
        if (bpt_register_native(systems[k].fn, "game", systems[k].name, systems[k].arity, &fn[k]) != 0) {
            fprintf(stderr, "gameloop: bpt_register_native(%s): %s\n", systems[k].name, bpt_last_error());
            return 2;
        }
        prev_calls[k] = prev_ns[k] = total_calls[k] = total_ns[k] = 0;
        memcpy(entry[k], systems[k].fn, sizeof entry[k]);
    }
    memset(&desc, 0, sizeof desc);
    desc.name = "gameloop";
    if (bpt_session_create(&desc, &s) != 0) {
        fprintf(stderr, "gameloop: bpt_session_create: %s\n", bpt_last_error());
        return 2;
    }

    world_init(&w, nent);
    js.w = &w;
    js.nchunks = (nent + CHUNK - 1) / CHUNK;
    js.nworkers = nworkers;
    for (i = 0; i < nworkers; i++)
        if (pthread_create(&th[i], NULL, worker_main, NULL) != 0) {
            fprintf(stderr, "gameloop: pthread_create failed\n");
            return 2;
        }
    printf("gameloop: %d entities in %d chunks, %d managed job threads, %d frames, call_time on game:_/_ "
           "toggled every %d frames\n", nent, js.nchunks, nworkers, frames, toggle);

    for (f = 0; f < frames; f++) {
        uint64_t t0 = now_ns(), tp = 0, dt;
        int toggled = 0, rc = 0, was_traced = traced;
        frame_start();
        /* The switch happens while this frame's jobs run. */
        if (f > 0 && f % toggle == 0) {
            uint64_t p0 = now_ns();
            rc = bpt_trace_pattern(s, "game:_/_", traced ? BPT_TIME | BPT_OFF : BPT_TIME, NULL);
            tp = now_ns() - p0;
            if (rc < 0) {
                fprintf(stderr, "gameloop: bpt_trace_pattern: %s\n", bpt_last_error());
                failed = 1;
            } else {
                traced = !traced;
                toggled = 1;
                toggles++;
            }
        }
        frame_wait();
        dt = now_ns() - t0;
        if (toggled) {
            if (dt > max_toggle_frame_ns)
                max_toggle_frame_ns = dt;
            if (!quiet)
                printf("frame %4d  %6.2f ms  call_time %s: bpt_trace_pattern(\"game:_/_\") %d functions in %.2f ms "
                       "while %d job threads ran the frame\n", f, dt / 1e6, traced ? "ON " : "OFF", rc, tp / 1e6,
                       nworkers);
        }
        if (was_traced && traced) {
            /* A whole frame traced: its own time per system, from the running totals. */
            uint64_t calls[NFUNCS], ns[NFUNCS];
            char line[512];
            int len = snprintf(line, sizeof line, "frame %4d  %6.2f ms ", f, dt / 1e6);
            if (read_totals(s, fn, calls, ns) != 0) {
                failed = 1;
            } else {
                checked_frames++;
                for (k = 0; k < NFUNCS; k++) {
                    uint64_t expect = fn[k] == fn[3] ? (uint64_t)nent : (uint64_t)js.nchunks, c = calls[k], t = ns[k];
                    calls[k] -= prev_calls[k];       /* this frame's share of the running totals */
                    ns[k] -= prev_ns[k];
                    prev_calls[k] = c;
                    prev_ns[k] = t;
                    total_calls[k] += calls[k];
                    total_ns[k] += ns[k];
                    if (len < (int)sizeof line)
                        len += snprintf(line + len, sizeof line - (size_t)len, " %s %5.2f", systems[k].label,
                                        ns[k] / 1e6);
                    if (calls[k] != expect) {
                        fprintf(stderr, "gameloop: frame %d: %s called %llu times by call_time, expected %llu\n", f,
                                systems[k].name, (unsigned long long)calls[k], (unsigned long long)expect);
                        failed = 1;
                    }
                }
                if (!quiet)
                    printf("%s  (own ms)\n", line);
            }
            traced_frames++;
            frame_ns_traced += dt;
        } else if (!toggled) {
            untraced_frames++;
            frame_ns_untraced += dt;
            if (!quiet && !traced && (f % toggle == 1 || f == frames - 1))
                printf("frame %4d  %6.2f ms  (untraced)\n", f, dt / 1e6);
        }
        if (toggled && traced) {
            /* Tracing began mid-frame: start the next frame's deltas from here. */
            if (read_totals(s, fn, prev_calls, prev_ns) != 0)
                failed = 1;
        }
        if (toggled && !traced)
            for (k = 0; k < NFUNCS; k++)
                prev_calls[k] = prev_ns[k] = 0;   /* switched off: the totals are gone */
    }
    if (traced && bpt_trace_pattern(s, "game:_/_", BPT_TIME | BPT_OFF, NULL) < 0) {
        fprintf(stderr, "gameloop: bpt_trace_pattern(off): %s\n", bpt_last_error());
        failed = 1;
    }

    pthread_mutex_lock(&js.lock);
    js.stop = 1;
    pthread_cond_broadcast(&js.go);
    pthread_mutex_unlock(&js.lock);
    for (i = 0; i < nworkers; i++)
        pthread_join(th[i], NULL);

    printf("\nsummary: %d frames, %d switches of call_time while the jobs ran (the longest such frame %.2f ms)\n",
           frames, toggles, max_toggle_frame_ns / 1e6);
    if (traced_frames && untraced_frames)
        printf("  mean frame: %.2f ms untraced, %.2f ms with call_time on all %d systems (%.2fx)\n",
               frame_ns_untraced / 1e6 / untraced_frames, frame_ns_traced / 1e6 / traced_frames, NFUNCS,
               ((double)frame_ns_traced / traced_frames) / ((double)frame_ns_untraced / untraced_frames));
    if (checked_frames) {
        printf("  own time over the %d fully traced frames:\n", checked_frames);
        for (k = 0; k < NFUNCS; k++)
            printf("    game:%-18s %9llu calls %9.2f ms %8.1f ns/call\n", systems[k].name,
                   (unsigned long long)total_calls[k], total_ns[k] / 1e6,
                   total_calls[k] ? (double)total_ns[k] / (double)total_calls[k] : 0.0);
    }

    /* The same frames, single-threaded and untraced: the world must match. */
    world_init(&ref, nent);
    for (f = 0; f < frames; f++)
        for (i = 0; i < js.nchunks; i++)
            run_chunk(&ref, i);
    if (!world_same(&w, &ref)) {
        fprintf(stderr, "gameloop: the world differs from a single-threaded untraced run\n");
        failed = 1;
    }
    for (k = 0; k < NFUNCS; k++) {
        bpt_info info;
        memset(&info, 0, sizeof info);
        if (bpt_trace_info(s, fn[k], BPT_INFO_FLAGS, &info) != 0 || info.flags != 0) {
            fprintf(stderr, "gameloop: %s is still traced at the end\n", systems[k].name);
            failed = 1;
        }
        if (memcmp(entry[k], systems[k].fn, sizeof entry[k]) != 0) {
            fprintf(stderr, "gameloop: %s's entry bytes are not the original at the end\n", systems[k].name);
            failed = 1;
        }
    }
    if (atomic_load(&worker_errors))
        failed = 1;
    if (!checked_frames && frames > toggle + 1) {
        fprintf(stderr, "gameloop: no frame was traced whole\n");
        failed = 1;
    }
    bpt_session_destroy(s);
    world_free(&w);
    world_free(&ref);
    printf("%s\n", failed ? "FAILED" : "ok: call counts exact in every traced frame, world identical to an untraced "
                                       "single-threaded run, every entry word the original");
    return failed;
}
