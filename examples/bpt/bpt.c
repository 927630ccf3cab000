/* bpt: look into a running bptrace program from outside, without stopping
   it (think-outside-the-beam's erlang-sample, for bptrace). It reads the
   target with process_vm_readv only: never ptrace, never /proc/PID/mem,
   never a write, never a stop. It finds the target's root record
   (bptrace.h >>root) from /proc/PID/maps and the ELF symbols of the mapped
   files, checks it (bpt_root_check), and walks what it describes
   (reader.h).

     bpt ps                      processes that contain bptrace
     bpt funcs PID [PATTERN]     registered functions, their trace flags and counts
     bpt top PID [-n N] [-d S] [-r ROWS] [-s calls|time]
                                 call_count and call_time per function, refreshed
                                 every S seconds, by calls or by own time
     bpt pstack PID              each thread's traced call stack (shadow stacks)
     bpt sessions PID            sessions: patterns, buffers, drops
     bpt progress PID            thread progress: epoch, each thread's state
     bpt sample PID [--pstack] [--blame FUNCTION] [--hz N] [--duration S]
                                 the hottest functions, from perf_event_open
                                 samples of the target's threads (task clock),
                                 named from the target's function table and
                                 ELF symbols; --pstack adds the traced stacks
                                 they ran under, --blame the traced callers of
                                 one function

   Through the target's control server (bptrace.h >>control: the agent,
   build/libbptrace-agent.so, starts one in a program built with the flags):
     bpt trace PID PATTERN [--return] [--exception] [--caller] [--args SPEC]
               [--ret TYPE] [--limit N/MS] [--duration S] [-o FILE.bpt]
               [--chrome FILE] [--folded FILE]
                                 call trace, live, as dbg prints it (or into files;
                                 Chrome slices and folded time need --return: a
                                 call no return ends is an instant event)
     bpt count PID PATTERN [--duration S] [-r ROWS]
                                 call_count over S seconds, exact
     bpt profile PID PATTERN [--duration S] [--memory] [-r ROWS]
                                 call_time (or call_memory) over S seconds, as tprof
     bpt record -o FILE.bpt [--kinds K] PATTERN -- PROG ARGS
                                 run PROG under the agent, tracing PATTERN into FILE
   Offline:
     bpt replay FILE.bpt [--chrome FILE] [--folded FILE]
                                 a trace file as dbg text (or Chrome JSON, folded stacks)
     bpt report FILE.bpt [-r ROWS]
                                 calls and own time per function, from calls and returns
     bpt dump --chrome|--folded FILE.bpt
                                 Chrome JSON or folded stacks on stdout

   Exit status: 0 done; 1 usage; 2 no such process, or it exited; 3 the
   kernel refused the read (another uid, ptrace_scope); 4 no bptrace in the
   process; 5 a root record or data this reader cannot use (the reason is
   printed), or a length whose records would take more memory than one
   read of the target may hold: BPT_MEM_MB (environment, 1..1048576 MiB,
   512 unless set) is that budget (reader.h, mem_max); 6 the target's
   control server went silent for BPT_TIMEOUT seconds (environment, 10
   unless set) in a connect or a reply: a stopped or stuck process (its
   state is printed). */
#define _GNU_SOURCE
#define BPTRACE_IMPLEMENTATION   /* bpt_root_check */
#include "bptrace.h"
#include "reader.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_USAGE = 1, EXIT_GONE = 2, EXIT_PERM = 3, EXIT_NOBPT = 4, EXIT_BAD = 5, EXIT_TIMEOUT = 6 };

/* ---- Reading the target ---- */

static int vm_read(rd_target *t, uint64_t addr, void *buf, size_t n) {
    pid_t pid = (pid_t)(intptr_t)t->user;
    struct iovec local = { buf, n }, remote = { (void *)(uintptr_t)addr, n };
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got == (ssize_t)n) return RD_OK;
    if (got >= 0 || errno == EFAULT) return RD_EFAULT;
    if (errno == ESRCH) return RD_EGONE;
    if (errno == EPERM || errno == EACCES) return RD_EPERM;
    return RD_EFAULT;
}

static int ptrace_scope(void) {
    int v = -1;
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    if (f) { if (fscanf(f, "%d", &v) != 1) v = -1; fclose(f); }
    return v;
}

/* An error of a read, as a message and an exit status. */
static int report(int pid, const rd_target *t, int rc) {
    switch (rc) {
    case RD_EGONE:
        fprintf(stderr, "bpt: process %d exited\n", pid);
        return EXIT_GONE;
    case RD_EPERM:
        fprintf(stderr, "bpt: process %d: the kernel refused the read (EPERM): it needs the same uid as "
                "the target, or CAP_SYS_PTRACE", pid);
        if (ptrace_scope() >= 0) fprintf(stderr, "; kernel.yama.ptrace_scope is %d (1: only a parent may read; "
                                         "2: only CAP_SYS_PTRACE; 3: nobody)", ptrace_scope());
        else fprintf(stderr, "; no Yama ptrace_scope on this kernel");
        fputc('\n', stderr);
        return EXIT_PERM;
    case RD_ENOMEM:
        fprintf(stderr, "bpt: out of memory\n");
        return EXIT_BAD;
    case RD_ETORN:
        fprintf(stderr, "bpt: process %d: the data kept changing while it was read\n", pid);
        return EXIT_BAD;
    case RD_EBUDGET:
        fprintf(stderr, "bpt: process %d: refused %s: corrupt data? (BPT_MEM_MB=N sets the budget)\n", pid, t->what);
        return EXIT_BAD;
    default:
        fprintf(stderr, "bpt: process %d: cannot read %s: corrupt data, or a layout this reader "
                "does not know\n", pid, t->what);
        return EXIT_BAD;
    }
}

/* ---- Finding the root record: /proc/PID/maps and ELF symbols ---- */

/* A symbol of a file: its name, value and size as in the file, its STT_* type. */
typedef void (*sym_visit)(const char *name, uint64_t value, uint64_t size, int type, void *user);

/* A target's mapped file is read with pread into heap buffers, never
   through an mmap: the target (or anyone) may cut the file short while bpt
   reads it, and a read through a mapping past the new end is SIGBUS (found
   by review: tests/bpt shrink). A read that comes up short is an error
   here: the file is skipped or its symbols end there. ELF_BUDGET bounds
   what one file's tables hold in memory at once; a table past it is
   skipped. */
