/* Swish and GLU (core/compute/ops_conformer_decl.h), instantiated by core/compute/ops_f32.c and
 * core/compute/ops_f64.c after core/compute/ops_impl.h (real, OPS_FN and ACT defined there). The
 * per-element math is kernel_math_act.h's, so a GPU kernel computes the same values. */

void OPS_FN(swish_forward)(real *y, const real *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = ACT(swish)(x[i]);
}

void OPS_FN(swish_backward)(real *dx, const real *dy, const real *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = ACT(silu_grad)(dy[i], x[i]);
}

void OPS_FN(glu_forward)(real *y, const real *x, int n, int c)
{
    for (int r = 0; r < n; r++) {
        const real *a = x + (size_t)r * 2 * c, *g = a + c;
        real *yr = y + (size_t)r * c;
#pragma omp simd
        for (int i = 0; i < c; i++) yr[i] = ACT(glu)(a[i], g[i]);
    }
}

void OPS_FN(glu_backward)(real *dx, const real *dy, const real *x, int n, int c)
{
    for (int r = 0; r < n; r++) {
        const real *a = x + (size_t)r * 2 * c, *g = a + c, *dyr = dy + (size_t)r * c;
        real *da = dx + (size_t)r * 2 * c, *dg = da + c;
        for (int i = 0; i < c; i++) ACT(glu_grad)(dyr[i], a[i], g[i], &da[i], &dg[i]);
    }
}
