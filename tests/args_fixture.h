/* args_fixture.h: traceable functions whose arguments fill the argument
   registers, for the tests of the native entry's short paths (t_count_path,
   t_call_path), which run before the stub saves the vector registers and
   must hand every argument over whole:
     fp8     eight doubles: xmm0-7 (x86-64), v0-v7 (aarch64)
     int6    six integers: every integer argument register on x86-64
     va_sum  variadic: the caller passes the count of vector registers in
             al (SysV), which the callee's prologue reads for va_arg
   Include it after bptrace.h and stdarg.h, where BPT_NATIVE is defined. */
#ifndef BPT_ARGS_FIXTURE_H
#define BPT_ARGS_FIXTURE_H

BPT_TRACEABLE double fp8(double a, double b, double c, double d, double e, double f, double g, double h) {
    return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}
BPT_TRACEABLE long int6(long a, long b, long c, long d, long e, long f) { return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f; }
BPT_TRACEABLE double va_sum(int n, ...) {
    va_list ap;
    double sum = 0;
    int i;
    va_start(ap, n);
    for (i = 0; i < n; i++) sum += (i + 1) * va_arg(ap, double);
    va_end(ap);
    return sum;
}

#endif
