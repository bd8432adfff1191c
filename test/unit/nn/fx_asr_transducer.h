/* The dims of scripts/make_asr_transducer_fixtures.py's mixed_*, pointwise_*, shrink_*, widen_* and convfirst_* models (mixed: (its MIXED body_conf: two
 * conformer blocks, an ebranchformer, a branchformer and a conformer block, each with its own
 * linear_size, heads and conv_mod_kernel_size; the 2-layer RNNDecoder; pointwise: fx_pointwise_dims), shared by
 * test_asr_transducer.c and test/unit/decode/test_asr_transducer_search.c. */
#ifndef ESPNET3_TEST_NN_FX_ASR_TRANSDUCER_H
#define ESPNET3_TEST_NN_FX_ASR_TRANSDUCER_H

#include "core/nn/model_params.h"

static inline model_dims fx_mixed_dims(void)
{
    model_dims d = {.idim = 20, .d = 16, .heads = 4, .ff = 32, .blocks = 5, .vocab = 12, .encoder = ENC_CONFORMER,
                    .macaron = 1, .rel_pos = 1, .use_cnn = 1, .cnn_kernel = 3, .act = ACT_SWISH,
                    .input_layer = IN_CONV2D, .tr_layers = 2, .tr_hidden = 12, .tr_joint = 10, .body = 1,
                    .cgmlp_units = 20, .gate_act = ACT_IDENTITY, .n_groups = 4};
    /* blocks, encoder, heads, ff, cnn_kernel, use_cnn, use_ffn, cgmlp_units, cgmlp_kernel, merge_kernel,
     * then the conv1d block's groups, dilation, bias, batch_norm, relu, stride, then the output width */
    d.group[0] = (struct model_group){2, ENC_CONFORMER, 2, 24, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}, 16};
    d.group[1] = (struct model_group){1, ENC_EBRANCHFORMER, 4, 20, 5, 0, 1, 20, 5, 3, 0, 0, 0, 0, 0, 0, {0}, {0}, 16};
    d.group[2] = (struct model_group){1, ENC_EBRANCHFORMER, 1, 12, 3, 0, 0, 12, 3, 0, 0, 0, 0, 0, 0, 0, {0}, {0}, 16};
    d.group[3] = (struct model_group){1, ENC_CONFORMER, 4, 32, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}, 16};
    d.f2 = input_layer_out_bins(IN_CONV2D, d.idim);
    return d;
}

/* The pointwise_* model (POINTWISE): MIXED's blocks 0, 2 and 4 with conv1d blocks of kernel 1
 * between them, the first with BatchNorm1d and 2 groups, the second without ReLU or bias. */
static inline model_dims fx_pointwise_dims(void)
{
    model_dims d = fx_mixed_dims();
    d.n_groups = 5;
    d.group[0].blocks = 1;
    d.group[1] = (struct model_group){1, ENC_CONV1D, 0, 0, 1, 0, 0, 0, 0, 0, 2, 1, 1, 1, 1, 1, {0}, {0}, 16};
    d.group[2] = (struct model_group){1, ENC_EBRANCHFORMER, 4, 20, 5, 0, 1, 20, 5, 3, 0, 0, 0, 0, 0, 0, {0}, {0}, 16};
    d.group[3] = (struct model_group){1, ENC_CONV1D, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, {0}, {0}, 16};
    d.group[4] = (struct model_group){1, ENC_CONFORMER, 4, 32, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}, 16};
    return d;
}

/* The shrink_* model (SHRINK): POINTWISE's X-former blocks with conv1d blocks that shrink the
 * frames between them: kernel 2, dilation 2, stride 2 with BatchNorm1d; kernel 2 without ReLU or
 * bias. */
static inline model_dims fx_shrink_dims(void)
{
    model_dims d = fx_pointwise_dims();
    d.group[1] = (struct model_group){1, ENC_CONV1D, 0, 0, 2, 0, 0, 0, 0, 0, 1, 2, 1, 1, 1, 2, {0}, {0}, 16};
    d.group[3] = (struct model_group){1, ENC_CONV1D, 0, 0, 2, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, {0}, {0}, 16};
    return d;
}

