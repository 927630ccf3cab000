/* tinyvm.c - live call tracing inside a threaded-code bytecode interpreter.

   WHAT IT DEMONSTRATES
       How an interpreter embeds bptrace's VM sites, the way BEAM does with
       op_i_generic_breakpoint:
       - every function's first instruction word is registered with
         bpt_register_vm(); bptrace switches that one word between the
         original instruction and the interpreter's BREAKPOINT instruction;
       - the dispatch loop loads every instruction word with BPT_VM_FETCH,
         because bptrace stores to those words while the VM threads run;
       - the BREAKPOINT instruction calls bpt_vm_breakpoint(), which counts,
         traces and hands back the original word, which the VM then runs;
       - a call whose return is traced (--return) keeps the token that
         bpt_vm_breakpoint() hands out in its call frame: RET gives it to
         bpt_vm_return() with the result, and a THROW that unwinds the
         frame gives it to bpt_vm_unwind() with the thrown value, as BEAM's
         return_trace and exception_trace frames;
       - several VM threads share one code array, and trace patterns are
         switched on and off while all of them keep running: the output
         shows each thread's instruction count in every phase.

   BUILD (from the repository root; bptrace.h is the amalgamated header)
       gcc   -std=c99 -Wall -Wextra -O2 -pthread examples/tinyvm.c -o tinyvm
       clang -std=c99 -Wall -Wextra -O2 -pthread examples/tinyvm.c -o tinyvm
       tcc   -Wall -pthread examples/tinyvm.c -o tinyvm
       Add -DTINYVM_SWITCH to use the portable switch dispatch instead of
       computed goto (what a compiler without GNU C extensions would get).

   RUN
       ./tinyvm examples/fib.tvm
           Without --trace or --count it call-traces fib:fib/1 and counts the
           calls of every function of the module (it prints the patterns).
       ./tinyvm examples/fib.tvm --threads 8 --trace 'fib:loop/3' --max-lines 5
       ./tinyvm examples/fib.tvm --count '_:_/_' --after-ms 100 --for-ms 300 --run-ms 600

   OPTIONS
       --threads N     VM threads, each with its own stacks, sharing one code array (4)
       --trace PAT     call-trace functions matching PAT, "module:name/arity" (repeatable)
       --count PAT     call_count functions matching PAT (repeatable)
       --after-ms MS   switch tracing on this long after the start (200)
       --for-ms MS     ... and off again this much later (500)
       --run-ms MS     total run time (1000)
       --max-lines N   trace lines to print; the rest are only counted (20)
       --profile PAT   call_time on functions matching PAT: a tprof-style table of own
                       time per function at the end of the tracing window (repeatable)
       --return        also return_from / exception_from for --trace patterns
                       (BPT_RETURN | BPT_EXCEPTION), and the caller in call lines

   WHAT TO LOOK FOR
       Each bpt_trace_pattern call prints how long it took. It waits for
       thread progress up to five times, and a wait ends when every VM
       thread that was inside a breakpoint at its start has left it. On a
       machine with fewer free CPUs than VM threads, a thread preempted
       inside a breakpoint holds the wait until the scheduler runs it again:
       milliseconds instead of microseconds. The VM threads never wait for
       bptrace, as the per-thread instruction counts of each phase show.

   Exit status: 0 when every VM computed correct results and every patched
   instruction word was restored; 1 otherwise; 2 for bad usage or a bad program.

   THE PROGRAM FORMAT (see examples/fib.tvm)
       func NAME ARITY ... end, LABEL:, push N, arg I, add, sub, mul, lt,
       jz LABEL, jmp LABEL, call NAME, ret, pop, print; ';' starts a comment.
       try LABEL ... endtry: a throw (which pops the value thrown) inside,
       or in any function called from inside, continues at LABEL in this
       function with the value pushed (see examples/throw.tvm).
       The module name is the file's base name without its extension. */

#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------
   Opcodes. One X-macro list gives each opcode its mnemonic and its number of
   operand words, so the parser, the translator and the interpreter agree.
   HALT and BREAKPOINT have no mnemonic: programs cannot write them. HALT is
   where a call made by the host returns to; BREAKPOINT is the word bptrace
   writes over a function's first instruction. */
#define TVM_OPS(X) \
    X(HALT,       NULL,    0) \
    X(BREAKPOINT, NULL,    0) \
    X(PUSH,       "push",  1) \
    X(ARG,        "arg",   1) \
    X(ADD,        "add",   0) \
    X(SUB,        "sub",   0) \
    X(MUL,        "mul",   0) \
    X(LT,         "lt",    0) \
    X(JZ,         "jz",    1) \
    X(JMP,        "jmp",   1) \
    X(CALL,       "call",  1) \
    X(RET,        "ret",   0) \
    X(POP,        "pop",   0) \
    X(PRINT,      "print", 0) \
    X(TRY,        "try",   1) \
    X(ENDTRY,     "endtry",0) \
    X(THROW,      "throw", 0)

enum tvm_op {
#define TVM_OP_ENUM(op, mnemonic, noperands) TVM_OP_##op,
    TVM_OPS(TVM_OP_ENUM)
#undef TVM_OP_ENUM
    TVM_OP_COUNT
};

static const char *const tvm_mnemonic[TVM_OP_COUNT] = {
#define TVM_OP_MNEMONIC(op, mnemonic, noperands) mnemonic,
    TVM_OPS(TVM_OP_MNEMONIC)
#undef TVM_OP_MNEMONIC
};

static const int tvm_noperands[TVM_OP_COUNT] = {
#define TVM_OP_NOPERANDS(op, mnemonic, noperands) noperands,
    TVM_OPS(TVM_OP_NOPERANDS)
#undef TVM_OP_NOPERANDS
};

/* Threaded code needs GNU C's labels as values (gcc, clang and tcc have
   them). Elsewhere an instruction word holds the opcode number and a switch
   dispatches; bptrace does not care which, it only swaps words. */
#if (defined(__GNUC__) || defined(__TINYC__)) && !defined(TINYVM_SWITCH)
#  define TVM_THREADED 1
#else
#  define TVM_THREADED 0
#endif

enum {
    TVM_NAME_MAX = 64, TVM_LINE_MAX = 512, TVM_ERROR_MAX = 256,
    TVM_STACK = 1 << 16,            /* values per VM */
    TVM_DEPTH = 1 << 14,            /* call frames per VM */
    /* A call made by the host (a run of main) must return within this many
       instructions; it bounds how long a VM thread takes to see its stop
       flag, and turns an endless loop into an error instead of a hang. */
    TVM_MAX_INSNS = 100000000
};

/* ---------------------------------------------------------------------------
   The loaded program. */

/* One parsed instruction, before translation to threaded code. */
struct tvm_insn {
    int op;
    int line;                  /* for error messages */
    int64_t imm;               /* push: the value; arg: the index */
    char sym[TVM_NAME_MAX];    /* jz, jmp: a label; call: a function name */
};

struct tvm_label {
    char name[TVM_NAME_MAX];
    size_t fn;                 /* labels are local to their function */
    size_t insn;               /* the instruction it names */
    int line;
};

struct tvm_fn {
    char name[TVM_NAME_MAX];
    int arity;
    int line;
    size_t first, count;       /* its instructions in program.insns */
    size_t entry;              /* offset of its first instruction word in code[] */
    bpt_vm_word orig;          /* that word as translated: what bptrace must restore */
    bpt_func *rec;             /* bptrace's record for this function */
};

