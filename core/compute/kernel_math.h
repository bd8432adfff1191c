/* Per-element math shared by the CPU ops and the CUDA kernels: `static inline` functions that
 * compile as C11 and as CUDA (__host__ __device__), so the CPU tests exercise the arithmetic the
 * GPU runs. Nothing here allocates, loops over buffers or sees a backend. */
#ifndef ESPNET3_COMPUTE_KERNEL_MATH_H
#define ESPNET3_COMPUTE_KERNEL_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define KM_HD __host__ __device__ __forceinline__
#else
#define KM_HD
#endif

/* ---- Adam / AdamW ----------------------------------------------------------------------------- */

/* Scalars of one update, computed in double on the host as torch does in Python (core/train/optim.c
 * adam_coefs_for), then rounded to float where torch hands them to a float kernel. */
typedef struct adam_coefs {
    float beta1, one_minus_beta1;
    float beta2, one_minus_beta2;
    float l2;             /* Adam: grad += l2 * param (0 for AdamW) */
    float decay;          /* AdamW: param *= 1 - lr * weight_decay (1 for Adam) */
    float bc2_sqrt;       /* sqrt(1 - beta2^step) */
    float eps;
    float neg_step_size;  /* -lr / (1 - beta1^step) */
} adam_coefs;

/* One element of torch's _single_tensor_adam / _single_tensor_adamw (vmax: NULL without amsgrad).
 * torch's AVX2 CPU kernels compute add(x, alpha=a) as fma(x, a, self) and addcmul(g, g, value=c)
 * as fma(c*g, g, self) (checked op by op against torch 1.13); fmaf keeps that rounding (glibc's
 * and CUDA's fmaf are exact). The other operations are single IEEE operations in torch's order
 * (-std=c11 does not contract them), so the results are torch's to the last bit. */
static inline KM_HD void adam_update_one(float *p, float *m, float *v, float *vmax, float g,
                                         const adam_coefs *c)
{
    float param = *p;
    g = c->l2 != 0.0f ? fmaf(param, c->l2, g) : g;            /* grad.add(param, alpha=wd) (Adam) */
    param = param * c->decay;                                  /* param.mul_(1 - lr*wd) (AdamW) */
    float mm = fmaf(g, c->one_minus_beta1, *m * c->beta1);     /* exp_avg.mul_(b1).add_(g, alpha=1-b1) */
    float vv = fmaf(c->one_minus_beta2 * g, g, *v * c->beta2); /* exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2) */
    float vd = vv;
    if (vmax) {                                                /* amsgrad */
        float a = *vmax;
        vd = a > vv ? a : vv;                                  /* torch.maximum, */
        vd = a != a ? a : vd;                                  /* which propagates NaN */
        *vmax = vd;
    }
    float denom = sqrtf(vd) / c->bc2_sqrt + c->eps;            /* (v.sqrt() / bc2_sqrt).add_(eps) */
    *p = param + (c->neg_step_size * mm) / denom;              /* param.addcdiv_(m, denom, -step_size) */
    *m = mm;
    *v = vv;
}

/* ---- gradient clipping ------------------------------------------------------------------------ */

/* torch.nn.utils.clip_grad_norm_'s factor for a total L2 norm: clip_coef = max_norm /
 * (total_norm + 1e-6) on a float32 tensor, which Python evaluates as reciprocal(total_norm + 1e-6)
 * * max_norm, then clamped at 1. Returns 1 (leave the gradients) when the norm is not finite: the
 * caller skips the step. */
static inline KM_HD float clip_grad_coef(double total_norm, double max_norm)
{
    if (!isfinite(total_norm)) return 1.0f;
    float tn = (float)total_norm;
    float coef = isfinite(tn) ? (1.0f / (tn + 1e-6f)) * (float)max_norm
                              : (float)(max_norm / total_norm); /* beyond float range: torch would have inf */
    return coef < 1.0f ? coef : 1.0f;
}

/* Gradient sums of squares are summed in blocks of this many elements, the blocks' sums then in
 * block order: the value does not depend on how blocks go to threads (or GPU thread blocks). */
