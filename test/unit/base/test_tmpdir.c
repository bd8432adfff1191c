/* Temporary folders (core/base/tmpdir.h) go on every way out: removed by their maker, by SIGTERM
 * or SIGINT ending the process (scancel, Ctrl-C, a stage-6 worker whose parent died), and never
 * by a forked child that dies while its parent still uses them. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/tmpdir.h"
#include "test/unit/test_util.h"

static char scratch[256];

static void setup(void)
{
    test_tmpdir_make(scratch, sizeof scratch, "tmpdirs");
    setenv("TMPDIR", scratch, 1);
}
static void teardown(void) { test_tmpdir_remove(scratch); }

TestSuite(tmpdir, .init = setup, .fini = teardown);

Test(tmpdir, made_under_TMPDIR_and_removed_whole)
{
    esp_err err;
    char *d = tmpdir_make("unit", &err);
    cr_assert_not_null(d, "%s", err.msg);
    cr_expect(strncmp(d, scratch, strlen(scratch)) == 0 && strstr(d, "/espnet3_unit_"), "%s", d);
    char *f = path_join(d, "a/b.txt");
    char *sub = path_join(d, "a");
    cr_assert_eq(mkdir_p(sub, &err), 0);
    test_write_text(f, "x\n");
    char keep[512];
    snprintf(keep, sizeof keep, "%s", d);
    tmpdir_remove(d);
    cr_expect_not(test_exists(keep));
    free(f), free(sub);
}

/* A child that made folders is ended by `sig`: they are gone, and it died of that signal. */
static void ended_by(int sig)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        signal(sig, SIG_DFL);
        esp_err err;
        char *a = tmpdir_make("zip", &err), *b = tmpdir_make("config", &err);
        if (!a || !b) _exit(3);
        char *f = path_join(a, "model.pth");
        test_write_text(f, "weights\n");
        dprintf(fds[1], "%s\n%s\n", a, b);
        close(fds[1]);
        for (;;) pause();
    }
    close(fds[1]);
    char buf[1024] = {0};
    size_t got = 0;
    ssize_t n;
    while ((n = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)n;
    close(fds[0]);
    char *nl = strchr(buf, '\n');
    cr_assert_not_null(nl, "the child made no folders");
    *nl = '\0';
    const char *a = buf, *b = strtok(nl + 1, "\n");
    cr_assert(test_exists(a) && b && test_exists(b));
    kill(pid, sig);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == sig, "the child did not die of signal %d", sig);
    cr_expect_not(test_exists(a), "%s outlived signal %d", a, sig);
    cr_expect_not(test_exists(b), "%s outlived signal %d", b, sig);
}

Test(tmpdir, sigterm_removes_the_folders_and_still_ends_the_process) { ended_by(SIGTERM); }
Test(tmpdir, sigint_removes_the_folders_and_still_ends_the_process) { ended_by(SIGINT); }

Test(tmpdir, a_child_killed_leaves_its_parents_folder)
{
    esp_err err;
    char *d = tmpdir_make("parent", &err);
    cr_assert_not_null(d, "%s", err.msg);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        raise(SIGTERM);
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    cr_expect(test_exists(d), "a child removed its parent's folder");
    tmpdir_remove(d);
}

/* A child of a process with folders (a stage-6 worker) makes its own and is ended by Ctrl-C: its
 * folder goes, the parent's stays, and it dies of SIGINT (the inherited handler is not stacked on
 * itself). */
Test(tmpdir, a_child_with_its_own_folder_cleans_only_that)
{
    esp_err err;
    char *d = tmpdir_make("parent", &err);
    cr_assert_not_null(d, "%s", err.msg);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char *c = tmpdir_make("child", &err);
        if (!c) _exit(3);
        dprintf(fds[1], "%s\n", c);
        close(fds[1]);
        raise(SIGINT);
        _exit(0);
    }
    close(fds[1]);
    char buf[512] = {0};
    size_t got = 0;
    ssize_t n;
    while ((n = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += (size_t)n;
    close(fds[0]);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "the child did not die of SIGINT (status %d)", status);
    char *nl = strchr(buf, '\n');
    cr_assert_not_null(nl);
    *nl = '\0';
    cr_expect_not(test_exists(buf), "the child's folder outlived SIGINT");
    cr_expect(test_exists(d), "the child removed its parent's folder");
    tmpdir_remove(d);
}