struct tvm_program {
    char module[TVM_NAME_MAX];
    struct tvm_fn *fns;        size_t nfns, fns_cap;
    struct tvm_insn *insns;    size_t ninsns, insns_cap;
    struct tvm_label *labels;  size_t nlabels, labels_cap;
    /* The threaded code: code[0] is HALT, then every function's words. It is
       shared by all VM threads and written by bptrace while they run. */
    bpt_vm_word *code;         size_t ncode;
    /* Parallel to code[]: the function whose entry word this is, else NULL.
       The BREAKPOINT instruction finds its function record here, as BEAM
       finds the GenericBp in front of a function's first instruction. */
    const struct tvm_fn **fn_at;
    /* The instruction word of each opcode (a label address when threaded). */
    bpt_vm_word op_word[TVM_OP_COUNT];
};

/* Grow an array to hold at least need elements. Returns the (possibly moved)
   array, or NULL with the old one untouched. */
static void *tvm_grow(void *array, size_t *cap, size_t need, size_t elem_size)
{
    size_t n = *cap ? *cap : 16;
    void *p;
    if (need <= *cap)
        return array;
    while (n < need)
        n *= 2;
    p = realloc(array, n * elem_size);
    if (p)
        *cap = n;
    return p;
}

static void tvm_program_free(struct tvm_program *prog)
{
    free(prog->fns);
    free(prog->insns);
    free(prog->labels);
    free(prog->code);
    free(prog->fn_at);
    memset(prog, 0, sizeof *prog);
}

static const struct tvm_fn *tvm_find_fn(const struct tvm_program *prog, const char *name, int arity)
{
    size_t i;
    for (i = 0; i < prog->nfns; i++)
        if (strcmp(prog->fns[i].name, name) == 0 && (arity < 0 || prog->fns[i].arity == arity))
            return &prog->fns[i];
    return NULL;
}

/* ---------------------------------------------------------------------------
   The parser: a line-based assembler. Every error names the file and line. */

struct tvm_parser {
    const char *path;
    int line;
    char *err;
    size_t errsize;
};

static int tvm_fail(struct tvm_parser *ps, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->line > 0)
        snprintf(ps->err, ps->errsize, "%s:%d: %s", ps->path, ps->line, msg);
    else
        snprintf(ps->err, ps->errsize, "%s: %s", ps->path, msg);
    return -1;
}

