# sqlite.mk - the SQLite live demo (issue #7): SQLite 3.52.0 built traceable, traced live.
#
#   make -f Makefile -f examples/sqlite.mk demo-sqlite     (or `make demo-sqlite` once the
#                                                           Makefile includes this file)
#   make ... demo-sqlite SQLITE_TARBALL=/path/to/sqlite-autoconf-3520000.tar.gz
#   make ... demo-sqlite SQLITE_LIVE_ARGS="--threads 4 --phase-ms 5000"
#   make ... sqlite-live        just build $(BUILD)/sqlite_live
#
# What it does:
#   1. examples/get-sqlite.sh fetches the amalgamation into $(BUILD)/sqlite/ (cached;
#      npm pack sqlite3@6.0.1 ships it) or copies SQLITE_TARBALL, and checks its SHA-256;
#   2. extracts sqlite3.c and sqlite3.h;
#   3. compiles sqlite3.c with the patchable-entry flags of the host architecture and
#      $(CC) (`make print-cflags`), so that every SQLite function, static ones too,
#      can be traced;
#   4. links examples/sqlite_live.c (which includes bptrace.h with the implementation)
#      into $(BUILD)/sqlite_live, and demo-sqlite runs it on $(BUILD)/demo/bank.db.
# Warnings in sqlite3.c are SQLite's (it is compiled with -w); sqlite_live.c builds
# with -Wall -Wextra and no warnings.

BUILD ?= build
CC ?= cc
SQLITE_VER := 3520000
SQLITE_DIR := $(BUILD)/sqlite
SQLITE_SRC := $(SQLITE_DIR)/sqlite-autoconf-$(SQLITE_VER)
SQLITE_TGZ := $(SQLITE_DIR)/sqlite-autoconf-$(SQLITE_VER).tar.gz
SQLITE_LIVE_ARGS ?=

# The whole-program flags for traceable functions, as the Makefile prints them for $(CC).
SQLITE_TRACE_CFLAGS = $(shell $(MAKE) --no-print-directory -s -f Makefile print-cflags CC="$(CC)")
SQLITE_OPTS := -DSQLITE_THREADSAFE=1 -DSQLITE_OMIT_LOAD_EXTENSION -DSQLITE_DEFAULT_WAL_SYNCHRONOUS=1 \
               -DSQLITE_DEFAULT_MEMSTATUS=0 -DSQLITE_DQS=0 -DSQLITE_OMIT_DEPRECATED
SQLITE_CFLAGS ?= -O2
SQLITE_LIVE_CFLAGS ?= -std=c11 -O2 -g -Wall -Wextra

.PHONY: sqlite-fetch sqlite-live demo-sqlite sqlite-flags-check bench-sqlite

# Always run the script: it checks the hash of the cached copy too, and a changed
# SQLITE_TARBALL must be noticed. It only rewrites the tarball when it changes.
sqlite-fetch:
	@SQLITE_TARBALL="$(SQLITE_TARBALL)" sh examples/get-sqlite.sh $(SQLITE_DIR)

$(SQLITE_SRC)/sqlite3.c: | sqlite-fetch
	tar -xzf $(SQLITE_TGZ) -C $(SQLITE_DIR) sqlite-autoconf-$(SQLITE_VER)/sqlite3.c sqlite-autoconf-$(SQLITE_VER)/sqlite3.h
	@touch $@ $(SQLITE_SRC)/sqlite3.h

$(SQLITE_SRC)/sqlite3.h: $(SQLITE_SRC)/sqlite3.c

# The compile line is recorded in $(SQLITE_DIR)/cflags, rewritten only when it changes,
# so that another CC or other flags rebuild sqlite3.o and nothing else does. The rule
# has its own recipe (a phony prerequisite alone would not make make look at the
# file's new time: a changed flag would leave the old sqlite3.o in place).
$(SQLITE_DIR)/cflags: sqlite-flags-check
	@mkdir -p $(SQLITE_DIR)
	@echo '$(CC) $(SQLITE_CFLAGS) $(SQLITE_TRACE_CFLAGS) $(SQLITE_OPTS)' > $@.new; \
	if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi

sqlite-flags-check:

$(SQLITE_DIR)/sqlite3.o: $(SQLITE_SRC)/sqlite3.c $(SQLITE_DIR)/cflags
	@flags="$(SQLITE_TRACE_CFLAGS)"; [ -n "$$flags" ] || { echo "sqlite.mk: make print-cflags gave no flags for CC=$(CC)" >&2; exit 1; }; \
	echo "$(CC) $(SQLITE_CFLAGS) $$flags $(SQLITE_OPTS) -w -c sqlite3.c  (SQLite 3.52.0, every function traceable)"; \
	start=$$(date +%s); \
	$(CC) $(SQLITE_CFLAGS) $$flags $(SQLITE_OPTS) -w -c $(SQLITE_SRC)/sqlite3.c -o $@.tmp && mv $@.tmp $@ && \
	echo "sqlite3.o built in $$(( $$(date +%s) - start )) s"

$(BUILD)/sqlite_live: examples/sqlite_live.c bptrace.h $(SQLITE_DIR)/sqlite3.o $(SQLITE_SRC)/sqlite3.h
	$(CC) $(SQLITE_LIVE_CFLAGS) -I$(SQLITE_SRC) -o $@ examples/sqlite_live.c $(SQLITE_DIR)/sqlite3.o -pthread -lm

sqlite-live: $(BUILD)/sqlite_live

# bench/sqlite_flags.c (make bench, section 6): the same program linked with the
# traceable sqlite3.o above and with one compiled without the patchable-entry flags.
$(SQLITE_DIR)/sqlite3-plain.o: $(SQLITE_SRC)/sqlite3.c $(SQLITE_DIR)/cflags
	$(CC) $(SQLITE_CFLAGS) $(SQLITE_OPTS) -w -c $(SQLITE_SRC)/sqlite3.c -o $@.tmp && mv $@.tmp $@

$(BUILD)/bench_sqlite_flags: bench/sqlite_flags.c bench/bench.h bptrace.h $(SQLITE_DIR)/sqlite3.o $(SQLITE_SRC)/sqlite3.h
	$(CC) $(SQLITE_LIVE_CFLAGS) -I$(SQLITE_SRC) -o $@ bench/sqlite_flags.c $(SQLITE_DIR)/sqlite3.o -pthread -lm

$(BUILD)/bench_sqlite_plain: bench/sqlite_flags.c bench/bench.h bptrace.h $(SQLITE_DIR)/sqlite3-plain.o $(SQLITE_SRC)/sqlite3.h
	$(CC) $(SQLITE_LIVE_CFLAGS) -I$(SQLITE_SRC) -o $@ bench/sqlite_flags.c $(SQLITE_DIR)/sqlite3-plain.o -pthread -lm

bench-sqlite: $(BUILD)/bench_sqlite_flags $(BUILD)/bench_sqlite_plain

# The outside workflow (phase 8 of the demo): sqlite_bank has no bptrace code; it is
# built with the flags only, like the SQLite it links, and runs under the agent.
$(BUILD)/sqlite_bank: examples/sqlite_bank.c $(SQLITE_DIR)/sqlite3.o $(SQLITE_SRC)/sqlite3.h
	$(CC) $(SQLITE_LIVE_CFLAGS) $(SQLITE_TRACE_CFLAGS) -I$(SQLITE_SRC) -o $@ examples/sqlite_bank.c $(SQLITE_DIR)/sqlite3.o -pthread -lm

demo-sqlite: $(BUILD)/sqlite_live $(BUILD)/bpt $(BUILD)/sqlite_bank $(BUILD)/libbptrace-agent.so
	@mkdir -p $(BUILD)/demo
	$(BUILD)/sqlite_live --db $(BUILD)/demo/bank.db --out $(BUILD)/demo --bpt $(BUILD)/bpt $(SQLITE_LIVE_ARGS)
	@sh examples/demo-agent.sh $(BUILD)
