/* api_probes.h: USDT probes, the public half's one concern here: static
   probe sites that bpftrace, perf, gdb and SystemTap find in the ELF file
   and attach to from outside, written by the header itself (no sys/sdt.h),
   as OTP's dyntrace and its erlang_dtrace.d probes. */
#include "api_format.h"

/* >>probes
   Every program built with the implementation carries the probes of
   provider `bptrace` (examples/bptrace.d lists each one's arguments, with a
   bpftrace one-liner for each):

     call, return, exception, return_to   a USDT session's events (usdt in
                                          bpt_session_desc: OTP's dyntrace tracer)
     step                                 each of the 13 steps of every change
     pattern__start, pattern__done        bpt_trace_pattern, with its result and ns
     session__create, session__destroy    sessions
     progress__wait__start, __done        thread progress waits (bpt_thread_progress_wait)
     drop                                 a record a session's buffer dropped
     user_trace                           bpt_user_trace: OTP's user_trace-i4s4

   and BPT_PROBE puts the program's own probes beside them.

   A probe site is the SystemTap SDT v3 layout: a NOP in the code, an ELF
   note in .note.stapsdt that names the provider, the probe, the NOP's
   address and the register that holds each argument ("8@%rdi" on x86-64,
   "8@x0" on aarch64), and a 2-byte semaphore in the .probes section (one
   per probe name in each program or shared object) that a tool raises
   while it is attached. The site tests the semaphore first: with nothing
   attached a probe costs one load and an untaken branch, and its
   arguments are not evaluated. Every argument is a 64-bit word (8@):
   integers, or pointers, which a tool reads (bpftrace: str(arg2)).

   Where the notes cannot be written, the probes compile to nothing and
   BPT_PROBES is 0: tcc (no way to emit the notes), an architecture other
   than x86-64 and aarch64, a non-ELF target, or BPT_NO_PROBES defined before
   the header (per file: the implementation's probes follow the file that
   defines BPTRACE_IMPLEMENTATION; a USDT session then gives BPT_ENOTSUP).
*/
#if !defined(BPT_NO_PROBES) && !defined(__TINYC__) && (defined(__GNUC__) || defined(__clang__)) && \
    defined(__ELF__) && (defined(__x86_64__) || defined(__aarch64__))
#  define BPT_PROBES 1
#else
#  define BPT_PROBES 0
#endif

/* BPT_PROBE(provider, name, args...): a probe site of the program's own,
   with 0 to 6 integer or pointer arguments, as DTRACE_PROBEn and sys/sdt.h's
   STAP_PROBEn. provider and name are identifiers (a name's "__" is kept:
   bpftrace spells it usdt:PROG:provider:name). It is a statement. The
   sites of one name in a program (or a shared object) share a semaphore,
   and a site evaluates its arguments only while a tool is attached to its
   name. Arguments are integers, enums or pointers (a C++ nullptr too); in
   C, a double is converted to an integer. Compiled out (BPT_PROBES 0), it
   evaluates nothing.
       BPT_PROBE(game, frame__start, frame_no, entity_count);
   Thread safety  any thread, signal handlers included (a NOP, a load)
   Source         sys/sdt.h (SystemTap), DTRACE_PROBEn (DTrace) */
#define BPT_PROBE(...) \
    BPT__SDT_CAT(BPT__PROBE_, BPT__SDT_NARGS(__VA_ARGS__, 6, 5, 4, 3, 2, 1, 0, ~))(__VA_ARGS__)

/* bpt_user_trace: fire the bptrace:user_trace probe with four integers and
   four strings (NULL allowed), for a tool attached to it, as OTP's
   dyntrace:p/1..8 fires erlang:user_trace-i4s4: arg0..arg3 are i1..i4,
   arg4..arg7 s1..s4 (bpftrace 0.17 reads up to arg5 on x86-64; gdb, perf
   and SystemTap all eight). With nothing attached (or probes compiled out)
   it returns at once.
   Parameters     i1..i4 any integers; s1..s4 NUL-terminated strings or NULL
   Returns        nothing
   Errors         none
   Thread safety  any thread, signal handlers included
   Source         OTP's dyntrace:p/1..8 and the user_trace-i4s4 probe (dyntrace.c) */
BPT_API void bpt_user_trace(int64_t i1, int64_t i2, int64_t i3, int64_t i4,
                            const char *s1, const char *s2, const char *s3, const char *s4);

/* ---- How a site is written (the macros above use these) ---- */
#define BPT__SDT_CAT(a, b) BPT__SDT_CAT2(a, b)
#define BPT__SDT_CAT2(a, b) a##b
#define BPT__SDT_NARGS(p, n, a1, a2, a3, a4, a5, a6, N, ...) N