static int tvm_is_name(const char *s)
{
    size_t i;
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
        return 0;
    for (i = 1; s[i]; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return i < TVM_NAME_MAX;
}

/* Parse a whole decimal integer (optionally signed) in [lo, hi]. */
static int tvm_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    long long v;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Split s in place on blanks; returns the number of tokens, max + 1 if more. */
static int tvm_split(char *s, char **tok, int max)
{
    int n = 0;
    for (;;) {
        while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
            s++;
        if (!*s)
            return n;
        if (n == max)
            return max + 1;
        tok[n++] = s;
        while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n')
            s++;
        if (*s)
            *s++ = '\0';
    }
}

/* The module name: the file's base name without its extension. */
static int tvm_module_name(struct tvm_parser *ps, const char *path, char *out)
{
    const char *base = strrchr(path, '/');
    const char *dot;
    size_t len;
    base = base ? base + 1 : path;
    dot = strrchr(base, '.');
    len = (dot && dot != base) ? (size_t)(dot - base) : strlen(base);
    if (len == 0 || len >= TVM_NAME_MAX)
        return tvm_fail(ps, "cannot make a module name (1 to 63 characters) from the file name");
    memcpy(out, base, len);
    out[len] = '\0';
    return 0;
}

/* Handle one line's tokens. cur is the index of the open function, or -1. */
static int tvm_parse_line(struct tvm_parser *ps, struct tvm_program *prog, char **tok, int ntok, long *cur)
{
    struct tvm_insn *in;
    size_t len = strlen(tok[0]);
    long long v;
    int op;
    void *p;

    if (strcmp(tok[0], "func") == 0) {
        struct tvm_fn *fn;
        if (*cur >= 0)
            return tvm_fail(ps, "'func' inside function '%s' (missing 'end'?)", prog->fns[*cur].name);
        if (ntok != 3)
            return tvm_fail(ps, "expected 'func NAME ARITY'");
        if (!tvm_is_name(tok[1]))
            return tvm_fail(ps, "bad function name '%s' (letters, digits, _; at most 63)", tok[1]);
        if (tvm_parse_int(tok[2], 0, 255, &v) != 0)
            return tvm_fail(ps, "bad arity '%s' (0 to 255)", tok[2]);
        if (tvm_find_fn(prog, tok[1], -1))
            return tvm_fail(ps, "function '%s' defined twice", tok[1]);
        if (!(p = tvm_grow(prog->fns, &prog->fns_cap, prog->nfns + 1, sizeof *prog->fns)))
            return tvm_fail(ps, "out of memory");
        prog->fns = p;
        fn = &prog->fns[prog->nfns];
        memset(fn, 0, sizeof *fn);
        strcpy(fn->name, tok[1]);
        fn->arity = (int)v;
        fn->line = ps->line;
        fn->first = prog->ninsns;
        *cur = (long)prog->nfns++;
        return 0;
    }
    if (strcmp(tok[0], "end") == 0) {
        struct tvm_fn *fn;
        int last;
        if (*cur < 0)
            return tvm_fail(ps, "'end' outside a function");
        if (ntok != 1)
            return tvm_fail(ps, "'end' takes no operand");
        fn = &prog->fns[*cur];
        fn->count = prog->ninsns - fn->first;
        if (fn->count == 0)
            return tvm_fail(ps, "function '%s' is empty", fn->name);
        /* Falling off the end would run into the next function's code. */
        last = prog->insns[prog->ninsns - 1].op;
        if (last != TVM_OP_RET && last != TVM_OP_JMP && last != TVM_OP_THROW)
            return tvm_fail(ps, "function '%s' must end with 'ret', 'jmp' or 'throw'", fn->name);
        *cur = -1;
        return 0;
    }
    if (len > 1 && tok[0][len - 1] == ':') {
        struct tvm_label *lb;
        size_t i;
        tok[0][len - 1] = '\0';
        if (*cur < 0)
            return tvm_fail(ps, "label '%s' outside a function", tok[0]);
        if (ntok != 1)
            return tvm_fail(ps, "put label '%s' on a line of its own", tok[0]);
        if (!tvm_is_name(tok[0]))
            return tvm_fail(ps, "bad label name '%s'", tok[0]);
        /* The first instruction's word is the one bptrace patches: a jump
           there would fetch it again and count as a new call (found by
           review). BEAM's func_info likewise stands before the code. */
        if (prog->ninsns == prog->fns[*cur].first)
            return tvm_fail(ps, "label '%s' on function '%s''s first instruction, whose word is its entry "
                            "(bptrace's breakpoint): a jump there would be a new call; begin with another "
                            "instruction", tok[0], prog->fns[*cur].name);
        for (i = 0; i < prog->nlabels; i++)
            if (prog->labels[i].fn == (size_t)*cur && strcmp(prog->labels[i].name, tok[0]) == 0)
                return tvm_fail(ps, "label '%s' defined twice in this function", tok[0]);
        if (!(p = tvm_grow(prog->labels, &prog->labels_cap, prog->nlabels + 1, sizeof *prog->labels)))
            return tvm_fail(ps, "out of memory");
        prog->labels = p;
        lb = &prog->labels[prog->nlabels++];
        strcpy(lb->name, tok[0]);
        lb->fn = (size_t)*cur;
        lb->insn = prog->ninsns;
        lb->line = ps->line;
        return 0;
    }

    /* An instruction. */
    for (op = 0; op < TVM_OP_COUNT; op++)
        if (tvm_mnemonic[op] && strcmp(tvm_mnemonic[op], tok[0]) == 0)
            break;
    if (op == TVM_OP_COUNT)
        return tvm_fail(ps, "unknown instruction '%s'", tok[0]);
    if (*cur < 0)
        return tvm_fail(ps, "instruction '%s' outside a function", tok[0]);
    if (ntok != 1 + tvm_noperands[op])
        return tvm_fail(ps, "'%s' takes %s operand", tok[0], tvm_noperands[op] ? "one" : "no");
    if (!(p = tvm_grow(prog->insns, &prog->insns_cap, prog->ninsns + 1, sizeof *prog->insns)))
        return tvm_fail(ps, "out of memory");
    prog->insns = p;
    in = &prog->insns[prog->ninsns];
    memset(in, 0, sizeof *in);
    in->op = op;
    in->line = ps->line;
    switch (op) {
    case TVM_OP_PUSH:
        /* A value lives in one code word, so it must fit one. */
        if (tvm_parse_int(tok[1], INTPTR_MIN, INTPTR_MAX, &v) != 0)
            return tvm_fail(ps, "bad number '%s'", tok[1]);
        in->imm = v;
        break;
    case TVM_OP_ARG:
        if (tvm_parse_int(tok[1], 0, prog->fns[*cur].arity - 1, &v) != 0)
            return tvm_fail(ps, "bad argument index '%s': function '%s' has no such argument",
                            tok[1], prog->fns[*cur].name);
        in->imm = v;
        break;
    case TVM_OP_JZ: case TVM_OP_JMP: case TVM_OP_TRY: case TVM_OP_CALL:
        if (!tvm_is_name(tok[1]))
            return tvm_fail(ps, "bad name '%s'", tok[1]);
        strcpy(in->sym, tok[1]);
        break;
    default:
        break;
    }
    prog->ninsns++;
    return 0;
}

/* Read one line into buf, without its newline. Returns 1, 0 at the end of
   the file, or -1 with *why set for a line that is too long or holds a NUL
   byte (a binary file, most likely). */
static int tvm_read_line(FILE *f, char *buf, size_t size, const char **why)
{
    size_t n = 0;
    int c;
    while ((c = getc(f)) != EOF && c != '\n') {
        if (c == '\0') {
            *why = "NUL byte in line (not a text file?)";
            return -1;
        }
        if (n + 1 == size) {
            *why = "line too long (at most 511 characters)";
            return -1;
        }
        buf[n++] = (char)c;
    }
    buf[n] = '\0';
    return c == EOF && n == 0 ? 0 : 1;
}

/* Read and check a program. Labels and calls are resolved here too, so a
   program that loads can only fail at run time by overflowing a stack. */
static int tvm_load(const char *path, struct tvm_program *prog, char *err, size_t errsize)
{
    struct tvm_parser ps;
    char buf[TVM_LINE_MAX];
    char *tok[4];
    long cur = -1;
    size_t i, j;
    int rc = -1;
    FILE *f;

    memset(prog, 0, sizeof *prog);
    ps.path = path;
    ps.line = 0;
    ps.err = err;
    ps.errsize = errsize;
    if (tvm_module_name(&ps, path, prog->module) != 0)
        return -1;
    if (!(f = fopen(path, "r"))) {
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
        return -1;
    }
    for (;;) {
        const char *why = NULL;
        char *comment;
        int ntok, got;
        ps.line++;
        if ((got = tvm_read_line(f, buf, sizeof buf, &why)) == 0)
            break;
        if (got < 0) {
            tvm_fail(&ps, "%s", why);
            goto out;
        }
        if ((comment = strchr(buf, ';')) != NULL)
            *comment = '\0';
        ntok = tvm_split(buf, tok, 3);
        if (ntok == 0)
            continue;
        if (ntok > 3) {
            tvm_fail(&ps, "too many operands");
            goto out;
        }
        if (tvm_parse_line(&ps, prog, tok, ntok, &cur) != 0)
            goto out;
    }
    if (ferror(f)) {
        snprintf(err, errsize, "%s: read error", path);
        goto out;
    }
    ps.line = 0;
    if (cur >= 0) {
        tvm_fail(&ps, "function '%s' (line %d) has no 'end'", prog->fns[cur].name, prog->fns[cur].line);
        goto out;
    }
    if (prog->nfns == 0) {
        tvm_fail(&ps, "no functions");
        goto out;
    }
    for (i = 0; i < prog->nlabels; i++) {
        const struct tvm_fn *fn = &prog->fns[prog->labels[i].fn];
        if (prog->labels[i].insn == fn->first + fn->count) {
            ps.line = prog->labels[i].line;
            tvm_fail(&ps, "label '%s' is not followed by an instruction", prog->labels[i].name);
            goto out;
        }
    }
    for (i = 0; i < prog->nfns; i++) {
        const struct tvm_fn *fn = &prog->fns[i];
        for (j = fn->first; j < fn->first + fn->count; j++) {
            const struct tvm_insn *in = &prog->insns[j];
            size_t k;
            ps.line = in->line;
            if (in->op == TVM_OP_CALL && !tvm_find_fn(prog, in->sym, -1)) {
                tvm_fail(&ps, "call to undefined function '%s'", in->sym);
                goto out;
            }
            if (in->op != TVM_OP_JZ && in->op != TVM_OP_JMP && in->op != TVM_OP_TRY)
                continue;
            for (k = 0; k < prog->nlabels; k++)
                if (prog->labels[k].fn == i && strcmp(prog->labels[k].name, in->sym) == 0)
                    break;
            if (k == prog->nlabels) {
                tvm_fail(&ps, "no label '%s' in function '%s'", in->sym, fn->name);
                goto out;
            }
        }
    }
    rc = 0;
out:
    fclose(f);
    if (rc != 0)
        tvm_program_free(prog);
    return rc;
}

/* Turn the parsed instructions into threaded code: each instruction becomes
   its opcode's word followed by its operand words. Needs prog->op_word. */
static int tvm_translate(struct tvm_program *prog)
{
    size_t *offset, i, j, k, n = 1;

    /* Pass 1: every instruction's word offset, so jumps can be resolved. */
    if (!(offset = malloc((prog->ninsns + 1) * sizeof *offset)))
        return -1;
    for (i = 0; i < prog->ninsns; i++) {
        offset[i] = n;
        n += 1 + (size_t)tvm_noperands[prog->insns[i].op];
    }
    prog->ncode = n;
    prog->code = calloc(n, sizeof *prog->code);
    prog->fn_at = calloc(n, sizeof *prog->fn_at);
    if (!prog->code || !prog->fn_at) {
        free(offset);
        return -1;
    }

    /* Pass 2: the words. */
    prog->code[0] = prog->op_word[TVM_OP_HALT];
    for (i = 0; i < prog->nfns; i++) {
        struct tvm_fn *fn = &prog->fns[i];
        fn->entry = offset[fn->first];
        prog->fn_at[fn->entry] = fn;
        for (j = fn->first; j < fn->first + fn->count; j++) {
            const struct tvm_insn *in = &prog->insns[j];
            bpt_vm_word *w = &prog->code[offset[j]];
            w[0] = prog->op_word[in->op];
            switch (in->op) {
            case TVM_OP_PUSH:
            case TVM_OP_ARG:
                w[1] = (bpt_vm_word)(intptr_t)in->imm;
                break;
            case TVM_OP_JZ:
            case TVM_OP_JMP:
            case TVM_OP_TRY:
                for (k = 0; k < prog->nlabels; k++)
                    if (prog->labels[k].fn == i && strcmp(prog->labels[k].name, in->sym) == 0)
                        break;
                w[1] = (bpt_vm_word)offset[prog->labels[k].insn];
                break;
            case TVM_OP_CALL:
                w[1] = (bpt_vm_word)(tvm_find_fn(prog, in->sym, -1) - prog->fns);
                break;
            default:
                break;
            }
        }
        fn->orig = prog->code[fn->entry];
    }
    free(offset);
    return 0;
}

/* ---------------------------------------------------------------------------
   The interpreter. */

/* A call stack entry. */
struct tvm_frame {
    bpt_vm_word *ret;          /* where RET continues */
    int64_t *fp;               /* the caller's argument base */
    const struct tvm_fn *fn;   /* the caller, for error messages */
    bpt_vm_token token;        /* nonzero: bptrace traces this call's return */
};

/* An active try: where a throw continues. */
struct tvm_catch {
    struct tvm_frame *frame;   /* the call stack as it was at the try */
    int64_t *sp, *fp;
    const struct tvm_fn *fn;
    bpt_vm_word *target;
};

/* What the BREAKPOINT instruction hands bptrace as the "frame": enough for
   tvm_arg() to read the arguments of the call being made, and tvm_caller()
   its caller. */
struct tvm_args {
    const int64_t *base;
    int arity;
    const struct tvm_fn *caller;   /* NULL: called by the host */
};

/* One VM instance: its own stacks and counters. Only its thread touches it. */
struct tvm {
    const struct tvm_program *prog;
    int64_t *stack;            /* TVM_STACK values */
    struct tvm_frame *frames;  /* TVM_DEPTH frames */
    struct tvm_catch *catches; /* TVM_DEPTH active tries */
    uint64_t insns, calls;     /* totals, added to when tvm_exec returns */
    int echo;                  /* 'print' writes to stdout */
    char error[TVM_ERROR_MAX];
};

static void tvm_free(struct tvm *vm)
{
    free(vm->stack);
    free(vm->frames);
    free(vm->catches);
    vm->stack = NULL;
    vm->frames = NULL;
    vm->catches = NULL;
}

static int tvm_init(struct tvm *vm, const struct tvm_program *prog)
{
    memset(vm, 0, sizeof *vm);
    vm->prog = prog;
    vm->stack = malloc(TVM_STACK * sizeof *vm->stack);
    vm->frames = malloc(TVM_DEPTH * sizeof *vm->frames);
    vm->catches = malloc(TVM_DEPTH * sizeof *vm->catches);
    if (!vm->stack || !vm->frames || !vm->catches) {
        tvm_free(vm);
        return -1;
    }
    return 0;
}

/* bpt_vm_ops.arg: bptrace asks for argument `index` of the call that hit
   the breakpoint; the VM's frame layout is known only here. */
static uint64_t tvm_arg(const void *frame, int index)
{
    const struct tvm_args *a = frame;
    return index < a->arity ? (uint64_t)a->base[index] : 0;
}

/* bpt_vm_ops.format: tinyvm values are signed 64-bit integers. */
static int tvm_format(char *buf, size_t size, uint64_t value)
{
    return snprintf(buf, size, "%" PRId64, (int64_t)value);
}

/* bpt_vm_ops.caller: the function the call returns to (BPT_CALLER, return_to). */
static bpt_func *tvm_caller(const void *frame)
{
    const struct tvm_args *a = frame;
    return a->caller ? a->caller->rec : NULL;
}

static const bpt_vm_ops tvm_ops = { .arg = tvm_arg, .format = tvm_format, .caller = tvm_caller };

/* Run fn(args) on vm and store its return value in *result; returns 0, or
   -1 with vm->error set.
   Called with vm == NULL, it only fills words_out[] with each opcode's
   instruction word and returns: label addresses exist only inside this
   function, so this is how the translator learns them. */
static int tvm_exec(struct tvm *vm, const struct tvm_fn *fn, const int64_t *args, int64_t *result,
                    bpt_vm_word *words_out)
{
    const struct tvm_program *prog;
    bpt_vm_word *code, *ip;
    int64_t *sp, *fp, *stack_end;
    struct tvm_frame *frame, *frames_end;
    struct tvm_catch *catch_top;
    const struct tvm_fn *cur;
    uint64_t insns = 0, calls = 0;
    int i, rc = -1;
#if !TVM_THREADED
    bpt_vm_word word;
#endif

    if (!vm) {
        int op;
        for (op = 0; op < TVM_OP_COUNT; op++)
            words_out[op] = (bpt_vm_word)op;
#if TVM_THREADED
#  define TVM_OP_LABEL(op, mnemonic, noperands) words_out[TVM_OP_##op] = (bpt_vm_word)&&op_##op;
        TVM_OPS(TVM_OP_LABEL)
#  undef TVM_OP_LABEL
#endif
        return 0;
    }

    /* Dispatch. TVM_NEXT fetches the instruction word at ip and runs it.
       The fetch is BPT_VM_FETCH (one relaxed atomic load) because bptrace
       may be storing to this very word right now from another thread; the
       load sees either the old or the new word, never a mix. */
#if TVM_THREADED
#  define TVM_CASE(op) op_##op:
#  define TVM_EXEC(w)  goto *(void *)(w)
#else
#  define TVM_CASE(op) case TVM_OP_##op:
#  define TVM_EXEC(w)  do { word = (w); goto dispatch; } while (0)
#endif
#define TVM_NEXT()        do { insns++; TVM_EXEC(BPT_VM_FETCH(ip)); } while (0)
#define TVM_FAIL(...)     do { snprintf(vm->error, sizeof vm->error, __VA_ARGS__); goto fail; } while (0)
#define TVM_NEED(n)       do { if (sp - fp < (n)) TVM_FAIL("%s:%s/%d: value stack underflow", \
                               prog->module, cur->name, cur->arity); } while (0)