#define ELF_BUDGET ((uint64_t)256 << 20)
enum { ELF_SYM_CHUNK = 4096 };   /* symbols read at a time */

/* n bytes of fd at off into buf: 0, or -1 when the file ends first (it
   shrank) or the read fails. */
static int pread_full(int fd, void *buf, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (unsigned char *)buf + got, n - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

/* A file opened for its symbols, with what is left of its ELF_BUDGET. */
typedef struct elf_file { int fd; uint64_t size, budget; } elf_file;

/* n bytes of the file at off, in a new heap buffer (the caller frees it):
   NULL when they lie past the size fstat gave, exceed the budget left, or
   no longer read in full. */
static void *elf_table(elf_file *ef, uint64_t off, uint64_t n) {
    void *buf;
    if (!n || off > ef->size || n > ef->size - off || n > ef->budget || !(buf = malloc((size_t)n))) return NULL;
    if (pread_full(ef->fd, buf, (size_t)n, off)) { free(buf); return NULL; }
    ef->budget -= n;
    return buf;
}

/* The page of the first PT_LOAD, the lowest (0 if none, or if cut short). */
static uint64_t elf_bias_from(elf_file *ef, const Elf64_Ehdr *eh) {
    Elf64_Phdr ph;
    int i;
    for (i = 0; i < eh->e_phnum; i++) {
        if (pread_full(ef->fd, &ph, sizeof ph, eh->e_phoff + (uint64_t)i * sizeof ph)) break;
        if (ph.p_type == PT_LOAD) return ph.p_vaddr & ~(uint64_t)0xfff;
    }
    return 0;
}

/* One symbol table (sec) and its names (strs) given to visit, symbols
   read ELF_SYM_CHUNK at a time: how many were visited. */
static int elf_symtab(elf_file *ef, const Elf64_Shdr *sec, const Elf64_Shdr *strs, sym_visit visit, void *user) {
    uint64_t count = sec->sh_size / sizeof(Elf64_Sym), j, k;
    uint64_t names_budget = ef->budget;
    char *names;
    Elf64_Sym *syms;
    int n = 0;
    if (sec->sh_offset > ef->size || sec->sh_size > ef->size - sec->sh_offset) return 0;
    if (!(names = (char *)elf_table(ef, strs->sh_offset, strs->sh_size))) return 0;
    if (names[strs->sh_size - 1] != 0 || !(syms = (Elf64_Sym *)malloc(ELF_SYM_CHUNK * sizeof *syms))) {
        free(names);
        ef->budget = names_budget;
        return 0;
    }
    for (j = 0; j < count; j += ELF_SYM_CHUNK) {
        uint64_t m = count - j < ELF_SYM_CHUNK ? count - j : ELF_SYM_CHUNK;
        if (pread_full(ef->fd, syms, (size_t)m * sizeof *syms, sec->sh_offset + j * sizeof *syms)) break;   /* it shrank */
        for (k = 0; k < m; k++) {
            if (syms[k].st_name >= strs->sh_size || syms[k].st_shndx == SHN_UNDEF) continue;
            visit(names + syms[k].st_name, syms[k].st_value, syms[k].st_size, ELF64_ST_TYPE(syms[k].st_info), user);
            n++;
        }
    }
    free(syms);
    free(names);
    ef->budget = names_budget;   /* one table's names at a time */
    return n;
}

/* Every defined symbol of an ELF64 file (.symtab, or .dynsym when it has
   none), given to visit with its value and size as in the file; *bias_from
   is the lowest PT_LOAD's page, *dyn whether addresses move with the load
   address (ET_DYN). Returns how many were visited; 0 for a file that is not
   ELF64, has no symbols, or is cut short before they read. Every offset is
   checked against the file's size, and every read against the file as it
   is then (pread: see ELF_BUDGET). */
static int elf_symbols(const char *path, sym_visit visit, void *user, uint64_t *bias_from, int *dyn) {
    /* The target names the file: it may be a FIFO, whose open would block
       for good, or a symlink to anything (found by review). Regular files
       only, opened without blocking or following a last link. */
    elf_file ef;
    struct stat st;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    int i, pass, n = 0;
    ef.fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);
    if (ef.fd < 0) return 0;
    if (fstat(ef.fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) goto out;
    ef.size = (uint64_t)st.st_size;
    ef.budget = ELF_BUDGET;
    if (pread_full(ef.fd, &eh, sizeof eh, 0) ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_shoff > ef.size || eh.e_shnum > (ef.size - eh.e_shoff) / sizeof(Elf64_Shdr) ||
        eh.e_phoff > ef.size || eh.e_phnum > (ef.size - eh.e_phoff) / sizeof(Elf64_Phdr))
        goto out;
    *bias_from = elf_bias_from(&ef, &eh);
    *dyn = eh.e_type == ET_DYN;
    if (!(sh = (Elf64_Shdr *)elf_table(&ef, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof *sh))) goto out;
    for (pass = 0; pass < 2 && !n; pass++)
        for (i = 0; i < eh.e_shnum; i++)
            if (sh[i].sh_type == (pass ? SHT_DYNSYM : SHT_SYMTAB) && sh[i].sh_link < eh.e_shnum)
                n += elf_symtab(&ef, &sh[i], &sh[sh[i].sh_link], visit, user);
out:
    free(sh);
    close(ef.fd);
    return n;
}

/* Each file mapped in pid, once, with the address its first byte is
   mapped at: visit returns nonzero to stop. 0, EXIT_GONE or EXIT_PERM. */
typedef int (*file_visit)(const char *path, const char *name, uint64_t base, void *user);
static int mapped_files(int pid, file_visit visit, void *user) {
    char path[64], line[4096 + 128], seen[256][256];
    int nseen = 0;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    if (!(f = fopen(path, "r"))) return errno == EACCES || errno == EPERM ? EXIT_PERM : EXIT_GONE;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off;
        char perms[8], obj[4096 + 64], full[4096 + 128];
        int k, dup = 0;
        obj[0] = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095[^\n]", &lo, &hi, perms, &off, obj) < 4) continue;
        if (obj[0] != '/' || off != 0) continue;   /* the file's first mapping holds its base */
        k = (int)strlen(obj);
        if (k > 10 && !strcmp(obj + k - 10, " (deleted)")) continue;   /* gone: that name is another file's now */
        for (k = 0; k < nseen; k++) dup |= !strcmp(seen[k], obj);
        if (dup) continue;
        if (nseen < 256) snprintf(seen[nseen++], sizeof seen[0], "%.255s", obj);
        /* Through /proc/PID/root: the file as the target sees it (another mount namespace). */
        snprintf(full, sizeof full, "/proc/%d/root%s", pid, obj);
        if (access(full, R_OK) != 0) snprintf(full, sizeof full, "%s", obj);
        if (visit(full, obj, lo, user)) break;
    }
    fclose(f);
    return 0;
}

