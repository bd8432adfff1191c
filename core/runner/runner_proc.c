/* The process's command line, stage and pending work (see runner_proc.h). */
#include "core/runner/runner_proc.h"

#include <stdlib.h>

#include "core/runner/runner.h"

static struct {
    int argc;
    char **argv;
    char *stage;
    int n_pending;
    char *pending_jobs;
    int worker_matched; /* a slurm worker found the runner_job it was started for */
} proc;

static void free_proc(void)
{
    for (int i = 0; i < proc.argc; i++) free(proc.argv[i]);
    free(proc.argv);
    free(proc.stage);
    free(proc.pending_jobs);
}

void runner_set_command(int argc, char *const argv[])
{
    if (!proc.argv && !proc.stage && !proc.pending_jobs) atexit(free_proc);
    for (int i = 0; i < proc.argc; i++) free(proc.argv[i]);
    free(proc.argv);
    proc.argc = argc;
    proc.argv = xcalloc((size_t)argc + 1, sizeof *proc.argv);
    for (int i = 0; i < argc; i++) proc.argv[i] = xstrdup(argv[i]);
}

void runner_set_stage(const char *name)
{
    if (!proc.argv && !proc.stage && !proc.pending_jobs) atexit(free_proc);
    free(proc.stage);
    proc.stage = name ? xstrdup(name) : NULL;
}

char *const *runner_command(int *argc)
{
    *argc = proc.argc;
    return proc.argv;
}

const char *runner_stage(void) { return proc.stage; }

void runner_note_pending(const char *job_ids)
{
    if (!proc.argv && !proc.stage && !proc.pending_jobs) atexit(free_proc);
    proc.n_pending++;
    if (!job_ids || !*job_ids) return;
    char *all = proc.pending_jobs && *proc.pending_jobs ? xasprintf("%s, %s", proc.pending_jobs, job_ids)
                                                        : xstrdup(job_ids);
    free(proc.pending_jobs);
    proc.pending_jobs = all;
}

void runner_note_worker_found(void) { proc.worker_matched = 1; }

int runner_pending_count(void) { return proc.n_pending; }
int runner_worker_found_job(void) { return proc.worker_matched; }
const char *runner_pending_jobs(void) { return proc.pending_jobs ? proc.pending_jobs : ""; }