#define TVM_ROOM()        do { if (sp == stack_end) TVM_FAIL("%s:%s/%d: value stack overflow", \
                               prog->module, cur->name, cur->arity); } while (0)
#define TVM_BUDGET()      do { if (insns > TVM_MAX_INSNS) TVM_FAIL("%s:%s/%d: still running after %d " \
                               "instructions (endless loop?)", prog->module, fn->name, fn->arity, \
                               TVM_MAX_INSNS); } while (0)

    prog = vm->prog;
    code = prog->code;
    stack_end = vm->stack + TVM_STACK;
    frames_end = vm->frames + TVM_DEPTH;
    vm->error[0] = '\0';
    if (fn->arity >= TVM_STACK) {
        snprintf(vm->error, sizeof vm->error, "too many arguments");
        return -1;
    }

    /* The host's call: push the arguments and a frame that returns to
       code[0], the HALT instruction, which leaves the loop. */
    sp = fp = vm->stack;
    for (i = 0; i < fn->arity; i++)
        *sp++ = args[i];
    frame = vm->frames;
    frame->ret = &code[0];
    frame->fp = fp;
    frame->fn = fn;
    frame->token = 0;
    frame++;
    catch_top = vm->catches;
    cur = fn;
    calls++;
    ip = &code[fn->entry];
    TVM_NEXT();

