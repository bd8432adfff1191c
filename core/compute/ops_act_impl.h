/* Swish, GLU, GELU and the elementwise product (core/compute/ops_conformer_decl.h), instantiated
 * by core/compute/ops_f32.c and core/compute/ops_f64.c after core/compute/ops_impl.h (real, OPS_FN and ACT defined there). The
 * per-element math is kernel_math_act.h's, so a GPU kernel computes the same values; exp and erfc
 * come a block at a time from VEXP and VERFC (the instantiation's: core/compute/vmath.h). */

/* Elements per block: exp and erfc of a block at once (VEXP / VERFC, core/compute/vmath.h), then
 * the rest of the element's math from kernel_math_act.h's *_e forms. */
enum { ACT_BLOCK = 512 };

OPS_CLONE_INLINE size_t OPS_FN(act_block)(size_t n, size_t o)
{
    return n - o < ACT_BLOCK ? n - o : ACT_BLOCK;
}

/* e[i] = exp(-x[i]) for i < k: the sigmoid's exponential. */
OPS_CLONE_INLINE void OPS_FN(exp_neg)(real *e, const real *x, size_t k)
{
    for (size_t i = 0; i < k; i++) e[i] = -x[i];
    VEXP(e, e, k);
}

/* The sigmoid activations' loop: for each block [o, o + k) of the n elements of x (k <= ACT_BLOCK),
 * xo = x + o and e[i] = exp(-xo[i]), then STMT for each i < k, vectorized. */
#define SIGMOID_BLOCKS(n, x, STMT)                                                                      \
    do {                                                                                                \
        real e[ACT_BLOCK];                                                                              \
        for (size_t o = 0; o < (n); o += ACT_BLOCK) {                                                   \
            size_t k = OPS_FN(act_block)((n), o);                                                       \
            const real *xo = (x) + o;                                                                   \
            OPS_FN(exp_neg)(e, xo, k);                                                                  \
            _Pragma("omp simd") for (size_t i = 0; i < k; i++) STMT;                                    \
        }                                                                                               \
    } while (0)

OPS_SIMD_CLONES
void OPS_FN(swish_forward)(real *y, const real *x, size_t n)
{
    SIGMOID_BLOCKS(n, x, y[o + i] = ACT(swish_e)(xo[i], e[i]));
}

OPS_SIMD_CLONES
void OPS_FN(swish_backward)(real *dx, const real *dy, const real *x, size_t n)
{
    SIGMOID_BLOCKS(n, x, dx[o + i] = ACT(silu_grad_e)(dy[o + i], xo[i], e[i]));
}

OPS_SIMD_CLONES
void OPS_FN(glu_forward)(real *y, const real *x, int n, int c)
{
    for (int r = 0; r < n; r++) {
        const real *a = x + (size_t)r * 2 * c, *g = a + c;
        real *yr = y + (size_t)r * c;
        SIGMOID_BLOCKS((size_t)c, g, yr[o + i] = ACT(glu_e)(a[o + i], e[i]));
    }
}

OPS_SIMD_CLONES
void OPS_FN(glu_backward)(real *dx, const real *dy, const real *x, int n, int c)
{
    real e[ACT_BLOCK];
    for (int r = 0; r < n; r++) {
        const real *a = x + (size_t)r * 2 * c, *g = a + c, *dyr = dy + (size_t)r * c;
        real *da = dx + (size_t)r * 2 * c, *dg = da + c;
        for (size_t o = 0; o < (size_t)c; o += ACT_BLOCK) {
            size_t k = OPS_FN(act_block)((size_t)c, o);
            OPS_FN(exp_neg)(e, g + o, k);
            for (size_t i = 0; i < k; i++) ACT(glu_grad_e)(dyr[o + i], a[o + i], e[i], &da[o + i], &dg[o + i]);
        }
    }
}

/* The cgMLP's GELU and gating product (the E-Branchformer). */
OPS_SIMD_CLONES
void OPS_FN(gelu_forward)(real *y, const real *x, size_t n)
{
    real c[ACT_BLOCK];
    for (size_t o = 0; o < n; o += ACT_BLOCK) {
        size_t k = OPS_FN(act_block)(n, o);
        const real *xo = x + o;
        for (size_t i = 0; i < k; i++) c[i] = ACT(gelu_arg)(xo[i]);
        VERFC(c, c, k);
#pragma omp simd
        for (size_t i = 0; i < k; i++) y[o + i] = ACT(gelu_e)(xo[i], c[i]);
    }
}

OPS_SIMD_CLONES
void OPS_FN(gelu_backward)(real *dx, const real *dy, const real *x, size_t n)
{
    real c[ACT_BLOCK], e[ACT_BLOCK];
    for (size_t o = 0; o < n; o += ACT_BLOCK) {
        size_t k = OPS_FN(act_block)(n, o);
        const real *xo = x + o;
        for (size_t i = 0; i < k; i++) c[i] = ACT(gelu_arg)(xo[i]), e[i] = (real)-0.5 * xo[i] * xo[i];
        VERFC(c, c, k);
        VEXP(e, e, k);
#pragma omp simd
        for (size_t i = 0; i < k; i++) dx[o + i] = ACT(gelu_grad_e)(dy[o + i], xo[i], c[i], e[i]);
    }
}

OPS_SIMD_CLONES
void OPS_FN(mul_forward)(real *y, const real *a, const real *b, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = a[i] * b[i];
}

OPS_SIMD_CLONES
void OPS_FN(mul_backward)(real *da, real *db, const real *dy, const real *a, const real *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        real g = dy[i];
        da[i] = g * b[i];
        db[i] = g * a[i];
    }
}
