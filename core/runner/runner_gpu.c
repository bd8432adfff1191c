/* parallel.env: local_gpu — the local env with one worker per visible GPU (ESPnet3 uses dask_cuda's
 * LocalCUDACluster): worker slot i runs with CUDA_VISIBLE_DEVICES set to the i-th visible device.
 * n_workers absent = one per GPU; more workers than GPUs is ESPnet3's error
 * "n_workers=X > num_gpus=Y"; fewer is a warning (some GPUs idle). */
#include "core/runner/runner_env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/compute/backend.h"

static struct {
    int probed, count;
    char **ids;
} gpus;

static void free_gpus(void)
{
    for (int i = 0; i < gpus.count; i++) free(gpus.ids[i]);
    free(gpus.ids);
}

/* The device count the CUDA runtime reports (probed in a child process by the compute room: CUDA
 * must not be initialised in a process that forks workers afterwards); 0 without CUDA. */
static int device_count(void)
{
    return backend_cuda_devices();
}

/* Visible devices, once per process: CUDA_VISIBLE_DEVICES's entries when it is set (so UUIDs
 * and MIG names pass through), else 0..count-1. */
static void probe(void)
{
    if (gpus.probed) return;
    gpus.probed = 1;
    gpus.count = device_count();
    if (gpus.count <= 0) return;
    atexit(free_gpus);
    gpus.ids = xcalloc((size_t)gpus.count, sizeof *gpus.ids);
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    char *list = vis ? xstrdup(vis) : NULL, *save = NULL;
    char *tok = list ? strtok_r(list, ",", &save) : NULL;
    for (int i = 0; i < gpus.count; i++) {
        gpus.ids[i] = tok ? xstrdup(tok) : xasprintf("%d", i);
        if (tok) tok = strtok_r(NULL, ",", &save);
    }
    free(list);
}

int runner_gpu_workers(const parallel_cfg *par, int *n_workers, esp_err *err)
{
    probe();
    long long want = par ? par->n_workers : 0;
    if (want < 0) return esp_fail(err, "parallel.n_workers: must be at least 1, got %lld", want);
    if (gpus.count == 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
#ifdef ESPNET3_CUDA
        return esp_fail(err,
                        "parallel.env: local_gpu: no GPU is visible (n_workers=%lld > num_gpus=0; "
                        "CUDA_VISIBLE_DEVICES=%s; check nvidia-smi, or use parallel.env: local)",
                        want ? want : 1, vis ? vis : "(unset)");
#else
        (void)vis;
        return esp_fail(err,
                        "parallel.env: local_gpu: no GPU is visible (n_workers=%lld > num_gpus=0): this build has "
                        "no CUDA backend (build with make CUDA=1, or use parallel.env: local)",
                        want ? want : 1);
#endif
    }
    if (want > gpus.count) return esp_fail(err, "n_workers=%lld > num_gpus=%d", want, gpus.count);
    if (want > 0 && want < gpus.count)
        log_warn("n_workers=%lld < num_gpus=%d, some GPUs may be idle.", want, gpus.count);
    *n_workers = want > 0 ? (int)want : gpus.count;
    return 0;
}

int runner_local_gpu_run(const runner_plan *plan, esp_err *err)
{
    probe();
    ESP_CHECK(plan->n_workers <= gpus.count);
    runner_plan p = *plan;
    p.gpu_ids = gpus.ids;
    log_info("%s: local_gpu: workers on CUDA_VISIBLE_DEVICES %s%s%s", plan->job->name ? plan->job->name : "runner",
             gpus.ids[0], plan->n_workers > 1 ? " ... " : "", plan->n_workers > 1 ? gpus.ids[plan->n_workers - 1] : "");
    return runner_local_run(&p, err);
}
