/* Per-element math shared by the CPU ops and the CUDA kernels: `static inline` functions that
 * compile as C11 and as CUDA (__host__ __device__), so the CPU tests exercise the arithmetic the
 * GPU runs. Nothing here allocates, loops over buffers or sees a backend. The CPU ops
 * (core/compute/ops_impl.h, core/compute/ops_step.c) call these functions; a kernel that calls
 * them too computes the same bits wherever the operations are single IEEE operations.
 *
 *   activations   act_relu, act_sigmoid, act_silu, act_swish, act_glu, act_gelu and their gradients, per type
 *                 (core/compute/kernel_math_act.h: _f32 and _f64)
 *   dropout       the counter-based mask: dropout_key, dropout_bits, dropout_threshold,
 *                 dropout_r16; the kept values' scale dropout_keep_scale
 *   attention     attn_row_keys (the key padding and causal masks of a query row), attn_chunk_keys
 *                 (the asr_transducer chunk mask's)
 *   label smooth. label_smoothing_prob, kl_div_term, label_smoothing_grad
 *   RNN-T loss    rnnt_alpha_node, rnnt_beta_node (the lattice), rnnt_node_weight, rnnt_label_arc
 *                 (FastEmit), rnnt_grad_final (the gradient's
 *                 clamp and scale); the CTC recursions' ctc_log_add
 *   Conformer     relpos_shift_col; per type (core/compute/kernel_math_conformer.h): bn_rstd,
 *                 bn_apply, bn_running, bn_dx (BatchNorm), relpos_angle (relative encoding)
 *   LSTM cell     per type (core/compute/kernel_math_lstm.h): lstm_cell, lstm_cell_c (the forward
 *                 of one unit), lstm_cell_grad, lstm_cell_grad_t (its backward)
 *   GRU cell      per type (core/compute/kernel_math_gru.h): gru_cell, gru_cell_n, gru_cell_h (the
 *                 forward of one unit), gru_cell_grad (its backward)
 *   optimizers    adam_update_one (Adam / AdamW), sgd_update_one, adadelta_update_one
 *   clipping      clip_grad_coef, clip_grad_value_one, SUM_SQUARES_BLOCK
 *   EMA weights   ema_update_one
 *   CTC alignment ctc_viterbi_best (one Viterbi step of the forced alignment)
 *   mixed prec.   core/compute/kernel_math_amp.h: bfloat16 / half rounding, the loss scaler's unscale */
#ifndef ESPNET3_COMPUTE_KERNEL_MATH_H
#define ESPNET3_COMPUTE_KERNEL_MATH_H

#include <math.h>
#include <stdint.h>

#include "core/base/rng.h"

/* `static inline KM_HD`: nvcc refuses __forceinline__ next to `inline` ("duplicate specifier"),
 * and `inline` is all a device function needs to be inlined. On the host they are always inlined:
 * GCC does not inline a plain function into the CPU-specific clones of the ops' loops
 * (OPS_SIMD_CLONES, core/compute/ops_impl.h), which then call it once per element. */
#ifdef __CUDACC__
#define KM_HD __host__ __device__
#elif defined(__GNUC__)
#define KM_HD __attribute__((always_inline))
#else
#define KM_HD
#endif

/* ---- CTC recursions (core/compute/ctc.c, cuda/ops_ctc.cu) ---------------------------------------- */

/* log(exp(a) + exp(b) + exp(c)) with one log; all -inf gives -inf (a plain max shift would give
 * NaN there), and a NaN input gives NaN (the max skips NaN, so the sums carry it). */
static inline KM_HD double ctc_log_add3(double a, double b, double c)
{
    double m = a > b ? a : b;
    m = m > c ? m : c;
    if (m == -INFINITY) return a + b + c;
    return m + log(exp(a - m) + exp(b - m) + exp(c - m));
}

static inline KM_HD double ctc_log_add(double a, double b)
{
    double m = a > b ? a : b;
    if (m == -INFINITY) return a + b;
    return m + log(exp(a - m) + exp(b - m));
}

/* l'(s) of the extended label sequence: blank (0) at even states, the label at odd ones. */
static inline KM_HD int ctc_ext_label(const int *lab, int s)
{
    return (s & 1) ? lab[s >> 1] : 0;
}

/* State s may also come from s-2 (skipping a blank) unless it is a blank or repeats l'(s-2). */
static inline KM_HD int ctc_can_skip(const int *lab, int s)
{
    return (s & 1) && s >= 3 && lab[s >> 1] != lab[(s >> 1) - 1];
}

/* ---- CTC forced alignment (core/compute/ctc_align.c, cuda/ops_ctc_align.cu) ------------------- */

