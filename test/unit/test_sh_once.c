/* test_sh_once (test_run_once.c), the fixture runner the training and SLURM suites share: a
 * command runs once per run of the tests, each test gets what it wrote with its own folder's name
 * in the text, and a failed run is run again. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

Test(sh_once, runs_once_and_copies_with_the_tests_own_folder)
{
    char a[64], b[64];
    test_tmpdir_make(a, sizeof a, "once_a");
    test_tmpdir_make(b, sizeof b, "once_b");
    /* $$: the shell's pid, other in each run of the command. */
    const char *cmd = "echo $$ >>'%s/ran' && mkdir -p '%s/sub' && echo '%s/data' >'%s/sub/where'";
    cr_assert_eq(test_sh_once(a, cmd, a, a, a, a), 0);
    cr_assert_eq(test_sh_once(b, cmd, b, b, b, b), 0);
    char *ra = test_slurp(test_path(a, "ran")), *rb = test_slurp(test_path(b, "ran"));
    cr_assert_eq(test_count_lines(rb), 1, "%s", rb);
    cr_assert_str_eq(ra, rb, "the command ran again");
    char want[128];
    snprintf(want, sizeof want, "%s/data\n", b);
    char *where = test_slurp(test_path(b, "sub/where"));
    cr_assert_str_eq(where, want, "the copy names the folder it was made in");
    free(ra), free(rb), free(where);

    /* A failed run is not kept: the next test runs it again, with its status. */
    const char *fail = "echo $$ >'%s/ran' && exit 3";
    cr_assert_eq(test_sh_once(a, fail, a), 3);
    ra = test_slurp(test_path(a, "ran"));
    cr_assert_eq(test_sh_once(b, fail, b), 3);
    rb = test_slurp(test_path(b, "ran"));
    cr_assert_str_neq(ra, rb, "a failed run was reused");
    free(ra), free(rb);
    test_tmpdir_remove(a);
    test_tmpdir_remove(b);
}
