# bench/bench.mk: the benchmarks' builds that need more than one file or a
# peer (run by `make bench`; installs nothing). Peers are optional: without
# uftrace or liburcu-dev their sections are built as stubs that say so.
CC ?= cc
BUILD ?= build
BENCH_CFLAGS ?= -std=c11 -O2 -g -Wall -Wextra
# Generated functions are compiled at -O0: 50,000 of them take gcc 4x less
# time than at -O1, and each stays a separate, patchable function either way.
GEN_CFLAGS ?= -O0 -g0
HAVE_URCU := $(shell printf '\043include <urcu/urcu-memb.h>\nint main(void){return 0;}\n' | $(CC) -x c - -o /dev/null -lurcu-memb -pthread >/dev/null 2>&1 && echo 1)
SIZES := 1000 10000 50000

all: $(BUILD)/bench_overhead $(BUILD)/bench_overhead_noprobes $(BUILD)/bench_probes_ab $(BUILD)/bench_ret_predict $(BUILD)/bench_vs_uftrace $(BUILD)/bench_vs_uftrace_pg \
     $(BUILD)/bench_vs_urcu $(foreach n,$(SIZES),$(BUILD)/bench_pattern_$(n))

$(BUILD)/bench_overhead: bench/overhead.c bench/bench.h bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -pthread

# The same, with the USDT probes compiled out: section 7's instruction counts.
$(BUILD)/bench_overhead_noprobes: bench/overhead.c bench/bench.h bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(BENCH_CFLAGS) -DBPT_NO_PROBES -o $@ $< -pthread

# Section 7: both builds in one process (bench/probes_ab.c). Every function of
# both halves starts on a 64-byte line: unaligned, the same instructions ran
# 13 % apart between the two halves of one process, whichever had the probes.
AB_CFLAGS = $(BENCH_CFLAGS) -falign-functions=64 -fPIC -shared -fvisibility=hidden
$(BUILD)/libprobes_ab_in.so: bench/probes_ab_half.c bench/probes_ab.h bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(AB_CFLAGS) -DAB_SIDE=in -o $@ $< -pthread
$(BUILD)/libprobes_ab_out.so: bench/probes_ab_half.c bench/probes_ab.h bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(AB_CFLAGS) -DAB_SIDE=out -DBPT_NO_PROBES -o $@ $< -pthread
$(BUILD)/bench_probes_ab: bench/probes_ab.c bench/probes_ab.h bench/bench.h $(BUILD)/libprobes_ab_in.so $(BUILD)/libprobes_ab_out.so
	$(CC) $(BENCH_CFLAGS) -o $@ $< -L$(BUILD) -lprobes_ab_in -lprobes_ab_out -Wl,-rpath,'$$ORIGIN' -pthread

$(BUILD)/bench_ret_predict: bench/ret_predict.c bench/bench.h
	@mkdir -p $(BUILD)
	$(CC) $(BENCH_CFLAGS) -o $@ $<

$(BUILD)/bench_vs_uftrace: bench/vs_uftrace.c bench/bench.h bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -pthread

# The peer build: no bptrace, -pg for `uftrace record`.
$(BUILD)/bench_vs_uftrace_pg: bench/vs_uftrace.c bench/bench.h
	@mkdir -p $(BUILD)
	$(CC) $(BENCH_CFLAGS) -DUFTRACE_BUILD -pg -o $@ $< -pthread

ifeq ($(HAVE_URCU),1)
$(BUILD)/bench_vs_urcu: bench/vs_urcu.c bench/bench.h bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(BENCH_CFLAGS) -o $@ $< -pthread -lurcu-memb
else
$(BUILD)/bench_vs_urcu:
	@mkdir -p $(BUILD)
	printf '#!/bin/sh\necho "3    skipped: liburcu-dev is not installed (apt-get install liburcu-dev)"\n' > $@ && chmod +x $@
endif

$(BUILD)/bench_pattern_scale.o: bench/pattern_scale.c bench/bench.h bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(BENCH_CFLAGS) -c -o $@ $<

$(BUILD)/bench_gen_%.c: bench/gen_funcs.sh
	@mkdir -p $(BUILD)
	bench/gen_funcs.sh $* $@

$(BUILD)/bench_gen_%.o: $(BUILD)/bench_gen_%.c bptrace.h
	$(CC) $(GEN_CFLAGS) -I. -c -o $@ $<

$(BUILD)/bench_pattern_%: $(BUILD)/bench_pattern_scale.o $(BUILD)/bench_gen_%.o
	$(CC) -o $@ $^ -pthread

.PRECIOUS: $(BUILD)/bench_gen_%.c $(BUILD)/bench_gen_%.o
.PHONY: all