/* One Viterbi step of state s: the best of its predecessors in prev (frame t - 1), stay s, then
 * s - 1, then s - 2 where ctc_can_skip allows it; a tie keeps the earlier of that order, so every
 * backend takes the same path. *from gets 0, 1 or 2 (how many states back). */
static inline KM_HD double ctc_viterbi_best(const double *prev, const int *lab, int s, signed char *from)
{
    double best = prev[s];
    signed char f = 0;
    if (s >= 1 && prev[s - 1] > best) best = prev[s - 1], f = 1;
    if (ctc_can_skip(lab, s) && prev[s - 2] > best) best = prev[s - 2], f = 2;
    *from = f;
    return best;
}

/* ---- RNN-T loss (core/compute/rnnt.c, core/compute/ops_rnnt_impl.h, cuda/ops_rnnt.cu) ---------- */

/* One node of an utterance's RNN-T lattice (rows of U1 nodes per frame, Tb frames, Ub = labels + 1
 * nodes used per row; blank and emit the log-probs of leaving a node by blank and by its next
 * label), in the order both the CPU and the CUDA kernels visit them:
 * alpha(t, u) = logadd(alpha(t-1, u) + blank(t-1, u), alpha(t, u-1) + emit(t, u-1)), alpha(0, 0) = 0;
 * beta(t, u) = logadd(beta(t+1, u) + blank(t, u), beta(t, u+1) + emit(t, u)), beta(Tb-1, Ub-1) =
 * blank(Tb-1, Ub-1). */
static inline KM_HD double rnnt_alpha_node(const double *alpha, const double *blank, const double *emit, int t,
                                           int u, size_t i, int U1)
{
    if (t == 0 && u == 0) return 0.0;
    if (t == 0) return alpha[i - 1] + emit[i - 1];
    if (u == 0) return alpha[i - U1] + blank[i - U1];
    return ctc_log_add(alpha[i - U1] + blank[i - U1], alpha[i - 1] + emit[i - 1]);
}

static inline KM_HD double rnnt_beta_node(const double *beta, const double *blank, const double *emit, int t, int u,
                                          size_t i, int U1, int Tb, int Ub)
{
    if (t == Tb - 1 && u == Ub - 1) return blank[i];
    if (t == Tb - 1) return beta[i + 1] + emit[i];
    if (u == Ub - 1) return beta[i + U1] + blank[i];
    return ctc_log_add(beta[i + U1] + blank[i], beta[i + 1] + emit[i]);
}

/* FastEmit (Yu et al. 2021, arXiv:2010.11148) as warp-transducer's RNNTLoss(fastemit_lambda) applies
 * it: the loss is unchanged, the gradient of a label arc's log-prob is scaled by 1 + lambda. With pe
 * = exp(alpha + lp_emit + beta(t, u + 1) + nll), the label arc's posterior (0 at u = Ub - 1), the
 * log_softmax backward weighs the node's softmax by rnnt_node_weight instead of occ, and the label's
 * entry loses rnnt_label_arc; lambda 0 gives occ and pe, the plain loss' gradient, bit for bit. */
static inline KM_HD double rnnt_node_weight(double occ, double pe, double lambda)
{
    return lambda != 0 ? occ + lambda * pe : occ;
}

static inline KM_HD double rnnt_label_arc(double pe, double lambda)
{
    return lambda != 0 ? (1.0 + lambda) * pe : pe;
}

/* A logits-gradient entry of one utterance's loss, clamped to [-clamp, clamp] when clamp > 0
 * (torchaudio's clamp; a NaN stays NaN), then scaled (dloss / B). */
static inline KM_HD double rnnt_grad_final(double g, double clamp, double scale)
{
    if (clamp > 0) {
        g = clamp < g ? clamp : g;
        g = g < -clamp ? -clamp : g;
    }
    return g * scale;
}

/* ---- activations ------------------------------------------------------------------------------ */

#define KM_T float
#define KM_FN(name) name##_f32
#define KM_EXP expf
#define KM_ERFC erfcf
#include "core/compute/kernel_math_act.h"
#undef KM_T
#undef KM_FN
#undef KM_EXP
#undef KM_ERFC

#define KM_T double
#define KM_FN(name) name##_f64
#define KM_EXP exp
#define KM_ERFC erfc
#include "core/compute/kernel_math_act.h"
#undef KM_T
#undef KM_FN
#undef KM_EXP
#undef KM_ERFC

/* ---- dropout ---------------------------------------------------------------------------------- */

