/* The float64 reference backend's state and the helpers its ops share (core/compute/backend_ref64.c,
 * core/compute/backend_ref64_conformer.c): double copies of an op's float buffers, widened before
 * the op and rounded back after it, and the _f64 ops' scratch. Private to those files. */
#ifndef ESPNET3_COMPUTE_BACKEND_REF64_INTERNAL_H
#define ESPNET3_COMPUTE_BACKEND_REF64_INTERNAL_H

#include <stdlib.h>

#include "core/compute/backend.h"
#include "core/compute/loss_state.h"

enum { REF_TMP_MAX = 16 };

typedef struct ref_impl {
    int threads;     /* the CTC and RNN-T losses' threads */
    double *scratch; /* the _f64 ops' scratch, grown on demand */
    size_t scratch_n;
    loss_state loss; /* the CTC workspace and the RNN-T lattice between a loss' ops */
    double *tmp[REF_TMP_MAX]; /* the double copies of the running op, freed when it returns */
    int ntmp;
} ref_impl;

/* ---- double copies of one op's buffers */

static inline double *tmp_zeros(backend *be, size_t n)
{
    ref_impl *r = be->impl;
    ESP_CHECK(r->ntmp < REF_TMP_MAX);
    return r->tmp[r->ntmp++] = xcalloc(n ? n : 1, sizeof(double));
}

static inline void tmp_release(backend *be)
{
    ref_impl *r = be->impl;
    while (r->ntmp > 0) free(r->tmp[--r->ntmp]);
}

/* x widened to double (NULL stays NULL). */
static inline double *wide(backend *be, const float *x, size_t n)
{
    if (!x) return NULL;
    double *d = tmp_zeros(be, n);
    for (size_t i = 0; i < n; i++) d[i] = (double)x[i];
    return d;
}

/* d rounded back into y (nothing when y is NULL). */
static inline void narrow(float *y, const double *d, size_t n)
{
    if (!y) return;
    for (size_t i = 0; i < n; i++) y[i] = (float)d[i];
}

/* The reference of an elementwise op over n values (its _f64 op): the inputs widened, the output
 * (overwritten) rounded back. REF_UNARY: op(y, x, n); REF_BINARY: op(y, a, b, n), as a backward's
 * (dx, dy, x or y, n); REF_MASKED: dropout's op(y, x, n, p, seed, stream). */
#define REF_UNARY(op)                                                                                   \
    static void ref_##op(backend *be, float *y, const float *x, size_t n)                               \
    {                                                                                                   \
        double *yd = tmp_zeros(be, n);                                                                  \
        ops_##op##_f64(yd, wide(be, x, n), n);                                                          \
        narrow(y, yd, n);                                                                               \
        tmp_release(be);                                                                                \
    }
#define REF_BINARY(op)                                                                                  \
    static void ref_##op(backend *be, float *y, const float *a, const float *b, size_t n)               \
    {                                                                                                   \
        double *yd = tmp_zeros(be, n);                                                                  \
        ops_##op##_f64(yd, wide(be, a, n), wide(be, b, n), n);                                          \
        narrow(y, yd, n);                                                                               \
        tmp_release(be);                                                                                \
    }
#define REF_MASKED(op)                                                                                  \
    static void ref_##op(backend *be, float *y, const float *x, size_t n, float p, uint64_t seed,        \
                         uint64_t stream)                                                               \
    {                                                                                                   \
        double *yd = tmp_zeros(be, n);                                                                  \
        ops_##op##_f64(yd, wide(be, x, n), n, p, seed, stream);                                         \
        narrow(y, yd, n);                                                                               \
        tmp_release(be);                                                                                \
    }

/* Elements spanned by `rows` rows of `cols` values at row stride ld. */
static inline size_t extent(int rows, int cols, int ld)
{
    return rows > 0 && cols > 0 ? (size_t)(rows - 1) * (size_t)ld + (size_t)cols : 0;
}

/* narrow() of the rows' own columns only: the gaps between them are not this op's output. */
static inline void narrow_rows(float *y, const double *d, int rows, int cols, int ld)
{
    for (int r = 0; r < rows; r++) narrow(y + (size_t)r * ld, d + (size_t)r * ld, (size_t)cols);
}

static inline double *scratch(backend *be, size_t n)
{
    ref_impl *r = be->impl;
    if (n > r->scratch_n) {
        free(r->scratch);
        r->scratch = xcalloc(n, sizeof(double));
        r->scratch_n = n;
    }
    return r->scratch;
}

/* The Conformer's ops (core/compute/backend_ref64_conformer.c) into a ref64 backend. */
void backend_ref64_conformer_ops(backend *be);

#endif
