/* native_fixture.h: what the tests of native sites share (tests/t_native*.c,
   t_frames.c, t_timem.c). Include it after bptrace.h and check.h.

   Where the compiler has native sites (BPT_NATIVE: gcc and clang, on x86-64
   and aarch64):
     code_byte(fn, i)             byte i of fn's code, read through volatile:
                                  compilers take code to be constant and may
                                  fold a later plain read into an earlier one;
     code_bytes(fn, out, n)       its first n bytes into out;
     native_reg(fn, module, name, arity)
                                  bpt_register_native, CHECKed to succeed
                                  (NULL if it did not);
     entry_as_registered(b)       turns an entry's compiled bytes b[0..6)
                                  into what registration leaves there while
                                  it is untraced: x86-64 gcc's 90 90 becomes
                                  the one NOP 66 90 (site_x86_64.c, >>renop).
   Where it has none (tcc, BPT_NO_NATIVE) a native test has nothing of its own
   to run: NATIVE_UNSUPPORTED_MAIN(what) is its main(). It checks that native
   registration says BPT_ENOTSUP (a function, a NULL function, the module
   scan) and that the refused function still runs, then skips (CHECK_SKIP),
   saying what the test would have checked. */
#ifndef BPT_NATIVE_FIXTURE_H
#define BPT_NATIVE_FIXTURE_H

#if defined(BPT_NATIVE)

static inline unsigned char code_byte(const void *fn, int i) { return ((const volatile unsigned char *)fn)[i]; }

static inline void code_bytes(const void *fn, unsigned char *out, int n) {
    int i;
    for (i = 0; i < n; i++) out[i] = code_byte(fn, i);
}

static inline void entry_as_registered(unsigned char *b) {
#if defined(__x86_64__)
    int at = b[0] == 0xF3 && b[1] == 0x0F && b[2] == 0x1E && b[3] == 0xFA ? 4 : 0;   /* endbr64 first */
    if (b[at] == 0x90 && b[at + 1] == 0x90) b[at] = 0x66;
#else
    (void)b;   /* aarch64: the compiled NOP word stays */
#endif
}

static inline bpt_func *native_reg(void *fn, const char *module, const char *name, int arity) {
    bpt_func *f = NULL;
    int rc = bpt_register_native(fn, module, name, arity, &f);
    CHECK(rc == 0, "bpt_register_native(%s:%s/%d) returned %d (%s); last error: %s", module, name, arity, rc,
          bpt_strerror(rc), bpt_last_error());
    return rc == 0 ? f : NULL;
}

#else

static inline long native_fixture_plain(long a) { return a + 1; }

static inline int native_unsupported(const char *what) {
    bpt_func *f;
    char reason[256];
    CHECK_RC(bpt_register_native((void *)native_fixture_plain, "native", "plain", 1, &f), BPT_ENOTSUP);
    printf("bpt_register_native: %s\n", bpt_last_error());
    CHECK_RC(bpt_register_native(NULL, "native", "null", 1, &f), BPT_ENOTSUP);
    CHECK_RC(bpt_register_module(NULL), BPT_ENOTSUP);
    printf("bpt_register_module: %s\n", bpt_last_error());
    CHECK(native_fixture_plain(1) == 2, "the refused function still runs");
    snprintf(reason, sizeof reason, "no native sites with this compiler (BPT_NATIVE undefined): %s", what);
    return CHECK_SKIP(reason);
}

#define NATIVE_UNSUPPORTED_MAIN(what) int main(void) { return native_unsupported(what); }

#endif
#endif