/* The mask of dropout (core/compute/ops_decl.h) for a (seed, stream): element e is kept iff its
 * 16 random bits dropout_r16(key, e) are >= dropout_threshold(p), key = dropout_key(seed, stream).
 * Four elements share one 64-bit draw: draw d = e / 4 is output d of splitmix64 started at key
 * (core/base/rng.h), element e takes its bits [16 * (e % 4), 16 * (e % 4) + 16). A kernel calls
 * dropout_r16 per element; the CPU loop calls dropout_bits once per four. */
static inline KM_HD uint64_t dropout_key(uint64_t seed, uint64_t stream)
{
    return rng_derive(seed, stream, 0);
}

/* Draw `ctr` of the mask: what splitmix64_next(&s) returns for s = key + ctr * RNG_GOLDEN_GAMMA. */
static inline KM_HD uint64_t dropout_bits(uint64_t key, uint64_t ctr)
{
    return rng_mix64(key + (ctr + 1) * RNG_GOLDEN_GAMMA);
}

/* The keep threshold on 16 random bits: round(p * 2^16); p in (0, 1). 65536 drops everything. */
static inline KM_HD uint32_t dropout_threshold(float p)
{
    return (uint32_t)((double)p * 65536.0 + 0.5);
}

/* Element e's 16 random bits. */
static inline KM_HD uint32_t dropout_r16(uint64_t key, uint64_t e)
{
    return (uint32_t)(dropout_bits(key, e >> 2) >> (16 * (e & 3))) & 0xffffu;
}

/* Kept values are multiplied by 1 / (1 - p), computed in double and rounded once to the element
 * type; p in (0, 1). */
static inline KM_HD double dropout_keep_scale(float p)
{
    return 1.0 / (1.0 - (double)p);
}

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
    int maximize;         /* the gradient negated first (torch's maximize) */
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
    g = c->maximize ? -g : g;                                  /* -grads[i] */
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

/* ---- SGD ----------------------------------------------------------------------------------------- */

/* Scalars of one torch.optim.SGD update, rounded to float where torch hands them to a float kernel
 * (core/train/optim.c sgd_coefs_for). */
typedef struct sgd_coefs {
    float weight_decay;
    float momentum;
    float one_minus_dampening;
    float neg_lr;
    int nesterov;
    int maximize;
    int first; /* the first update: the momentum buffer starts as a copy of the gradient */
} sgd_coefs;

/* One element of torch 2.11's _single_tensor_sgd (buf: NULL when momentum is 0, where torch keeps
 * no buffer). add(x, alpha=a) is fma(x, a, self) on torch's AVX2 kernels, as for Adam. */
static inline KM_HD void sgd_update_one(float *p, float *buf, float g, const sgd_coefs *c)
{
    float param = *p;
    g = c->maximize ? -g : g;                                       /* -grads[i] */
    g = c->weight_decay != 0.0f ? fmaf(param, c->weight_decay, g) : g; /* grad.add(param, alpha=wd) */
    if (buf) {
        /* the first step: buf = grad.clone(); then buf.mul_(momentum).add_(grad, alpha=1-dampening) */
        float b = c->first ? g : fmaf(g, c->one_minus_dampening, *buf * c->momentum);
        *buf = b;
        g = c->nesterov ? fmaf(b, c->momentum, g) : b;              /* grad.add(buf, alpha=momentum) */
    }
    *p = fmaf(g, c->neg_lr, param);                                 /* param.add_(grad, alpha=-lr) */
}

/* ---- Adadelta ------------------------------------------------------------------------------------ */

/* Scalars of one torch.optim.Adadelta update (core/train/optim.c adadelta_coefs_for). */
typedef struct adadelta_coefs {
    float weight_decay;
    float rho, one_minus_rho;
    float eps;
    float neg_lr;
    int maximize;
} adadelta_coefs;

/* One element of torch 2.11's _single_tensor_adadelta; addcmul(t, t, value=c) is fma(c*t, t, self)
 * on torch's AVX2 kernels, as for Adam's second moment. sqrtf is IEEE's correctly rounded root, as
 * CUDA's and a torch built without MKL take it (PyPI's CPU torch takes MKL's, which rounds about one
 * value in six the other way: scripts/make_sgd_adadelta_fixtures.py). */