typedef struct root_find { uint64_t value; int found; uint64_t addr; char file[512]; } root_find;
static void root_sym(const char *name, uint64_t value, uint64_t size, int type, void *user) {
    root_find *rf = (root_find *)user;
    (void)size;
    if (type == STT_OBJECT && !strcmp(name, "bpt_root") && !rf->found) { rf->value = value; rf->found = 1; }
}
static int root_file(const char *path, const char *name, uint64_t base, void *user) {
    root_find *rf = (root_find *)user;
    uint64_t from = 0;
    int dyn = 0;
    rf->found = 0;
    if (!elf_symbols(path, root_sym, rf, &from, &dyn) || !rf->found) return 0;
    rf->addr = dyn ? base - from + rf->value : rf->value;
    snprintf(rf->file, sizeof rf->file, "%s", name);
    return 1;
}

/* The root record's address in process pid: 0 found, EXIT_GONE, EXIT_PERM or EXIT_NOBPT. */
static int find_root(int pid, uint64_t *addr, char *file, size_t file_len) {
    root_find rf;
    int rc;
    memset(&rf, 0, sizeof rf);
    if ((rc = mapped_files(pid, root_file, &rf))) return rc;
    if (!rf.addr) return EXIT_NOBPT;
    *addr = rf.addr;
    snprintf(file, file_len, "%s", rf.file);
    return 0;
}

/* The memory budget of one walk (reader.h, mem_max): BPT_MEM_MB MiB, or 0
   for the reader's default when it is unset or not a number in range. */
static uint64_t mem_budget(void) {
    const char *env = getenv("BPT_MEM_MB");
    char *end;
    unsigned long long mb;
    if (!env || !*env) return 0;
    errno = 0;
    mb = strtoull(env, &end, 10);
    if (errno || *end || !mb || mb > (1ull << 20)) {
        fprintf(stderr, "bpt: warning: BPT_MEM_MB=%s is not a number of MiB in 1..1048576: the default is used\n", env);
        return 0;
    }
    return (uint64_t)mb << 20;
}

/* Open pid's root: 0, or an exit status with its message printed. */
static int open_target(int pid, rd_target *t, int quiet) {
    uint64_t addr;
    char file[512], why[256];
    int rc;
    memset(t, 0, sizeof *t);
    t->read = vm_read;
    t->user = (void *)(intptr_t)pid;
    t->mem_max = mem_budget();
    if ((rc = find_root(pid, &addr, file, sizeof file))) {
        if (!quiet) {
            if (rc == EXIT_GONE) fprintf(stderr, "bpt: no process %d\n", pid);
            else if (rc == EXIT_PERM) report(pid, t, RD_EPERM);
            else fprintf(stderr, "bpt: process %d has no bptrace (no bpt_root symbol in any mapped file; "
                         "a stripped program keeps it only if exported)\n", pid);
        }
        return rc;
    }
    rc = rd_open(t, addr, why, sizeof why);
    if (rc == RD_EGONE || rc == RD_EPERM || rc == RD_EFAULT) return quiet ? EXIT_BAD : report(pid, t, rc);
    if (rc) {
        if (!quiet) fprintf(stderr, "bpt: process %d (%s): unusable root record: %s\n", pid, file, why);
        return EXIT_BAD;
    }
    return 0;
}

/* A snapshot of pid into s: 0, or an exit status with its message printed
   and s freed (what a failed walk had read is of no use). */
static int snapshot(int pid, rd_target *t, rd_snapshot *s) {
    int rc = rd_snapshot_take(t, s, 20);
    if (rc) { rd_snapshot_free(s); return report(pid, t, rc); }
    if (s->torn) fprintf(stderr, "bpt: warning: functions or sessions changed during every read; what follows may be torn\n");
    return 0;
}

static void flag_names(unsigned flags, unsigned paused, char *out, size_t n) {
    static const struct { unsigned flag; const char *name; } names[] = {
        { BPT_CALL, "call" }, { BPT_COUNT, "count" }, { BPT_TIME, "time" }, { BPT_MEMORY, "memory" } };
    size_t i, l = 0;
    out[0] = 0;
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (flags & names[i].flag)
            l += (size_t)snprintf(out + l, n - l, "%s%s%s", l ? "," : "", names[i].name,
                                  paused & names[i].flag ? "(paused)" : "");
    if (flags & BPT_OFF) l += (size_t)snprintf(out + l, n - l, "%soff", l ? "," : "");
    if (flags & BPT_PAUSE) l += (size_t)snprintf(out + l, n - l, "%spause", l ? "," : "");
    if (flags & BPT_RESTART) l += (size_t)snprintf(out + l, n - l, "%srestart", l ? "," : "");
    if (!l) snprintf(out, n, "-");
}

static void func_label(const rd_func *f, char *out, size_t n) {
    if (f->arity < 0) snprintf(out, n, "%s:%s/_", f->module, f->name);
    else snprintf(out, n, "%s:%s/%d", f->module, f->name, f->arity);
}

/* ---- Commands ---- */

static int cmd_ps(void) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    if (!d) { perror("bpt: /proc"); return EXIT_BAD; }
    printf("%-8s %-10s %-8s %s\n", "PID", "BPTRACE", "ARCH", "COMMAND");
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name);
        rd_target t;
        char comm[64] = "?", path[64];
        FILE *f;
        if (pid <= 0 || pid == getpid()) continue;
        if (open_target(pid, &t, 1)) continue;
        snprintf(path, sizeof path, "/proc/%d/comm", pid);
        if ((f = fopen(path, "r"))) { if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0; fclose(f); }
        printf("%-8d %-10s %-8s %s\n", pid, t.root.bptrace_version, t.root.arch, comm);
        n++;
    }
    closedir(d);
    if (!n) printf("(no process with bptrace that this user may read)\n");
    return 0;
}

