/* The compute backend: device memory and every op of a training step on device float buffers
 * (layers, losses, the optimizer update, reductions), as a struct of function pointers. Model and
 * trainer code is written once against it; host code reads or writes device buffers only through
 * be->copy. A kind is a backend_kind, resolved once from a config key (backend_kind_for) or a
 * name (backend_kind_parse) and carried as that value; backend_open() (core/compute/backend.c)
 * opens it:
 *   "cpu"    core/compute/backend_cpu.c: the float instantiation of core/compute/ops.h (OpenBLAS)
 *            and the threaded step ops of core/compute/ops_step.h; what training runs on;
 *   "ref64"  core/compute/backend_ref64.c: a test/reference backend, not for training: the same
 *            float interface, every op computed by the double instantiation (_f64) and rounded
 *            back to float, so test_backend_ops (test/unit/compute/test_backend_ops.c) compares
 *            any backend against it op by op;
 *   "cuda"   cuda/backend_cuda.cu in a binary built with CUDA=1: device buffers from cudaMalloc,
 *            every op on one stream (cuBLAS for the GEMMs, kernels in cuda/ops_*.cu); copies to
 *            and from the host synchronize.
 * The compute entries are listed once, with their semantics, in core/compute/backend_ops.h
 * (BACKEND_OPS), and backend_supports says which of them a backend implements (a NULL entry: not).
 *
 * Buffers are device pointers from be->alloc; `lens` arrays
 * and returned scalars live on the host. Ops may run asynchronously: be->synchronize waits for
 * them (the CPU backend is synchronous). A backend is used by one thread at a time. */
#ifndef ESPNET3_BACKEND_H
#define ESPNET3_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"
#include "core/compute/backend_ops.h"
#include "core/compute/kernel_math.h"

typedef enum backend_copy_kind {
    BACKEND_HOST_TO_DEVICE,
    BACKEND_DEVICE_TO_HOST,
    BACKEND_DEVICE_TO_DEVICE,
} backend_copy_kind;

/* The kinds of backend (their names: backend_kind_name). */
typedef enum backend_kind { BACKEND_CPU, BACKEND_REF64, BACKEND_CUDA, BACKEND_KINDS } backend_kind;

typedef struct backend backend;

enum { BACKEND_UPLOAD_SLOTS = 2 };
struct backend {
    const char *name; /* backend_kind_name(kind) */
    backend_kind kind;
    void *impl;       /* the backend's private state */
    struct backend_profile *profile; /* the per-op profiler's state while it runs, else NULL
                                      * (core/compute/backend_profile.h) */

    /* ---- memory: bytes, 64-byte aligned, zero-filled; alloc exits with an error when out of
     * memory; free(NULL) is a no-op. */
    void *(*alloc)(backend *be, size_t bytes);
    void (*free)(backend *be, void *p);
    void (*copy)(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind);
    void (*fill)(backend *be, void *p, int byte, size_t bytes); /* memset */
    void (*synchronize)(backend *be);
    /* Frees the backend's state (not the buffers it handed out). */
    void (*destroy)(backend *be);
    /* Mixed precision (trainer.precision): the precision every GEMM of the ops reads its inputs
     * in from now on, accumulating and writing float32 (AMP_FP32: plain float GEMMs, the default).
     * cpu: rounds the inputs (core/compute/ops_precision.h); cuda: casts them to 16-bit copies
     * for cublasGemmEx with CUBLAS_COMPUTE_32F; ref64 ignores it (the exact reference). */
    void (*set_gemm_precision)(backend *be, amp_precision p);
    /* Device backends (NULL on cpu and ref64): the run's memory, taken once before the model is
     * built. `device_bytes` in one device allocation that later allocs are carved from (one that
     * does not fit is allocated on its own, with a log line), `staging_bytes` of host-pinned memory
     * that host-to-device copies go through asynchronously. Exits with one line on failure. */
    void (*reserve)(backend *be, size_t device_bytes, size_t staging_bytes);
    /* The bytes later allocs can still get now (NULL: not known): cpu, what its cap leaves
     * (SIZE_MAX without one); cuda, the device's free memory. The batched decoder splits a batch
     * whose planned memory is more than this (core/decode/speech2text.h). */
    size_t (*mem_available)(backend *be);
    /* cpu only (NULL elsewhere): caps what the buffers it hands out may hold together (0: no cap);
     * an alloc past the cap fails as running out of memory does. */
    void (*set_mem_limit)(backend *be, size_t bytes);
    /* Device backends (NULL on cpu and ref64): timing marks on the stream (CUDA events), for the
     * per-op profiler. mark records one after the work queued so far and returns its number (from
     * 0 after marks_reset); mark_seconds(a, b) waits for mark b and returns the device's time from
     * mark a to mark b; marks_reset forgets every mark (their events are reused). */
    int (*mark)(backend *be);
    double (*mark_seconds)(backend *be, int a, int b);
    void (*marks_reset)(backend *be);