#if !TVM_THREADED
dispatch:
    switch (word) {
#endif
    TVM_CASE(HALT) {
        *result = sp[-1];
        rc = 0;
        goto done;
    }
    TVM_CASE(BREAKPOINT) {
        /* bptrace wrote this word over the first instruction of the
           function being entered: ip still points at that entry, and the
           call has already set up the frame, so the arguments are fp[0..]. */
        const struct tvm_fn *f = prog->fn_at[ip - code];
        struct tvm_args a;
        if (!f)
            TVM_FAIL("breakpoint word at code[%ld], which is no function entry", (long)(ip - code));
        a.base = fp;
        a.arity = f->arity;
        a.caller = frame - 1 > vm->frames ? frame[-1].fn : NULL;
        /* Counts, evaluates match specs, sends trace messages, and returns
           the instruction word it displaced. Run that word as if it had
           been fetched: its operands follow at ip + 1 as usual. If a
           session traces the return, the call's frame keeps the token. */
        TVM_EXEC(bpt_vm_breakpoint(f->rec, &a, &frame[-1].token));
    }
    TVM_CASE(PUSH) {
        TVM_ROOM();
        *sp++ = (int64_t)(intptr_t)ip[1];
        ip += 2;
        TVM_NEXT();
    }
    TVM_CASE(ARG) {
        TVM_ROOM();
        *sp = fp[ip[1]];
        sp++;
        ip += 2;
        TVM_NEXT();
    }
    /* Arithmetic wraps (computed unsigned): a program must not be able to
       make the interpreter itself run into undefined behaviour. */
    TVM_CASE(ADD) {
        TVM_NEED(2);
        sp--;
        sp[-1] = (int64_t)((uint64_t)sp[-1] + (uint64_t)sp[0]);
        ip++;
        TVM_NEXT();
    }
    TVM_CASE(SUB) {
        TVM_NEED(2);
        sp--;
        sp[-1] = (int64_t)((uint64_t)sp[-1] - (uint64_t)sp[0]);
        ip++;
        TVM_NEXT();
    }
    TVM_CASE(MUL) {
        TVM_NEED(2);
        sp--;
        sp[-1] = (int64_t)((uint64_t)sp[-1] * (uint64_t)sp[0]);
        ip++;
        TVM_NEXT();
    }
    TVM_CASE(LT) {
        TVM_NEED(2);
        sp--;
        sp[-1] = sp[-1] < sp[0];
        ip++;
        TVM_NEXT();
    }
    /* Every loop passes a jump or a call: that is where the budget is checked. */
    TVM_CASE(JZ) {
        TVM_NEED(1);
        TVM_BUDGET();
        sp--;
        ip = *sp == 0 ? &code[ip[1]] : ip + 2;
        TVM_NEXT();
    }
    TVM_CASE(JMP) {
        TVM_BUDGET();
        ip = &code[ip[1]];
        TVM_NEXT();
    }
    TVM_CASE(CALL) {
        const struct tvm_fn *callee = &prog->fns[ip[1]];
        TVM_NEED(callee->arity);
        TVM_BUDGET();
        if (frame == frames_end)
            TVM_FAIL("%s:%s/%d: call stack overflow (recursion too deep?)",
                     prog->module, callee->name, callee->arity);
        frame->ret = ip + 2;
        frame->fp = fp;
        frame->fn = cur;
        frame->token = 0;
        frame++;
        fp = sp - callee->arity;
        cur = callee;
        calls++;
        /* Entering the callee fetches its first word: the one bptrace patches. */
        ip = &code[callee->entry];
        TVM_NEXT();
    }
    TVM_CASE(RET) {
        int64_t v;
        TVM_NEED(1);
        v = sp[-1];
        sp = fp;           /* drop the arguments and operands ... */
        *sp++ = v;         /* ... and leave the result in their place */
        if (frame[-1].token)
            bpt_vm_return(frame[-1].token, (uint64_t)v);
        while (catch_top > vm->catches && catch_top[-1].frame == frame)
            catch_top--;   /* a try left open by the return ends with it */
        frame--;
        fp = frame->fp;
        cur = frame->fn;
        ip = frame->ret;
        TVM_NEXT();
    }
    TVM_CASE(TRY) {
        if (catch_top == vm->catches + TVM_DEPTH)
            TVM_FAIL("%s:%s/%d: too many nested tries", prog->module, cur->name, cur->arity);
        catch_top->frame = frame;
        catch_top->sp = sp;
        catch_top->fp = fp;
        catch_top->fn = cur;
        catch_top->target = &code[ip[1]];
        catch_top++;
        ip += 2;
        TVM_NEXT();
    }
    TVM_CASE(ENDTRY) {
        if (catch_top == vm->catches || catch_top[-1].frame != frame)
            TVM_FAIL("%s:%s/%d: endtry without try", prog->module, cur->name, cur->arity);
        catch_top--;
        ip++;
        TVM_NEXT();
    }
    TVM_CASE(THROW) {
        int64_t v;
        TVM_NEED(1);
        v = sp[-1];
        if (catch_top == vm->catches)
            TVM_FAIL("%s:%s/%d: uncaught throw of %" PRId64, prog->module, cur->name, cur->arity, v);
        catch_top--;
        /* Unwind every call made since the try, newest first: each traced
           one hears of the throw passing, as BEAM's exception_trace. */
        while (frame > catch_top->frame) {
            frame--;
            if (frame->token)
                bpt_vm_unwind(frame->token, (uint64_t)v);
        }
        sp = catch_top->sp;
        fp = catch_top->fp;
        cur = catch_top->fn;
        *sp++ = v;
        ip = catch_top->target;
        TVM_NEXT();
    }
    TVM_CASE(POP) {
        TVM_NEED(1);
        sp--;
        ip++;
        TVM_NEXT();
    }
    TVM_CASE(PRINT) {
        TVM_NEED(1);
        sp--;
        if (vm->echo)
            printf("%s:%s/%d printed %" PRId64 "\n", prog->module, cur->name, cur->arity, *sp);
        ip++;
        TVM_NEXT();
    }
#if !TVM_THREADED
    default:
        TVM_FAIL("bad instruction word %lu at code[%ld]", (unsigned long)word, (long)(ip - code));
    }
#endif

fail:
    /* The run is abandoned: its traced calls never return. */
    while (frame > vm->frames) {
        frame--;
        if (frame->token)
            bpt_vm_unwind(frame->token, 0);
    }
done:
    vm->insns += insns;
    vm->calls += calls;
    return rc;
#undef TVM_CASE
#undef TVM_EXEC
#undef TVM_NEXT
#undef TVM_FAIL
#undef TVM_NEED
#undef TVM_ROOM
#undef TVM_BUDGET
}

/* ---------------------------------------------------------------------------
   VM threads. */

/* What a VM thread shares with the main thread. The VM itself is private to
   its thread; the counters are published under `lock` after every run of
   main, which is often enough for per-phase numbers and costs nothing per
   instruction. (tcc has no <stdatomic.h>, so a mutex it is.) */
struct vm_thread {
    pthread_t thread;
    int index;
    struct tvm vm;
    const struct tvm_fn *main_fn, *fib_fn;
    int64_t expect;            /* what main returned in the first, untraced run */
    pthread_mutex_t lock;      /* guards the fields below */
    int stop;                  /* set by the main thread */
    uint64_t insns, calls, runs, checks, wrong;
    int failed;
    char error[TVM_ERROR_MAX];
};

struct counts {
    uint64_t insns, calls, runs;
};

static int64_t fib_c(int64_t n)
{
    int64_t a = 0, b = 1, t;
    while (n-- > 0) {
        t = a + b;
        a = b;
        b = t;
    }
    return a;
}

static void *vm_thread_main(void *arg)
{
    struct vm_thread *t = arg;
    uint64_t runs = 0, checks = 0, wrong = 0;
    int64_t result;

    for (;;) {
        int stop, rc;
        pthread_mutex_lock(&t->lock);
        stop = t->stop;
        pthread_mutex_unlock(&t->lock);
        if (stop)
            break;
        rc = tvm_exec(&t->vm, t->main_fn, NULL, &result, NULL);
        runs++;
        checks++;
        if (rc == 0 && result != t->expect)
            wrong++;   /* e.g. a throw no longer caught where it was */
        /* Check the VM against C while the breakpoints come and go: a wrong
           original word handed back by bptrace would show up here. */
        if (rc == 0 && t->fib_fn) {
            int64_t n = (int64_t)(runs % 23);
            rc = tvm_exec(&t->vm, t->fib_fn, &n, &result, NULL);
            checks++;
            if (rc == 0 && result != fib_c(n))
                wrong++;
        }
        pthread_mutex_lock(&t->lock);
        t->insns = t->vm.insns;
        t->calls = t->vm.calls;
        t->runs = runs;
        t->checks = checks;
        t->wrong = wrong;
        if (rc != 0) {
            t->failed = 1;
            memcpy(t->error, t->vm.error, sizeof t->error);
        }
        pthread_mutex_unlock(&t->lock);
        if (rc != 0)
            break;
    }
    return NULL;
}

