# bptrace: the header is the product; this Makefile builds its tests, examples and demo.
#   make demo         the main job: SQLite traced live (examples/sqlite.mk); make demo-tinyvm: the
#                     interpreter; make demo-gameloop: call_time in a frame loop on managed threads
#   make test         the whole test matrix (tests/run), ends with "N passed, N failed, N skipped"
#   make deps         install what demo and test need (.ci/install-deps; sudo if not root),
#                     unless it is all there already: demo and test run it first
#   make examples     build/tinyvm, build/protocol_walkthrough, build/gameloop, build/hello, build/bpt,
#                     build/libbptrace-agent.so
#   make bench        benchmarks (figures and ratios; no assertions)
#   make fuzz         the libFuzzer targets, FUZZ_SECONDS each (tests/fuzz/fuzz.mk)
#   make amalgamate   regenerate bptrace.h from src/
#   make check-amalgamation
#   make print-cflags the whole-program flags for traceable functions
CC ?= cc
CFLAGS ?= -std=c11 -O2 -g -Wall -Wextra
BUILD := build

.PHONY: all deps demo demo-tinyvm demo-gameloop bench-build test test-elf bench amalgamate check-amalgamation examples print-cflags clean

all: examples

bptrace.h: $(wildcard src/*)
	./amalgamate.sh

amalgamate:
	./amalgamate.sh

check-amalgamation:
	./amalgamate.sh --check

$(BUILD)/%: examples/%.c bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -I. -o $@ $< -pthread -lm

examples: $(BUILD)/tinyvm $(BUILD)/protocol_walkthrough $(BUILD)/gameloop $(BUILD)/hello $(BUILD)/bpt $(BUILD)/libbptrace-agent.so

# bpt: the tool from outside (examples/bpt: ps, funcs, top, pstack, sessions, progress,
# sample read the target; trace, count, profile, record steer it through its control server).
$(BUILD)/bpt: examples/bpt/bpt.c examples/bpt/reader.h examples/bpt/client.h bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -I. -o $@ examples/bpt/bpt.c -pthread

# The LD_PRELOAD agent: registers a program built with the flags, starts its control server.
$(BUILD)/libbptrace-agent.so: examples/agent.c bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -fPIC -shared -I. -o $@ examples/agent.c -pthread -ldl

# The packages the tests and the demo need (apt-get, Debian 12), installed only when
# .ci/install-deps --check finds something missing.
deps:
	@.ci/install-deps --check > /dev/null || .ci/install-deps

# The main job: SQLite 3.52 (fetched and checked, built traceable) traced live while its
# threads run a bank workload (examples/sqlite.mk, examples/sqlite_live.c).
demo: deps
	@$(MAKE) --no-print-directory demo-sqlite

# The interpreter example, traced live.
demo-gameloop: $(BUILD)/gameloop
	$(BUILD)/gameloop

demo-tinyvm: $(BUILD)/tinyvm
	$(BUILD)/tinyvm --threads 4 --trace 'fib:fib/_' --count 'fib:*/_' --after-ms 300 --for-ms 600 --run-ms 1200 examples/fib.tvm

include examples/sqlite.mk

test: deps
	./amalgamate.sh --check
	tests/run

# make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGET=pattern]: the libFuzzer targets for as long as asked.
include tests/fuzz/fuzz.mk

# The ELF module scanner across 24 builds (gcc, clang, lld, gold, LTO, PIE and not,
# aarch64 under qemu, sanitizers) with corrupt-file fuzzing; needs lld. ~5 minutes.
test-elf:
	tests/module_harness.sh

# Benchmarks print figures and ratios; they assert nothing and stay out of make test.
$(BUILD)/bench_%: bench/%.c bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ $< -pthread

# The other benchmarks' builds (generated programs, peer builds) are in bench/bench.mk;
# bench/run.sh prints the table PERFORMANCE.md shows. Peers: uftrace, liburcu-dev, valgrind.
bench: bench-build
	$(BUILD)/bench_entry_overhead
	CC="$(CC)" bench/run.sh $(BUILD)

# Build every benchmark without running it (CI checks that they build).
bench-build: $(BUILD)/bench_entry_overhead bptrace.h bench-sqlite
	$(MAKE) -f bench/bench.mk CC="$(CC)" BUILD=$(BUILD) all

# The flags that make every function of a file traceable (BPT_TRACEABLE_CFLAGS),
# for the architecture $(CC) compiles for (a cross compiler needs its target's flags,
# not the host's), or ARCH=x86_64 / ARCH=aarch64. gcc also
# needs -fno-ipa-ra -fno-ipa-stack-alignment, which clang neither has nor needs.
ARCH ?= $(or $(firstword $(subst -, ,$(shell $(CC) -dumpmachine 2>/dev/null))),$(shell uname -m))
print-cflags:
	@case "$(ARCH)" in \
	  x86_64)  f="-fpatchable-function-entry=26,24 -falign-functions=16" ;; \
	  aarch64|arm64) f="-fpatchable-function-entry=9,8 -falign-functions=16" ;; \
	  *) echo "bptrace: no native entry patching on $(ARCH) (VM sites work everywhere)" >&2; exit 1 ;; \
	esac; \
	if $(CC) --version 2>/dev/null | grep -q clang; then echo "$$f"; else echo "$$f -fno-ipa-ra -fno-ipa-stack-alignment"; fi

clean:
	rm -rf $(BUILD)