/* The widen_* model (WIDEN, input_conf conv_size 8): a conformer block of 16, a conv1d block
 * 16 -> 24 (kernel 1, BatchNorm1d, 2 groups), a conformer block of 24 (linear 32, 4 heads), a conv1d
 * block 24 -> 20 (kernel 2, no ReLU or bias), an ebranchformer block of 20 (linear 20, 2 heads,
 * kernel 3); the last entry of each group its output width. */
static inline model_dims fx_widen_dims(void)
{
    model_dims d = fx_pointwise_dims(); /* its first two groups, then shrink's second conv1d block */
    d.d = 20, d.embed_d = 16, d.embed_ch = 8;
    d.group[1].d = 24;
    d.group[2] = (struct model_group){1, ENC_CONFORMER, 4, 32, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}, 24};
    d.group[3] = fx_shrink_dims().group[3], d.group[3].d = 20;
    d.group[4] = (struct model_group){1, ENC_EBRANCHFORMER, 2, 20, 3, 0, 1, 20, 3, 3, 0, 0, 0, 0, 0, 0, {0}, {0}, 20};
    return d;
}

/* The convfirst_* model (CONVFIRST): ConvInput without its Linear (16 channels x 4 bins: 64
 * features), a conv1d block 64 -> 16 of kernel 3, then MIXED's blocks 2 and 4. */
static inline model_dims fx_convfirst_dims(void)
{
    model_dims d = fx_mixed_dims();
    d.n_groups = 3, d.blocks = 3, d.embed_raw = 1, d.embed_ch = 16, d.embed_d = 16 * d.f2;
    d.encoder = ENC_EBRANCHFORMER, d.use_cnn = 0, d.use_ffn = 1, d.cnn_kernel = 5, d.cgmlp_kernel = 5;
    d.merge_kernel = 3;
    d.group[0] = (struct model_group){1, ENC_CONV1D, 0, 0, 3, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 1, {0}, {0}, 16};
    d.group[1] = (struct model_group){1, ENC_EBRANCHFORMER, 4, 20, 5, 0, 1, 20, 5, 3, 0, 0, 0, 0, 0, 0, {0}, {0}, 16};
    d.group[2] = (struct model_group){1, ENC_CONFORMER, 4, 32, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}, 16};
    return d;
}

/* The norms_<kind>_* models (NORMS): MIXED's blocks with main_conf's norm_type and
 * conv_mod_norm_type and each entry's eps / partial keys (norm_spec: kind, partial columns, eps;
 * layer_norm's eps 0 is its 1e-12). kind: NORM_RMS (rms_norm, gating units scale_norm), NORM_BASIC
 * (basic_norm, gating units rms_norm), NORM_SCALE (scale_norm, gating units basic_norm). */
static inline model_dims fx_norms_dims(int kind)
{
    model_dims d = fx_mixed_dims();
    norm_spec n = {kind, 0, kind == NORM_BASIC ? 0.25f : 1e-5f};
    int ck = kind == NORM_RMS ? NORM_SCALE : kind == NORM_BASIC ? NORM_RMS : NORM_BASIC;
    norm_spec c = {ck, 0, ck == NORM_BASIC ? 0.25f : 1e-5f};
    for (int g = 0; g < 4; g++) d.group[g].norm = n;
    d.group[1].csgu_norm = d.group[2].csgu_norm = c;
    d.after_norm = n;
    if (kind == NORM_RMS) /* block 0: norm_partial 0.5, norm_eps 1e-4; ebranchformer: conv_mod_norm_eps 1e-3 */
        d.group[0].norm = (norm_spec){NORM_RMS, 8, 1e-4f}, d.group[1].csgu_norm.eps = 1e-3f, d.after_norm.p = 4;
    if (kind == NORM_BASIC) /* ebranchformer: conv_mod_norm_partial 0.5; branchformer: norm_eps 0.1 */
        d.group[1].csgu_norm.p = 5, d.group[2].norm.eps = 0.1f, d.after_norm.eps = 0.5f;
    if (kind == NORM_SCALE) d.group[3].norm.eps = 1e-3f;
    d.norm = d.group[0].norm, d.csgu_norm = d.group[0].csgu_norm;
    return d;
}

#endif
