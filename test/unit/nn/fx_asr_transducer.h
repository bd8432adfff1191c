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
    d.group[0] = (struct model_group){2, ENC_CONFORMER, 2, 24, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16};
    d.group[1] = (struct model_group){1, ENC_EBRANCHFORMER, 4, 20, 5, 0, 1, 20, 5, 3, 0, 0, 0, 0, 0, 0, 16};
    d.group[2] = (struct model_group){1, ENC_EBRANCHFORMER, 1, 12, 3, 0, 0, 12, 3, 0, 0, 0, 0, 0, 0, 0, 16};
    d.group[3] = (struct model_group){1, ENC_CONFORMER, 4, 32, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16};
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
    d.group[1] = (struct model_group){1, ENC_CONV1D, 0, 0, 1, 0, 0, 0, 0, 0, 2, 1, 1, 1, 1, 1, 16};
    d.group[2] = (struct model_group){1, ENC_EBRANCHFORMER, 4, 20, 5, 0, 1, 20, 5, 3, 0, 0, 0, 0, 0, 0, 16};
    d.group[3] = (struct model_group){1, ENC_CONV1D, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 16};
    d.group[4] = (struct model_group){1, ENC_CONFORMER, 4, 32, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16};
    return d;
}

/* The shrink_* model (SHRINK): POINTWISE's X-former blocks with conv1d blocks that shrink the
 * frames between them: kernel 2, dilation 2, stride 2 with BatchNorm1d; kernel 2 without ReLU or
 * bias. */
static inline model_dims fx_shrink_dims(void)
{
    model_dims d = fx_pointwise_dims();
    d.group[1] = (struct model_group){1, ENC_CONV1D, 0, 0, 2, 0, 0, 0, 0, 0, 1, 2, 1, 1, 1, 2, 16};
    d.group[3] = (struct model_group){1, ENC_CONV1D, 0, 0, 2, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 16};
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
    d.group[2] = (struct model_group){1, ENC_CONFORMER, 4, 32, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 24};
    d.group[3] = fx_shrink_dims().group[3], d.group[3].d = 20;
    d.group[4] = (struct model_group){1, ENC_EBRANCHFORMER, 2, 20, 3, 0, 1, 20, 3, 3, 0, 0, 0, 0, 0, 0, 20};
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
    d.group[0] = (struct model_group){1, ENC_CONV1D, 0, 0, 3, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 1, 16};
    d.group[1] = (struct model_group){1, ENC_EBRANCHFORMER, 4, 20, 5, 0, 1, 20, 5, 3, 0, 0, 0, 0, 0, 0, 16};
    d.group[2] = (struct model_group){1, ENC_CONFORMER, 4, 32, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 16};
    return d;
}

#endif