static int cmd_funcs(int pid, const char *pattern) {
    rd_target t;
    rd_snapshot s;
    uint32_t i;
    int rc;
    memset(&s, 0, sizeof s);
    if ((rc = open_target(pid, &t, 0)) || (rc = snapshot(pid, &t, &s))) return rc;
    printf("%-44s %-6s %-22s %14s  %s\n", "FUNCTION", "SITE", "FLAGS", "CALL_COUNT", "SESSIONS");
    for (i = 0; i < s.nfuncs; i++) {
        char label[320], flags[80], count[32];
        const rd_func *f = &s.funcs[i];
        func_label(f, label, sizeof label);
        if (pattern && fnmatch(pattern, label, 0)) continue;
        flag_names(f->flags, f->paused, flags, sizeof flags);
        if (f->counted) snprintf(count, sizeof count, "%llu", (unsigned long long)f->count);
        else snprintf(count, sizeof count, "-");
        printf("%-44s %-6s %-22s %14s  %s\n", label, f->kind == 2 ? "native" : "vm", flags, count,
               f->sessions[0] ? f->sessions : "-");
    }
    rd_snapshot_free(&s);
    return 0;
}

typedef struct top_row { double calls_s, own_ms_s; uint32_t ix; } top_row;
static int top_by_time;
static int by_rate(const void *a, const void *b) {
    const top_row *x = (const top_row *)a, *y = (const top_row *)b;
    double u = top_by_time ? x->own_ms_s : x->calls_s, v = top_by_time ? y->own_ms_s : y->calls_s;
    return u < v ? 1 : u > v ? -1 : x->ix < y->ix ? -1 : x->ix > y->ix;
}

/* top: two snapshots delay seconds apart, per function: call_count (exact)
   and call_time (own time, read while the owners write it: a moment's
   skew between a row's calls and time), as rates over the interval. */
static int cmd_top(int pid, int refreshes, double delay, int shown, int by_time) {
    rd_target t;
    rd_snapshot prev, cur;
    int rc, r;
    top_by_time = by_time;
    memset(&prev, 0, sizeof prev);
    memset(&cur, 0, sizeof cur);
    if ((rc = open_target(pid, &t, 0)) || (rc = snapshot(pid, &t, &prev))) return rc;
    for (r = 0; r < refreshes; r++) {
        struct timespec ts = { (time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9) };
        top_row *rows;
        uint32_t i, j, n = 0, ncount = 0, ntime = 0;
        uint64_t total = 0;
        int approx = 0;
        nanosleep(&ts, NULL);
        if ((rc = snapshot(pid, &t, &cur))) { rd_snapshot_free(&prev); return rc; }
        rows = (top_row *)calloc(cur.nfuncs + 1, sizeof *rows);
        if (!rows) { rd_snapshot_free(&prev); rd_snapshot_free(&cur); return report(pid, &t, RD_ENOMEM); }
        for (i = 0; i < cur.nfuncs; i++) {
            const rd_func *f = &cur.funcs[i], *p = NULL;
            if (!f->counted && !f->timed) continue;
            ncount += f->counted;
            ntime += f->timed;
            if (f->counted) total += f->count;
            if (by_time && !f->timed) continue;   /* -s time: the timed ones */
            for (j = 0; j < prev.nfuncs; j++)
                if (prev.funcs[j].addr == f->addr) { p = &prev.funcs[j]; break; }
            if (f->counted) {
                uint64_t before = p && p->counted ? p->count : 0;
                rows[n].calls_s = (double)(f->count >= before ? f->count - before : 0) / delay;
            } else {
                uint64_t before = p && p->timed ? p->time_calls : 0;
                rows[n].calls_s = (double)(f->time_calls >= before ? f->time_calls - before : 0) / delay;
            }
            if (f->timed) {
                uint64_t before = p && p->timed ? p->time_ns : 0;
                rows[n].own_ms_s = (double)(f->time_ns >= before ? f->time_ns - before : 0) / 1e6 / delay;
                approx |= f->time_approx;
            }
            rows[n++].ix = i;
        }
        qsort(rows, n, sizeof *rows, by_rate);
        printf("bpt top %d: epoch %llu, %u threads, %u counted and %u timed functions, %llu calls counted%s%s\n", pid,
               (unsigned long long)cur.epoch, cur.nrecords, ncount, ntime, (unsigned long long)total,
               cur.torn ? " (torn)" : "", approx ? " (a call_time table moved while read: left out)" : "");
        printf("%12s %14s %10s %12s  %s\n", "CALLS/S", "CALL_COUNT", "OWN_MS/S", "OWN_MS", "FUNCTION");
        for (i = 0; i < n && i < (uint32_t)shown; i++) {
            const rd_func *f = &cur.funcs[rows[i].ix];
            char label[320], count[32], own[32], own_s[32];
            func_label(f, label, sizeof label);
            if (f->counted) snprintf(count, sizeof count, "%llu", (unsigned long long)f->count);
            else snprintf(count, sizeof count, "-");
            if (f->timed) {
                snprintf(own_s, sizeof own_s, "%.1f", rows[i].own_ms_s);
                snprintf(own, sizeof own, "%.1f", (double)f->time_ns / 1e6);
            } else {
                snprintf(own_s, sizeof own_s, "-");
                snprintf(own, sizeof own, "-");
            }
            printf("%12.0f %14s %10s %12s  %s\n", rows[i].calls_s, count, own_s, own, label);
        }
        fflush(stdout);
        free(rows);
        rd_snapshot_free(&prev);
        prev = cur;
        memset(&cur, 0, sizeof cur);
    }
    rd_snapshot_free(&prev);
    return 0;
}

