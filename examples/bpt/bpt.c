/* bpt: look into a running bptrace program from outside, without stopping
   it (think-outside-the-beam's erlang-sample, for bptrace). It reads the
   target with process_vm_readv only: never ptrace, never /proc/PID/mem,
   never a write, never a stop. It finds the target's root record
   (bptrace.h >>root) from /proc/PID/maps and the ELF symbols of the mapped
   files, checks it (bpt_root_check), and walks what it describes
   (reader.h).

     bpt ps                      processes that contain bptrace
     bpt funcs PID [PATTERN]     registered functions, their trace flags and counts
     bpt top PID [-n N] [-d S]   call_count per function, refreshed every S seconds
     bpt pstack PID              each thread's traced call stack (shadow stacks)
     bpt sessions PID            sessions: patterns, buffers, drops
     bpt progress PID            thread progress: epoch, each thread's state

   Exit status: 0 done; 1 usage; 2 no such process, or it exited; 3 the
   kernel refused the read (another uid, ptrace_scope); 4 no bptrace in the
   process; 5 a root record or data this reader cannot use (the reason is
   printed). */
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_USAGE = 1, EXIT_GONE = 2, EXIT_PERM = 3, EXIT_NOBPT = 4, EXIT_BAD = 5 };

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
    default:
        fprintf(stderr, "bpt: process %d: cannot read %s: corrupt data, or a layout this reader "
                "does not know\n", pid, t->what);
        return EXIT_BAD;
    }
}

/* ---- Finding the root record: /proc/PID/maps and ELF symbols ---- */

/* The value of symbol `name` in an ELF64 file (.symtab, then .dynsym), and
   the lowest PT_LOAD's page-aligned address; 0 when it has none. */
static int elf_symbol(const char *path, const char *name, uint64_t *value, uint64_t *load0) {
    int fd = open(path, O_RDONLY | O_CLOEXEC), found = 0;
    struct stat st;
    unsigned char *m;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    int i, pass;
    if (fd < 0) return 0;
    if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) { close(fd); return 0; }
    m = (unsigned char *)mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return 0;
    eh = (const Elf64_Ehdr *)m;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        eh->e_shoff > (uint64_t)st.st_size || eh->e_shnum > ((uint64_t)st.st_size - eh->e_shoff) / sizeof(Elf64_Shdr) ||
        eh->e_phoff > (uint64_t)st.st_size || eh->e_phnum > ((uint64_t)st.st_size - eh->e_phoff) / sizeof(Elf64_Phdr))
        goto out;
    *load0 = 0;
    for (i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(m + eh->e_phoff) + i;
        if (ph->p_type == PT_LOAD) { *load0 = ph->p_vaddr & ~(uint64_t)0xfff; break; }
    }
    sh = (const Elf64_Shdr *)(m + eh->e_shoff);
    for (pass = 0; pass < 2 && !found; pass++) {
        for (i = 0; i < eh->e_shnum && !found; i++) {
            const Elf64_Shdr *s = &sh[i], *strs;
            const Elf64_Sym *sym;
            uint64_t j, n;
            if (s->sh_type != (pass ? SHT_DYNSYM : SHT_SYMTAB) || s->sh_link >= eh->e_shnum) continue;
            strs = &sh[s->sh_link];
            if (s->sh_offset > (uint64_t)st.st_size || s->sh_size > (uint64_t)st.st_size - s->sh_offset ||
                strs->sh_offset > (uint64_t)st.st_size || strs->sh_size > (uint64_t)st.st_size - strs->sh_offset)
                continue;
            sym = (const Elf64_Sym *)(m + s->sh_offset);
            n = s->sh_size / sizeof *sym;
            for (j = 0; j < n; j++) {
                if (sym[j].st_name >= strs->sh_size || ELF64_ST_TYPE(sym[j].st_info) != STT_OBJECT) continue;
                if (strncmp((const char *)m + strs->sh_offset + sym[j].st_name, name,
                            strs->sh_size - sym[j].st_name) == 0 && sym[j].st_shndx != SHN_UNDEF) {
                    *value = sym[j].st_value;
                    found = eh->e_type == ET_DYN ? 2 : 1;
                    break;
                }
            }
        }
    }
out:
    munmap(m, (size_t)st.st_size);
    return found;
}