static void snapshot(struct vm_thread *ts, int n, struct counts *out)
{
    int i;
    for (i = 0; i < n; i++) {
        pthread_mutex_lock(&ts[i].lock);
        out[i].insns = ts[i].insns;
        out[i].calls = ts[i].calls;
        out[i].runs = ts[i].runs;
        pthread_mutex_unlock(&ts[i].lock);
    }
}

/* ---------------------------------------------------------------------------
   The main thread: options, timeline, report. */

enum { MAX_PATTERNS = 8 };

struct options {
    const char *path;
    int threads;
    const char *trace[MAX_PATTERNS];  int ntrace;
    const char *count[MAX_PATTERNS];  int ncount;
    const char *profile[MAX_PATTERNS]; int nprofile;
    long after_ms, for_ms, run_ms, max_lines;
    int return_trace;          /* --return */
};

/* What the drainer has seen of the session's messages. */
struct drain_tally {
    long shown, not_shown;
    uint64_t calls;            /* call messages */
    uint64_t returns;          /* return_from */
    uint64_t exceptions;       /* exception_from */
    uint64_t return_tos;       /* return_to */
    uint64_t others;           /* limit notices, anything else */
    uint64_t drop_reports;     /* "dropped" notices ... */
    uint64_t dropped;          /* ... and the messages they say were lost */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t deadline_ns)
{
    uint64_t now = now_ns();
    struct timespec ts;
    if (now >= deadline_ns)
        return;
    ts.tv_sec = (time_t)((deadline_ns - now) / 1000000000u);
    ts.tv_nsec = (long)((deadline_ns - now) % 1000000000u);
    nanosleep(&ts, NULL);
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s PROGRAM.tvm [--threads N] [--trace PAT]... [--count PAT]...\n"
            "       [--after-ms MS] [--for-ms MS] [--run-ms MS] [--max-lines N] [--return] [--profile PAT]...\n"
            "PAT is module:function/arity, each part a glob ('*') or '_' for any,\n"
            "e.g. 'fib:fib/_'. Without --trace/--count: --trace 'MODULE:fib/_' --count 'MODULE:*/_'.\n",
            argv0);
}

static int parse_options(int argc, char **argv, struct options *o)
{
    int i;
    memset(o, 0, sizeof *o);
    o->threads = 4;
    o->after_ms = 200;
    o->for_ms = 500;
    o->run_ms = 1000;
    o->max_lines = 20;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long v;
        long *num = NULL;
        long long hi = 3600000;
        if (strcmp(a, "--return") == 0) {
            o->return_trace = 1;
            continue;
        }
        if (a[0] != '-') {
            if (o->path) {
                fprintf(stderr, "tinyvm: only one program file, please ('%s')\n", a);
                return -1;
            }
            o->path = a;
            continue;
        }
        if (i + 1 == argc) {
            fprintf(stderr, "tinyvm: %s needs a value\n", a);
            return -1;
        }
        if (strcmp(a, "--trace") == 0 || strcmp(a, "--count") == 0 || strcmp(a, "--profile") == 0) {
            int *n = a[2] == 't' ? &o->ntrace : a[2] == 'c' ? &o->ncount : &o->nprofile;
            const char **list = a[2] == 't' ? o->trace : a[2] == 'c' ? o->count : o->profile;
            if (*n == MAX_PATTERNS) {
                fprintf(stderr, "tinyvm: at most %d %s patterns\n", MAX_PATTERNS, a);
                return -1;
            }
            list[(*n)++] = argv[++i];
            continue;
        }
        if (strcmp(a, "--threads") == 0) {
            if (tvm_parse_int(argv[++i], 1, 64, &v) != 0) {
                fprintf(stderr, "tinyvm: --threads wants 1..64, not '%s'\n", argv[i]);
                return -1;
            }
            o->threads = (int)v;
            continue;
        }
        if (strcmp(a, "--after-ms") == 0) num = &o->after_ms;
        else if (strcmp(a, "--for-ms") == 0) num = &o->for_ms;
        else if (strcmp(a, "--run-ms") == 0) num = &o->run_ms;
        else if (strcmp(a, "--max-lines") == 0) { num = &o->max_lines; hi = 1000000000; }
        if (!num) {
            fprintf(stderr, "tinyvm: unknown option '%s'\n", a);
            return -1;
        }
        if (tvm_parse_int(argv[++i], 0, hi, &v) != 0) {
            fprintf(stderr, "tinyvm: %s wants a number from 0 to %lld, not '%s'\n", a, hi, argv[i]);
            return -1;
        }
        *num = (long)v;
    }
    if (!o->path) {
        fprintf(stderr, "tinyvm: no program file\n");
        return -1;
    }
    if (o->after_ms + o->for_ms > o->run_ms) {
        fprintf(stderr, "tinyvm: --after-ms + --for-ms (%ld) must not exceed --run-ms (%ld)\n",
                o->after_ms + o->for_ms, o->run_ms);
        return -1;
    }
    return 0;
}

/* Move what the session's buffers hold to stdout: the first max_lines
   messages as dbg-style lines, the rest only counted. bptrace never makes a
   traced thread wait for us: if we are slow, its buffer fills and it drops
   messages, and a "dropped" message says how many. While tracing is on the
   VM threads may fill buffers as fast as we empty them, so a pass that
   drained until the buffers were empty might never end, and tracing would
   never be switched off (it happened in CI: 3 VM threads under qemu, 2 CPUs).
   A pass stops at the deadline (now_ns()); 0: only once they are empty,
   for the last pass, after tracing is off. */
static void drain(bpt_session s, long max_lines, struct drain_tally *t, uint64_t deadline)
{
    bpt_msg msgs[64];
    char line[256];
    int n = 0, i;
    while ((deadline == 0 || now_ns() < deadline) && (n = bpt_session_drain(s, msgs, 64)) > 0) {
        for (i = 0; i < n; i++) {
            switch (msgs[i].type) {
            case BPT_MSG_CALL: t->calls++; break;
            case BPT_MSG_RETURN_FROM: t->returns++; break;
            case BPT_MSG_EXCEPTION_FROM: t->exceptions++; break;
            case BPT_MSG_RETURN_TO: t->return_tos++; break;
            case BPT_MSG_DROPPED:
                t->drop_reports++;
                t->dropped += msgs[i].value;
                break;
            default: t->others++; break;
            }
            if (t->shown < max_lines) {
                bpt_format_dbg(&msgs[i], line, sizeof line);
                printf("    %s\n", line);
                t->shown++;
            } else {
                t->not_shown++;
            }
        }
    }
    if (n < 0)
        fprintf(stderr, "tinyvm: bpt_session_drain: %s\n", bpt_last_error());
}

static void print_phase(const char *what, uint64_t ns, const struct counts *from,
                        const struct counts *to, int n)
{
    uint64_t insns = 0, calls = 0;
    int i;
    for (i = 0; i < n; i++) {
        insns += to[i].insns - from[i].insns;
        calls += to[i].calls - from[i].calls;
    }
    printf("phase %-17s %6.0f ms: %9.2fM instructions (%.0fM/s), %8.2fM calls; per thread:",
           what, ns / 1e6, insns / 1e6, ns ? insns / 1e6 / (ns / 1e9) : 0.0, calls / 1e6);
    for (i = 0; i < n; i++)
        printf(" %.2fM", (to[i].insns - from[i].insns) / 1e6);
    printf("\n");
}

/* Rows of a call_time table, one per function. */
struct profile_rows {
    bpt_profile_row rows[256];
    int n;
};

