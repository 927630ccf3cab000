# bptrace: the header is the product; this Makefile builds its tests, examples and demo.
#   make demo         the main job (until the SQLite demo lands: tinyvm traced live)
#   make test         the whole test matrix (tests/run), ends with "N passed, N failed"
#   make amalgamate   regenerate bptrace.h from src/
#   make check-amalgamation
CC ?= cc
CFLAGS ?= -std=c11 -O2 -g -Wall -Wextra
BUILD := build

.PHONY: all demo test amalgamate check-amalgamation examples clean

all: examples

bptrace.h: $(wildcard src/*)
	./amalgamate.sh

amalgamate:
	./amalgamate.sh

check-amalgamation:
	./amalgamate.sh --check

$(BUILD)/%: examples/%.c bptrace.h
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS) -o $@ $< -pthread

examples: $(BUILD)/tinyvm $(BUILD)/protocol_walkthrough

demo: $(BUILD)/tinyvm
	$(BUILD)/tinyvm --threads 4 --trace 'fib:fib/_' --count 'fib:*/_' --after-ms 300 --for-ms 600 --run-ms 1200 examples/fib.tvm

test:
	./amalgamate.sh --check
	tests/run

clean:
	rm -rf $(BUILD)
