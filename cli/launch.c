#include "cli/launch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/dist/dist.h"
#include "core/dist/dist_launch.h"

int launch_stage_ranks(const stage_def *s, backend_kind kind, const cli_args *a, int argc, char **argv, const esp_configs *cfgs,
                       int *rc, esp_err *err)
{
    int flags = a->nproc_per_node >= 0 || a->nnodes >= 0 || a->node_rank >= 0 || a->master_addr || a->master_port >= 0;
    if (!(s->flags & STAGE_SPAWNS_RANKS)) return 0;
    const dist_env *env = dist_process_env(err);
    if (!env) return -1;
    /* A launcher that started one task (`srun -n 1`) leaves the node's ranks to us. */
    if (env->source != DIST_NONE && env->world_size > 1) {
        if (flags)
            return esp_fail(err, "--nproc_per_node/--nnodes/--node_rank/--master_addr/--master_port: this process is "
                                 "already rank %d of %d (%s); drop the flags", env->rank, env->world_size,
                            dist_source_name(env->source));
        return 0;
    }
    launch_opts o = {.nproc = 1, .nnodes = 1, .node_rank = 0, .master_addr = a->master_addr,
                     .master_port = a->master_port > 0 ? (int)a->master_port : 0};
    if (flags) {
        if (a->nproc_per_node == 0 || a->nnodes == 0) return esp_fail(err, "--nproc_per_node and --nnodes must be at least 1");
        if (a->nproc_per_node > 0) o.nproc = (int)a->nproc_per_node;
        if (a->nnodes > 0) o.nnodes = (int)a->nnodes;
        if (a->node_rank >= 0) o.node_rank = (int)a->node_rank;
        if (o.node_rank >= o.nnodes)
            return esp_fail(err, "--node_rank %d must be below --nnodes %d", o.node_rank, o.nnodes);
        if (o.nnodes > 1 && !o.master_addr)
            return esp_fail(err, "--nnodes %d: give --master_addr (the host of node 0, where rank 0 runs)", o.nnodes);
        if (a->master_port > 65535) return esp_fail(err, "--master_port %ld is not a port number", a->master_port);
        if (o.nnodes > 1 && !o.master_port) o.master_port = 29500;
    } else {
        const trainer_cfg *tc = training_of(cfgs)->trainer;
        int64_t dev = tc->devices, nodes = tc->num_nodes; /* defaulted at load: the block is always there */
        /* One rank on a GPU still runs in a process of its own (unless this process is one our
         * launcher started): CUDA cannot be used in a child forked after it was initialised, and
         * later stages fork their workers (stage 6's parallel.env local runs the decoder on the
         * GPU in each). So also for a single task of srun or torchrun. */
        int own_rank = getenv("ESPNET3_LAUNCHED_RANK") != NULL;
        if (dev * nodes <= 1 && (own_rank || kind != BACKEND_CUDA)) return 0;
        if (nodes > 1)
            return esp_fail(err, "%s: trainer.num_nodes %" PRId64 ": a plain command starts the ranks of its own node "
                                 "only (start one command per node with --nproc_per_node %" PRId64 " --nnodes %" PRId64
                                 " --node_rank I --master_addr HOST, or use srun / torchrun)",
                            cfgs->training->path, nodes, dev, nodes);
        o.nproc = (int)dev;
    }
    char **rank_argv = cli_rank_argv(argc, argv, s->name);
    o.argv = rank_argv;
    int r = dist_launch_local(&o, err);
    *rc = r == DIST_LAUNCH_STOPPED ? STAGE_STOPPED : r;
    free(rank_argv);
    return 1;
}