static void add_profile_row(const bpt_func *f, const char *module, const char *name, int arity,
                            const bpt_info *info, void *user)
{
    struct profile_rows *pr = user;
    (void)f;
    if (pr->n == 256)
        return;
    pr->rows[pr->n].module = module;
    pr->rows[pr->n].name = name;
    pr->rows[pr->n].arity = arity;
    pr->rows[pr->n].calls = info->calls;
    pr->rows[pr->n].value = info->time_ns;
    pr->n++;
}

/* Set one pattern, saying what it did and how long it took. */
static int set_pattern(bpt_session s, const char *pat, unsigned flags, const char *flags_text)
{
    uint64_t t0 = now_ns();
    int rc = bpt_trace_pattern(s, pat, flags, NULL);
    uint64_t ns = now_ns() - t0;
    if (rc < 0) {
        fprintf(stderr, "tinyvm: bpt_trace_pattern('%s', %s): %s\n", pat, flags_text, bpt_last_error());
        return rc;
    }
    printf("bpt_trace_pattern(\"%s\", %s): %d function%s matched, %.1f us\n",
           pat, flags_text, rc, rc == 1 ? "" : "s", ns / 1e3);
    return rc;
}

static void print_count(const bpt_func *f, const char *module, const char *name, int arity,
                        const bpt_info *info, void *user)
{
    char mfa[300];
    (void)f;
    (void)user;
    snprintf(mfa, sizeof mfa, "%s:%s/%d", module, name, arity);
    printf("    %-24s %12" PRIu64 " calls%s\n", mfa, info->count, info->count_paused ? " (paused)" : "");
}

int main(int argc, char **argv)
{
    struct options o;
    struct tvm_program prog;
    struct vm_thread *ts = NULL;
    struct counts *c0 = NULL, *c1 = NULL, *c2 = NULL, *c3 = NULL;
    struct drain_tally tally;
    struct tvm first;
    const struct tvm_fn *main_fn;
    int64_t expect;
    char err[512], trace_default[TVM_NAME_MAX + 8], count_default[TVM_NAME_MAX + 8];
    bpt_session session;
    bpt_session_desc desc;
    bpt_session_counts stats;
    uint64_t t_start, t_on, t_off, t_end, deadline;
    int i, nthreads_ready = 0, nthreads_started = 0, have_session = 0, failed = 0;
    size_t fi, registered = 0;

    /* A line at a time, even into a file or a pipe: what a run printed is
       there to read even if it is killed (examples/run-tests' time limit). */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_options(argc, argv, &o) != 0) {
        usage(argv[0]);
        return 2;
    }
    if (tvm_load(o.path, &prog, err, sizeof err) != 0) {
        fprintf(stderr, "tinyvm: %s\n", err);
        return 2;
    }
    tvm_exec(NULL, NULL, NULL, NULL, prog.op_word);
    if (tvm_translate(&prog) != 0) {
        fprintf(stderr, "tinyvm: out of memory\n");
        tvm_program_free(&prog);
        return 2;
    }
    if (!(main_fn = tvm_find_fn(&prog, "main", 0))) {
        fprintf(stderr, "tinyvm: %s: no function main/0\n", o.path);
        tvm_program_free(&prog);
        return 2;
    }
    printf("tinyvm: module %s, %lu functions, %lu code words, %s dispatch, %d VM threads\n",
           prog.module, (unsigned long)prog.nfns, (unsigned long)prog.ncode,
           TVM_THREADED ? "threaded (computed goto)" : "switch", o.threads);
    /* Run main once here, before any thread or breakpoint exists: a program
       that fails (a stack overflow, an endless loop) is reported as a bad
       program, and its output is shown once, not by every run of every thread. */
    if (tvm_init(&first, &prog) != 0) {
        fprintf(stderr, "tinyvm: out of memory\n");
        tvm_program_free(&prog);
        return 2;
    }
    first.echo = 1;
    if (tvm_exec(&first, main_fn, NULL, &expect, NULL) != 0) {
        fprintf(stderr, "tinyvm: %s\n", first.error);
        tvm_free(&first);
        tvm_program_free(&prog);
        return 2;
    }
    tvm_free(&first);
    if (o.ntrace == 0 && o.ncount == 0 && o.nprofile == 0) {
        snprintf(trace_default, sizeof trace_default, "%s:fib/_", prog.module);
        snprintf(count_default, sizeof count_default, "%s:*/_", prog.module);
        o.trace[o.ntrace++] = trace_default;
        o.count[o.ncount++] = count_default;
    }

    /* Register every function's entry word as a VM site. From here on,
       bptrace may store to those words whenever a pattern changes. */
    for (fi = 0; fi < prog.nfns; fi++, registered++) {
        struct tvm_fn *fn = &prog.fns[fi];
        if (bpt_register_vm(&prog.code[fn->entry], prog.op_word[TVM_OP_BREAKPOINT], prog.module,
                            fn->name, fn->arity, &tvm_ops, &fn->rec) != 0) {
            fprintf(stderr, "tinyvm: bpt_register_vm(%s/%d): %s\n", fn->name, fn->arity, bpt_last_error());
            failed = 2;
            goto cleanup;
        }
    }
    memset(&desc, 0, sizeof desc);
    desc.name = "tinyvm";
    desc.max_chunks = 16;   /* the default 16 chunks a thread, fixed: the VM threads outrun the
                               drainer, which prints; what no buffer holds is dropped and counted */
    if (bpt_session_create(&desc, &session) != 0) {
        fprintf(stderr, "tinyvm: bpt_session_create: %s\n", bpt_last_error());
        failed = 2;
        goto cleanup;
    }
    have_session = 1;

    ts = calloc((size_t)o.threads, sizeof *ts);
    c0 = calloc((size_t)o.threads, sizeof *c0);
    c1 = calloc((size_t)o.threads, sizeof *c1);
    c2 = calloc((size_t)o.threads, sizeof *c2);
    c3 = calloc((size_t)o.threads, sizeof *c3);
    if (!ts || !c0 || !c1 || !c2 || !c3) {
        fprintf(stderr, "tinyvm: out of memory\n");
        failed = 2;
        goto cleanup;
    }
    for (; nthreads_ready < o.threads; nthreads_ready++) {
        struct vm_thread *t = &ts[nthreads_ready];
        if (tvm_init(&t->vm, &prog) != 0) {
            fprintf(stderr, "tinyvm: out of memory\n");
            failed = 2;
            goto cleanup;
        }
        t->index = nthreads_ready;
        t->main_fn = main_fn;
        t->expect = expect;
        t->fib_fn = tvm_find_fn(&prog, "fib", 1);
        pthread_mutex_init(&t->lock, NULL);
    }
    if (!tvm_find_fn(&prog, "fib", 1))
        printf("tinyvm: no fib/1 in this program: results of main are checked against its first run only\n");

    t_start = now_ns();
    for (; nthreads_started < o.threads; nthreads_started++) {
        if (pthread_create(&ts[nthreads_started].thread, NULL, vm_thread_main, &ts[nthreads_started]) != 0) {
            fprintf(stderr, "tinyvm: pthread_create failed\n");
            failed = 2;
            goto cleanup;
        }
    }

    /* Phase 1: no tracing. (c0 stays all zero: the counts at the start.) */
    sleep_until(t_start + (uint64_t)o.after_ms * 1000000u);

    /* Phase 2: switch tracing on, live. Each call runs the 13 steps. */
    t_on = now_ns();
    snapshot(ts, o.threads, c1);
    printf("\n");
    /* A malformed pattern is the user's mistake: stop here. Destroying the
       session (in cleanup) removes whatever the earlier patterns set. */
    for (i = 0; i < o.ntrace; i++) {
        if (set_pattern(session, o.trace[i],
                        o.return_trace ? BPT_CALL | BPT_RETURN | BPT_EXCEPTION | BPT_CALLER : BPT_CALL,
                        o.return_trace ? "BPT_CALL | BPT_RETURN | BPT_EXCEPTION | BPT_CALLER" : "BPT_CALL") < 0) {
            failed = 2;
            goto cleanup;
        }
    }
    for (i = 0; i < o.ncount; i++) {
        if (set_pattern(session, o.count[i], BPT_COUNT, "BPT_COUNT") < 0) {
            failed = 2;
            goto cleanup;
        }
    }
    for (i = 0; i < o.nprofile; i++) {
        if (set_pattern(session, o.profile[i], BPT_TIME, "BPT_TIME") < 0) {
            failed = 2;
            goto cleanup;
        }
    }

    printf("first %ld trace messages:\n", o.max_lines);
    memset(&tally, 0, sizeof tally);
    deadline = t_on + (uint64_t)o.for_ms * 1000000u;
    while (now_ns() < deadline) {
        uint64_t next = now_ns() + 20000000u;
        sleep_until(next < deadline ? next : deadline);
        drain(session, o.max_lines, &tally, deadline);
    }

    /* Switch off. Pause the counters first so the table below is one
       consistent snapshot (BEAM: trace_pattern(..., pause, [call_count])),
       read it, then remove every breakpoint of the session. */
    t_off = now_ns();
    snapshot(ts, o.threads, c2);
    printf("\n");
    for (i = 0; i < o.ncount; i++)
        if (set_pattern(session, o.count[i], BPT_COUNT | BPT_PAUSE, "BPT_COUNT | BPT_PAUSE") < 0)
            failed = 1;
    for (i = 0; i < o.ntrace; i++)
        if (set_pattern(session, o.trace[i], BPT_CALL | BPT_OFF, "BPT_CALL | BPT_OFF") < 0)
            failed = 1;
    drain(session, o.max_lines, &tally, 0);
    printf("drained %" PRIu64 " trace messages = %" PRIu64 " call + %" PRIu64 " return_from + %" PRIu64
           " exception_from + %" PRIu64 " return_to + %" PRIu64 " other\n",
           tally.calls + tally.returns + tally.exceptions + tally.return_tos + tally.others, tally.calls,
           tally.returns, tally.exceptions, tally.return_tos, tally.others);
    printf("drained %" PRIu64 " dropped notices, announcing %" PRIu64 " messages lost on full buffers "
           "(a VM thread never waits for the drainer)\n", tally.drop_reports, tally.dropped);
    printf("lines: %ld shown + %ld not shown = %" PRIu64 " trace messages + %" PRIu64 " notices\n", tally.shown,
           tally.not_shown, tally.calls + tally.returns + tally.exceptions + tally.return_tos + tally.others,
           tally.drop_reports);
    for (i = 0; i < o.ncount; i++) {
        printf("call counts for %s:\n", o.count[i]);
        if (bpt_trace_info_each(session, o.count[i], BPT_INFO_COUNT, print_count, NULL) < 0) {
            fprintf(stderr, "tinyvm: bpt_trace_info_each: %s\n", bpt_last_error());
            failed = 1;
        }
    }
    for (i = 0; i < o.ncount; i++)
        if (set_pattern(session, o.count[i], BPT_COUNT | BPT_OFF, "BPT_COUNT | BPT_OFF") < 0)
            failed = 1;
    /* call_time: collected while the VM threads run (bptrace never stops
       them to read the per-thread tables), printed as OTP's tprof does. */
    for (i = 0; i < o.nprofile; i++) {
        struct profile_rows pr;
        char *table;
        memset(&pr, 0, sizeof pr);
        if (bpt_trace_info_each(session, o.profile[i], BPT_INFO_TIME, add_profile_row, &pr) < 0) {
            fprintf(stderr, "tinyvm: bpt_trace_info_each: %s\n", bpt_last_error());
            failed = 1;
        } else if ((table = malloc(65536)) != NULL) {
            bpt_format_profile(pr.rows, pr.n, 0, table, 65536);
            printf("call_time for %s (own time, all VM threads):\n%s", o.profile[i], table);
            free(table);
        }
        if (set_pattern(session, o.profile[i], BPT_TIME | BPT_OFF, "BPT_TIME | BPT_OFF") < 0)
            failed = 1;
    }

    /* Every breakpoint of the session is gone, so every entry word must be
       the original again, while the VM threads are still running. */
    for (fi = 0; fi < prog.nfns; fi++) {
        const struct tvm_fn *fn = &prog.fns[fi];
        if (bpt_vm_word_at(fn->rec) != fn->orig || BPT_VM_FETCH(&prog.code[fn->entry]) != fn->orig) {
            fprintf(stderr, "tinyvm: %s:%s/%d: entry word not restored\n", prog.module, fn->name, fn->arity);
            failed = 1;
        }
    }

    /* Phase 3: no tracing again, until the end of the run. */
    sleep_until(t_start + (uint64_t)o.run_ms * 1000000u);
    t_end = now_ns();
    snapshot(ts, o.threads, c3);
    printf("\n");
    print_phase("before tracing", t_on - t_start, c0, c1, o.threads);
    print_phase("while tracing", t_off - t_on, c1, c2, o.threads);
    print_phase("after tracing", t_end - t_off, c2, c3, o.threads);

    /* produced = delivered (the trace messages drained above) + dropped + pending: still
       in the buffers, produced after the last drain (with --return, the returns of calls
       traced before the switch-off). Each is bptrace's own count (examples/run-tests
       checks the sum). A buffer marks its drops in front of its next record, so the
       drops after the last record drained are in no notice drained. */
    if (bpt_session_stats(session, &stats) == 0)
        printf("session %s: %" PRIu64 " messages produced = %" PRIu64 " delivered + %" PRIu64 " dropped + %" PRIu64
               " pending; %" PRIu64 " of the dropped announced by the notices drained, %" PRIu64 " not\n",
               stats.name, stats.produced, stats.delivered, stats.dropped,
               stats.pending, tally.dropped, stats.dropped - tally.dropped);

