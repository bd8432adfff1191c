/* Compute ops of the ASR model (encoder, CTC head, attention decoder) on the CPU, forward and
 * backward, written once (core/compute/ops_impl.h; the embedding and the label-smoothing loss in
 * ops_embed_impl.h and ops_loss_impl.h; the Conformer's in ops_act_impl.h, ops_conv1d_impl.h,
 * ops_norm_impl.h and ops_relattn_impl.h, declared in ops_conformer_decl.h; the LSTM cell in
 * ops_lstm_impl.h, the GRU cell in ops_gru_impl.h; the transducer's joint activation in ops_joint_impl.h; the RNN-T loss' passes
 * over the logits in ops_rnnt_impl.h) and instantiated
 * twice: `_f32` (float: the CPU backend, core/compute/ops_f32.c) and `_f64` (double: the float64 reference backend
 * core/compute/backend_ref64.c and the finite-difference tests, core/compute/ops_f64.c). The
 * prototypes are in core/compute/ops_decl.h, expanded here once per type:
 * ops_linear_forward_f32(...), ops_linear_forward_f64(...), ... Model and trainer code does not
 * call them: it calls the backend (core/compute/backend.h).
 *
 * Conventions (every op):
 * - Row-major flat buffers, outputs first; PyTorch weight layouts (Linear W[out][in],
 *   y = x W^T + b; Conv2d W[out_c][in_c][3][3]); conv activations are channels last.
 * - Parameter gradients (dw, db, dgamma, dbeta) ACCUMULATE (+=): zero the flat gradient buffer once
 *   per optimizer step.
 * - Input gradients: linear, conv2d and layernorm take `acc` (0: overwrite dx, 1: dx += ...), so a
 *   residual branch adds into the trunk's gradient without a separate add. Every other backward
 *   overwrites its input gradient; the elementwise ones may run in place (dx == dy).
 * - Sizes are ints (per-dimension), offsets size_t. Scratch buffers are the caller's, sized by the
 *   ops_*_scratch() helpers below (in elements of the instantiated type).
 * - BLAS: the float ops call ops_sgemm_mp (core/compute/ops_sgemm.h: OpenBLAS' sgemm split over
 *   the GEMM thread count the CPU backend sets), the double ones cblas_dgemm. The ops' own loops
 *   are serial; the `_mt` variants of core/compute/ops_mt_decl.h split them over threads with the
 *   same results. */
#ifndef ESPNET3_OPS_H
#define ESPNET3_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/compute/conv_winograd.h"
#include "core/compute/kernel_math.h"
#include "core/compute/rnnt.h"
#include "core/compute/rownorm.h"

/* Output length of one Conv2d(kernel 3, stride 2, no padding) along a dimension: torch's
 * (n - 3) // 2 + 1 (= (n - 1) // 2), 0 when the input is shorter than the kernel. */
static inline int ops_conv_out_len(int n)
{
    return n < 3 ? 0 : (n - 3) / 2 + 1;
}

/* Output length of a convolution with kernel k and stride s, no padding: torch's (n - k) // s + 1,
 * 0 when the input is shorter than the kernel. */
static inline int ops_conv_len(int n, int k, int s)
{
    return n < k ? 0 : (n - k) / s + 1;
}

/* Frames after Conv2dSubsampling (two convs): ((T - 1) // 2 - 1) // 2, clamped at 0. */
static inline int ops_subsample_len(int t)
{
    return ops_conv_out_len(ops_conv_out_len(t));
}

/* Scratch (elements) for conv2d_forward. One input channel (the first conv): the packed weight
 * (9 x oc) and the bias (oc). More: the Winograd form's (core/compute/conv_winograd.h). */
static inline size_t ops_conv2d_forward_scratch(int ic, int oc, int h, int w)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    if (ic > 1 && oh > 0 && ow > 0) return wino_scratch(ic, oc, oh, ow, 0);
    return ((size_t)ic * 9 + 1) * (size_t)oc;
}

/* Scratch (elements) for conv2d_backward. One input channel: packed weight and its gradient
 * (9 x oc each), one item's patch matrix (oh*ow x 9) and masked output gradient (oh*ow x oc).
 * More: the Winograd form's. */
static inline size_t ops_conv2d_backward_scratch(int ic, int oc, int h, int w)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    if (ic > 1 && oh > 0 && ow > 0) return wino_scratch(ic, oc, oh, ow, 1);
    size_t p = (size_t)oh * (size_t)ow, kk = (size_t)ic * 9;
    return 2 * kk * (size_t)oc + p * (kk + (size_t)oc);
}

/* Floats conv2d_forward_mt can keep in `saved` for conv2d_backward_mt of the same x (0: nothing):
 * the Winograd form's transformed input tiles, which the weight gradient would otherwise compute
 * again (one input channel: none). */
static inline size_t ops_conv2d_saved_floats(int nb, int ic, int h, int w)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    return ic > 1 && oh > 0 && ow > 0 && nb > 0 ? wino_saved_floats(nb, ic, oh, ow) : 0;
}

/* Floats of conv2d_kernels_mt's transformed kernels (0: no Winograd form, one input channel or no
 * output), and which tile sizes they are for: kernels of one w for inputs of the same key are the
 * same. */
