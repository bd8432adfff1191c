/* The typed views of core/nn/model_tensors.h: each member points at its parameter-table entry (in
 * the parameter and in the gradient layout), tensors a model does not have are NULL, every model
 * kind binds, and a table entry no member names stops the binding. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/model_tensors.h"

/* Binds over a host buffer of table t's parameters with buffers (the parameter view). */
static float *bind_params(model_tensors *v, const param_table *t, const model_dims *d)
{
    float *base = calloc(t->state_total ? t->state_total : 1, sizeof *base);
    model_tensors_bind(v, t, d, base, t->state_total);
    return base;
}

static void expect_at(const param_table *t, const float *base, const float *member, const char *name)
{
    const param_info *p = param_find(t, name);
    cr_assert_not_null(p, "%s", name);
    cr_assert_eq(member, base + p->offset, "%s: the member points elsewhere", name);
}

static model_dims conformer_dims(void)
{
    return (model_dims){.idim = 40, .d = 16, .heads = 2, .ff = 24, .blocks = 2, .vocab = 9, .f2 = 9,
                        .encoder = ENC_CONFORMER, .macaron = 1, .rel_pos = 1, .use_cnn = 1, .cnn_kernel = 5,
                        .dec_blocks = 1, .dec_heads = 2, .dec_ff = 20, .n_interctc = 1, .interctc = {0},
                        .interctc_cond = 1};
}

Test(model_tensors, members_point_at_their_table_entries)
{
    model_dims d = conformer_dims();
    param_table t;
    param_table_build(&t, &d);
    model_tensors v;
    float *base = bind_params(&v, &t, &d);
    expect_at(&t, base, v.embed.conv[1].weight, "encoder.embed.conv.2.weight");
    expect_at(&t, base, v.embed.out.bias, "encoder.embed.out.0.bias");
    const enc_block_tensors *b = &v.blocks[1];
    expect_at(&t, base, b->self_attn.linear_k.bias, "encoder.encoders.1.self_attn.linear_k.bias");
    expect_at(&t, base, b->self_attn.linear_pos.weight, "encoder.encoders.1.self_attn.linear_pos.weight");
    expect_at(&t, base, b->self_attn.pos_bias_v, "encoder.encoders.1.self_attn.pos_bias_v");
    expect_at(&t, base, b->feed_forward_macaron.w_2.weight, "encoder.encoders.1.feed_forward_macaron.w_2.weight");
    expect_at(&t, base, b->conv_module.norm.running_var, "encoder.encoders.1.conv_module.norm.running_var");
    expect_at(&t, base, b->norm_final.bias, "encoder.encoders.1.norm_final.bias");
    expect_at(&t, base, v.after_norm.weight, "encoder.after_norm.weight");
    expect_at(&t, base, v.conditioning_layer.weight, "encoder.conditioning_layer.weight");
    expect_at(&t, base, v.ctc_lo.bias, "ctc.ctc_lo.bias");
    expect_at(&t, base, v.decoder.embed, "decoder.embed.0.weight");
    expect_at(&t, base, v.decoder.blocks[0].src_attn.linear_v.weight, "decoder.decoders.0.src_attn.linear_v.weight");
    expect_at(&t, base, v.decoder.blocks[0].norm3.weight, "decoder.decoders.0.norm3.weight");
    expect_at(&t, base, v.decoder.output_layer.bias, "decoder.output_layer.bias");
    /* What this model does not have. */
    cr_assert_null(b->self_attn.linear_pos.bias);
    cr_assert_null(b->norm1.weight);
    cr_assert_null(b->cgmlp.channel_proj1.weight);
    cr_assert_null(v.preencoder.weight);
    cr_assert_null(v.embed.linear.weight);
    cr_assert_null(v.rnn_lm.encoder);
    model_tensors_free(&v);
    free(base);
    param_table_free(&t);
}

Test(model_tensors, the_gradient_view_has_no_buffers)
{
    model_dims d = conformer_dims();
    param_table t;
    param_table_build(&t, &d);
    cr_assert_gt(t.state_total, t.total);
    float *grads = calloc(t.total, sizeof *grads);
    model_tensors g;
    model_tensors_bind(&g, &t, &d, grads, t.total);
    const nn_batchnorm *bn = &g.blocks[0].conv_module.norm;
    expect_at(&t, grads, bn->weight, "encoder.encoders.0.conv_module.norm.weight");
    cr_assert_null(bn->running_mean);
    cr_assert_null(bn->running_var);
    cr_assert_null(bn->num_batches_tracked);
    model_tensors_free(&g);
    free(grads);
    param_table_free(&t);
}

