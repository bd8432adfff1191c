/* Helpers of the tests that run stages on the project's own SLURM cluster (test_runner_slurm.c,
 * test_infer_slurm.c): a temp folder per test, shell commands run from the repository root with
 * their output kept in that folder, and scripts/slurm_local.sh's cluster (slurm_cluster.h) up in
 * it for the test and down afterwards (also after a failed assertion). Each test file gets its own copy (static):
 * Criterion runs every test in a process of its own. */
#ifndef ESPNET3_TEST_SLURM_TEST_CLUSTER_H
#define ESPNET3_TEST_SLURM_TEST_CLUSTER_H

#include <criterion/criterion.h>
#include <stdarg.h>

#include "test/unit/slurm_cluster.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char workdir[256];
static int cluster_up;

static inline const char *env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

/* Runs a shell command in the repository root; its output goes to <workdir>/<log>.out/.err. */
static inline int sh(const char *log, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = slurm_cluster_vsh(workdir, log, fmt, ap);
    va_end(ap);
    return rc;
}

/* The file's text (caller frees), or NULL when it cannot be read. */
static inline char *slurp(const char *fmt, ...)
{
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    char *s = malloc(n + 1);
    memcpy(s, buf, n + 1);
    return s;
}

static inline int count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* .init of the suites. */
static inline void setup(void)
{
    snprintf(workdir, sizeof workdir, "/tmp/espnet3_slurm_XXXXXX");
    cr_assert_not_null(mkdtemp(workdir));
    cluster_up = 0;
}

/* .fini: runs after a failed assertion too, so no daemon outlives the test. */
static inline void teardown(void)
{
    slurm_cluster_stop(workdir, &cluster_up);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", workdir);
}

/* Installs what is missing and starts a one-node cluster; skips the test when that cannot be. */
static inline void start_cluster(void)
{
    slurm_cluster_start(workdir, 1, &cluster_up);
    setenv("ESPNET3_SLURM_POLL_S", "0.2", 1); /* the local cluster answers at once */
}

/* The job id of the first submission recorded in <workdir>/<runner_dir>/slurm/jobs. */
static inline long long first_job_id(const char *runner_dir)
{
    char *jobs = slurp("%s/%s/slurm/jobs", workdir, runner_dir);
    cr_assert_not_null(jobs, "no job record in %s", runner_dir);
    int sub;
    long long job = 0;
    cr_assert_eq(sscanf(jobs, "%d %lld", &sub, &job), 2);
    free(jobs);
    return job;
}

/* Waits (up to a minute) until squeue lists none of the jobs ("12" or "12,13"). */
static inline void wait_until_gone(const char *job_ids)
{
    cr_assert_eq(sh("wait", "for i in $(seq 600); do [ -z \"$(squeue -h -j %s)\" ] && exit 0; sleep 0.1; done; exit 1",
                    job_ids),
                 0, "SLURM jobs %s did not finish", job_ids);
}

#endif