static int cmd_pstack(int pid) {
    rd_target t;
    rd_snapshot s;
    uint32_t i, n, k;
    int rc, which, moved;
    uint64_t frames[64];
    memset(&s, 0, sizeof s);
    if ((rc = open_target(pid, &t, 0)) || (rc = snapshot(pid, &t, &s))) return rc;
    for (i = 0; i < s.nthreads; i++) {
        const rd_thread *th = &s.threads[i];
        if (!th->in_use) continue;
        printf("thread %u (record %u)\n", th->tid, th->index);
        for (which = 0; which < 2; which++) {
            if ((rc = rd_stack(&t, th, which, frames, &n, 64, &moved))) { rd_snapshot_free(&s); return report(pid, &t, rc); }
            if (!n) continue;
            printf("  %s frames%s:\n", which ? "VM" : "native", moved ? " (the stack moved while read)" : "");
            for (k = n; k-- > 0;) {
                const rd_func *f = rd_func_at(&s, frames[k]);
                char label[320];
                if (f) func_label(f, label, sizeof label);
                else snprintf(label, sizeof label, "? (function record 0x%llx)", (unsigned long long)frames[k]);
                printf("    #%u %s\n", n - 1 - k, label);
            }
        }
    }
    rd_snapshot_free(&s);
    return 0;
}

static int cmd_sessions(int pid) {
    rd_target t;
    rd_session *ss;
    uint32_t n, i, j;
    int rc, torn;
    if ((rc = open_target(pid, &t, 0))) return rc;
    if ((rc = rd_sessions(&t, &ss, &n, &torn, 20))) return report(pid, &t, rc);
    if (torn) fprintf(stderr, "bpt: warning: sessions changed during every read; what follows may be torn\n");
    for (i = 0; i < n; i++) {
        const rd_session *o = &ss[i];
        printf("session %llu \"%s\": %s%s\n", (unsigned long long)o->id, o->name, o->type,
               o->dead ? " (being destroyed)" : "");
        printf("  lanes %u, buffers %llu bytes (chunks of %llu, %llu at start, up to %llu a lane)\n", o->lanes,
               (unsigned long long)o->bytes, (unsigned long long)o->chunk_bytes, (unsigned long long)o->chunks,
               (unsigned long long)o->max_chunks);
        printf("  records written %llu, drained %llu, unread %llu, delivered %llu\n", (unsigned long long)o->written,
               (unsigned long long)o->drained,
               (unsigned long long)(o->written >= o->drained + o->overwritten + o->delivered
                                    ? o->written - o->drained - o->overwritten - o->delivered : 0),
               (unsigned long long)o->delivered);
        printf("  lost: dropped %llu, overwritten %llu, nested %llu, before a lane %llu, rate-limited %llu, "
               "returns not traced %llu\n", (unsigned long long)o->dropped, (unsigned long long)o->overwritten,
               (unsigned long long)o->lost, (unsigned long long)o->laneless, (unsigned long long)o->limited,
               (unsigned long long)o->skipped);
        for (j = 0; j < o->npatterns; j++) {
            const rd_pattern *p = &o->patterns[j];
            char flags[80];
            flag_names(p->flags, 0, flags, sizeof flags);
            printf("  pattern %s:%s/", p->module, p->function);
            if (p->arity < 0) printf("_"); else printf("%d", p->arity);
            printf("  %s%s%s\n", flags, p->flags & BPT_RETURN ? ",return" : "", p->flags & BPT_EXCEPTION ? ",exception" : "");
        }
    }
    if (!n) printf("(no sessions)\n");
    rd_sessions_free(ss, n);
    return 0;
}

static int cmd_progress(int pid) {
    rd_target t;
    rd_snapshot s;
    uint32_t i, nest, online;
    int rc;
    memset(&s, 0, sizeof s);
    if ((rc = open_target(pid, &t, 0)) || (rc = snapshot(pid, &t, &s))) return rc;
    nest = rd_const(&t, BPT_ROOT_C_NEST_BITS);
    online = rd_const(&t, BPT_ROOT_C_ONLINE);
    printf("epoch %llu, waits %llu, thread records %u\n", (unsigned long long)s.epoch, (unsigned long long)s.waits,
           s.nrecords);
    printf("%-8s %-7s %-30s %s\n", "TID", "RECORD", "STATE", "A WAIT FOR THE EPOCH");
    for (i = 0; i < s.nthreads; i++) {
        const rd_thread *th = &s.threads[i];
        uint64_t st = th->state, ep = st >> nest;
        uint32_t pins = (uint32_t)(st & (online - 1));
        char state[64];
        if (!th->in_use) snprintf(state, sizeof state, "exited (record free)");
        else if (st == 0) snprintf(state, sizeof state, "quiescent");
        else if (st & online) snprintf(state, sizeof state, "managed, online at %llu%s", (unsigned long long)ep,
                                       pins ? ", pinned" : "");
        else snprintf(state, sizeof state, "pinned x%u since epoch %llu", pins, (unsigned long long)ep);
        printf("%-8u %-7u %-30s %s\n", th->tid, th->index, state,
               st != 0 && ep < s.epoch ? "waits for it" : "-");
    }
    rd_snapshot_free(&s);
    return 0;
}

/* ---- bpt sample: perf_event_open samples, named through the target ---- */

typedef struct symbol { uint64_t addr, size; const char *file; char *name; } symbol;
typedef struct symtab { symbol *v; size_t n, cap; const char *file; char *files[256]; int nfiles; } symtab;

static void sym_add(const char *name, uint64_t value, uint64_t size, int type, void *user) {
    symtab *st = (symtab *)user;
    if (type != STT_FUNC || !value) return;
    if (st->n == st->cap) {
        symbol *g = (symbol *)realloc(st->v, sizeof *g * (st->cap ? 2 * st->cap : 1024));
        if (!g) return;
        st->v = g;
        st->cap = st->cap ? 2 * st->cap : 1024;
    }
    st->v[st->n].addr = value;
    st->v[st->n].size = size;
    st->v[st->n].file = st->file;
    st->v[st->n].name = strdup(name);
    if (st->v[st->n].name) st->n++;
}
static int sym_file(const char *path, const char *name, uint64_t base, void *user) {
    symtab *st = (symtab *)user;
    uint64_t from = 0;
    size_t n0 = st->n, i;
    int dyn = 0;
    const char *slash = strrchr(name, '/');
    if (st->nfiles == 256 || !(st->file = st->files[st->nfiles] = strdup(slash ? slash + 1 : name))) return 0;
    st->nfiles++;
    (void)elf_symbols(path, sym_add, st, &from, &dyn);
    for (i = n0; i < st->n; i++)   /* where this file's code is in the target */
        if (dyn) st->v[i].addr += base - from;
    return 0;
}
static int sym_cmp(const void *a, const void *b) {
    const symbol *x = (const symbol *)a, *y = (const symbol *)b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}
