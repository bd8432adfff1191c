/* Selecting and running stages: the stage list from --stage/--stop_stage or --stages, the check
 * that each selected stage has its config, and the per-stage log file with ESPnet3's rotation. */
#ifndef ESPNET3_CLI_STAGE_RUNNER_H
#define ESPNET3_CLI_STAGE_RUNNER_H

#include "../stages/stages.h"
#include "options.h"

/* Fills out[] (capacity stage_count) in table order; returns the count or -1 with err. */
int select_stages(const cli_args *a, const stage_def **out, esp_err *err);
/* Without --stage/--stop_stage/--stages, or with `--stages all` (ESPnet3's default), every stage
 * is selected; this keeps those whose config was given (a training config alone runs stages 1-5)
 * and logs the others. Any other selection is returned unchanged. Returns the new count. */
int keep_configured_stages(const cli_args *a, const stage_def **sel, int n, const esp_configs *cfgs);
/* Checks that every selected stage has the config it reads. */
int check_stage_configs(const stage_def **sel, int n, const esp_configs *cfgs, esp_err *err);
/* Moves X.log to X1.log, X1.log to X2.log, ... so X.log is free (ESPnet3's log rotation). */
int rotate_log(const char *dir, const char *stage, esp_err *err);
/* Runs one stage with its log file and START/DONE lines. */
int run_stage(const stage_def *s, const esp_configs *cfgs, esp_err *err);

#endif
