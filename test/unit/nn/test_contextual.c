/* The contextual block Transformer and Conformer encoders against the real ESPnet (fixtures by
 * scripts/make_contextual_fixtures.py: ESPnet2's ContextualBlock{Transformer,Conformer}Encoder + CTC, seeded
 * weights, a padded batch of 2, dropout off): encoder output, log-probs, CTC loss and every
 * parameter gradient of its forward_train, within a relative 1e-4, in blocks (with and without the
 * context vectors' positional encoding, the linear input layer) and in one piece (the utterance
 * fits a block; the Conformer with and without macaron, swish and ReLU). Also: the decoding model (one shared workspace) computes the same bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/formats/npz.h"
#include "core/nn/model.h"
#include "test/unit/nn/grads_final_check.h"
#include "test/unit/nn/nn_fixture.h"
#include "test/unit/test_util.h"

#define TOL 1e-4

static model_dims case_dims(const char *name)
{
    model_dims m = {.idim = 20, .d = 16, .heads = 2, .ff = 24, .blocks = 2, .vocab = 9, .encoder = ENC_CONTEXTUAL,
                    .input_layer = IN_CONV2D, .block_size = 8, .hop_size = 4, .look_ahead = 2, .ctx_pos_enc = 1};
    if (!strcmp(name, "no_ctx_pe")) m.block_size = 6, m.hop_size = 3, m.look_ahead = 3, m.ctx_pos_enc = 0;
    if (!strcmp(name, "short")) m.block_size = 40, m.hop_size = 16, m.look_ahead = 16;
    if (!strcmp(name, "linear")) {
        m.idim = 12, m.heads = 4, m.blocks = 1, m.input_layer = IN_LINEAR;
        m.block_size = 10, m.hop_size = 5, m.look_ahead = 0;
    }
    if (!strncmp(name, "conformer", 9)) m.ctx_conformer = 1, m.use_cnn = 1, m.macaron = 1, m.cnn_kernel = 5;
    if (!strcmp(name, "conformer_relu"))
        m.macaron = 0, m.act = ACT_RELU, m.cnn_kernel = 7, m.block_size = 6, m.hop_size = 3, m.look_ahead = 1;
    if (!strcmp(name, "conformer_short")) m.cnn_kernel = 3, m.block_size = 40, m.hop_size = 16, m.look_ahead = 16;
    m.f2 = input_layer_out_bins(m.input_layer, m.idim);
    return m;
}

static void open_case(const char *name, npz_file *f, backend **be)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/contextual/%s.npz", test_root_dir(), name);
    esp_err err;
    cr_assert_eq(npz_read(path, f, &err), 0, "%s", err.msg);
    *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(*be, "%s", err.msg);
}

static void check_case(const char *name)
{
    model_dims dims = case_dims(name);
    npz_file f;
    backend *be;
    open_case(name, &f, &be);
    asr_model m;
    model_rates rates = {0};
    asr_model_init(&m, be, &dims, &rates);
    fx_load_state(&m, &f);
    fx_batch b;
    fx_load_batch(&b, &f, dims.idim, 0);
    double worst_out = 0, worst_grad = 0;

    asr_model_zero_grad(&m);
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 1, 0);
    float *hl = fx_floats(fx_get(&f, "out.hlens"));
    cr_assert(m.hlens[0] == (int)hl[0] && m.hlens[1] == (int)hl[1], "hlens %d %d vs %g %g", m.hlens[0], m.hlens[1],
              hl[0], hl[1]);
    free(hl);
    size_t nh = (size_t)2 * m.T2 * dims.d, nl = (size_t)2 * m.T2 * dims.vocab;
    double e = fx_compare(&f, "out.enc", m.lnf, nh, &worst_out, TOL);
    cr_log_info("%s: encoder output rel err %.3g", name, e);
    e = fx_compare(&f, "out.logp", m.logp, nl, &worst_out, TOL);
    cr_log_info("%s: log-probs rel err %.3g", name, e);
    double loss = asr_model_loss(&m, b.labels, b.ylens, b.stride, NULL);
    float *ref_loss = fx_floats(fx_get(&f, "out.loss"));
    double le = fabs(loss - ref_loss[0]) / fabs(ref_loss[0]);
    cr_log_info("%s: CTC loss %.6f vs ESPnet %.6f, rel err %.3g", name, loss, ref_loss[0], le);
    cr_expect_lt(le, TOL, "loss %f vs %f", loss, ref_loss[0]);
    free(ref_loss);

    gf_check gf;
    gf_arm(&gf, &m);
    asr_model_backward(&m, 1.0f);
    gf_verify(&gf);
    const param_table *t = &m.table;
    const char *worst_name = "";
    for (size_t i = 0; i < t->n; i++) {
        const param_info *p = &t->items[i];
        if (p->kind != PARAM_TRAINED) continue; /* BatchNorm's running statistics */
        char gname[160];
        snprintf(gname, sizeof gname, "grad.%s", p->name);
        /* Softmax (linear_k) or BatchNorm's mean (depthwise_conv) cancels it: a true gradient of 0. */
        if (strstr(p->name, "linear_k.bias") || strstr(p->name, "depthwise_conv.bias")) {
            double w = test_max_abs(m.grads + p->offset, p->count);
            cr_expect_lt(w, 1e-5, "gradient of %s should vanish: %g", p->name, w);
            continue;
        }
        double before = worst_grad;
        fx_compare(&f, gname, m.grads + p->offset, p->count, &worst_grad, TOL);
        if (worst_grad > before) worst_name = p->name;
    }
    cr_log_info("%s: %zu parameter gradients, worst rel err %.3g (%s)", name, t->n, worst_grad, worst_name);
    free(b.feats);
    asr_model_free(&m);
    backend_close(be);
    npz_free(&f);
}

