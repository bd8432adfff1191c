/* Helpers of the op tests (test_ops.c, test_ops_attention.c, test_ops_torch.c): a per-test arena
 * of host buffers, random doubles, float/double conversions, the error measure and central finite
 * differences. Criterion assertions report failures. */
#ifndef ESPNET3_TEST_OPS_TEST_UTIL_H
#define ESPNET3_TEST_OPS_TEST_UTIL_H

#include <stddef.h>

#include "core/base/rng.h"

/* The generator drand() draws from; each test seeds it (rng_init). */
extern rng ops_rng;

/* Zeroed host memory that lives until ops_arena_free (every op suite's .fini: LeakSanitizer stays
 * quiet). */
void *talloc(size_t bytes);
void ops_arena_free(void);
double *dz(size_t n);
float *fz(size_t n);

/* Uniform in [lo, hi) from ops_rng. */
double *drand(size_t n, double lo, double hi);
/* x rounded to float. */
float *tof(const double *x, size_t n);
double dsum_prod(const double *a, const double *b, size_t n);

/* max |a - b| / max |b|: the error measure of every comparison here. */
double err_dd(const double *a, const double *b, size_t n);
double err_fd(const float *a, const double *b, size_t n);
double err_ff(const float *a, const float *b, size_t n);

#define FD_EPS 1e-6
#define FD_TOL 1e-6
#define F32_TOL 1e-4

/* Central differences of loss() over each element of x, against the analytic gradient g. */
void fd_check(double (*loss)(void *), void *ctx, double *x, const double *g, size_t n, const char *what);

#define CHECK_F32(a, b, n, what)                                                                   \
    do {                                                                                           \
        double e_ = err_fd((a), (b), (n));                                                         \
        cr_assert(e_ < F32_TOL, "%s: float vs double rel err %.3g", (what), e_);                   \
    } while (0)

#endif
