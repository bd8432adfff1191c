/* Micro-benchmark of the CPU backend's ops at the reference model's shapes (batch 16 x 400
 * frames, d 256, 4 heads, FF 1024): median ms and GFLOP/s per op. Built and run by
 * scripts/bench/ops.   usage: ops_bench THREADS RUNS [NAME] (NAME: only ops whose name has it) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/progress.h"
#include "core/compute/backend.h"
#include "core/compute/blas_core.h"
#include "core/compute/ops.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *randbuf(backend *be, size_t n, unsigned seed)
{
    float *p = be->alloc(be, n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((seed >> 8) * 0x1p-24 - 0.5);
    }
    return p;
}

static const char *only; /* run only the ops whose name contains this */

/* Times `what` RUNS times after one warm-up; prints the median. */
#define BENCH(name, gflop, what)                                                                   \
    do {                                                                                           \
        double t_[64];                                                                             \
        if (only && !strstr(name, only)) break;                                                    \
        what;                                                                                      \
        for (int r_ = 0; r_ < runs; r_++) {                                                        \
            double t0_ = now_seconds();                                                                    \
            what;                                                                                  \
            t_[r_] = now_seconds() - t0_;                                                                  \
        }                                                                                          \
        qsort(t_, (size_t)runs, sizeof(double), cmp_double);                                       \
        double m_ = t_[runs / 2];                                                                  \
        printf("| %d | %-44s | %9.2f | %7.1f |\n", threads, name, m_ * 1e3,                        \
               (gflop) > 0 ? (gflop) / m_ : 0.0);                                                  \
        fflush(stdout);                                                                            \
    } while (0)

