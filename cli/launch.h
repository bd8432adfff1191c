/* Launch decisions of the command line: whether the train stage runs here (this process is a
 * rank, or the run has one rank) or in local ranks this process starts (`trainer.devices: N` on a
 * plain command, or --nproc_per_node/--nnodes/--node_rank/--master_addr/--master_port; one rank
 * on a GPU too, so that this process never initialises CUDA before later stages fork workers). */
#ifndef ESPNET3_CLI_LAUNCH_H
#define ESPNET3_CLI_LAUNCH_H

#include "stages/stages.h"
#include "cli/options.h"

/* Returns 1 when the stage was run through launched ranks (result in *rc), 0 when the caller
 * runs it in this process, -1 on an error (err filled). kind: the stage's backend (one rank on
 * CUDA is still launched, so that CUDA is initialised in a fresh process). */
int launch_stage_ranks(const stage_def *s, backend_kind kind, const cli_args *a, int argc, char **argv, const esp_configs *cfgs,
                       int *rc, esp_err *err);

#endif
