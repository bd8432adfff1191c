/* The project's local SLURM cluster (scripts/slurm_local.sh) for one test, with its state in a
 * folder of the test: slurm_cluster_start installs the packages when missing, starts munged,
 * slurmctld and 1 or 2 emulated nodes (2: n1 and n2, which do not resolve: give MASTER_ADDR)
 * and points SLURM_CONF at it; slurm_cluster_stop, called from the suite's .fini so that it runs
 * after a failed assertion too, stops every daemon it started. The test is skipped, saying why,
 * only when it does not run as root or the packages cannot be installed.
 * Commands run in the repository root (ESPNET3_ROOT); a command's output goes to
 * <dir>/<log>.out and <dir>/<log>.err. */
#ifndef ESPNET3_TEST_SLURM_CLUSTER_H
#define ESPNET3_TEST_SLURM_CLUSTER_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/unit/test_util.h"

static inline const char *slurm_cluster_root(void)
{
    const char *v = getenv("ESPNET3_ROOT");
    return v && *v ? v : ".";
}

/* The shell command that runs body in the repository root with its output in <dir>/<log>.out/.err. */
static inline const char *slurm_cluster_command(const char *dir, const char *log, const char *fmt, va_list ap)
{
    static char body[4096], cmd[8192];
    vsnprintf(body, sizeof body, fmt, ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && ( %s ) >'%s/%s.out' 2>'%s/%s.err'", slurm_cluster_root(), body, dir, log,
             dir, log);
    return cmd;
}

/* Runs a shell command in the repository root; returns its exit status (-1: killed). */
static inline int slurm_cluster_vsh(const char *dir, const char *log, const char *fmt, va_list ap)
{
    int st = system(slurm_cluster_command(dir, log, fmt, ap));
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static inline int slurm_cluster_sh(const char *dir, const char *log, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = slurm_cluster_vsh(dir, log, fmt, ap);
    va_end(ap);
    return rc;
}

/* slurm_cluster_sh of a fixture command whose outputs all lie under dir: once per run of the test
 * binary, copied into dir for every later test that runs it (test_sh_once). */
static inline int slurm_cluster_sh_once(const char *dir, const char *log, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *cmd = slurm_cluster_command(dir, log, fmt, ap);
    va_end(ap);
    return test_sh_once(dir, "%s", cmd);
}

/* The first bytes of <dir>/<name> into buf (empty when it cannot be read). */
static inline const char *slurm_cluster_read(const char *dir, const char *name, char *buf, size_t size)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    buf[0] = '\0';
    FILE *fp = fopen(path, "rb");
    if (fp) {
        buf[fread(buf, 1, size - 1, fp)] = '\0';
        fclose(fp);
    }
    return buf;
}

/* Starts the cluster in <dir>/cluster with `nodes` nodes (1 or 2); *up says whether to stop it. */
static inline void slurm_cluster_start(const char *dir, int nodes, int *up)
{
    static char msg[8192];
    if (geteuid() != 0)
        cr_skip_test("the SLURM tests start munged, slurmctld and slurmd as root; run them as root");
    if (slurm_cluster_sh(dir, "install", "scripts/slurm_local.sh install") != 0)
        cr_skip_test("the SLURM packages are missing and could not be installed (scripts/slurm_local.sh install): %s",
                     slurm_cluster_read(dir, "install.err", msg, sizeof msg));
    *up = 1;
    cr_assert_eq(slurm_cluster_sh(dir, "up", "scripts/slurm_local.sh up -d '%s/cluster' -n %d", dir, nodes), 0,
                 "cluster did not start: %s", slurm_cluster_read(dir, "up.err", msg, sizeof msg));
    char conf[512];
    snprintf(conf, sizeof conf, "%s/cluster/slurm.conf", dir);
    setenv("SLURM_CONF", conf, 1);
}

static inline void slurm_cluster_stop(const char *dir, int *up)
{
    if (*up && slurm_cluster_sh(dir, "down", "scripts/slurm_local.sh down -d '%s/cluster'", dir) != 0)
        fprintf(stderr, "slurm_local.sh down failed (see %s/down.err)\n", dir);
    *up = 0;
}

#endif