Test(model_tensors, every_model_kind_binds)
{
    model_dims ebf = {.idim = 16, .pre_in = 20, .pre_out = 16, .d = 16, .heads = 2, .ff = 24, .blocks = 2,
                      .vocab = 9, .input_layer = IN_LINEAR, .encoder = ENC_EBRANCHFORMER, .macaron = 1, .rel_pos = 1,
                      .use_ffn = 1, .cgmlp_units = 32, .cgmlp_kernel = 3, .linear_after_conv = 1, .merge_kernel = 3};
    model_dims plain = {.idim = 20, .d = 16, .heads = 2, .ff = 24, .blocks = 1, .vocab = 9, .input_layer = IN_NONE};
    model_dims conv8 = {.idim = 40, .d = 16, .heads = 2, .ff = 24, .blocks = 1, .vocab = 9, .input_layer = IN_CONV2D8,
                        .f2 = input_layer_out_bins(IN_CONV2D8, 40)};
    model_dims tlm = {.d = 16, .vocab = 9, .no_ctc = 1, .lm = LM_TRANSFORMER, .lm_embed = 8, .lm_pos_enc = 1,
                      .dec_blocks = 2, .dec_heads = 2, .dec_ff = 20};
    model_dims rlm = {.d = 16, .vocab = 9, .no_ctc = 1, .lm = LM_SEQ_RNN, .lm_embed = 8, .lm_layers = 2};
    const model_dims *all[] = {&ebf, &plain, &conv8, &tlm, &rlm};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
        param_table t;
        param_table_build(&t, all[k]);
        model_tensors v;
        float *base = bind_params(&v, &t, all[k]);
        if (all[k] == &ebf) {
            expect_at(&t, base, v.preencoder.weight, "preencoder.linear_out.weight");
            expect_at(&t, base, v.embed.norm.bias, "encoder.embed.1.bias");
            expect_at(&t, base, v.blocks[1].self_attn.pos_bias_u, "encoder.encoders.1.attn.pos_bias_u");
            expect_at(&t, base, v.blocks[1].cgmlp.channel_proj1.weight,
                      "encoder.encoders.1.cgmlp.channel_proj1.0.weight");
            expect_at(&t, base, v.blocks[1].cgmlp.csgu.linear.bias, "encoder.encoders.1.cgmlp.csgu.linear.bias");
            expect_at(&t, base, v.blocks[1].merge_proj.weight, "encoder.encoders.1.merge_proj.weight");
        } else if (all[k] == &plain) {
            expect_at(&t, base, v.embed.plain.weight, "encoder.embed.weight");
            expect_at(&t, base, v.blocks[0].norm2.bias, "encoder.encoders.0.norm2.bias");
        } else if (all[k] == &conv8) {
            expect_at(&t, base, v.embed.conv[2].bias, "encoder.embed.conv.4.bias");
            expect_at(&t, base, v.embed.out.weight, "encoder.embed.out.weight");
        } else if (all[k] == &tlm) {
            expect_at(&t, base, v.decoder.embed, "lm.embed.weight");
            expect_at(&t, base, v.decoder.lm_in_norm.weight, "lm.encoder.embed.1.weight");
            expect_at(&t, base, v.decoder.blocks[1].norm3.bias, "lm.encoder.encoders.1.norm2.bias");
            cr_assert_null(v.decoder.blocks[1].src_attn.linear_q.weight);
            cr_assert_null(v.decoder.blocks[1].norm2.weight);
            expect_at(&t, base, v.decoder.output_layer.weight, "lm.decoder.weight");
        } else {
            expect_at(&t, base, v.rnn_lm.encoder, "lm.encoder.weight");
            expect_at(&t, base, v.rnn_lm.rnn[1].bias_hh, "lm.rnn.bias_hh_l1");
            expect_at(&t, base, v.rnn_lm.decoder.bias, "lm.decoder.bias");
        }
        model_tensors_free(&v);
        free(base);
        param_table_free(&t);
    }
}

/* The floats of the gradient-view entries whose names start with prefix: [lo, hi) and their count. */
static tensor_span named_span(const param_table *t, const char *const *prefixes, int n)
{
    tensor_span s = {0};
    for (size_t i = 0; i < t->n; i++) {
        const param_info *p = &t->items[i];
        int match = 0;
        for (int k = 0; k < n; k++) match |= !strncmp(p->name, prefixes[k], strlen(prefixes[k]));
        if (!match || p->offset >= t->total) continue;
        if (!s.covered || p->offset < s.lo) s.lo = p->offset;
        if (!s.covered || p->offset + p->count > s.hi) s.hi = p->offset + p->count;
        s.covered += p->count;
    }
    return s;
}

static void expect_span(tensor_span got, tensor_span want, const char *what)
{
    cr_assert(got.lo == want.lo && got.hi == want.hi && got.covered == want.covered,
              "%s: span [%zu, %zu) covering %zu, the table's [%zu, %zu) covering %zu", what, got.lo, got.hi,
              got.covered, want.lo, want.hi, want.covered);
    cr_assert_eq(got.covered, got.hi - got.lo, "%s: other tensors lie inside its span", what);
}

/* The spans the backward reports gradients final by (core/nn/model.c) hold their modules' tensors
 * as the names say, and nothing else. */
Test(model_tensors, gradient_spans_are_the_modules_tensors)
{
    model_dims d = conformer_dims();
    param_table t;
    param_table_build(&t, &d);
    float *grads = calloc(t.total, sizeof *grads);
    model_tensors g;
    model_tensors_bind(&g, &t, &d, grads, t.total);
    for (int l = 0; l < d.blocks; l++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "encoder.encoders.%d.", l);
        const char *const p[] = {prefix};
        expect_span(g.spans.blocks[l], named_span(&t, p, 1), prefix);
    }
    const char *const enc[] = {"encoder.encoders.", "encoder.embed.", "preencoder."};
    expect_span(g.spans.encoder, named_span(&t, enc, 3), "encoder");
    const char *const heads[] = {"ctc.", "encoder.after_norm.", "encoder.conditioning_layer."};
    expect_span(g.spans.heads, named_span(&t, heads, 3), "heads");
    model_tensors_free(&g);
    free(grads);
    param_table_free(&t);
}

/* A table entry the views do not know (here one renamed) would be left out of every forward. */
Test(model_tensors, an_entry_no_member_names_aborts, .signal = SIGABRT)
{
    model_dims d = {.idim = 20, .d = 16, .heads = 2, .ff = 24, .blocks = 1, .vocab = 9, .input_layer = IN_NONE};
    param_table t;
    param_table_build(&t, &d);
    const param_info *p = param_find(&t, "encoder.encoders.0.norm2.bias");
    cr_assert_not_null(p);
    snprintf(t.items[p - t.items].name, sizeof p->name, "encoder.encoders.0.norm9.bias");
    model_tensors v;
    float *base = bind_params(&v, &t, &d);
    free(base);
}