    /* saved (NULL: none): conv2d_saved_floats floats that the forward fills with what the
     * backward of the same x reads instead of computing it again (the CPU's transformed input
     * tiles). conv2d_saved_floats is NULL where a backend keeps nothing (then pass NULL). */
    size_t (*conv2d_saved_floats)(backend *be, int nb, int ic, int oc, int h, int wd);
    /* Device backends (NULL on cpu and ref64): batch uploads on a second stream beside the compute
     * stream, so the next batch's copy overlaps the step. pinned_alloc/pinned_free: page-locked host
     * memory (zero-filled; exits with one line on failure). upload(be, slot, dst, src, bytes): starts
     * the copy of `bytes` from src (pinned) to dst on the upload stream and returns at once; src must
     * stay untouched until upload_done. upload_wait(be, slot): the compute stream's later work waits
     * for slot's copy (the host does not). upload_done(be): the host waits for every upload. Slots 0
     * .. BACKEND_UPLOAD_SLOTS - 1 (a double buffer). */
    void *(*pinned_alloc)(backend *be, size_t bytes);
    void (*pinned_free)(backend *be, void *p);
    void (*upload)(backend *be, int slot, void *dst, const void *src, size_t bytes);
    void (*upload_wait)(backend *be, int slot);
    void (*upload_done)(backend *be);
    /* Device backends (NULL on cpu and ref64): CUDA graphs of a run of ops. After graph_begin the
     * ops and copies issued are captured on the backend's stream (recorded, not run) until
     * graph_end(be, key), which makes them the graph of key (a shape bucket's; replacing one key
     * had) and returns how many launches it holds; graph_launch(be, key) runs key's graph (1), or
     * returns 0 when key has none. What a graph reads varies from launch to launch only through
     * device memory: its arguments are those it was captured with. Nothing captured may wait for
     * the device on the host (a copy to the host, a reduction to a host value, a cudaMalloc: the
     * backend's scratch must have grown before, in an uncaptured run): that stops with file:line
     * and CUDA's error. */
    void (*graph_begin)(backend *be);
    size_t (*graph_end)(backend *be, uint64_t key);
    int (*graph_launch)(backend *be, uint64_t key);

    /* ---- the compute ops: core/compute/backend_ops.h lists them (each one's signature after
     * `backend *be`, its semantics and layouts) */
#define X(OP, name, ret, params, args) ret(*name) params;
    BACKEND_OPS(X)
#undef X
};

/* 1 when be implements op (its entry is set), 0 when the entry must not be called. The cpu and
 * ref64 backends implement every op. */
int backend_supports(const backend *be, backend_op op);

/* Opens a backend of `kind` (BACKEND_CUDA only in a binary built with CUDA=1) on GPU `device`
 * (cuda; ignored by cpu and ref64) computing with `threads` CPU threads (>= 1; the CPU backend sets
 * OpenBLAS' process-wide thread count, so the last one opened wins; ref64 leaves it). NULL with err
 * set when the kind is unavailable here. Release with backend_close. */
backend *backend_open(backend_kind kind, int device, int threads, esp_err *err);
void backend_close(backend *be);

/* "cpu", "ref64", "cuda". */
const char *backend_kind_name(backend_kind kind);
/* A kind by its name (tests and benchmarks: ESPNET3_TEST_BACKENDS, --backend); -1 with err set for
 * another name. */
int backend_kind_parse(const char *name, backend_kind *out, esp_err *err);

/* The backend kind for Lightning's trainer.accelerator / ESPnet's inference `device`: cpu ->
 * BACKEND_CPU; gpu, cuda -> BACKEND_CUDA (an error without a CUDA build or a visible device); auto
 * (and NULL) -> BACKEND_CUDA where this build sees a GPU, else BACKEND_CPU (Lightning's choice).
 * -1 with err set for anything else. */
int backend_kind_for(const char *accelerator, backend_kind *out, esp_err *err);

/* CUDA devices this process would see (after CUDA_VISIBLE_DEVICES), probed once per process in a
 * child process so that CUDA is never initialised where workers or ranks are forked later; 0 in a
 * build without CUDA. */
int backend_cuda_devices(void);

#endif
