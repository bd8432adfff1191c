/* Starting the local ranks of one node: the binary runs itself once per rank with the
 * torchrun-style variables set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
 * MASTER_ADDR, MASTER_PORT), forwards their stderr, and waits. When a rank fails the others are
 * stopped (SIGTERM, then SIGKILL) and the error names the rank with its last error line. Ranks
 * die with the launcher (PR_SET_PDEATHSIG), so no orphan outlives it. */
#ifndef ESPNET3_DIST_LAUNCH_H
#define ESPNET3_DIST_LAUNCH_H

#include "core/base/log.h"

typedef struct launch_opts {
    int nproc;               /* ranks on this node */
    int nnodes, node_rank;
    const char *master_addr; /* NULL: 127.0.0.1 */
    int master_port;         /* 0: a free port (one node only) */
    char *const *argv;       /* what each rank runs (argv[0] is replaced by this executable) */
} launch_opts;

/* Starts the node's ranks and waits for them: 0 when all succeed, DIST_LAUNCH_STOPPED when they
 * stopped on request with a checkpoint (exit status ESP_EXIT_STOPPED: a signal to this launcher,
 * forwarded to them, or trainer.max_time), -1 with err when one failed (the others are stopped). */
enum { DIST_LAUNCH_STOPPED = 1 };
int dist_launch_local(const launch_opts *o, esp_err *err);

#endif
