/* The dims of scripts/make_asr_transducer_fixtures.py's mixed_*, pointwise_* and shrink_* models (mixed: (its MIXED body_conf: two
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
     * then the conv1d block's groups, dilation, bias, batch_norm, relu, stride */
    d.group[0] = (struct model_group){2, ENC_CONFORMER, 2, 24, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}};
    d.group[1] = (struct model_group){1, ENC_EBRANCHFORMER, 4, 20, 5, 0, 1, 20, 5, 3, 0, 0, 0, 0, 0, 0, {0}, {0}};
    d.group[2] = (struct model_group){1, ENC_EBRANCHFORMER, 1, 12, 3, 0, 0, 12, 3, 0, 0, 0, 0, 0, 0, 0, {0}, {0}};
    d.group[3] = (struct model_group){1, ENC_CONFORMER, 4, 32, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}};
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
    d.group[1] = (struct model_group){1, ENC_CONV1D, 0, 0, 1, 0, 0, 0, 0, 0, 2, 1, 1, 1, 1, 1, {0}, {0}};
    d.group[2] = (struct model_group){1, ENC_EBRANCHFORMER, 4, 20, 5, 0, 1, 20, 5, 3, 0, 0, 0, 0, 0, 0, {0}, {0}};
    d.group[3] = (struct model_group){1, ENC_CONV1D, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, {0}, {0}};
    d.group[4] = (struct model_group){1, ENC_CONFORMER, 4, 32, 5, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}};
    return d;
}

/* The shrink_* model (SHRINK): POINTWISE's X-former blocks with conv1d blocks that shrink the
 * frames between them: kernel 2, dilation 2, stride 2 with BatchNorm1d; kernel 2 without ReLU or
 * bias. */
static inline model_dims fx_shrink_dims(void)
{
    model_dims d = fx_pointwise_dims();
    d.group[1] = (struct model_group){1, ENC_CONV1D, 0, 0, 2, 0, 0, 0, 0, 0, 1, 2, 1, 1, 1, 2, {0}, {0}};
    d.group[3] = (struct model_group){1, ENC_CONV1D, 0, 0, 2, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, {0}, {0}};
    return d;
}

#endif
