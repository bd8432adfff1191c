/* espnet3's older parameter names and ESPnet's (core/nn/model_params.h). Kept apart from the
 * table so that readers of checkpoint files (averaging, the fuzz targets) need nothing else. */
#include <stdio.h>
#include <string.h>

#include "core/nn/model_params.h"

int param_legacy_name(const char *name, char *buf, size_t cap)
{
    /* espnet3 wrote encoder.embed.out.{weight,bias} (no Sequential index) before ESPnet's names. */
    static const char cur[] = "encoder.embed.out.0.";
    if (strncmp(name, cur, sizeof cur - 1)) return 0;
    return snprintf(buf, cap, "encoder.embed.out.%s", name + sizeof cur - 1) < (int)cap;
}

int param_current_name(const char *name, char *buf, size_t cap)
{
    static const char older[] = "encoder.embed.out.";
    if (strncmp(name, older, sizeof older - 1) || strchr(name + sizeof older - 1, '.')) return 0;
    return snprintf(buf, cap, "encoder.embed.out.0.%s", name + sizeof older - 1) < (int)cap;
}

/* The ASR task's module paths -> the asr_transducer task's (espnet2/asr_transducer/: ConvInput's
 * `output`, MultiBlocks' `blocks` and `norm_blocks`, the Conformer and E-Branchformer blocks'
 * `self_att`, `conv_mod` and norms, RNNDecoder's `rnn`, the model's `ctc_lin`). Prefix rewrites,
 * first match wins. */
static const struct {
    const char *from, *to;
} body_prefix[] = {
    {"encoder.embed.out.0.", "encoder.embed.output."},
    {"encoder.after_norm.", "encoder.encoders.norm_blocks."},
    {"ctc.ctc_lo.", "ctc_lin."},
    {"decoder.decoder.", "decoder.rnn."},
};
/* Inside encoder.encoders.<i>: a Conformer block (ConformerEncoderLayer -> Conformer) and an
 * E-Branchformer block (EBranchformerEncoderLayer with its cgMLP -> EBranchformer with its
 * ConvolutionalSpatialGatingUnit conv_mod and DepthwiseConvolution depthwise_conv_mod). */
typedef struct {
    const char *from, *to;
} name_part;
static const name_part conformer_part[] = {
    {"self_attn.", "self_att."},       {"conv_module.", "conv_mod."},   {"norm_ff_macaron.", "norm_macaron."},
    {"norm_ff.", "norm_feed_forward."}, {"norm_mha.", "norm_self_att."}, {NULL, NULL},
};
static const name_part ebranchformer_part[] = {
    {"attn.", "self_att."},
    {"cgmlp.channel_proj1.", "channel_proj1."},
    {"cgmlp.channel_proj2.", "channel_proj2."},
    {"cgmlp.csgu.", "conv_mod."},
    {"depthwise_conv_fusion.", "depthwise_conv_mod.conv."},
    {"norm_ff_macaron.", "norm_feed_forward_macaron."},
    {"norm_ff.", "norm_feed_forward."},
    {"norm_mha.", "norm_self_att."},
    {NULL, NULL},
};

int param_body_name(const char *name, int encoder, char *buf, size_t cap)
{
    for (size_t i = 0; i < sizeof body_prefix / sizeof *body_prefix; i++) {
        size_t n = strlen(body_prefix[i].from);
        if (!strncmp(name, body_prefix[i].from, n)) return snprintf(buf, cap, "%s%s", body_prefix[i].to, name + n) < (int)cap;
    }
    static const char blocks[] = "encoder.encoders.";
    const char *rest = name + sizeof blocks - 1, *dot;
    if (strncmp(name, blocks, sizeof blocks - 1) || !(dot = strchr(rest, '.')) || dot == rest) return 0;
    for (const char *p = rest; p < dot; p++)
        if (*p < '0' || *p > '9') return 0;
    int idx = (int)(dot - rest);
    const char *leaf = dot + 1;
    for (const name_part *p = encoder == ENC_EBRANCHFORMER ? ebranchformer_part : conformer_part; p->from; p++) {
        size_t n = strlen(p->from);
        if (!strncmp(leaf, p->from, n))
            return snprintf(buf, cap, "encoder.encoders.blocks.%.*s.%s%s", idx, rest, p->to, leaf + n) < (int)cap;
    }
    return snprintf(buf, cap, "encoder.encoders.blocks.%.*s.%s", idx, rest, leaf) < (int)cap;
}