#if BPT_PROBES
/* The semaphore of provider:name: one 2-byte word in .probes per module
   (the program, or a shared object), shared by every site of the name
   there. It lives in assembly only: the first site in each object file
   defines it (weak and hidden, so the linker keeps one), each site reads
   it with one PC-relative load of its own, and the note names it by
   symbol. No C object: g++ groups the section-attributed variables of
   inline functions and templates into one comdat group (or ignores the
   attribute), refuses "i"(&variable) for them in position-independent
   code, and ignores a block-scope asm label inside a template. */
#  define BPT__SDT_SEM_SYM(p, n) "bpt__sdt_sem." #p "." #n
#  define BPT__SDT_SEM_DEF(p, n) \
    ".ifndef " BPT__SDT_SEM_SYM(p, n) "\n" \
    ".pushsection .probes,\"aw\"\n" \
    ".weak " BPT__SDT_SEM_SYM(p, n) "\n" \
    ".hidden " BPT__SDT_SEM_SYM(p, n) "\n" \
    ".balign 2\n" \
    BPT__SDT_SEM_SYM(p, n) ": .zero 2\n" \
    ".type " BPT__SDT_SEM_SYM(p, n) ", %%object\n" \
    ".size " BPT__SDT_SEM_SYM(p, n) ", 2\n" \
    ".popsection\n" \
    ".endif\n"
/* BPT__SDT_SEM_LOAD(provider, name, v): v (an unsigned long) := the
   semaphore; volatile, so every test reads it anew. */
#  if defined(__x86_64__)
#    define BPT__SDT_SEM_LOAD(p, n, v) \
    __asm__ __volatile__(BPT__SDT_SEM_DEF(p, n) "movzwl " BPT__SDT_SEM_SYM(p, n) "(%%rip), %k0" : "=r"(v))
#  else
#    define BPT__SDT_SEM_LOAD(p, n, v) \
    __asm__ __volatile__(BPT__SDT_SEM_DEF(p, n) "adrp %0, " BPT__SDT_SEM_SYM(p, n) "\n" \
                         "ldrh %w0, [%0, #:lo12:" BPT__SDT_SEM_SYM(p, n) "]" : "=r"(v))
#  endif
/* An argument: always a 64-bit register, as the untaken branch pays
   nothing for it. sys/sdt.h lets the compiler pick ("nor"), which gives
   memory operands such as "8@sym(%rip)" or "8@200(%rsp)" and constants,
   and not every reader parses every such form on every architecture.
   C++ converts without an old-style cast (-Wold-style-cast). */
#  if defined(__cplusplus)
extern "C++" {
template <typename T> static inline uint64_t bpt__sdt_word(T *p) { return reinterpret_cast<uintptr_t>(p); }
template <typename T> static inline uint64_t bpt__sdt_word(T v) { return static_cast<uint64_t>(v); }
static inline uint64_t bpt__sdt_word(decltype(nullptr)) { return 0; }
}
#    define BPT__SDT_ARG(x) "r"(bpt__sdt_word(x))
#  else
#    define BPT__SDT_ARG(x) "r"((uint64_t)(x))
#  endif
/* One site: the NOP (label 990), then the note (type 3, owner "stapsdt":
   the site's address, the .stapsdt.base address tools use to detect
   prelinking, the semaphore, provider, name, argument locations), and
   once per file the .stapsdt.base byte. "?" puts the
   note in the site's section group, so a discarded inline copy takes its
   note with it. The "memory" clobber makes what a pointer argument points
   to written before the probe fires (only on the attached path). */
#  define BPT__SDT_ASM(p, n, args) \
    "990: nop\n" \
    ".pushsection .note.stapsdt,\"?\",\"note\"\n" \
    ".balign 4\n" \
    ".4byte 992f-991f, 994f-993f, 3\n" \
    "991: .asciz \"stapsdt\"\n" \
    "992: .balign 4\n" \
    "993: .8byte 990b\n" \
    ".8byte _.stapsdt.base\n" \
    ".8byte " BPT__SDT_SEM_SYM(p, n) "\n" \
    ".asciz \"" #p "\"\n" \
    ".asciz \"" #n "\"\n" \
    ".asciz \"" args "\"\n" \
    "994: .balign 4\n" \
    ".popsection\n" \
    ".ifndef _.stapsdt.base\n" \
    ".pushsection .stapsdt.base,\"aG\",\"progbits\",.stapsdt.base,comdat\n" \
    ".weak _.stapsdt.base\n" \
    ".hidden _.stapsdt.base\n" \
    "_.stapsdt.base: .space 1\n" \
    ".size _.stapsdt.base, 1\n" \
    ".popsection\n" \
    ".endif\n"