Test(contextual, blocks_match_espnet) { check_case("blocks"); }
Test(contextual, context_without_positions_matches_espnet) { check_case("no_ctx_pe"); }
Test(contextual, one_block_utterances_match_espnet) { check_case("short"); }
Test(contextual, linear_input_layer_matches_espnet) { check_case("linear"); }
Test(contextual, conformer_blocks_match_espnet) { check_case("conformer"); }
Test(contextual, conformer_relu_wide_kernel_matches_espnet) { check_case("conformer_relu"); }
Test(contextual, conformer_one_block_utterances_match_espnet) { check_case("conformer_short"); }

/* The decoding model shares one layer workspace; at batch size 1 its log-probs are the training
 * model's (eval mode) to the bit. */
Test(contextual, decoding_model_computes_the_same_bits)
{
    const char *names[] = {"blocks", "short"};
    for (int c = 0; c < 2; c++) {
        model_dims dims = case_dims(names[c]);
        npz_file f;
        backend *be;
        open_case(names[c], &f, &be);
        asr_model tm, im;
        model_rates rates = {0};
        asr_model_init(&tm, be, &dims, &rates);
        asr_model_init_inference(&im, be, &dims);
        fx_load_state(&tm, &f);
        fx_load_state(&im, &f);
        fx_batch b;
        fx_load_batch(&b, &f, dims.idim, 0);
        for (int u = 0; u < 2; u++) {
            const float *x = b.feats + (size_t)u * b.T * dims.idim;
            asr_model_forward(&tm, x, &b.lens[u], 1, b.lens[u], 0, 0);
            asr_model_forward(&im, x, &b.lens[u], 1, b.lens[u], 0, 0);
            size_t n = (size_t)tm.T2 * dims.vocab;
            cr_assert(!memcmp(tm.logp, im.logp, n * sizeof(float)), "%s utterance %d", names[c], u);
        }
        free(b.feats);
        asr_model_free(&tm), asr_model_free(&im);
        backend_close(be);
        npz_free(&f);
    }
}

/* With every dropout on (the context vectors' positional dropout too), the gradient of each group
 * of parameters agrees with a central difference of the loss along it (the masks are the seed's). */
static double loss_at(asr_model *m, const fx_batch *b)
{
    asr_model_forward(m, b->feats, b->lens, 2, b->T, 1, 99);
    return asr_model_loss(m, b->labels, b->ylens, b->stride, NULL);
}

static double directional_error(asr_model *m, const fx_batch *b, const float *p0, const float *g, const char *group)
{
    size_t n = m->table.total;
    double g2 = 0, l[2];
    for (size_t i = 0; i < m->table.n; i++) {
        const param_info *p = &m->table.items[i];
        if (!strncmp(p->name, group, strlen(group)))
            for (size_t e = 0; e < p->count; e++) g2 += (double)g[p->offset + e] * g[p->offset + e];
    }
    double gn = sqrt(g2), eps = fmin(0.01 / gn, 0.02);
    cr_assert(gn > 0, "%s: no gradient", group);
    for (int s = 0; s < 2; s++) {
        memcpy(m->params, p0, n * sizeof *p0);
        for (size_t i = 0; i < m->table.n; i++) {
            const param_info *p = &m->table.items[i];
            if (strncmp(p->name, group, strlen(group))) continue;
            for (size_t e = 0; e < p->count; e++)
                m->params[p->offset + e] = p0[p->offset + e] + (float)((s ? -eps : eps) * g[p->offset + e] / gn);
        }
        l[s] = loss_at(m, b);
    }
    memcpy(m->params, p0, n * sizeof *p0);
    return fabs((l[0] - l[1]) / (2 * eps) - gn) / gn;
}

