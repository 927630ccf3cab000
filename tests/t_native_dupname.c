/* t_native_dupname: BPT_TEST_WHOLE_PROGRAM
   Two functions of one module under one name get a name id each (found by
   review). An id names one entry address, which the USDT probes report
   (bptrace:call's arg1) and bpt__names_addr gives; two same-named static
   functions of one module shared an id, the second's registration moved
   the id's address to itself, and records of the two could not be told
   apart.
   - bpt_register_module: two functions whose names differ only past 127
     bytes are registered under one cut name, in one batch: two ids, each
     with its own function's address;
   - bpt_register_native: two functions registered as dup:helper/0 get two
     ids; once one is unregistered, a function registered under the name
     takes its id back (a library loaded anew keeps its ids: no new id is
     given), and the other id stays with its function. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"

#if !defined(BPT_NATIVE)
NATIVE_UNSUPPORTED_MAIN("same-named functions get an id each")
#else
#include <string.h>

/* 127 bytes in common ("helper_" and 120 x), then _one or _two: the module
   scan cuts both to the same 127-byte name. */
#define P120 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
#define NAME2(p, t) helper_##p##t
#define NAME(p, t) NAME2(p, t)
__attribute__((noinline)) static long NAME(P120, _one)(long x) { __asm__ volatile(""); return x + 1; }
__attribute__((noinline)) static long NAME(P120, _two)(long x) { __asm__ volatile(""); return x + 2; }
__attribute__((noinline)) static long helper_a(long x) { __asm__ volatile(""); return x + 3; }
__attribute__((noinline)) static long helper_b(long x) { __asm__ volatile(""); return x + 4; }
__attribute__((noinline)) static long helper_c(long x) { __asm__ volatile(""); return x + 5; }
long (*volatile keep[])(long) = { NAME(P120, _one), NAME(P120, _two), helper_a, helper_b, helper_c };

static bpt_func *registered_at(void *fn) {
    uint32_t i;
    for (i = 0; i < bpt__registry.len; i++)
        if (bpt__registry.funcs[i]->fn == fn) return bpt__registry.funcs[i];
    return NULL;
}

static void show(const char *what, const bpt_func *f) {
    printf("  %-22s %s:%.20s... at %p: id %u, the id's address 0x%llx\n", what, f->module, f->name, f->fn,
           f->fid, (unsigned long long)bpt__names_addr(f->fid));
}

int main(void) {
    bpt_func *fa, *fb, *fc, *one, *two;
    uint32_t ida, count;
    int rc;
    /* bpt_register_native: two functions, one name. */
    fa = native_reg((void *)helper_a, "dup", "helper", 0);
    fb = native_reg((void *)helper_b, "dup", "helper", 0);
    if (!fa || !fb) return CHECK_DONE();
    show("helper_a", fa);
    show("helper_b", fb);
    CHECK(fa->fid != fb->fid, "two functions registered as dup:helper/0 share id %u", fa->fid);
    CHECK(bpt__names_addr(fa->fid) == (uint64_t)(uintptr_t)helper_a, "helper_a's id names another address");
    CHECK(bpt__names_addr(fb->fid) == (uint64_t)(uintptr_t)helper_b, "helper_b's id names another address");
    /* Unregistered, its id is free: the next function under the name takes it. */
    ida = fa->fid;
    count = bpt__names_count();
    CHECK_RC(bpt_unregister(fa), 0);
    fc = native_reg((void *)helper_c, "dup", "helper", 0);
    if (!fc) return CHECK_DONE();
    show("helper_c", fc);
    CHECK(fc->fid == ida, "helper_c got id %u, not the free id %u", fc->fid, ida);
    CHECK(bpt__names_count() == count, "a new id was given: %u, was %u", bpt__names_count(), count);
    CHECK(bpt__names_addr(fc->fid) == (uint64_t)(uintptr_t)helper_c, "helper_c's id names another address");
    CHECK(bpt__names_addr(fb->fid) == (uint64_t)(uintptr_t)helper_b, "helper_b's id moved");
    /* A library loaded anew: its functions unregistered, registered again. */
    CHECK_RC(bpt_unregister(fb), 0);
    CHECK_RC(bpt_unregister(fc), 0);
    count = bpt__names_count();
    fb = native_reg((void *)helper_b, "dup", "helper", 0);
    fc = native_reg((void *)helper_c, "dup", "helper", 0);
    if (!fb || !fc) return CHECK_DONE();
    show("helper_b again", fb);
    show("helper_c again", fc);
    CHECK(bpt__names_count() == count, "registered again: new ids given (%u, was %u)", bpt__names_count(), count);
    CHECK(fb->fid != fc->fid, "registered again: one id for two functions");

    /* bpt_register_module: one batch, two functions under one cut name. */
    rc = bpt_register_module(NULL);
    CHECK(rc >= 2, "bpt_register_module(NULL) = %d (%s)", rc, bpt_last_error());
    one = registered_at((void *)NAME(P120, _one));
    two = registered_at((void *)NAME(P120, _two));
    CHECK(one && two, "the two long-named functions were not registered");
    if (!one || !two) return CHECK_DONE();
    show("helper_x..._one", one);
    show("helper_x..._two", two);
    CHECK(strlen(one->name) == 127 && strcmp(one->name, two->name) == 0, "names %s and %s", one->name, two->name);
    CHECK(one->fid != two->fid, "one id for two functions: %u", one->fid);
    CHECK(bpt__names_addr(one->fid) == (uint64_t)(uintptr_t)one->fn, "_one's id names another address");
    CHECK(bpt__names_addr(two->fid) == (uint64_t)(uintptr_t)two->fn, "_two's id names another address");
    return CHECK_DONE();
}
#endif