/* BPT__SDT_FIREn(provider, name, args): the site, with n arguments. The
   caller tests the semaphore first (BPT__SDT_SEM_LOAD). */
#  define BPT__SDT_FIRE0(p, n) __asm__ __volatile__(BPT__SDT_ASM(p, n, "") ::: "memory")
#  define BPT__SDT_FIRE1(p, n, a1) __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0") :: BPT__SDT_ARG(a1) : "memory")
#  define BPT__SDT_FIRE2(p, n, a1, a2) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1") :: BPT__SDT_ARG(a1), BPT__SDT_ARG(a2) : "memory")
#  define BPT__SDT_FIRE3(p, n, a1, a2, a3) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2") :: BPT__SDT_ARG(a1), BPT__SDT_ARG(a2), \
                         BPT__SDT_ARG(a3) : "memory")
#  define BPT__SDT_FIRE4(p, n, a1, a2, a3, a4) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2 8@%3") :: BPT__SDT_ARG(a1), BPT__SDT_ARG(a2), \
                         BPT__SDT_ARG(a3), BPT__SDT_ARG(a4) : "memory")
#  define BPT__SDT_FIRE5(p, n, a1, a2, a3, a4, a5) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2 8@%3 8@%4") :: BPT__SDT_ARG(a1), \
                         BPT__SDT_ARG(a2), BPT__SDT_ARG(a3), BPT__SDT_ARG(a4), BPT__SDT_ARG(a5) : "memory")
#  define BPT__SDT_FIRE6(p, n, a1, a2, a3, a4, a5, a6) \
    __asm__ __volatile__(BPT__SDT_ASM(p, n, "8@%0 8@%1 8@%2 8@%3 8@%4 8@%5") :: BPT__SDT_ARG(a1), \
                         BPT__SDT_ARG(a2), BPT__SDT_ARG(a3), BPT__SDT_ARG(a4), BPT__SDT_ARG(a5), \
                         BPT__SDT_ARG(a6) : "memory")
/* A site: its name's semaphore, tested before anything is evaluated. */
#  define BPT__PROBE_SITE(p, n, fire) \
    do { \
        unsigned long bpt__sdt_on; \
        BPT__SDT_SEM_LOAD(p, n, bpt__sdt_on); \
        if (__builtin_expect(bpt__sdt_on != 0, 0)) fire; \
    } while (0)
#  define BPT__PROBE_0(p, n) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE0(p, n))
#  define BPT__PROBE_1(p, n, a1) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE1(p, n, a1))
#  define BPT__PROBE_2(p, n, a1, a2) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE2(p, n, a1, a2))
#  define BPT__PROBE_3(p, n, a1, a2, a3) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE3(p, n, a1, a2, a3))
#  define BPT__PROBE_4(p, n, a1, a2, a3, a4) BPT__PROBE_SITE(p, n, BPT__SDT_FIRE4(p, n, a1, a2, a3, a4))
#  define BPT__PROBE_5(p, n, a1, a2, a3, a4, a5) \
    BPT__PROBE_SITE(p, n, BPT__SDT_FIRE5(p, n, a1, a2, a3, a4, a5))
#  define BPT__PROBE_6(p, n, a1, a2, a3, a4, a5, a6) \
    BPT__PROBE_SITE(p, n, BPT__SDT_FIRE6(p, n, a1, a2, a3, a4, a5, a6))
#else
/* Compiled out: nothing is evaluated, but every argument is still named,
   so a variable kept only for a probe draws no "unused" warning. */
#  define BPT__PROBE_0(p, n) do { } while (0)
#  define BPT__PROBE_1(p, n, a1) do { if (0) { (void)(a1); } } while (0)
#  define BPT__PROBE_2(p, n, a1, a2) do { if (0) { (void)(a1); (void)(a2); } } while (0)
#  define BPT__PROBE_3(p, n, a1, a2, a3) do { if (0) { (void)(a1); (void)(a2); (void)(a3); } } while (0)
#  define BPT__PROBE_4(p, n, a1, a2, a3, a4) \
    do { if (0) { (void)(a1); (void)(a2); (void)(a3); (void)(a4); } } while (0)
#  define BPT__PROBE_5(p, n, a1, a2, a3, a4, a5) \
    do { if (0) { (void)(a1); (void)(a2); (void)(a3); (void)(a4); (void)(a5); } } while (0)
#  define BPT__PROBE_6(p, n, a1, a2, a3, a4, a5, a6) \
    do { if (0) { (void)(a1); (void)(a2); (void)(a3); (void)(a4); (void)(a5); (void)(a6); } } while (0)
#endif