static inline size_t ops_conv2d_kernels_floats(int ic, int oc, int h, int w)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    if (ic <= 1 || oh <= 0 || ow <= 0) return 0;
    wino_plan p = wino_plan_make(oh, ow);
    return (size_t)p.classes * ic * oc;
}
static inline int ops_conv2d_kernels_key(int h, int w)
{
    wino_plan p = wino_plan_make(ops_conv_out_len(h), ops_conv_out_len(w));
    return p.mh * (WINO_MAX_M + 1) + p.mw;
}

/* The same on `threads` threads (conv2d_forward_mt / conv2d_backward_mt). */
static inline size_t ops_conv2d_forward_scratch_mt(int ic, int oc, int h, int w, int threads)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    if (ic > 1 && oh > 0 && ow > 0) return wino_scratch_threads(ic, oc, oh, ow, 0, threads);
    return ops_conv2d_forward_scratch(ic, oc, h, w);
}
static inline size_t ops_conv2d_backward_scratch_mt(int ic, int oc, int h, int w, int threads)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
    if (ic > 1 && oh > 0 && ow > 0) return wino_scratch_threads(ic, oc, oh, ow, 1, threads);
    return ops_conv2d_backward_scratch(ic, oc, h, w);
}
/* Output frames of a Conv1d of kernel k, stride s and dilation d without padding (torch's
 * (t - d (k - 1) - 1) // s + 1), 0 when t is shorter than the dilated kernel. */
static inline int ops_conv1d_gen_len(int t, int k, int s, int d)
{
    return ops_conv_len(t, d * (k - 1) + 1, s);
}
/* Scratch (elements) for conv1d_gen_forward: the packed weight (oc x kg, kg = k * ic / groups)
 * and one group's patch matrix (ot x kg); conv1d_gen_backward: also the packed weight gradient. */
static inline size_t ops_conv1d_gen_forward_scratch(int t, int ic, int oc, int k, int s, int d, int groups)
{
    size_t kg = (size_t)k * (ic / groups);
    return (size_t)oc * kg + (size_t)ops_conv1d_gen_len(t, k, s, d) * kg;
}
static inline size_t ops_conv1d_gen_backward_scratch(int t, int ic, int oc, int k, int s, int d, int groups)
{
    return ops_conv1d_gen_forward_scratch(t, ic, oc, k, s, d, groups) + (size_t)oc * k * (ic / groups);
}
/* Scratch (elements) for conv2d_gen_forward: the packed weight (oc x kk) and one item's patch
 * matrix (P x kk), kk = kh * kw * ic, P = output positions per item; conv2d_gen_backward: also
 * the packed weight gradient and one item's masked output gradient (P x oc). */
static inline size_t ops_conv2d_gen_forward_scratch(int ic, int oc, int h, int w, int kh, int kw, int sh, int sw)
{
    size_t p = (size_t)ops_conv_len(h, kh, sh) * (size_t)ops_conv_len(w, kw, sw), kk = (size_t)kh * kw * ic;
    return (size_t)oc * kk + p * kk;
}
static inline size_t ops_conv2d_gen_backward_scratch(int ic, int oc, int h, int w, int kh, int kw, int sh, int sw)
{
    size_t p = (size_t)ops_conv_len(h, kh, sh) * (size_t)ops_conv_len(w, kw, sw), kk = (size_t)kh * kw * ic;
    return 2 * (size_t)oc * kk + p * (kk + (size_t)oc);
}

/* Scratch (elements) for mha_forward (the dropped probabilities of one head; 0 without dropout)
 * and mha_backward (two tq x tk matrices); attention_* are mha with tq = tk = t. */
static inline size_t ops_mha_forward_scratch(int tq, int tk, float p)
{
    return p > 0 ? (size_t)tq * (size_t)tk : 0;
}
static inline size_t ops_mha_backward_scratch(int tq, int tk)
{
    return 2 * (size_t)tq * (size_t)tk;
}
static inline size_t ops_attention_forward_scratch(int t, float p)
{
    return ops_mha_forward_scratch(t, t, p);
}
static inline size_t ops_attention_backward_scratch(int t)
{
    return ops_mha_backward_scratch(t, t);
}

/* Scratch (elements) for relattn_forward: the biased queries (2 x t x hd), the position scores
 * (t x 2t-1) and, with dropout, the dropped probabilities (t x t); relattn_backward: the biased
 * queries and one query gradient (3 x t x hd), two t x t matrices and the position scores'
 * gradient (t x 2t-1). */
static inline size_t ops_relattn_forward_scratch(int t, int hd, float p)
{
    size_t tt = (size_t)t;
    return 2 * tt * (size_t)hd + tt * (2 * tt - 1) + (p > 0 ? tt * tt : 0);
}
static inline size_t ops_relattn_backward_scratch(int t, int hd)
{
    size_t tt = (size_t)t;
    return 3 * tt * (size_t)hd + 2 * tt * tt + tt * (2 * tt - 1);
}

#define OPS_DECL_T float
#define OPS_DECL_FN(name) ops_##name##_f32
#include "core/compute/ops_decl.h"
#include "core/compute/ops_conformer_decl.h"
#include "core/compute/ops_mt_decl.h"
#undef OPS_DECL_T
#undef OPS_DECL_FN

#define OPS_DECL_T double
#define OPS_DECL_FN(name) ops_##name##_f64
#include "core/compute/ops_decl.h"
#include "core/compute/ops_conformer_decl.h"
#include "core/compute/ops_mt_decl.h"
#undef OPS_DECL_T
#undef OPS_DECL_FN

#endif
