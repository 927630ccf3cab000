/* bench/sqlite_flags.c (section 6): what the patchable-entry flags cost when
   nothing is traced. The same program is linked twice (examples/sqlite.mk):
   with SQLite compiled with `make print-cflags` (bench_sqlite_flags, whose
   functions bptrace registers, as sqlite_live does) and with SQLite compiled
   without them (bench_sqlite_plain). bench/run.sh runs the two alternately
   and compares their throughput.

   The workload is the demo's TPC-B-like bank transaction on an in-memory
   database, one thread: per transaction an account, a teller and a branch
   updated, a balance read and a history row inserted, as prepared statements
   inside BEGIN/COMMIT.

   Usage: bench_sqlite_{flags,plain} [TRANSACTIONS]   (default 200000)
   Prints "transactions N seconds S tps T registered R". */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "bench.h"
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

enum { ACCOUNTS = 100000, TELLERS = 100, BRANCHES = 10 };

static sqlite3 *db;

static void die(const char *what) {
    fprintf(stderr, "bench_sqlite: %s: %s\n", what, db ? sqlite3_errmsg(db) : "no database");
    exit(1);
}

static void exec(const char *sql) {
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(sql);
}

static sqlite3_stmt *prepare(const char *sql) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(sql);
    return st;
}

/* Bind the first nparams of the integers a, b and step to the end. */
static void run(sqlite3_stmt *st, int nparams, long a, long b) {
    int rc;
    if (nparams > 0) sqlite3_bind_int64(st, 1, a);
    if (nparams > 1) sqlite3_bind_int64(st, 2, b);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {}
    if (rc != SQLITE_DONE) die("step");
    sqlite3_reset(st);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000, i;
    unsigned long long seed = 88172645463325252ull;
    int registered;
    sqlite3_stmt *upd_a, *sel_a, *upd_t, *upd_b, *ins_h, *begin, *commit;
    uint64_t t0, t1;
    if (n < 1) {
        fprintf(stderr, "usage: %s [TRANSACTIONS >= 1]\n", argv[0]);
        return 2;
    }
    /* The traceable build registers every patchable function, as the demo
       does; the plain build has none (0). Nothing is traced in either. */
    registered = bpt_register_module(NULL);
    if (registered < 0) registered = 0;
    if (sqlite3_open(":memory:", &db) != SQLITE_OK) die("open");
    exec("CREATE TABLE accounts(aid INTEGER PRIMARY KEY, bid INTEGER, abalance INTEGER, filler TEXT);"
         "CREATE TABLE tellers(tid INTEGER PRIMARY KEY, bid INTEGER, tbalance INTEGER);"
         "CREATE TABLE branches(bid INTEGER PRIMARY KEY, bbalance INTEGER);"
         "CREATE TABLE history(tid INTEGER, bid INTEGER, aid INTEGER, delta INTEGER, mtime INTEGER);");
    exec("BEGIN");
    {
        sqlite3_stmt *a = prepare("INSERT INTO accounts VALUES(?1, ?1 % 10, 0, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')");
        sqlite3_stmt *t = prepare("INSERT INTO tellers VALUES(?1, ?1 % 10, 0)");
        sqlite3_stmt *b = prepare("INSERT INTO branches VALUES(?1, 0)");
        for (i = 0; i < ACCOUNTS; i++) run(a, 1, i, 0);
        for (i = 0; i < TELLERS; i++) run(t, 1, i, 0);
        for (i = 0; i < BRANCHES; i++) run(b, 1, i, 0);
        sqlite3_finalize(a);
        sqlite3_finalize(t);
        sqlite3_finalize(b);
    }
    exec("COMMIT");
    upd_a = prepare("UPDATE accounts SET abalance = abalance + ?2 WHERE aid = ?1");
    sel_a = prepare("SELECT abalance FROM accounts WHERE aid = ?1");
    upd_t = prepare("UPDATE tellers SET tbalance = tbalance + ?2 WHERE tid = ?1");
    upd_b = prepare("UPDATE branches SET bbalance = bbalance + ?2 WHERE bid = ?1");
    ins_h = prepare("INSERT INTO history VALUES(?1 % 100, ?1 % 10, ?1, ?2, 0)");
    begin = prepare("BEGIN");
    commit = prepare("COMMIT");
    t0 = bench_now();
    for (i = 0; i < n; i++) {
        long aid, delta;
        seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;   /* xorshift64 */
        aid = (long)(seed % ACCOUNTS);
        delta = (long)(seed >> 40 & 0x1fff) - 4096;
        run(begin, 0, 0, 0);
        run(upd_a, 2, aid, delta);
        run(sel_a, 1, aid, 0);
        run(upd_t, 2, aid % TELLERS, delta);
        run(upd_b, 2, aid % BRANCHES, delta);
        run(ins_h, 2, aid, delta);
        run(commit, 0, 0, 0);
    }
    t1 = bench_now();
    printf("transactions %ld seconds %.3f tps %.0f registered %d\n", n, (double)(t1 - t0) / 1e9,
           (double)n * 1e9 / (double)(t1 - t0), registered);
    sqlite3_finalize(upd_a);
    sqlite3_finalize(sel_a);
    sqlite3_finalize(upd_t);
    sqlite3_finalize(upd_b);
    sqlite3_finalize(ins_h);
    sqlite3_finalize(begin);
    sqlite3_finalize(commit);
    sqlite3_close(db);
    return 0;
}