static inline KM_HD void adadelta_update_one(float *p, float *square_avg, float *acc_delta, float g,
                                             const adadelta_coefs *c)
{
    float param = *p;
    g = c->maximize ? -g : g;                                          /* -grad */
    g = c->weight_decay != 0.0f ? fmaf(param, c->weight_decay, g) : g; /* grad.add(param, alpha=wd) */
    /* square_avg.mul_(rho).addcmul_(grad, grad, value=1-rho) */
    float sq = fmaf(c->one_minus_rho * g, g, *square_avg * c->rho);
    float std = sqrtf(sq + c->eps);                                    /* square_avg.add(eps).sqrt_() */
    float delta = sqrtf(*acc_delta + c->eps);                          /* acc_delta.add(eps).sqrt_() */
    delta = delta / std * g;                                           /* delta.div_(std).mul_(grad) */
    /* acc_delta.mul_(rho).addcmul_(delta, delta, value=1-rho) */
    *acc_delta = fmaf(c->one_minus_rho * delta, delta, *acc_delta * c->rho);
    *square_avg = sq;
    *p = fmaf(delta, c->neg_lr, param);                                /* param.add_(delta, alpha=-lr) */
}

/* ---- attention masks --------------------------------------------------------------------------- */

/* The keys query row i of an attention head sees: the first `len` (the key padding mask), and
 * with `causal` only those at or before the query's own position (ESPnet's subsequent_mask &
 * target mask). */
static inline KM_HD int attn_row_keys(int len, int causal, int i)
{
    return causal && i + 1 < len ? i + 1 : len;
}

/* The keys [*lo, *hi) query row i sees under espnet2/asr_transducer/utils.py's make_chunk_mask and
 * the key padding mask: its own chunk of `chunk` frames and the `left` chunks before it (every one
 * before with left <= 0), up to len; chunk <= 0: the first len. *hi <= *lo: none. */
static inline KM_HD void attn_chunk_keys(int i, int chunk, int left, int len, int *lo, int *hi)
{
    int c = chunk > 0 ? i / chunk : 0, start = left > 0 ? (c - left) * chunk : 0, end = (c + 1) * chunk;
    *lo = chunk > 0 && start > 0 ? start : 0;
    *hi = chunk > 0 && end < len ? end : len;
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

/* torch.nn.utils.clip_grad_value_ on one gradient: torch.clamp(g, -v, v), which keeps a NaN. */
static inline KM_HD float clip_grad_value_one(float g, float v)
{
    return g < -v ? -v : g > v ? v : g;
}

/* ---- weight averaging ------------------------------------------------------------------------- */

/* torch.optim.swa_utils.get_ema_avg_fn's `decay * ema + (1 - decay) * cur` on float32 tensors: each
 * Python float scalar becomes a float (decay, and 1 - decay taken in double first), each product
 * and the sum round to float (three tensor ops; the compilers contract none of them: C11 and
 * nvcc -fmad=false). counts: an integer counter (BatchNorm's int64 num_batches_tracked): torch
 * computes it as float too and copy_ into int64 truncates toward zero. */
static inline KM_HD float ema_update_one(float avg, float cur, float decay, float one_minus_decay, int counts)
{
    float kept = decay * avg, added = one_minus_decay * cur, v = kept + added;
    return counts ? truncf(v) : v;
}

/* Gradient sums of squares are summed in blocks of this many elements, the blocks' sums then in
 * block order: the value does not depend on how blocks go to threads (or GPU thread blocks). */
enum { SUM_SQUARES_BLOCK = 4096 };

/* ---- Conformer: BatchNorm and relative positions --------------------------------------------- */

/* Column of the rel_shift'ed score (query i, key j) in the (t x 2t-1) product with the relative
 * encoding, whose row k holds relative position t - 1 - k (ESPnet's rel_shift: i - j). */
static inline KM_HD int relpos_shift_col(int i, int j, int t) { return t - 1 - i + j; }

#define KM_T float
#define KM_FN(name) name##_f32
#define KM_EXP expf
#include "core/compute/kernel_math_conformer.h"
#undef KM_T
#undef KM_FN
#undef KM_EXP

#define KM_T double
#define KM_FN(name) name##_f64
#define KM_EXP exp
#include "core/compute/kernel_math_conformer.h"
#undef KM_T
#undef KM_FN
#undef KM_EXP

/* ---- the LSTM and GRU cells ----------------------------------------------------------------------- */

#define KM_T float
#define KM_FN(name) name##_f32
#define KM_EXP expf
#define KM_TANH tanhf
#include "core/compute/kernel_math_lstm.h"
#include "core/compute/kernel_math_gru.h"
#undef KM_T
#undef KM_FN
#undef KM_EXP
#undef KM_TANH

#define KM_T double
#define KM_FN(name) name##_f64
#define KM_EXP exp
#define KM_TANH tanh
#include "core/compute/kernel_math_lstm.h"
#include "core/compute/kernel_math_gru.h"
#undef KM_T
#undef KM_FN
#undef KM_EXP
#undef KM_TANH

#include "core/compute/kernel_math_amp.h"

#endif