cleanup:
    /* Stop the VMs before anything they use goes away: a function may only
       be unregistered when no thread can be about to run its entry word. */
    for (i = 0; i < nthreads_started; i++) {
        pthread_mutex_lock(&ts[i].lock);
        ts[i].stop = 1;
        pthread_mutex_unlock(&ts[i].lock);
    }
    for (i = 0; i < nthreads_started; i++)
        pthread_join(ts[i].thread, NULL);
    for (i = 0; i < nthreads_started; i++) {
        struct vm_thread *t = &ts[i];
        if (t->failed) {
            fprintf(stderr, "tinyvm: VM thread %d failed: %s\n", i, t->error);
            failed = 1;
        }
        if (t->wrong) {
            fprintf(stderr, "tinyvm: VM thread %d computed %" PRIu64 " wrong results\n", i, t->wrong);
            failed = 1;
        }
        printf("VM thread %d: %" PRIu64 " runs of main, %" PRIu64 " results checked (main against its first run, fib against C), %" PRIu64
               " wrong\n", i, t->runs, t->checks, t->wrong);
    }
    if (have_session && bpt_session_destroy(session) != 0) {
        fprintf(stderr, "tinyvm: bpt_session_destroy: %s\n", bpt_last_error());
        failed = 1;
    }
    for (fi = 0; fi < registered; fi++) {
        if (bpt_unregister(prog.fns[fi].rec) != 0) {
            fprintf(stderr, "tinyvm: bpt_unregister(%s): %s\n", prog.fns[fi].name, bpt_last_error());
            failed = 1;
        }
    }
    for (i = 0; i < nthreads_ready; i++) {
        tvm_free(&ts[i].vm);
        pthread_mutex_destroy(&ts[i].lock);
    }
    free(ts);
    free(c0);
    free(c1);
    free(c2);
    free(c3);
    tvm_program_free(&prog);
    if (!failed)
        printf("ok: all entry words restored, all results correct\n");
    return failed;
}
