/* Swish, GLU, GELU and the elementwise product (core/compute/ops_conformer_decl.h), instantiated
 * by core/compute/ops_f32.c and core/compute/ops_f64.c after core/compute/ops_impl.h (real, OPS_FN and ACT defined there). The
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

/* The cgMLP's GELU and gating product (the E-Branchformer). */
void OPS_FN(gelu_forward)(real *y, const real *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = ACT(gelu)(x[i]);
}

void OPS_FN(gelu_backward)(real *dx, const real *dy, const real *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) dx[i] = ACT(gelu_grad)(dy[i], x[i]);
}

void OPS_FN(mul_forward)(real *y, const real *a, const real *b, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

void OPS_FN(mul_backward)(real *da, real *db, const real *dy, const real *a, const real *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        real g = dy[i];
        da[i] = g * b[i];
        db[i] = g * a[i];
    }
}
