# tests/fuzz/fuzz.mk: long libFuzzer runs (the Makefile includes this).
#
#   make fuzz                                  every target, FUZZ_SECONDS (600) each, one after another
#   make fuzz FUZZ_SECONDS=3600 FUZZ_TARGET=api
#   make fuzz-build                            only build them
#
# Targets: tests/fuzz/fuzz_NAME.c (pattern, argspec, api). Each runs in
# build/fuzz/ over build/fuzz/corpus/NAME, which starts as a copy of the seed
# corpus tests/fuzz/corpus/NAME and keeps what the runs find (the committed
# seeds are never written). A crash leaves build/fuzz/NAME-crash-* and makes
# `make fuzz` fail after the remaining targets ran; reproduce it with
# build/fuzz/fuzz-NAME FILE. One job per target (the machine is shared); add
# FUZZ_FLAGS=-jobs=N for more. `tests/fuzz/run OUTDIR [RUNS]` is the short
# fixed-count run of the test matrix.

FUZZ_SECONDS ?= 600
FUZZ_TARGETS := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGET ?= $(FUZZ_TARGETS)
FUZZ_CC ?= clang
FUZZ_CFLAGS ?= -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
               -pthread -Wall -Wextra -Werror
FUZZ_FLAGS ?=
FUZZ_DIR = $(if $(BUILD),$(BUILD),build)/fuzz

.PHONY: fuzz fuzz-build

fuzz-build: $(foreach t,$(FUZZ_TARGET),$(FUZZ_DIR)/fuzz-$(t))

fuzz: fuzz-build
	@failed=""; \
	for t in $(FUZZ_TARGET); do \
	    mkdir -p $(FUZZ_DIR)/corpus/$$t; \
	    cp -n tests/fuzz/corpus/$$t/* $(FUZZ_DIR)/corpus/$$t/; \
	    echo "fuzz-$$t: $(FUZZ_SECONDS) s over $(FUZZ_DIR)/corpus/$$t"; \
	    $(FUZZ_DIR)/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
	        -artifact_prefix=$(FUZZ_DIR)/$$t- $(FUZZ_FLAGS) $(FUZZ_DIR)/corpus/$$t || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: crashes in:$$failed (inputs in $(FUZZ_DIR)/)"; exit 1; fi

$(FUZZ_DIR)/fuzz-%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h bptrace.h
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $<