static const symbol *sym_at(const symtab *st, uint64_t ip) {
    size_t lo = 0, hi = st->n;
    while (lo < hi) {   /* the last symbol at or below ip */
        size_t mid = lo + (hi - lo) / 2;
        if (st->v[mid].addr <= ip) lo = mid + 1; else hi = mid;
    }
    if (!lo) return NULL;
    if (st->v[lo - 1].size && ip >= st->v[lo - 1].addr + st->v[lo - 1].size) return NULL;
    return &st->v[lo - 1];
}

/* The name of a code address: module:function/arity when bptrace has the
   function registered ("[entry]" in the bytes before it that a hit runs
   through, which no ELF symbol covers), else file:symbol, else the address. */
static void name_ip(const rd_target *t, const symtab *st, const rd_snapshot *s, uint64_t ip, char *out, size_t n) {
    const symbol *sy = sym_at(st, ip);
    uint32_t i, pad = rd_const(t, BPT_ROOT_C_ENTRY_PAD);
    for (i = 0; i < s->nfuncs; i++) {
        const rd_func *f = &s->funcs[i];
        if (f->kind == 2 && pad && ip < f->fn && ip >= f->fn - pad) {
            char label[320];
            func_label(f, label, sizeof label);
            snprintf(out, n, "%s [entry]", label);
            return;
        }
        if (f->kind == 2 && ((sy && f->fn == sy->addr) || (f->code_size && ip >= f->fn && ip < f->fn + f->code_size))) {
            func_label(f, out, n);
            return;
        }
    }
    if (sy) snprintf(out, n, "%s:%s", sy->file, sy->name);
    else snprintf(out, n, "0x%llx", (unsigned long long)ip);
}

typedef struct tally { char *key; uint64_t n; } tally;
typedef struct tallies { tally *v; size_t n, cap; } tallies;
static void tally_add(tallies *t, const char *key) {
    size_t i;
    for (i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].key, key)) { t->v[i].n++; return; }
    if (t->n == t->cap) {
        tally *g = (tally *)realloc(t->v, sizeof *g * (t->cap ? 2 * t->cap : 64));
        if (!g) return;
        t->v = g;
        t->cap = t->cap ? 2 * t->cap : 64;
    }
    if ((t->v[t->n].key = strdup(key))) t->v[t->n++].n = 1;
}
static int tally_cmp(const void *a, const void *b) {
    const tally *x = (const tally *)a, *y = (const tally *)b;
    return x->n < y->n ? 1 : x->n > y->n ? -1 : strcmp(x->key, y->key);
}

typedef struct sampler { int tid, fd; unsigned char *ring; size_t bytes; } sampler;
enum { RING_PAGES = 16, MAX_SAMPLED = 1024 };

static int perf_open(int tid, int hz, sampler *sp, int *err) {
    struct perf_event_attr a;
    long page = sysconf(_SC_PAGESIZE);
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_SOFTWARE;
    a.config = PERF_COUNT_SW_TASK_CLOCK;   /* the thread's own CPU time: no PMU needed */
    a.sample_freq = (uint64_t)hz;
    a.freq = 1;
    a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    sp->fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (sp->fd < 0) { *err = errno; return -1; }
    sp->tid = tid;
    sp->bytes = (size_t)page * (1 + RING_PAGES);
    sp->ring = (unsigned char *)mmap(NULL, sp->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sp->fd, 0);
    if (sp->ring == MAP_FAILED) { *err = errno; close(sp->fd); sp->fd = -1; return -1; }
    return 0;
}

/* Take the ring's new samples: the kernel's data_head, read with acquire,
   pairs with its release of the records; our data_tail store releases
   the space back to it (perf_event_open(2), "mmap layout"). */
typedef void (*sample_fn)(int tid, uint64_t ip, void *user);
static void perf_drain(sampler *sp, sample_fn fn, void *user) {
    struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *)sp->ring;
    unsigned char *data = sp->ring + mp->data_offset;
    uint64_t size = mp->data_size, head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE), tail = mp->data_tail;
    while (tail + sizeof(struct perf_event_header) <= head) {
        struct perf_event_header h;
        unsigned char rec[64];
        uint64_t i;
        for (i = 0; i < sizeof h; i++) ((unsigned char *)&h)[i] = data[(tail + i) % size];
        if (h.size < sizeof h || tail + h.size > head) break;
        if (h.type == PERF_RECORD_SAMPLE && h.size >= sizeof h + 16 && h.size <= sizeof rec) {
            uint64_t ip;
            uint32_t pt[2];
            for (i = 0; i < h.size; i++) rec[i] = data[(tail + i) % size];
            memcpy(&ip, rec + sizeof h, 8);
            memcpy(pt, rec + sizeof h + 8, 8);
            fn((int)pt[1], ip, user);
        }
        tail += h.size;
    }
    __atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
}

typedef struct sample_ctx {
    rd_target *t;
    const rd_snapshot *s;
    const symtab *st;
    int pstack;
    const char *blame;
    uint64_t total;
    tallies funcs, stacks;
} sample_ctx;

/* The traced stack of thread tid now, outermost first, joined by ';'. */
static void traced_stack(sample_ctx *c, int tid, char *out, size_t n) {
    uint32_t i, k, nf;
    uint64_t frames[64];
    int moved;
    size_t l = 0;
    out[0] = 0;
    for (i = 0; i < c->s->nthreads; i++) {
        if ((int)c->s->threads[i].tid != tid || !c->s->threads[i].in_use) continue;
        if (rd_stack(c->t, &c->s->threads[i], 0, frames, &nf, 64, &moved)) return;
        for (k = 0; k < nf && l + 1 < n; k++) {
            const rd_func *f = rd_func_at(c->s, frames[k]);
            char label[320];
            if (f) func_label(f, label, sizeof label); else snprintf(label, sizeof label, "?");
            l += (size_t)snprintf(out + l, n - l, "%s%s", l ? ";" : "", label);
        }
        return;
    }
}

