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

/* ---- attention masks --------------------------------------------------------------------------- */

/* The keys query row i of an attention head sees: the first `len` (the key padding mask), and
 * with `causal` only those at or before the query's own position (ESPnet's subsequent_mask &
 * target mask). */
static inline KM_HD int attn_row_keys(int len, int causal, int i)
{
    return causal && i + 1 < len ? i + 1 : len;
}

/* ---- label smoothing (ESPnet's LabelSmoothingLoss) ------------------------------------------------ */

/* The smoothed target distribution of a row whose label is `target`: confidence 1 - smoothing
 * there and smoothing / (v - 1) on every other class (true_dist.fill_ then scatter_). */
static inline KM_HD double label_smoothing_prob(int c, int target, double smoothing, int v)
{
    return c == target ? 1.0 - smoothing : smoothing / (double)(v - 1);
}

/* One element of KLDivLoss(reduction="none")(logp, t) = t * (log t - logp), 0 where t is 0 (torch
 * uses xlogy). */
static inline KM_HD double kl_div_term(double t, double logp)
{
    return t > 0 ? t * (log(t) - logp) : 0.0;
}

/* The gradient of scale * sum_c kl_div_term(t_c, logp_c) with respect to the logits under
 * logp = log_softmax(logits), for one element: scale * (softmax - t) (the t's of a row sum to 1). */
static inline KM_HD double label_smoothing_grad(double logp, double t, double scale)
{
    return scale * (exp(logp) - t);
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

#endif
