/* proc_run_capture keeps the start and the end of a long stderr: a tool's usage error is at the
 * start, a Python traceback's exception at the end (the Hugging Face CLI's, cut off before). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/base/proc.h"

static char *stderr_of(const char *script, size_t cap)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    proc_buf out = {0}, errs = {0};
    int status;
    esp_err err;
    cr_assert_eq(proc_run_capture(argv, &out, &errs, cap, &status, &err), 0, "%s", err.msg);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    free(out.data);
    return errs.data ? (char *)errs.data : strdup("");
}

Test(proc, a_long_stderr_keeps_its_start_and_its_end)
{
    char *e = stderr_of("printf 'usage: first\\n' >&2; yes filler | head -c 100000 >&2; printf 'Error: last\\n' >&2; exit 3", 64);
    cr_assert(!strncmp(e, "usage: first\n", 13), "%.80s", e);
    cr_assert_not_null(strstr(e, "\n[...]\n"));
    cr_assert_eq(strlen(e), 64 + 7 + 64, "%zu bytes", strlen(e));
    cr_assert_str_eq(e + strlen(e) - 12, "Error: last\n");
    free(e);
    /* one that fits past the start by less than a ring is whole, with no mark */
    e = stderr_of("printf '%070d' 0 >&2; exit 3", 64);
    cr_assert_eq(strlen(e), 70);
    cr_assert_null(strstr(e, "[...]"));
    free(e);
    e = stderr_of("printf '%0200d' 0 >&2; exit 3", 64);
    cr_assert_eq(strlen(e), 64 + 7 + 64);
    free(e);
}
