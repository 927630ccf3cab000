/* t_format_locale
   The Chrome writer's numbers do not follow the program's locale: a program
   that calls setlocale(LC_ALL, "de_DE.UTF-8") prints "%.3f" as "1,500",
   which is not JSON (the writer printed ts so; found by review). Under a
   locale with a decimal comma (generated with localedef into a directory
   of the test's own when the system has none: .ci/install-deps installs
   the locale sources), a trace's ts must still read 1.500, and names with
   bytes that are not UTF-8 must come out as valid JSON strings. */
#define BPTRACE_IMPLEMENTATION
#include "../bptrace.h"
#include "check.h"
#include "format_fixture.h"
#include <locale.h>
#include <stdlib.h>
#include <string.h>

/* A locale whose decimal point is a comma, or NULL. */
static const char *comma_locale(char *dir, size_t size) {
    static const char *names[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE" };
    char cmd[512];
    size_t i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (setlocale(LC_NUMERIC, names[i])) return names[i];
    /* None installed: make one, as `localedef` does for the system. */
    snprintf(dir, size, "/tmp/bpt_locale.%ld", (long)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s && localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 > /dev/null 2>&1", dir, dir);
    if (system(cmd) != 0) return NULL;
    setenv("LOCPATH", dir, 1);
    return setlocale(LC_NUMERIC, "de_DE.UTF-8") ? "de_DE.UTF-8 (generated)" : NULL;
}

int main(void) {
    static const char F[] = "f", BAD[] = "caf\xc3\xa9_\xff\xc3";   /* é, then a stray byte and a cut sequence */
    char dir[256] = "", probe[32], cmd[300];
    const char *loc = comma_locale(dir, sizeof dir);
    bpt_chrome w;
    bpt_msg m;
    FILE *out;
    char *text;
    if (!loc) {
        printf("no locale with a decimal comma here, and localedef could not make one (package locales)\n");
        return CHECK_SKIP("no de_DE locale and no locale sources to make one (.ci/install-deps installs them)");
    }
    snprintf(probe, sizeof probe, "%.3f", 1.5);
    printf("locale %s: printf(\"%%.3f\", 1.5) gives %s\n", loc, probe);
    CHECK(strcmp(probe, "1,500") == 0, "the locale's decimal point is a comma (%s)", probe);
    out = tmpfile();
    CHECK_RC(bpt_chrome_open(&w, out), 0);
    m = msg(BPT_MSG_CALL, 5, F, 0);
    CHECK_RC(bpt_chrome_write(&w, &m), 0);
    m = msg(BPT_MSG_CALL, 5, BAD, 1);
    m.ts_ns = 1500;   /* 1.5 us */
    CHECK_RC(bpt_chrome_write(&w, &m), 0);
    m = msg(BPT_MSG_RETURN_FROM, 5, BAD, 2);
    CHECK_RC(bpt_chrome_write(&w, &m), 0);
    CHECK(bpt_chrome_close(&w) > 0, "closed");
    text = slurp(out);
    printf("%s", text);
    CHECK(strstr(text, "\"ts\":1.500") != NULL && strstr(text, "\"ts\":2.000") != NULL && !strstr(text, ",500"),
          "ts in microseconds with a decimal point, whatever the locale");
    CHECK(strstr(text, "caf\xc3\xa9_\\ufffd\\ufffd") != NULL && count(text, "\\ufffd") == 4,
          "valid UTF-8 kept, the other bytes as U+FFFD (in the B and the E)");
    free(text);
    fclose(out);
    setlocale(LC_NUMERIC, "C");
    if (dir[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "removed %s", dir);
    }
    return CHECK_DONE();
}
