/* backend_open: the one place that names a backend kind. A binary built without CUDA knows "cpu"
 * and the test/reference backend "ref64" (never picked by backend_kind_for: no accelerator name
 * maps to it); with CUDA=1 it can see devices (core/compute/cuda_api.h) but has no CUDA backend
 * yet, so "cuda" is refused with a line that says why rather than silently running on the CPU. */
#include "core/compute/backend.h"

#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_cpu.h"
#include "core/compute/backend_ref64.h"

/* Why "cuda" cannot open here; NULL when it can. Nothing here initialises CUDA: the CUDA build
 * has no backend to open yet, and probing devices in a process that forks workers later breaks
 * them (core/runner/runner_gpu.c probes in a child). */
static const char *cuda_unavailable(void)
{
#ifdef ESPNET3_CUDA
    return "this espnet3 has no CUDA backend yet: its CUDA build only probes devices (use cpu)";
#else
    return "this espnet3 was built without CUDA (build it with make CUDA=1, or use cpu)";
#endif
}

backend *backend_open(const char *kind, int device, int threads, esp_err *err)
{
    int (*init)(backend *, int, esp_err *) = NULL;
    if (!kind || strcmp(kind, "cpu") == 0) init = backend_cpu_init;
    else if (strcmp(kind, "ref64") == 0) init = backend_ref64_init;
    if (init) {
        backend *be = xcalloc(1, sizeof *be);
        if (init(be, threads, err) != 0) {
            free(be);
            return NULL;
        }
        return be;
    }
    if (strcmp(kind, "cuda") == 0) {
        esp_fail(err, "backend cuda (device %d): %s", device, cuda_unavailable());
        return NULL;
    }
    esp_fail(err, "backend %s: unknown kind (cpu, cuda, or ref64 for tests)", kind);
    return NULL;
}

void backend_close(backend *be)
{
    if (!be) return;
    be->destroy(be);
    free(be);
}

const char *backend_kind_for(const char *accelerator, esp_err *err)
{
    if (!accelerator || strcmp(accelerator, "auto") == 0) return cuda_unavailable() ? "cpu" : "cuda";
    if (strcmp(accelerator, "cpu") == 0) return "cpu";
    if (strcmp(accelerator, "gpu") == 0 || strcmp(accelerator, "cuda") == 0) {
        const char *why = cuda_unavailable();
        if (!why) return "cuda";
        esp_fail(err, "%s: %s", accelerator, why);
        return NULL;
    }
    esp_fail(err, "%s: unknown accelerator (auto, cpu, gpu or cuda)", accelerator);
    return NULL;
}
