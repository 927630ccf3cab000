/* sqlite_bank.c: a SQLite workload with no bptrace code in it, for the
   outside workflow of `make demo` (phase 8): SQLite and this file compiled
   with the flags of `make print-cflags`, run under the LD_PRELOAD agent
   (build/libbptrace-agent.so), and steered from outside with bpt count,
   bpt profile and bpt trace while it runs.

   The workload is the demo's TPC-B-like bank transaction (sqlite_live.c):
   per transaction an account, a teller and a branch updated, a balance
   read and a history row inserted, as prepared statements inside
   BEGIN/COMMIT, on an in-memory database of its own in each of THREADS
   threads, for SECONDS seconds.

   Usage: sqlite_bank [SECONDS [THREADS]]   (default 10 s, 2 threads)
   Prints "ready PID" when the databases are filled, and at the end
   "transactions N seconds S tps T". */
#define _GNU_SOURCE
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { ACCOUNTS = 20000, TELLERS = 100, BRANCHES = 10 };

static double seconds = 10.0;
static pthread_barrier_t filled;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(sqlite3 *db, const char *what) {
    fprintf(stderr, "sqlite_bank: %s: %s\n", what, db ? sqlite3_errmsg(db) : "no database");
    exit(1);
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(db, sql);
    return st;
}

/* Bind the first nparams of a and b, step to the end, reset. */
static void run(sqlite3 *db, sqlite3_stmt *st, int nparams, long a, long b) {
    int rc;
    if (nparams > 0) sqlite3_bind_int64(st, 1, a);
    if (nparams > 1) sqlite3_bind_int64(st, 2, b);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
    if (rc != SQLITE_DONE) die(db, "step");
    sqlite3_reset(st);
}

static void *worker(void *arg) {
    long *done = (long *)arg, i;
    unsigned long long seed = 88172645463325252ull ^ (unsigned long long)(uintptr_t)arg;
    sqlite3 *db;
    sqlite3_stmt *st[7];
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) die(NULL, "open");
    if (sqlite3_exec(db, "CREATE TABLE accounts(aid INTEGER PRIMARY KEY, bid INTEGER, abalance INTEGER, filler TEXT);"
                         "CREATE TABLE tellers(tid INTEGER PRIMARY KEY, bid INTEGER, tbalance INTEGER);"
                         "CREATE TABLE branches(bid INTEGER PRIMARY KEY, bbalance INTEGER);"
                         "CREATE TABLE history(tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime INTEGER);"
                         "BEGIN", NULL, NULL, NULL) != SQLITE_OK) die(db, "schema");
    st[0] = prepare(db, "INSERT INTO accounts VALUES(?1, ?1 % 10, 0, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')");
    st[1] = prepare(db, "INSERT INTO tellers VALUES(?1, ?1 % 10, 0)");
    st[2] = prepare(db, "INSERT INTO branches VALUES(?1, 0)");
    for (i = 0; i < ACCOUNTS; i++) run(db, st[0], 1, i, 0);
    for (i = 0; i < TELLERS; i++) run(db, st[1], 1, i, 0);
    for (i = 0; i < BRANCHES; i++) run(db, st[2], 1, i, 0);
    for (i = 0; i < 3; i++) sqlite3_finalize(st[i]);
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) die(db, "COMMIT");
    st[0] = prepare(db, "BEGIN");
    st[1] = prepare(db, "UPDATE accounts SET abalance = abalance + ?2 WHERE aid = ?1");
    st[2] = prepare(db, "SELECT abalance FROM accounts WHERE aid = ?1");
    st[3] = prepare(db, "UPDATE tellers SET tbalance = tbalance + ?2 WHERE tid = ?1");
    st[4] = prepare(db, "UPDATE branches SET bbalance = bbalance + ?2 WHERE bid = ?1");
    st[5] = prepare(db, "INSERT INTO history VALUES(?1 % 100, ?1 % 10, ?1, ?2, 0)");
    st[6] = prepare(db, "COMMIT");
    pthread_barrier_wait(&filled);
    double end = now() + seconds;
    for (i = 0; now() < end; i++) {
        long aid, delta;
        seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;   /* xorshift64 */
        aid = (long)(seed % ACCOUNTS);
        delta = (long)(seed >> 40 & 0x1fff) - 4096;
        run(db, st[0], 0, 0, 0);
        run(db, st[1], 2, aid, delta);
        run(db, st[2], 1, aid, 0);
        run(db, st[3], 2, aid % TELLERS, delta);
        run(db, st[4], 2, aid % BRANCHES, delta);
        run(db, st[5], 2, aid, delta);
        run(db, st[6], 0, 0, 0);
    }
    *done = i;
    for (int k = 0; k < 7; k++) sqlite3_finalize(st[k]);
    sqlite3_close(db);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 2 ? atoi(argv[2]) : 2;
    long done[64] = { 0 }, total = 0;
    pthread_t t[64];
    if (argc > 1) seconds = atof(argv[1]);
    if (!(seconds > 0 && seconds < 86400) || threads < 1 || threads > 64) {
        fprintf(stderr, "usage: sqlite_bank [SECONDS [THREADS 1..64]]\n");
        return 2;
    }
    pthread_barrier_init(&filled, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, &done[i]);
    pthread_barrier_wait(&filled);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double t0 = now();
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL), total += done[i];
    double s = now() - t0;
    printf("transactions %ld seconds %.1f tps %.0f\n", total, s, (double)total / s);
    return 0;
}
