#include "core/dist/dist.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/base/progress.h"
#ifdef ESPNET3_CUDA
#include "core/dist/comm_nccl.h"
#endif


const dist_env *dist_process_env(esp_err *err)
{
    static dist_env env;
    static int state; /* 0 unknown, 1 detected, -1 failed */
    static esp_err saved;
    if (state == 0) {
        state = dist_env_detect(&env, env_lookup_process, NULL, 1, &saved) == 0 ? 1 : -1;
    }
    if (state < 0) {
        if (err) *err = saved;
        return NULL;
    }
    return &env;
}

/* Ranks with the same key share memory: the machine (hostname + boot id) and the node rank the
 * launcher gave, so ranks that a launcher calls different nodes talk TCP even on one machine. */
static void node_key(char *out, size_t n, int node_rank)
{
    char host[256] = "?", boot[64] = "";
    gethostname(host, sizeof host - 1);
    FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (fp) {
        if (!fgets(boot, sizeof boot, fp)) boot[0] = '\0';
        fclose(fp);
        boot[strcspn(boot, "\n")] = '\0';
    }
    snprintf(out, n, "%s/%s/node%d", host, boot, node_rank);
}

int dist_join(dist_ctx *d, const dist_env *env, const char *run_id_fallback, comm_kind kind, double timeout_s,
              esp_err *err)
{
    memset(d, 0, sizeof *d);
    d->env = *env;
    d->rank = env->rank, d->world = env->world_size;
    ESP_CHECK(timeout_s > 0); /* trainer.dist_timeout: ranged and defaulted when the config is loaded */
    d->timeout = timeout_s;
    if (d->world <= 1) return 0;
    int nccl = kind == COMM_KIND_NCCL;
#ifndef ESPNET3_CUDA
    if (nccl)
        return esp_fail(err, "dist: comm nccl: not available in this build (build with make CUDA=1, or use the CPU)");
#endif
    char run[160];
    snprintf(run, sizeof run, "%s", env->run_id[0] ? env->run_id : run_id_fallback);
    d->store = store_open(env->master_addr, env->store_port, env->rank == 0, run, env->rank, env->world_size,
                          d->timeout, err);
    if (!d->store) return -1;
    char key[512];
    node_key(key, sizeof key, env->node_rank);
#ifdef ESPNET3_CUDA
    if (nccl) d->comm = comm_nccl_create(d->store, env, d->timeout, err);
    else
#endif
        d->comm = comm_cpu_create(d->store, d->rank, d->world, key, run, d->timeout, err);
    if (!d->comm) {
        store_close(d->store);
        d->store = NULL;
        return -1;
    }
    return 0;
}

int dist_leave(dist_ctx *d, esp_err *err)
{
    int rc = 0;
    if (d->store) rc = store_barrier(d->store, "leave", err);
    /* The other ranks say when they are through the barrier; rank 0 keeps serving until then. */
    int64_t out = 0;
    if (rc == 0 && d->rank != 0) rc = store_add(d->store, "leave/out", 1, &out, err);
    double deadline = now_seconds() + d->timeout;
    while (rc == 0 && d->rank == 0 && d->store && out < d->world - 1) {
        if ((rc = store_add(d->store, "leave/out", 0, &out, err)) != 0) break;
        if (out < d->world - 1 && now_seconds() > deadline) {
            rc = esp_fail(err, "store: timed out after %.0f s waiting for the ranks to leave", d->timeout);
            break;
        }
        struct timespec nap = {0, 2000000};
        if (out < d->world - 1) nanosleep(&nap, NULL);
    }
    dist_abort(d);
    return rc;
}

void dist_abort(dist_ctx *d)
{
    comm_destroy(d->comm);
    store_close(d->store);
    d->comm = NULL;
    d->store = NULL;
}
