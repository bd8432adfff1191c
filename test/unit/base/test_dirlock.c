/* The folder lock (core/base/dirlock.h) against what a user (or someone else) may leave where it
 * lives: a symlink to a user's file, a FIFO, a foreign line. Nothing is followed, written or echoed. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/dirlock.h"
#include "test/unit/test_util.h"

static char dir[256];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "dirlock"); }
static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(dirlock, .init = setup, .fini = teardown);

Test(dirlock, a_symlinked_lock_is_refused_and_its_target_untouched)
{
    const char *target = test_path(dir, "precious.txt");
    test_write_text(target, "my thesis, chapter 3\n");
    cr_assert_eq(symlink(target, test_path(dir, ".espnet3.lock")), 0);
    dir_lock l;
    esp_err err;
    cr_assert_eq(dir_lock_take(&l, dir, "stage train", &err), -1);
    cr_assert(strstr(err.msg, ".espnet3.lock: a symbolic link"), "%s", err.msg);
    cr_assert_null(strstr(err.msg, "thesis"), "%s", err.msg);
    char *text = test_slurp(target);
    cr_assert_str_eq(text, "my thesis, chapter 3\n");
    free(text);
}

Test(dirlock, a_fifo_is_refused_without_hanging)
{
    cr_assert_eq(mkfifo(test_path(dir, ".espnet3.lock"), 0600), 0);
    dir_lock l;
    esp_err err;
    cr_assert_eq(dir_lock_take(&l, dir, "stage train", &err), -1);
    cr_assert(strstr(err.msg, "not a regular file"), "%s", err.msg);
}

Test(dirlock, a_foreign_line_is_not_echoed_and_an_own_line_is)
{
    test_write_text(test_path(dir, ".espnet3.lock"), "secret token 1234\n");
    dir_lock l;
    esp_err err;
    cr_assert_eq(dir_lock_take(&l, dir, "stage train", &err), 0, "%s", err.msg);
    dir_lock_release(&l);
    cr_assert_not(test_exists(test_path(dir, ".espnet3.lock")));
    /* a lock file that another live run holds: its owner line is shown */
    dir_lock a, b;
    cr_assert_eq(dir_lock_take(&a, dir, "stage train", &err), 0, "%s", err.msg);
    cr_assert_eq(dir_lock_take(&b, dir, "stage infer", &err), -1);
    cr_assert(strstr(err.msg, "in use by another espnet3 run (pid ") && strstr(err.msg, "stage train"), "%s", err.msg);
    dir_lock_release(&a);
}
