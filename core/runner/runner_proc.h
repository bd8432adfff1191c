/* What this process knows across runner_run calls: its command line and stage (a slurm job runs
 * them again), the runs left pending and whether a slurm worker found its job. The front end
 * (runner.c) and the slurm env (runner_slurm.c) both use it; the setters and counters the rest
 * of espnet3 sees are in runner.h. */
#ifndef ESPNET3_RUNNER_PROC_H
#define ESPNET3_RUNNER_PROC_H

/* The command line and stage saved by runner_set_command / runner_set_stage (NULL when unset). */
char *const *runner_command(int *argc);
const char *runner_stage(void);
/* Counts a RUNNER_PENDING return; job_ids (may be NULL) is added to runner_pending_jobs(). */
void runner_note_pending(const char *job_ids);
/* A slurm worker job met the runner_job it was submitted for (runner_worker_found_job). */
void runner_note_worker_found(void);

#endif
