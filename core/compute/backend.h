/* The compute backend: device memory and the encoder's ops on device float buffers, as a struct
 * of function pointers. Model code is written once against it; core/compute/backend_cpu.c fills it with
 * the float instantiation of core/compute/ops.h (OpenBLAS), a CUDA backend fills the same fields later.
 *
 * Every op has the semantics, argument order and layouts of its ops_<name>_f32 counterpart in
 * core/compute/ops_decl.h (outputs first; parameter gradients accumulate; `acc` on the input gradients of
 * linear, conv2d and layernorm), with the backend as first argument and no scratch arguments:
 * the backend owns its scratch memory. Buffers are device pointers from be->alloc; `lens` arrays
 * and returned scalars live on the host. Ops may run asynchronously: be->synchronize waits for
 * them (the CPU backend is synchronous). A backend is used by one thread at a time. */
#ifndef ESPNET3_BACKEND_H
#define ESPNET3_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"

typedef enum backend_copy_kind {
    BACKEND_HOST_TO_DEVICE,
    BACKEND_DEVICE_TO_HOST,
    BACKEND_DEVICE_TO_DEVICE,
} backend_copy_kind;

typedef struct backend backend;
struct backend {
    const char *name; /* "cpu", "cuda" */
    void *impl;       /* the backend's private state */
    int threads;      /* CPU threads the backend computes with */

    /* ---- memory: bytes, 64-byte aligned, zero-filled; alloc exits with an error when out of
     * memory; free(NULL) is a no-op. */
    void *(*alloc)(backend *be, size_t bytes);
    void (*free)(backend *be, void *p);
    void (*copy)(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind);
    void (*fill)(backend *be, void *p, int byte, size_t bytes); /* memset */
    void (*synchronize)(backend *be);
    /* Frees the backend's state (not the buffers it handed out). */
    void (*destroy)(backend *be);

    /* ---- GEMM, row-major: c (m x n) = alpha * op(a) op(b) + beta * c, op = transpose when
     * ta / tb is non-zero; lda, ldb, ldc are the row strides of the stored matrices. */
    void (*gemm)(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

    /* ---- layers (see core/compute/ops_decl.h) */
    void (*linear_forward)(backend *be, float *y, const float *x, const float *w, const float *b,
                           int n, int ic, int oc);
    void (*linear_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, int n, int ic, int oc, int acc);
    void (*conv2d_forward)(backend *be, float *y, const float *x, const float *w, const float *b,
                           int nb, int ic, int oc, int h, int wd, int relu);
    void (*conv2d_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, const float *y, int nb, int ic, int oc,
                            int h, int wd, int acc);
    void (*swap12)(backend *be, float *y, const float *x, int nb, int d1, int d2, int d3);
    void (*relu_forward)(backend *be, float *y, const float *x, size_t n);
    void (*relu_backward)(backend *be, float *dx, const float *dy, const float *y, size_t n);
    void (*layernorm_forward)(backend *be, float *y, float *mean, float *rstd, const float *x,
                              const float *w, const float *b, int n, int c, double eps);
    void (*layernorm_backward)(backend *be, float *dx, float *dw, float *db, const float *dy,
                               const float *x, const float *w, const float *mean, const float *rstd,
                               int n, int c, int acc);
    void (*add)(backend *be, float *y, const float *a, const float *b, size_t n);
    void (*scale)(backend *be, float *y, const float *x, double s, size_t n);
    void (*axpy)(backend *be, float *y, const float *x, double s, size_t n);
    void (*posenc_forward)(backend *be, float *y, const float *x, double xscale, int nb, int t,
                           int d);
    void (*attention_forward)(backend *be, float *y, float *att, const float *q, const float *k,
                              const float *v, int ld, const int *lens, int nb, int t, int h, int hd,
                              float p, uint64_t seed, uint64_t stream);
    void (*attention_backward)(backend *be, float *dq, float *dk, float *dv, const float *dy,
                               const float *att, const float *q, const float *k, const float *v,
                               int ld, const int *lens, int nb, int t, int h, int hd, float p,
                               uint64_t seed, uint64_t stream);
    void (*log_softmax_forward)(backend *be, float *y, const float *x, int n, int v);
    void (*log_softmax_backward)(backend *be, float *dx, const float *dy, const float *y, int n,
                                 int v);
    void (*dropout_forward)(backend *be, float *y, const float *x, size_t n, float p, uint64_t seed,
                            uint64_t stream);
    void (*dropout_backward)(backend *be, float *dx, const float *dy, size_t n, float p,
                             uint64_t seed, uint64_t stream);

    /* ---- reductions to a host double (they synchronize), gradient clipping */
    double (*sum)(backend *be, const float *x, size_t n);
    double (*sum_squares)(backend *be, const float *x, size_t n);
    double (*clip_grad_norm)(backend *be, float *g, size_t n, double max_norm);
};

/* The CPU backend: OpenBLAS sgemm with `threads` threads (>= 1; it sets OpenBLAS' global thread
 * count), elementwise loops on the calling thread. Release with be->destroy(be). */
int backend_cpu_init(backend *be, int threads, esp_err *err);

#endif