static void on_sample(int tid, uint64_t ip, void *user) {
    sample_ctx *c = (sample_ctx *)user;
    char leaf[400], stack[4096], key[4600];
    name_ip(c->t, c->st, c->s, ip, leaf, sizeof leaf);
    c->total++;
    tally_add(&c->funcs, leaf);
    if (!c->pstack && !c->blame) return;
    traced_stack(c, tid, stack, sizeof stack);
    if (c->blame && strcmp(leaf, c->blame)) return;
    snprintf(key, sizeof key, "%s%s%s", stack, stack[0] ? ";" : "", leaf);
    tally_add(&c->stacks, c->blame ? (stack[0] ? stack : "(no traced caller)") : key);
}

static int cmd_sample(int pid, double seconds, int hz, int pstack, const char *blame) {
    rd_target t;
    rd_snapshot s;
    symtab st;
    sample_ctx c;
    sampler sp[MAX_SAMPLED];
    int nsp = 0, rc, i, err = 0, refused = 0;
    struct timespec start, now;
    char path[64];
    DIR *d;
    struct dirent *e;
    memset(&s, 0, sizeof s);
    memset(&st, 0, sizeof st);
    memset(&c, 0, sizeof c);
    if ((rc = open_target(pid, &t, 0)) || (rc = snapshot(pid, &t, &s))) return rc;
    if ((rc = mapped_files(pid, sym_file, &st))) { rd_snapshot_free(&s); return rc; }
    qsort(st.v, st.n, sizeof *st.v, sym_cmp);
    c.t = &t; c.s = &s; c.st = &st; c.pstack = pstack; c.blame = blame;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        double el;
        /* Threads started since the last look get a sampler too. */
        snprintf(path, sizeof path, "/proc/%d/task", pid);
        if ((d = opendir(path))) {
            while ((e = readdir(d)) && nsp < MAX_SAMPLED) {
                int tid = atoi(e->d_name), have = 0;
                if (tid <= 0) continue;
                for (i = 0; i < nsp; i++) have |= sp[i].tid == tid;
                if (!have && perf_open(tid, hz, &sp[nsp], &err) == 0) nsp++;
                else if (!have && (err == EACCES || err == EPERM)) refused = 1;
            }
            closedir(d);
        } else if (!nsp) {
            rd_snapshot_free(&s);
            return report(pid, &t, RD_EGONE);
        }
        if (!nsp && (refused || err)) {
            int paranoid = -9;
            FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
            if (f) { if (fscanf(f, "%d", &paranoid) != 1) paranoid = -9; fclose(f); }
            fprintf(stderr, "bpt: perf events refused for process %d: %s; kernel.perf_event_paranoid is %d "
                    "(2: own processes' user space only; 3 and up: none without CAP_PERFMON)\n", pid,
                    strerror(err), paranoid);
            rd_snapshot_free(&s);
            return EXIT_PERM;
        }
        usleep(10000);
        for (i = 0; i < nsp; i++) perf_drain(&sp[i], on_sample, &c);
        clock_gettime(CLOCK_MONOTONIC, &now);
        el = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
        if (el >= seconds) break;
    }
    for (i = 0; i < nsp; i++) { munmap(sp[i].ring, sp[i].bytes); close(sp[i].fd); }
    qsort(c.funcs.v, c.funcs.n, sizeof *c.funcs.v, tally_cmp);
    qsort(c.stacks.v, c.stacks.n, sizeof *c.stacks.v, tally_cmp);
    printf("bpt sample %d: %llu samples of %d threads in %.1f s at %d Hz (task clock)\n", pid,
           (unsigned long long)c.total, nsp, seconds, hz);
    if (!blame) {
        printf("%10s %6s  %s\n", "SAMPLES", "%", "FUNCTION");
        for (i = 0; i < (int)c.funcs.n && i < 20; i++)
            printf("%10llu %5.1f%%  %s\n", (unsigned long long)c.funcs.v[i].n,
                   100.0 * (double)c.funcs.v[i].n / (double)(c.total ? c.total : 1), c.funcs.v[i].key);
    }
    if (pstack || blame) {
        printf(blame ? "\ntraced callers of %s:\n%10s  %s\n" : "\n%s%10s  %s\n", blame ? blame : "",
               "SAMPLES", blame ? "CALLERS (outermost first)" : "TRACED STACK;LEAF (outermost first)");
        for (i = 0; i < (int)c.stacks.n && i < 20; i++)
            printf("%10llu  %s\n", (unsigned long long)c.stacks.v[i].n, c.stacks.v[i].key);
    }
    for (i = 0; i < (int)c.funcs.n; i++) free(c.funcs.v[i].key);
    for (i = 0; i < (int)c.stacks.n; i++) free(c.stacks.v[i].key);
    free(c.funcs.v); free(c.stacks.v);
    while (st.n) free(st.v[--st.n].name);
    while (st.nfiles) free(st.files[--st.nfiles]);
    free(st.v);
    rd_snapshot_free(&s);
    return 0;
}

#include "client.h"

