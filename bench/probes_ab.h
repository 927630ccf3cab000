/* bench/probes_ab.h: the entry points of one half of bench_probes_ab
   (bench/probes_ab_half.c, a shared object), named ab_in_* or ab_out_* by
   AB_SIDE. */
#define AB_CAT2(a, b, c) a##b##_##c
#define AB_CAT(a, b, c) AB_CAT2(a, b, c)
#if defined(AB_SIDE)
#  define AB(name) AB_CAT(ab_, AB_SIDE, name)
#endif
/* The only names a half exports (it is built with -fvisibility=hidden). */
#define AB_EXPORT __attribute__((visibility("default")))
#define AB_DECLARE(side)                                            \
    AB_EXPORT long AB_CAT(ab_, side, mix)(long iters);             \
    AB_EXPORT int AB_CAT(ab_, side, setup)(void);                  \
    AB_EXPORT int AB_CAT(ab_, side, set_mode)(unsigned flags);     \
    AB_EXPORT const char *AB_CAT(ab_, side, error)(void);          \
    AB_EXPORT int AB_CAT(ab_, side, probes)(void);                 \
    AB_EXPORT void AB_CAT(ab_, side, stop)(void);
AB_DECLARE(in)
AB_DECLARE(out)
#if defined(AB_SIDE)
long AB(l1)(long a, long b);
long AB(l2)(long a, long b);
long AB(l3)(long a, long b);
long AB(l4)(long a, long b);
#endif
