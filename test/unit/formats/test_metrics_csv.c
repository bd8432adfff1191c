/* A damaged metrics.csv met on resume (test/fuzz/fuzz_metrics_csv.c, issue 16): one error line
 * naming file:line instead of a rewrite that silently loses the rows after the damage. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/formats/metrics_csv.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "metrics_hostile"); }
static void teardown(void) { test_tmpdir_remove(dir); }
TestSuite(metrics_csv_hostile, .init = setup, .fini = teardown);

static void expect_open_error(const char *bytes, size_t len, const char *want)
{
    const char *path = test_path(dir, "metrics.csv");
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    fwrite(bytes, 1, len, fp);
    fclose(fp);
    metrics_csv m;
    esp_err err = {{0}};
    cr_assert_neq(metrics_csv_open(&m, path, 2, &err), 0, "opened %s", path);
    cr_assert(strstr(err.msg, path), "the error names the file: %s", err.msg);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
    /* The file is left as it was for the user to look at. */
    char *after = test_slurp(path);
    cr_assert_eq(memcmp(after, bytes, len), 0);
    free(after);
}

#define OPEN_ERROR(lit, want) expect_open_error(lit, sizeof lit - 1, want)

/* A NUL byte ended the cell there; the resume rewrite then wrote the file back without the rest. */
Test(metrics_csv_hostile, nul_byte_is_an_error)
{
    OPEN_ERROR("loss,step\r\n1.5,1\r\n2\0.5,2\r\n3.5,3\r\n", "metrics.csv:3: holds a NUL byte");
}

/* A quote that never closes made the rest of the file one cell, which the rewrite dropped. */
Test(metrics_csv_hostile, unclosed_quote_is_an_error)
{
    OPEN_ERROR("loss,step\r\n1.5,1\r\n\"2.5,2\r\n3.5,3\r\n", "metrics.csv:3: a quoted cell that never ends");
    OPEN_ERROR("\"loss,step\r\n", "metrics.csv:1: a quoted cell that never ends");
}
