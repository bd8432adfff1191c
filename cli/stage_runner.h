/* Selecting and running stages: the stage list from --stage/--stop_stage or --stages, the check
 * that each selected stage has its config, and the per-stage log file with ESPnet3's rotation. */
#ifndef ESPNET3_CLI_STAGE_RUNNER_H
#define ESPNET3_CLI_STAGE_RUNNER_H

#include "stages/stages.h"
#include "cli/options.h"

/* Fills out[] (capacity stage_count) in table order; returns the count or -1 with err. */
int select_stages(const cli_args *a, const stage_def **out, esp_err *err);
/* Checks that the selected stages have the configs they read. Stages named with --stages must;
 * from a range, the default (every stage) or `--stages all`, stages whose config was not given
 * are left out with a log line, and an error only when none is left. Compacts sel[] and returns
 * the new count, or -1 with err. kinds[i]: the backend kept stage i runs on (stage_backend; one
 * that cannot open here is the error), resolved once for launching and running it. */
int check_stage_configs(const cli_args *a, const stage_def **sel, backend_kind *kinds, int n, const esp_configs *cfgs,
                        esp_err *err);
/* Moves X.log to X1.log, X1.log to X2.log, ... so X.log is free (ESPnet3's log rotation). */
int rotate_log(const char *dir, const char *stage, esp_err *err);
/* Runs one stage with its log file and START/DONE lines; with write_requirements also
 * requirements.txt beside the log (ESPnet3's --write_requirements; here: what --version prints). */
int run_stage(const stage_def *s, backend_kind kind, const esp_configs *cfgs, int write_requirements, esp_err *err);

#endif