/* The root record's address in process pid: 0 found, EXIT_GONE, EXIT_NOBPT. */
static int find_root(int pid, uint64_t *addr, char *file, size_t file_len) {
    char path[64], line[4096 + 128], seen[64][512];
    int nseen = 0, rc = EXIT_NOBPT;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    if (!(f = fopen(path, "r"))) return errno == EACCES || errno == EPERM ? EXIT_PERM : EXIT_GONE;
    while (fgets(line, sizeof line, f)) {
        unsigned long long lo, hi, off;
        char perms[8], obj[4096 + 64];
        int k, dup = 0, kind;
        uint64_t value = 0, load0 = 0;
        obj[0] = 0;
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095[^\n]", &lo, &hi, perms, &off, obj) < 4) continue;
        if (obj[0] != '/' || off != 0) continue;   /* the file's first mapping holds its base */
        for (k = 0; k < nseen; k++) dup |= !strcmp(seen[k], obj);
        if (dup) continue;
        if (nseen < 64) snprintf(seen[nseen++], sizeof seen[0], "%s", obj);
        /* Through /proc/PID/root: the file as the target sees it (another mount namespace). */
        snprintf(path, sizeof path, "/proc/%d/root", pid);
        {
            char full[4096 + 128];
            snprintf(full, sizeof full, "%s%s", path, obj);
            if (!(kind = elf_symbol(full, "bpt_root", &value, &load0))) kind = elf_symbol(obj, "bpt_root", &value, &load0);
        }
        if (!kind) continue;
        *addr = kind == 2 ? lo - load0 + value : value;
        snprintf(file, file_len, "%s", obj);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

/* Open pid's root: 0, or an exit status with its message printed. */
static int open_target(int pid, rd_target *t, int quiet) {
    uint64_t addr;
    char file[512], why[256];
    int rc;
    memset(t, 0, sizeof *t);
    t->read = vm_read;
    t->user = (void *)(intptr_t)pid;
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

static int snapshot(int pid, rd_target *t, rd_snapshot *s) {
    int rc = rd_snapshot_take(t, s, 20);
    if (rc) return report(pid, t, rc);
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

static int by_rate(const void *a, const void *b) {
    const double *x = (const double *)a, *y = (const double *)b;
    return x[0] < y[0] ? 1 : x[0] > y[0] ? -1 : 0;
}

static int cmd_top(int pid, int refreshes, double delay) {
    rd_target t;
    rd_snapshot prev, cur;
    int rc, r;
    memset(&prev, 0, sizeof prev);
    memset(&cur, 0, sizeof cur);
    if ((rc = open_target(pid, &t, 0)) || (rc = snapshot(pid, &t, &prev))) return rc;
    for (r = 0; r < refreshes; r++) {
        struct timespec ts = { (time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9) };
        double (*rows)[2];
        uint32_t i, j, n = 0;
        uint64_t total = 0;
        nanosleep(&ts, NULL);
        if ((rc = snapshot(pid, &t, &cur))) { rd_snapshot_free(&prev); return rc; }
        rows = (double (*)[2])calloc(cur.nfuncs + 1, sizeof *rows);
        if (!rows) { rd_snapshot_free(&prev); rd_snapshot_free(&cur); return report(pid, &t, RD_ENOMEM); }
        for (i = 0; i < cur.nfuncs; i++) {
            const rd_func *f = &cur.funcs[i];
            uint64_t before = 0;
            if (!f->counted) continue;
            for (j = 0; j < prev.nfuncs; j++)
                if (prev.funcs[j].addr == f->addr && prev.funcs[j].counted) { before = prev.funcs[j].count; break; }
            rows[n][0] = (double)(f->count >= before ? f->count - before : 0) / delay;
            rows[n][1] = (double)i;
            total += f->count;
            n++;
        }
        qsort(rows, n, sizeof *rows, by_rate);
        printf("bpt top %d: epoch %llu, %u threads, %u counted functions, %llu calls in all%s\n", pid,
               (unsigned long long)cur.epoch, cur.nrecords, n, (unsigned long long)total, cur.torn ? " (torn)" : "");
        printf("%14s %14s  %s\n", "CALLS/S", "CALL_COUNT", "FUNCTION");
        for (i = 0; i < n && i < 30; i++) {
            const rd_func *f = &cur.funcs[(uint32_t)rows[i][1]];
            char label[320];
            func_label(f, label, sizeof label);
            printf("%14.0f %14llu  %s\n", rows[i][0], (unsigned long long)f->count, label);
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
    uint32_t i, j, k, max = 0;
    uint64_t seq;
    unsigned char *sb = NULL, *lb = NULL;
    uint64_t *lanes = NULL;
    int rc, shown = 0;
    if ((rc = open_target(pid, &t, 0))) return rc;
    max = rd_const(&t, BPT_ROOT_C_MAX_SESSIONS);
    sb = (unsigned char *)malloc(rd_size(&t, BPT_ROOT_S_SESSION));
    lb = (unsigned char *)malloc(rd_size(&t, BPT_ROOT_S_LANE) > rd_size(&t, BPT_ROOT_S_PATTERN)
                                 ? rd_size(&t, BPT_ROOT_S_LANE) : rd_size(&t, BPT_ROOT_S_PATTERN));
    lanes = (uint64_t *)malloc(8ull * rd_const(&t, BPT_ROOT_C_LANES_PER_DIR));
    if (!sb || !lb || !lanes) { rc = report(pid, &t, RD_ENOMEM); goto out; }
    if ((rc = rd_u64(&t, rd_global(&t, BPT_ROOT_G_SEQ), &seq, "the layout count"))) { rc = report(pid, &t, rc); goto out; }
    for (i = 0; i < max; i++) {
        uint64_t sa, pa, written = 0, dropped = 0, over = 0, delivered = 0, lost = 0, drained = 0, bytes = 0;
        uint32_t nlanes = 0, np = 0;
        const char *type;
        if ((rc = rd_u64(&t, rd_global(&t, BPT_ROOT_G_SESSIONS) + 8ull * i, &sa, "the session table"))) goto fail;
        if (!sa) continue;
        if ((rc = rd_bytes(&t, sa, sb, rd_size(&t, BPT_ROOT_S_SESSION), "a session"))) goto fail;
        type = rd_field(&t, sb, BPT_ROOT_F_SESSION_USDT) ? "usdt" : rd_field(&t, sb, BPT_ROOT_F_SESSION_TRACER) ? "callback"
             : rd_field(&t, sb, BPT_ROOT_F_SESSION_FLIGHT) ? "flight recorder" : "buffered";
        for (j = 0; j < rd_const(&t, BPT_ROOT_C_LANE_DIRS); j++) {
            uint64_t dir;
            memcpy(&dir, (const unsigned char *)rd_field_ptr(&t, sb, BPT_ROOT_F_SESSION_LANE_DIR) + 8ull * j, 8);
            if (!dir) continue;
            if ((rc = rd_bytes(&t, dir, lanes, 8ull * rd_const(&t, BPT_ROOT_C_LANES_PER_DIR), "a lane directory"))) goto fail;
            for (k = 0; k < rd_const(&t, BPT_ROOT_C_LANES_PER_DIR); k++) {
                if (!lanes[k]) continue;
                if ((rc = rd_bytes(&t, lanes[k], lb, rd_size(&t, BPT_ROOT_S_LANE), "a lane"))) goto fail;
                nlanes++;
                written += rd_field(&t, lb, BPT_ROOT_F_LANE_WRITTEN);
                dropped += rd_field(&t, lb, BPT_ROOT_F_LANE_DROPPED);
                over += rd_field(&t, lb, BPT_ROOT_F_LANE_OVERWRITTEN);
                delivered += rd_field(&t, lb, BPT_ROOT_F_LANE_DELIVERED);
                lost += rd_field(&t, lb, BPT_ROOT_F_LANE_LOST);
                drained += rd_field(&t, lb, BPT_ROOT_F_LANE_DRAINED);
                bytes += rd_field(&t, lb, BPT_ROOT_F_LANE_BUDGET) * rd_field(&t, lb, BPT_ROOT_F_LANE_CHUNK_BYTES);
            }
        }
        printf("session %llu \"%.*s\": %s%s\n", (unsigned long long)rd_field(&t, sb, BPT_ROOT_F_SESSION_ID),
               (int)t.root.field_bytes[BPT_ROOT_F_SESSION_NAME] - 1,
               (const char *)rd_field_ptr(&t, sb, BPT_ROOT_F_SESSION_NAME), type,
               rd_field(&t, sb, BPT_ROOT_F_SESSION_DEAD) ? " (being destroyed)" : "");
        printf("  lanes %u, buffers %llu bytes (chunks of %llu, %llu at start, up to %llu a lane)\n", nlanes,
               (unsigned long long)bytes, (unsigned long long)rd_field(&t, sb, BPT_ROOT_F_SESSION_CHUNK_BYTES),
               (unsigned long long)rd_field(&t, sb, BPT_ROOT_F_SESSION_CHUNKS),
               (unsigned long long)rd_field(&t, sb, BPT_ROOT_F_SESSION_MAX_CHUNKS));
        printf("  records written %llu, drained %llu, unread %llu, delivered %llu\n", (unsigned long long)written,
               (unsigned long long)drained, (unsigned long long)(written >= drained + over ? written - drained - over : 0),
               (unsigned long long)delivered);
        printf("  lost: dropped %llu, overwritten %llu, nested %llu, before a lane %llu, rate-limited %llu, "
               "returns not traced %llu\n", (unsigned long long)dropped, (unsigned long long)over,
               (unsigned long long)lost, (unsigned long long)rd_field(&t, sb, BPT_ROOT_F_SESSION_LANELESS),
               (unsigned long long)rd_field(&t, sb, BPT_ROOT_F_SESSION_LIMITED),
               (unsigned long long)rd_field(&t, sb, BPT_ROOT_F_SESSION_SKIPPED));
        for (pa = rd_field(&t, sb, BPT_ROOT_F_SESSION_PATTERNS); pa; pa = rd_field(&t, lb, BPT_ROOT_F_PATTERN_NEXT)) {
            char flags[80];
            int ar;
            uint32_t mw = t.root.field_bytes[BPT_ROOT_F_PATTERN_MODULE], fw = t.root.field_bytes[BPT_ROOT_F_PATTERN_FUNCTION];
            if (np++ > RD_MAX_PATTERNS) { rc = rd_fail(&t, RD_EFAULT, "a pattern list without an end", pa); goto fail; }
            if ((rc = rd_bytes(&t, pa, lb, rd_size(&t, BPT_ROOT_S_PATTERN), "a pattern"))) goto fail;
            flag_names((unsigned)rd_field(&t, lb, BPT_ROOT_F_PATTERN_FLAGS), 0, flags, sizeof flags);
            ar = (int)(int32_t)rd_field(&t, lb, BPT_ROOT_F_PATTERN_ARITY);
            printf("  pattern %.*s:%.*s/", (int)mw - 1, (const char *)rd_field_ptr(&t, lb, BPT_ROOT_F_PATTERN_MODULE),
                   (int)fw - 1, (const char *)rd_field_ptr(&t, lb, BPT_ROOT_F_PATTERN_FUNCTION));
            if (ar < 0) printf("_"); else printf("%d", ar);
            printf("  %s%s%s\n", flags, rd_field(&t, lb, BPT_ROOT_F_PATTERN_FLAGS) & BPT_RETURN ? ",return" : "",
                   rd_field(&t, lb, BPT_ROOT_F_PATTERN_FLAGS) & BPT_EXCEPTION ? ",exception" : "");
        }
        shown++;
    }
    {
        uint64_t seq2 = seq + 1;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);   /* [L1] reader */
        if (rd_u64(&t, rd_global(&t, BPT_ROOT_G_SEQ), &seq2, "the layout count") || seq2 != seq || (seq & 1))
            fprintf(stderr, "bpt: warning: sessions changed while they were read; what is above may be torn\n");
    }
    if (!shown) printf("(no sessions)\n");
    rc = 0;
    goto out;
fail:
    rc = report(pid, &t, rc);
out:
    free(sb); free(lb); free(lanes);
    return rc;
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

static int usage(void) {
    fprintf(stderr,
            "usage: bpt ps\n"
            "       bpt funcs PID [PATTERN]     PATTERN: a glob on module:function/arity\n"
            "       bpt top PID [-n REFRESHES] [-d SECONDS]\n"
            "       bpt pstack PID\n"
            "       bpt sessions PID\n"
            "       bpt progress PID\n");
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    int pid;
    char *end;
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "ps")) return argc == 2 ? cmd_ps() : usage();
    if (argc < 3) return usage();
    pid = (int)strtol(argv[2], &end, 10);
    if (*end || pid <= 0) { fprintf(stderr, "bpt: not a process id: '%s'\n", argv[2]); return EXIT_USAGE; }
    if (!strcmp(argv[1], "funcs") && argc <= 4) return cmd_funcs(pid, argc == 4 ? argv[3] : NULL);
    if (!strcmp(argv[1], "pstack") && argc == 3) return cmd_pstack(pid);
    if (!strcmp(argv[1], "sessions") && argc == 3) return cmd_sessions(pid);
    if (!strcmp(argv[1], "progress") && argc == 3) return cmd_progress(pid);
    if (!strcmp(argv[1], "top")) {
        int n = 1000000, i;
        double d = 1.0;
        for (i = 3; i < argc; i++) {
            if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
            else if (!strcmp(argv[i], "-d") && i + 1 < argc) d = atof(argv[++i]);
            else return usage();
        }
        if (n < 1 || !(d > 0.0 && d < 3600.0)) return usage();
        return cmd_top(pid, n, d);
    }
    return usage();
}