static int usage(void) {
    fprintf(stderr,
            "usage: bpt ps\n"
            "       bpt funcs PID [PATTERN]     PATTERN: a glob on module:function/arity\n"
            "       bpt top PID [-n REFRESHES] [-d SECONDS] [-r ROWS] [-s calls|time]\n"
            "       bpt pstack PID\n"
            "       bpt sessions PID\n"
            "       bpt progress PID\n"
            "       bpt sample PID [--pstack] [--blame FUNCTION] [--hz N] [--duration SECONDS]\n"
            "       bpt trace PID PATTERN [--return] [--exception] [--caller] [--args SPEC] [--ret TYPE]\n"
            "                 [--limit N/MS] [--duration SECONDS] [-o FILE.bpt] [--chrome FILE] [--folded FILE]\n"
            "       bpt count PID PATTERN [--duration SECONDS] [-r ROWS]\n"
            "       bpt profile PID PATTERN [--duration SECONDS] [--memory] [-r ROWS]\n"
            "       bpt record -o FILE.bpt [--kinds KINDS] PATTERN -- PROG ARGS...\n"
            "       bpt replay FILE.bpt [--chrome FILE] [--folded FILE]\n"
            "       bpt report FILE.bpt [-r ROWS]\n"
            "       bpt dump --chrome|--folded FILE.bpt\n");
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    int pid;
    char *end;
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "ps")) return argc == 2 ? cmd_ps() : usage();
    if (argc < 3) return usage();
    if (!strcmp(argv[1], "replay")) {
        const char *chrome = NULL, *folded = NULL;
        for (int i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "--chrome") && i + 1 < argc) chrome = argv[++i];
            else if (!strcmp(argv[i], "--folded") && i + 1 < argc) folded = argv[++i];
            else return usage();
        }
        return cmd_replay(argv[2], chrome, folded);
    }
    if (!strcmp(argv[1], "report")) {
        int rows = 30;
        for (int i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "-r") && i + 1 < argc) rows = atoi(argv[++i]);
            else return usage();
        }
        return rows < 1 ? usage() : cmd_report(argv[2], rows);
    }
    if (!strcmp(argv[1], "dump") && argc == 4 && (!strcmp(argv[2], "--chrome") || !strcmp(argv[2], "--folded")))
        return cmd_replay(argv[3], argv[2][2] == 'c' ? "/dev/stdout" : NULL, argv[2][2] == 'f' ? "/dev/stdout" : NULL);
    if (!strcmp(argv[1], "record")) {
        const char *out = NULL, *kinds = "call,return", *pattern = NULL;
        int i;
        for (i = 2; i < argc && strcmp(argv[i], "--"); i++) {
            if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
            else if (!strcmp(argv[i], "--kinds") && i + 1 < argc) kinds = argv[++i];
            else if (!pattern && argv[i][0] != '-') pattern = argv[i];
            else return usage();
        }
        if (!out || i + 1 >= argc) return usage();
        return cmd_record(out, kinds, pattern ? pattern : "_:_/_", argv + i + 1);
    }
    pid = (int)strtol(argv[2], &end, 10);
    if (*end || pid <= 0) { fprintf(stderr, "bpt: not a process id: '%s'\n", argv[2]); return EXIT_USAGE; }
    if (!strcmp(argv[1], "funcs") && argc <= 4) return cmd_funcs(pid, argc == 4 ? argv[3] : NULL);
    if (!strcmp(argv[1], "pstack") && argc == 3) return cmd_pstack(pid);
    if (!strcmp(argv[1], "sessions") && argc == 3) return cmd_sessions(pid);
    if (!strcmp(argv[1], "progress") && argc == 3) return cmd_progress(pid);
    if (!strcmp(argv[1], "sample")) {
        int hz = 997, pstack = 0, i;
        double secs = 2.0;
        const char *blame = NULL;
        for (i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "--pstack")) pstack = 1;
            else if (!strcmp(argv[i], "--blame") && i + 1 < argc) blame = argv[++i];
            else if (!strcmp(argv[i], "--hz") && i + 1 < argc) hz = atoi(argv[++i]);
            else if (!strcmp(argv[i], "--duration") && i + 1 < argc) secs = atof(argv[++i]);
            else return usage();
        }
        if (hz < 1 || hz > 100000 || !(secs > 0.0 && secs < 86400.0)) return usage();
        return cmd_sample(pid, secs, hz, pstack, blame);
    }
    if ((!strcmp(argv[1], "count") || !strcmp(argv[1], "profile")) && argc >= 4) {
        double secs = 1.0;
        int rows = 1000000, memory = 0;
        for (int i = 4; i < argc; i++) {
            if (!strcmp(argv[i], "--duration") && i + 1 < argc) secs = atof(argv[++i]);
            else if (!strcmp(argv[i], "-r") && i + 1 < argc) rows = atoi(argv[++i]);
            else if (!strcmp(argv[i], "--memory") && argv[1][0] == 'p') memory = 1;
            else return usage();
        }
        if (!(secs > 0.0 && secs < 86400.0) || rows < 1) return usage();
        return cmd_counting(pid, argv[3], argv[1][0] == 'c' ? "count" : memory ? "memory" : "time", secs, rows);
    }
    if (!strcmp(argv[1], "trace") && argc >= 4) {
        trace_opts o;
        memset(&o, 0, sizeof o);
        o.pattern = argv[3];
        for (int i = 4; i < argc; i++) {
            if (!strcmp(argv[i], "--return")) o.ret_trace = 1;
            else if (!strcmp(argv[i], "--exception")) o.exc_trace = 1;
            else if (!strcmp(argv[i], "--caller")) o.caller = 1;
            else if (!strcmp(argv[i], "--args") && i + 1 < argc) o.args = argv[++i];
            else if (!strcmp(argv[i], "--ret") && i + 1 < argc) o.ret = argv[++i];
            else if (!strcmp(argv[i], "--limit") && i + 1 < argc) o.limit = argv[++i];
            else if (!strcmp(argv[i], "--duration") && i + 1 < argc) o.seconds = atof(argv[++i]);
            else if (!strcmp(argv[i], "-o") && i + 1 < argc) o.out = argv[++i];
            else if (!strcmp(argv[i], "--chrome") && i + 1 < argc) o.chrome = argv[++i];
            else if (!strcmp(argv[i], "--folded") && i + 1 < argc) o.folded = argv[++i];
            else return usage();
        }
        if (o.seconds < 0.0 || o.seconds >= 86400.0) return usage();
        return cmd_trace(pid, &o);
    }
    if (!strcmp(argv[1], "top")) {
        int n = 1000000, i, r = 30, by_time = 0;
        double d = 1.0;
        for (i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
            else if (!strcmp(argv[i], "-s") && i + 1 < argc && !strcmp(argv[i + 1], "time")) by_time = 1, i++;
            else if (!strcmp(argv[i], "-s") && i + 1 < argc && !strcmp(argv[i + 1], "calls")) by_time = 0, i++;
            else if (!strcmp(argv[i], "-r") && i + 1 < argc) r = atoi(argv[++i]);
            else if (!strcmp(argv[i], "-d") && i + 1 < argc) d = atof(argv[++i]);
            else return usage();
        }
        if (n < 1 || r < 1 || !(d > 0.0 && d < 3600.0)) return usage();
        return cmd_top(pid, n, d, r, by_time);
    }
    return usage();
}
