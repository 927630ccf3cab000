/* module_harness.h: what the module scan harness (module_harness.c) and its
   shared object (module_harness_lib.c) share: the patchable attribute and
   the macros that define hundreds of distinct functions and list them. */
#ifndef MODULE_HARNESS_H
#define MODULE_HARNESS_H

/* bptrace's layouts (DESIGN §4.2, §4.3); HARNESS_PAD is the padding in bytes. */
#if defined(__x86_64__)
#  define HARNESS_PAD 24
#  define HARNESS_ATTR __attribute__((patchable_function_entry(26, 24), aligned(16), noinline))
#elif defined(__aarch64__)
#  define HARNESS_PAD 32
#  define HARNESS_ATTR __attribute__((patchable_function_entry(9, 8), aligned(16), noinline))
#else
#  error "module harness: x86-64 or aarch64 only"
#endif

typedef struct harness_fn {
    const char *name;
    void *fn;
    int is_static;          /* not in .dynsym: a stripped object cannot name it */
} harness_fn;

/* D(n) for n = p0..p9, and for p00..p99: p is a decimal prefix, so every
   id is a plain decimal number >= 100 (never an octal literal). */
#define H_D10(D, p) D(p##0) D(p##1) D(p##2) D(p##3) D(p##4) D(p##5) D(p##6) D(p##7) D(p##8) D(p##9)
#define H_D100(D, p) H_D10(D, p##0) H_D10(D, p##1) H_D10(D, p##2) H_D10(D, p##3) H_D10(D, p##4) \
                     H_D10(D, p##5) H_D10(D, p##6) H_D10(D, p##7) H_D10(D, p##8) H_D10(D, p##9)

/* Each body differs (its id), so identical code folding cannot merge two. */
#define H_DEFINE(prefix, storage, n) HARNESS_ATTR storage int prefix##n(int x) { return x * 7 + n; }
#define H_ENTRY(prefix, is_static, n) { #prefix #n, (void *)prefix##n, is_static },

#endif
