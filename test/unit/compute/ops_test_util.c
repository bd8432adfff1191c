/* Helpers of the op tests (ops_test_util.h). */
#include "test/unit/compute/ops_test_util.h"
#include "test/unit/test_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

rng ops_rng;

static void *arena[1024];
static int arena_n;

void *talloc(size_t bytes)
{
    cr_assert(arena_n < (int)(sizeof arena / sizeof arena[0]));
    void *p = calloc(1, bytes ? bytes : 1);
    cr_assert(p);
    return arena[arena_n++] = p;
}

void ops_arena_free(void)
{
    while (arena_n > 0) free(arena[--arena_n]);
}

double *dz(size_t n)
{
    return talloc(n * sizeof(double));
}

float *fz(size_t n)
{
    return talloc(n * sizeof(float));
}

double *drand(size_t n, double lo, double hi)
{
    double *x = dz(n);
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (double)(rng_next(&ops_rng) >> 11) * 0x1p-53;
    return x;
}

float *tof(const double *x, size_t n)
{
    float *y = fz(n);
    for (size_t i = 0; i < n; i++) y[i] = (float)x[i];
    return y;
}

double dsum_prod(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

double err_dd(const double *a, const double *b, size_t n) { return test_err_dd(a, b, n, NULL); }

double err_fd(const float *a, const double *b, size_t n) { return test_err_fd(a, b, n, NULL); }

double err_ff(const float *a, const float *b, size_t n) { return test_err_ff(a, b, n, 1.0, NULL); }

void fd_check(double (*loss)(void *), void *ctx, double *x, const double *g, size_t n, const char *what)
{
    double *fd = dz(n);
    for (size_t i = 0; i < n; i++) {
        double save = x[i];
        x[i] = save + FD_EPS;
        double lp = loss(ctx);
        x[i] = save - FD_EPS;
        double lm = loss(ctx);
        x[i] = save;
        fd[i] = (lp - lm) / (2 * FD_EPS);
    }
    double e = err_dd(g, fd, n);
    cr_assert(e < FD_TOL, "%s: finite differences disagree, rel err %.3g", what, e);
}
