/* See config_test_util.h. No Test() here. */
#include "test/unit/config/config_test_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "test/unit/test_util.h"

double cfg_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double cfg_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const bin_run *cfg_run_bin(const char *dir, const char *const *args)
{
    static bin_run r;
    const char *argv[64];
    int n = 0;
    argv[n++] = test_bin_path();
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    char out_path[1100], err_path[1100];
    snprintf(out_path, sizeof out_path, "%s/bin_stdout.txt", dir);
    snprintf(err_path, sizeof err_path, "%s/bin_stderr.txt", dir);
    fflush(NULL);
    double t0 = cfg_now();
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || chdir(dir) != 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    struct timespec pause = {0, 5 * 1000 * 1000};
    for (int waited = 0;; waited++) {
        pid_t w = wait4(pid, &st, WNOHANG, &ru);
        if (w == pid) break;
        if (waited > 12000) { /* 60 s */
            kill(pid, SIGKILL);
            wait4(pid, &st, 0, &ru);
            cr_assert_fail("%s timed out", argv[0]);
        }
        nanosleep(&pause, NULL);
    }
    r.seconds = cfg_now() - t0;
    r.maxrss_kb = ru.ru_maxrss;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    cr_assert_neq(r.status, 127, "cannot run %s (set ESPNET3_BIN)", argv[0]);
    char *o = test_slurp_or_empty(out_path), *e = test_slurp_or_empty(err_path);
    snprintf(r.out, sizeof r.out, "%s", o);
    snprintf(r.err, sizeof r.err, "%s", e);
    free(o);
    free(e);
    return &r;
}

int cfg_load(config_kind kind, const char *path, int with_template, const char **ov, int n_ov, esp_config **cfg,
             esp_err *err)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    config_load_opts o = {.template_dir = with_template ? tdir : NULL, .overrides = ov, .n_overrides = n_ov};
    return config_load(kind, path, &o, cfg, err);
}

int cfg_count_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; *p; p++) n += *p == '\n';
    size_t len = strlen(text);
    return n + (len && text[len - 1] != '\n');
}
