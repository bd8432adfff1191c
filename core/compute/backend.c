/* The backend kinds: their names (the one place that spells them), the accelerator keys that pick
 * one, and backend_open. A binary built without CUDA opens BACKEND_CPU and the test/reference
 * BACKEND_REF64 (never picked by backend_kind_for: no accelerator name maps to it); one built with
 * CUDA=1 also BACKEND_CUDA (cuda/backend_cuda.cu, through the constructor declared in
 * core/compute/backend_cuda.h). */
#include "core/compute/backend.h"

#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_cpu.h"
#include "core/compute/backend_profile.h"
#include "core/compute/backend_ref64.h"

#ifdef ESPNET3_CUDA
#include <errno.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/compute/backend_cuda.h"
#include "core/compute/cuda_api.h"

/* Asked in a child process: CUDA must not be initialised in a process that forks workers or ranks
 * afterwards, and backend_kind_for runs in the CLI before it launches them. Opening the backend does
 * initialise CUDA, in the process that computes on it (a rank, a decoding worker). */
int backend_cuda_devices(void)
{
    static int probed, count;
    if (probed) return count;
    probed = 1;
    int fd[2];
    if (pipe(fd) != 0) return count = 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        int n = cuda_device_count();
        ssize_t w = write(fd[1], &n, sizeof n);
        _exit(w == (ssize_t)sizeof n ? 0 : 1);
    }
    close(fd[1]);
    if (pid < 0 || read(fd[0], &count, sizeof count) != (ssize_t)sizeof count) count = 0;
    close(fd[0]);
    if (pid > 0)
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    return count;
}
#else
int backend_cuda_devices(void)
{
    return 0;
}
#endif

/* Why "cuda" cannot be chosen here; NULL when it can. */
static const char *cuda_unavailable(void)
{
#ifdef ESPNET3_CUDA
    return backend_cuda_devices() > 0 ? NULL : "no CUDA device is visible (check nvidia-smi and CUDA_VISIBLE_DEVICES, or use cpu)";
#else
    return "this espnet3 was built without CUDA (build it with make CUDA=1, or use cpu)";
#endif
}

static backend *open_cuda(int device, int threads, esp_err *err)
{
#ifdef ESPNET3_CUDA
    backend *be = xcalloc(1, sizeof *be);
    esp_err why;
    if (backend_cuda_init(be, device, threads, &why) != 0) {
        free(be);
        esp_fail(err, "backend cuda (device %d): %s", device, why.msg);
        return NULL;
    }
    return be;
#else
    (void)threads;
    esp_fail(err, "backend cuda (device %d): %s", device, cuda_unavailable());
    return NULL;
#endif
}

static const char *const kind_names[BACKEND_KINDS] = {[BACKEND_CPU] = "cpu", [BACKEND_REF64] = "ref64",
                                                      [BACKEND_CUDA] = "cuda"};

const char *backend_kind_name(backend_kind kind)
{
    ESP_CHECK(kind >= 0 && kind < BACKEND_KINDS);
    return kind_names[kind];
}

int backend_kind_parse(const char *name, backend_kind *out, esp_err *err)
{
    for (int k = 0; k < BACKEND_KINDS; k++)
        if (name && !strcmp(name, kind_names[k])) {
            *out = (backend_kind)k;
            return 0;
        }
    return esp_fail(err, "backend %s: unknown kind (cpu, cuda, or ref64 for tests)", name ? name : "(none)");
}

backend *backend_open(backend_kind kind, int device, int threads, esp_err *err)
{
    int (*init)(backend *, int, esp_err *) = NULL;
    switch (kind) {
    case BACKEND_CPU: init = backend_cpu_init; break;
    case BACKEND_REF64: init = backend_ref64_init; break;
    case BACKEND_CUDA: return open_cuda(device, threads, err);
    case BACKEND_KINDS: break;
    }
    ESP_CHECK(init != NULL);
    backend *be = xcalloc(1, sizeof *be);
    if (init(be, threads, err) != 0) {
        free(be);
        return NULL;
    }
    return be;
}

void backend_close(backend *be)
{
    if (!be) return;
    backend_profile_stop(be);
    be->destroy(be);
    free(be);
}

int backend_kind_for(const char *accelerator, backend_kind *out, esp_err *err)
{
    /* auto, as Lightning's: a GPU when this build can open one, else the CPU. */
    if (!accelerator || strcmp(accelerator, "auto") == 0) {
        *out = cuda_unavailable() ? BACKEND_CPU : BACKEND_CUDA;
        return 0;
    }
    if (strcmp(accelerator, "cpu") == 0) {
        *out = BACKEND_CPU;
        return 0;
    }
    if (strcmp(accelerator, "gpu") == 0 || strcmp(accelerator, "cuda") == 0) {
        const char *why = cuda_unavailable();
        if (why) return esp_fail(err, "%s: %s", accelerator, why);
        *out = BACKEND_CUDA;
        return 0;
    }
    return esp_fail(err, "%s: unknown accelerator (auto, cpu, gpu or cuda)", accelerator);
}