int main(int argc, char **argv)
{
    blas_core_select(argv); /* OpenBLAS' kernels as espnet3 runs them (core/compute/blas_core.h) */
    int threads = argc > 1 ? atoi(argv[1]) : 1, runs = argc > 2 ? atoi(argv[2]) : 5;
    if (runs < 1 || runs > 64) runs = 5;
    only = argc > 3 && argv[3][0] ? argv[3] : NULL;
    backend *be;
    esp_err err;
    if (!(be = backend_open(BACKEND_CPU, 0, threads, &err))) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const int B = 16, T = 400, F = 80, D = 256, H = 4, FF = 1024;
    const int T1 = ops_conv_out_len(T), F1 = ops_conv_out_len(F);
    const int T2 = ops_conv_out_len(T1), F2 = ops_conv_out_len(F1), N = 6400;
    int lens[16];
    for (int b = 0; b < B; b++) lens[b] = T2 - b % 4;

    /* Linear 6400 x 256 -> 1024 (the FF's first layer at 16 x 400 rows). */
    float *x = randbuf(be, (size_t)N * D, 1), *w = randbuf(be, (size_t)FF * D, 2);
    float *b = randbuf(be, FF, 3), *y = randbuf(be, (size_t)N * FF, 4);
    float *dx = be->alloc(be, (size_t)N * D * 4), *dw = be->alloc(be, (size_t)FF * D * 4);
    float *db = be->alloc(be, (size_t)FF * 4);
    double lin = 2.0 * N * D * FF * 1e-9;
    BENCH("linear fwd 6400x256 -> 1024 (sgemm + bias)", lin,
          be->linear_forward(be, y, x, w, b, N, D, FF));
    BENCH("linear bwd 6400x256 -> 1024 (dx, dw, db)", 2 * lin,
          be->linear_backward(be, dx, dw, db, y, x, w, N, D, FF, 0));
    be->free(be, x), be->free(be, w), be->free(be, b), be->free(be, y);
    be->free(be, dx), be->free(be, dw), be->free(be, db);

    /* Conv2dSubsampling's convolutions at 16 x 400 x 80. */
    size_t n0 = (size_t)B * T * F, n1 = (size_t)B * D * T1 * F1, n2 = (size_t)B * D * T2 * F2;
    float *in = randbuf(be, n0, 5), *w1 = randbuf(be, (size_t)D * 9, 6), *b1 = randbuf(be, D, 7);
    float *w2 = randbuf(be, (size_t)D * D * 9, 8), *b2 = randbuf(be, D, 9);
    float *h1 = be->alloc(be, n1 * 4), *h2 = be->alloc(be, n2 * 4), *dh1 = be->alloc(be, n1 * 4);
    float *dh2 = randbuf(be, n2, 10), *dw1 = be->alloc(be, (size_t)D * 9 * 4);
    float *dw2 = be->alloc(be, (size_t)D * D * 9 * 4), *db1 = be->alloc(be, D * 4),
          *db2 = be->alloc(be, D * 4);
    double c1 = 2.0 * B * D * T1 * F1 * 9 * 1e-9, c2 = 2.0 * B * D * T2 * F2 * D * 9 * 1e-9;
    BENCH("conv1 fwd 1->256 + ReLU", c1, be->conv2d_forward(be, h1, in, w1, b1, B, 1, D, T, F, 1, NULL));
    BENCH("conv2 fwd 256->256 + ReLU", c2,
          be->conv2d_forward(be, h2, h1, w2, b2, B, D, D, T1, F1, 1, NULL));
    BENCH("conv2 bwd (dx, dw, db)", 2 * c2,
          be->conv2d_backward(be, dh1, dw2, db2, dh2, h1, w2, h2, B, D, D, T1, F1, 0, NULL));
    BENCH("conv1 bwd (dw, db)", c1,
          be->conv2d_backward(be, NULL, dw1, db1, dh1, in, w1, h1, B, 1, D, T, F, 0, NULL));
    be->free(be, in), be->free(be, w1), be->free(be, b1), be->free(be, w2), be->free(be, b2);
    be->free(be, h1), be->free(be, h2), be->free(be, dh1), be->free(be, dh2);
    be->free(be, dw1), be->free(be, dw2), be->free(be, db1), be->free(be, db2);

    /* One layer's attention core and layer norm at 16 x 99 frames. */
    size_t ne = (size_t)B * T2 * D;
    float *qkv = randbuf(be, 3 * ne, 11), *ya = be->alloc(be, ne * 4);
    float *att = be->alloc(be, (size_t)B * H * T2 * T2 * 4), *dqkv = be->alloc(be, 3 * ne * 4);
    float *dy = randbuf(be, ne, 12);
    double at = 2.0 * 2 * B * T2 * T2 * D * 1e-9;
    BENCH("attention fwd (B16 T99 h4 dk64)", at,
          be->attention_forward(be, ya, att, qkv, qkv + D, qkv + 2 * D, 3 * D, lens, B, T2, H,
                               D / H, 0, 0, 0));
    BENCH("attention bwd", 2 * at,
          be->attention_backward(be, dqkv, dqkv + D, dqkv + 2 * D, dy, att, qkv, qkv + D,
                                qkv + 2 * D, 3 * D, lens, B, T2, H, D / H, 0, 0, 0));
    BENCH("attention fwd, dropout 0.1", at,
          be->attention_forward(be, ya, att, qkv, qkv + D, qkv + 2 * D, 3 * D, lens, B, T2, H,
                               D / H, 0.1f, 1, 2));
    float *lw = randbuf(be, D, 13), *lb = randbuf(be, D, 14),
          *mu = be->alloc(be, (size_t)B * T2 * 4);
    float *rs = be->alloc(be, (size_t)B * T2 * 4), *ldw = be->alloc(be, D * 4),
          *ldb = be->alloc(be, D * 4);
    BENCH("layernorm fwd (1584 x 256)", 0,
          be->layernorm_forward(be, ya, mu, rs, dy, lw, lb, B * T2, D, 1e-12));
    BENCH("layernorm bwd", 0,
          be->layernorm_backward(be, dqkv, ldw, ldb, dy, ya, lw, mu, rs, B * T2, D, 0));
    size_t nf = (size_t)B * T2 * FF;
    float *big = randbuf(be, nf, 15);
    BENCH("dropout fwd 0.1 (1584 x 1024)", 0, be->dropout_forward(be, big, big, nf, 0.1f, 3, 4));
    BENCH("relu fwd (1584 x 1024)", 0, be->relu_forward(be, big, big, nf));
    be->free(be, qkv), be->free(be, ya), be->free(be, att), be->free(be, dqkv), be->free(be, dy);
    be->free(be, lw), be->free(be, lb), be->free(be, mu), be->free(be, rs), be->free(be, ldw);
    be->free(be, ldb), be->free(be, big);
    backend_close(be);
    return 0;
}
