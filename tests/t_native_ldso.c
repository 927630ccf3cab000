/* t_native_ldso: BPT_TEST_WHOLE_PROGRAM
   The program started through the dynamic loader, as
   "/lib64/ld-linux-x86-64.so.2 ./prog" starts it (found by review). Then
   /proc/self/exe is ld.so, not the program: bpt_register_module(NULL) read
   ld.so's file, found it differs from the loaded program and failed with
   "rebuilt or replaced since?", and the program's own name was not loaded
   (BPT_ENOENT). The main program's file is now the one mapped where its
   first segment is (/proc/self/maps). The test runs itself again through
   its PT_INTERP; where that cannot run (qemu-user: no binfmt for the
   loader) it says SKIPPED. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "native_fixture.h"

#if !defined(BPT_NATIVE)
NATIVE_UNSUPPORTED_MAIN("bpt_register_module(NULL) in a program started through ld.so")
#else
#include <link.h>
#include <errno.h>
#include <string.h>
#include <sys/wait.h>

#define EXEC_FAILED 125   /* the child's status when the loader could not be executed */

__attribute__((noinline)) long work(long x) { __asm__ volatile(""); return x * 3; }

static int find_interp(struct dl_phdr_info *info, size_t size, void *data) {
    int i;
    (void)size;
    for (i = 0; i < (int)info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_INTERP)
            *(const char **)data = (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    return 1;   /* the first object is the main program */
}

/* In the program started through ld.so: argv[2] is the program's path. */
static int child(const char *prog) {
    char exe[PATH_MAX];
    const char *base = strrchr(prog, '/') ? strrchr(prog, '/') + 1 : prog;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    bpt_func *f;
    int rc;
    exe[n > 0 ? n : 0] = '\0';
    printf("child: /proc/self/exe is %s; the program is %s\n", exe, prog);
    CHECK(strcmp(exe, prog) != 0, "not started through ld.so: /proc/self/exe is the program");
    rc = bpt_register_module(NULL);
    printf("bpt_register_module(NULL) = %d %s\n", rc, rc < 0 ? bpt_last_error() : "");
    CHECK(rc > 0, "bpt_register_module(NULL): %d (%s)", rc, bpt_last_error());
    rc = bpt_func_lookup(base, "work", 0, &f);
    CHECK(rc == 0, "%s:work/0: %s", base, bpt_last_error());
    if (rc == 0) CHECK(f->fn == (void *)work, "work registered at %p, is at %p", f->fn, (void *)work);
    rc = bpt_register_module(base);
    printf("bpt_register_module(\"%s\") = %d %s\n", base, rc, rc < 0 ? bpt_last_error() : "");
    CHECK(rc == 0, "by its name: %d (%s), expected 0 (registered already)", rc, bpt_last_error());
    rc = bpt_register_imports(NULL, NULL);
    printf("bpt_register_imports(NULL) = %d %s\n", rc, rc < 0 ? bpt_last_error() : "");
    CHECK(rc >= 0 || rc == BPT_ENOTSUP, "bpt_register_imports(NULL): %d (%s)", rc, bpt_last_error());
    CHECK(work(2) == 6, "work computes");
    return CHECK_DONE();
}

int main(int argc, char **argv) {
    const char *interp = NULL;
    char prog[PATH_MAX], why[PATH_MAX + 200];
    ssize_t n;
    pid_t pid;
    int status;
    if (argc == 3 && strcmp(argv[1], "--child") == 0) return child(argv[2]);
    if ((n = readlink("/proc/self/exe", prog, sizeof prog - 1)) <= 0) return CHECK_SKIP("no /proc/self/exe");
    prog[n] = '\0';
    dl_iterate_phdr(find_interp, &interp);
    if (!interp) return CHECK_SKIP("the program has no PT_INTERP (static?)");
    printf("running %s %s --child\n", interp, prog);
    fflush(stdout);
    if ((pid = fork()) == 0) {
        execl(interp, interp, prog, "--child", prog, (char *)NULL);
        printf("execl %s: %s\n", interp, strerror(errno));
        fflush(stdout);
        _exit(EXEC_FAILED);
    }
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork/waitpid");
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == EXEC_FAILED) {
        snprintf(why, sizeof why, "cannot execute the loader %s (execl's error above; under qemu-user the "
                 "loader is the target's, under qemu's -L prefix, which execve does not use)", interp);
        return CHECK_SKIP(why);
    }
    CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child through ld.so: status 0x%x", status);
    return CHECK_DONE();
}
#endif