Test(contextual, gradients_with_dropout_match_differences)
{
    model_dims dims = case_dims("blocks");
    npz_file f;
    backend *be;
    open_case("blocks", &f, &be);
    asr_model m;
    model_rates rates = {.dropout = 0.1f, .pos_dropout = 0.1f, .att_dropout = 0.1f, .ctc_weight = 1.0f};
    asr_model_init(&m, be, &dims, &rates);
    fx_load_state(&m, &f);
    fx_batch b;
    fx_load_batch(&b, &f, dims.idim, 0);
    asr_model_zero_grad(&m);
    loss_at(&m, &b);
    asr_model_backward(&m, 1.0f);
    float *p0, *g;
    fx_snapshot(&m, &p0, &g);
    static const char *const groups[] = {"encoder.embed.", "encoder.encoders.0.", "encoder.encoders.1.",
                                         "encoder.after_norm."};
    for (size_t k = 0; k < sizeof groups / sizeof *groups; k++) {
        double e = directional_error(&m, &b, p0, g, groups[k]);
        cr_log_info("%s: directional difference rel err %.3g", groups[k], e);
        cr_expect_lt(e, 5e-3, "%s: directional difference off by %g", groups[k], e);
    }
    free(p0), free(g), free(b.feats);
    asr_model_free(&m);
    backend_close(be);
    npz_free(&f);
}

/* encoder_conf: the block geometry and its defaults; the keys ESPnet's class would not take, the
 * geometry it cannot stream, init_average false (ESPnet fails on it) and the block keys under the
 * other encoders are refused by name. */
Test(contextual, config_keys)
{
    char *ctx = "contextual_block_transformer", *transformer = "transformer", *abs_pos = "abs_pos", *null = "null";
    encoder_conf_cfg e = {0};
    model_cfg m = {.encoder = ctx, .encoder_conf = &e};
    model_dims d = {0};
    esp_err err;
    cr_assert_eq(encoder_dims_from_cfg(&d, &m, &err), 0, "%s", err.msg);
    cr_assert(d.encoder == ENC_CONTEXTUAL && d.block_size == 40 && d.hop_size == 16 && d.look_ahead == 16 &&
              d.ctx_pos_enc == 1);
    int64_t bs = 8, hop = 6, la = 3;
    int no = 0;
    struct {
        encoder_conf_cfg e;
        const char *encoder, *msg;
    } bad[] = {
        {{.block_size = &bs, .hop_size = &hop, .look_ahead = &la}, ctx, "hop_size + look_ahead <= block_size"},
        {{.init_average = &no}, ctx, "init_average: false"},
        {{.pos_enc_layer_type = abs_pos}, ctx, "pos_enc_layer_type: not a key of ContextualBlockTransformerEncoder"},
        {{.input_layer = null}, ctx, "input_layer: null is not supported by contextual_block_transformer"},
        {{.block_size = &bs}, transformer, "block_size: a contextual block encoder key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        m = (model_cfg){.encoder = (char *)bad[i].encoder, .encoder_conf = &bad[i].e};
        cr_assert_neq(encoder_dims_from_cfg(&d, &m, &err), 0, "case %zu", i);
        cr_assert(strstr(err.msg, bad[i].msg), "case %zu: %s", i, err.msg);
    }
}

/* contextual_block_conformer: ContextualBlockConformerEncoder's defaults (the convolution module of
 * kernel 31, swish, no macaron, plain attention whatever selfattention_layer_type says); its
 * Conformer keys taken, the relative-position ones refused by name. */
Test(contextual, conformer_config_keys)
{
    char *ctxc = "contextual_block_conformer", *rel = "rel_selfattn", *latest = "latest", *relu = "relu";
    int yes = 1;
    int64_t k = 4, k3 = 3;
    encoder_conf_cfg e = {.selfattention_layer_type = rel};
    model_cfg m = {.encoder = ctxc, .encoder_conf = &e};
    model_dims d = {0};
    esp_err err;
    cr_assert_eq(encoder_dims_from_cfg(&d, &m, &err), 0, "%s", err.msg);
    cr_assert(d.encoder == ENC_CONTEXTUAL && d.ctx_conformer && d.use_cnn && d.cnn_kernel == 31 && !d.macaron &&
              !d.rel_pos && d.act == ACT_SWISH && d.block_size == 40);
    e = (encoder_conf_cfg){.macaron_style = &yes, .activation_type = relu, .cnn_module_kernel = &k3};
    cr_assert_eq(encoder_dims_from_cfg(&d, &m, &err), 0, "%s", err.msg);
    cr_assert(d.macaron && d.act == ACT_RELU && d.cnn_kernel == 3);
    e = (encoder_conf_cfg){.rel_pos_type = latest};
    cr_assert_neq(encoder_dims_from_cfg(&d, &m, &err), 0);
    cr_assert(strstr(err.msg, "rel_pos_type: not a key of ContextualBlockConformerEncoder"), "%s", err.msg);
    e = (encoder_conf_cfg){.cnn_module_kernel = &k};
    cr_assert_neq(encoder_dims_from_cfg(&d, &m, &err), 0);
    cr_assert(strstr(err.msg, "cnn_module_kernel: 4 must be odd"), "%s", err.msg);
    e = (encoder_conf_cfg){.macaron_style = &yes};
    m.encoder = "contextual_block_transformer";
    cr_assert_neq(encoder_dims_from_cfg(&d, &m, &err), 0);
    cr_assert(strstr(err.msg, "macaron_style: not a key of ContextualBlockTransformerEncoder"), "%s", err.msg);
}
