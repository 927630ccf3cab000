/* The shared object of t_native_module (tests/run builds it, with the
   patchable-entry flags, and passes its path): 40 exported and 10 static
   functions, plus lib_call_static. */
#define LIB_FN(n) long lib_fn_##n(long x) { return x * 2 + n; }
#define LIB_STATIC(n) static long lib_static_##n(long x) { return x * 3 + n; }
#define TEN(M, b) M(b##0) M(b##1) M(b##2) M(b##3) M(b##4) M(b##5) M(b##6) M(b##7) M(b##8) M(b##9)
TEN(LIB_FN, 1) TEN(LIB_FN, 2) TEN(LIB_FN, 3) TEN(LIB_FN, 4)
TEN(LIB_STATIC, 5)
/* Reach the static ones, so they are kept. */
#define LIB_REF(n) lib_static_##n,
long (*const lib_statics[10])(long) = { TEN(LIB_REF, 5) };
long lib_call_static(int i, long x) { return lib_statics[i](x); }
