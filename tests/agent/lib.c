/* tests/agent/lib.c: a library the target dlopens after a pattern that
   names it is set (tests/agent/check.py dlopen); built with the flags. */
long lib_work(long x) { return x + 7; }