enum { SUM_SQUARES_BLOCK = 4096 };

/* ---- Conformer: activations, GLU, BatchNorm, relative positions --------------------------------
 * One definition for float (_f32, what the backends run) and double (_f64, the finite-difference
 * tests): KM_REAL_MATH(T, S, EXP, SQRT) makes km_<name>_<S> for the element type T. */

/* Column of the rel_shift'ed score (query i, key j) in the (t x 2t-1) product with the relative
 * encoding, whose row k holds relative position t - 1 - k (ESPnet's rel_shift: i - j). */
static inline KM_HD int km_rel_shift_col(int i, int j, int t) { return t - 1 - i + j; }

#define KM_REAL_MATH(T, S, EXP, SQRT)                                                              \
    static inline KM_HD T km_sigmoid_##S(T x) { return (T)1 / ((T)1 + EXP(-x)); }                  \
    /* Swish (SiLU): x * sigmoid(x), as ESPnet's Swish module computes it. */                      \
    static inline KM_HD T km_swish_##S(T x) { return x * km_sigmoid_##S(x); }                      \
    /* d swish / dx = s (1 + x (1 - s)), times the output gradient. */                              \
    static inline KM_HD T km_swish_grad_##S(T x, T dy)                                              \
    {                                                                                              \
        T s = km_sigmoid_##S(x);                                                                   \
        return dy * (s * ((T)1 + x * ((T)1 - s)));                                                 \
    }                                                                                              \
    /* GLU over channels: out = a * sigmoid(b) (a the first half, b the second). */                \
    static inline KM_HD T km_glu_##S(T a, T b) { return a * km_sigmoid_##S(b); }                   \
    static inline KM_HD void km_glu_grad_##S(T a, T b, T dy, T *da, T *db)                        \
    {                                                                                              \
        T s = km_sigmoid_##S(b);                                                                   \
        *da = dy * s;                                                                              \
        *db = dy * a * s * ((T)1 - s);                                                             \
    }                                                                                              \
    /* BatchNorm per channel as torch's CPU kernel: y = x * alpha + beta with alpha = rstd * w,   \
     * beta = b - mean * alpha; rstd = 1 / sqrt(var + eps) (biased batch variance in training,    \
     * running_var in eval). */                                                                    \
    static inline KM_HD T km_bn_rstd_##S(double var, double eps) { return (T)(1.0 / SQRT(var + eps)); } \
    static inline KM_HD T km_bn_apply_##S(T x, T alpha, T beta) { return x * alpha + beta; }       \
    /* running = momentum * batch + (1 - momentum) * running, in double as torch's CPU update;    \
     * the variance's batch value is the unbiased one, var_sum / (n - 1). */                       \
    static inline KM_HD T km_bn_running_##S(T running, double batch, double momentum)             \
    {                                                                                              \
        return (T)(momentum * batch + (1 - momentum) * (double)running);                           \
    }                                                                                              \
    /* Training-mode input gradient (torch's form): dx = (dy - mean(dy) - xc * k) * rstd * w,    \
     * xc = x - mean, k = sum(xc * dy) * rstd^2 / n. */                                            \
    static inline KM_HD T km_bn_dx_##S(T dy, T xc, T mean_dy, T k, T rstd_w)                       \
    {                                                                                              \
        return (dy - mean_dy - xc * k) * rstd_w;                                                   \
    }                                                                                              \
    /* Sinusoid argument of position pos (negative allowed) at pair i of a d-dim encoding:        \
     * pos * exp(2i * -(ln 10000 / d)), as torch computes it in the element type. */               \
    static inline KM_HD T km_pe_angle_##S(int pos, int i, int d)                                   \
    {                                                                                              \
        T div = EXP((T)(2 * i) * (T)(-9.210340371976184 / d));                                     \
        return (T)pos * div;                                                                       \
    }

KM_REAL_MATH(float, f32, expf, sqrt)
KM_REAL_MATH(double, f64, exp, sqrt)

#endif
