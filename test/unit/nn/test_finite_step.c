/* A whole training step at ESPnet2's default sizes stays finite, for each model kind: forward, loss
 * and backward of the Transformer, Conformer, E-Branchformer and contextual block encoders (ESPnet2's
 * default encoder_conf: 256 wide, 6 / 6 / 12 / 6 blocks), the first with the joint CTC/attention loss and
 * intermediate CTC, on a padded batch of 4 with dropout on; and the language models at ESPnet2's
 * defaults (TransformerLM: embed 128, att_unit 256, 4 layers; SequentialRNNLM: a 2-layer LSTM of
 * 650) on a padded batch of 4 texts, dropout on; every parameter and gradient must be
 * finite and the gradient not all zero, so a NaN or Inf anywhere in a step fails here by name
 * (issue 45) rather than as a drifting number elsewhere. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/config/config_types.h"
#include "core/nn/lm_conf.h"
#include "core/nn/model.h"
#include "core/nn/model_params.h"
#include "test/unit/nn/nn_fixture.h"
#include "test/unit/test_util.h"

enum { B = 4, T = 300, IDIM = 80, VOCAB = 500, LMAX = 20 };

static void check_finite(const asr_model *m, const float *host, size_t n, const char *what, const char *kind)
{
    for (size_t i = 0; i < m->table.n; i++) {
        const param_info *p = &m->table.items[i];
        if (p->kind != PARAM_TRAINED) continue;
        double a = test_max_abs(host + p->offset, p->count);
        cr_assert(isfinite(a), "%s: %s of %s is not finite", kind, what, p->name);
    }
    cr_assert(test_max_abs(host, n) > 0, "%s: every %s is zero", kind, what);
}

/* One training step (forward with dropout, loss, backward) of a batch of B: every parameter and
 * gradient finite, neither all zero. Frees the model. feats NULL: an LM's step (labels only). */
static void step_and_check(const char *kind, asr_model *m, const float *feats, const int *lens, const int *labels,
                           const int *ylens)
{
    asr_model_zero_grad(m);
    asr_model_forward(m, feats, lens, B, feats ? T : 0, 1, 11);
    double loss = asr_model_loss(m, labels, ylens, LMAX, NULL);
    cr_assert(isfinite(loss) && loss > 0, "%s: loss %g", kind, loss);
    asr_model_backward(m, 1.0f);
    float *p0, *g;
    fx_snapshot(m, &p0, &g);
    check_finite(m, p0, m->table.total, "parameter", kind);
    check_finite(m, g, m->table.total, "gradient", kind);
    cr_log_info("%s: %zu parameters, loss %.4f", kind, m->table.total, loss);
    free(p0), free(g);
    asr_model_free(m);
}

static void step(const char *kind, model_cfg *cfg)
{
    model_dims d;
    esp_err err;
    cr_assert_eq(model_dims_from_cfg(&d, cfg, IDIM, VOCAB, &err), 0, "%s: %s", kind, err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 2, &err);
    cr_assert_not_null(be, "%s", err.msg);
    model_rates r = {.dropout = 0.1f, .pos_dropout = 0.1f, .att_dropout = 0.1f, .ctc_dropout = 0.1f,
                     .dec_dropout = 0.1f, .dec_pos_dropout = 0.1f, .lsm_weight = 0.1f,
                     .ctc_weight = d.dec_blocks ? 0.3f : 1.0f, .interctc_weight = d.n_interctc ? 0.3f : 0.0f};
    asr_model m;
    asr_model_init(&m, be, &d, &r);
    cr_assert_eq(param_init(m.params, &m.table, "xavier_uniform", 7, &err), 0, "%s", err.msg);
    float *feats = malloc((size_t)B * T * IDIM * sizeof *feats);
    uint32_t s = 3;
    for (size_t i = 0; i < (size_t)B * T * IDIM; i++) {
        s = s * 1664525u + 1013904223u;
        feats[i] = 2.0f * ((float)(s >> 8) / (float)(1u << 24)) - 1.0f;
    }
    int lens[B] = {T, T - 37, T - 90, T - 151}, labels[B * LMAX], ylens[B] = {LMAX, 15, 11, 6};
    for (int i = 0; i < B * LMAX; i++) labels[i] = 1 + (i * 37) % (VOCAB - 2);
    step_and_check(kind, &m, feats, lens, labels, ylens);
    free(feats);
    backend_close(be);
}

Test(finite_step, transformer_joint_loss_and_intermediate_ctc, .timeout = 300)
{
    char *transformer = "transformer";
    int64_t idx[] = {3};
    encoder_conf_cfg e = {.interctc_layer_idx = idx, .n_interctc_layer_idx = 1};
    model_conf_cfg mc = {.ctc_weight = 0.3, .lsm_weight = 0.1, .interctc_weight = 0.3};
    model_cfg cfg = {.encoder = transformer, .encoder_conf = &e, .decoder = transformer, .model_conf = &mc};
    step("transformer", &cfg);
}

Test(finite_step, conformer, .timeout = 300)
{
    char *conformer = "conformer", *latest = "latest";
    int yes = 1;
    int64_t k = 15;
    encoder_conf_cfg e = {.rel_pos_type = latest, .macaron_style = &yes, .use_cnn_module = &yes, .cnn_module_kernel = &k};
    model_cfg cfg = {.encoder = conformer, .encoder_conf = &e};
    step("conformer", &cfg);
}

Test(finite_step, e_branchformer, .timeout = 300)
{
    char *ebf = "e_branchformer";
    int yes = 1;
    encoder_conf_cfg e = {.use_ffn = &yes, .macaron_ffn = &yes};
    model_cfg cfg = {.encoder = ebf, .encoder_conf = &e};
    step("e_branchformer", &cfg);
}

/* 74 frames after subsampling: blocks of 40 (hop 16, look-ahead 16), ESPnet2's defaults. */
Test(finite_step, contextual_block_transformer, .timeout = 300)
{
    char *ctx = "contextual_block_transformer";
    model_cfg cfg = {.encoder = ctx};
    step("contextual_block_transformer", &cfg);
}

/* An LM task's step: the model's LM form (no audio) on a padded batch of texts. */
static void lm_step(const char *kind, model_cfg *cfg)
{
    model_dims d;
    esp_err err;
    cr_assert_eq(lm_dims_from_cfg(&d, cfg, VOCAB, &err), 0, "%s: %s", kind, err.msg);
    model_rates r = {0};
    lm_rates_from_cfg(&r, cfg);
    backend *be = backend_open(BACKEND_CPU, 0, 2, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    asr_model_init(&m, be, &d, &r);
    cr_assert_eq(param_init(m.params, &m.table, "xavier_uniform", 7, &err), 0, "%s", err.msg);
    int labels[B * LMAX], ylens[B] = {LMAX, 15, 11, 6};
    for (int b = 0; b < B; b++)
        for (int t = 0; t < LMAX; t++) labels[b * LMAX + t] = t < ylens[b] ? 1 + (b * LMAX + t) * 37 % (VOCAB - 2) : -1;
    step_and_check(kind, &m, NULL, NULL, labels, ylens);
    backend_close(be);
}

Test(finite_step, transformer_lm, .timeout = 300)
{
    char *transformer = "transformer";
    model_cfg cfg = {.lm = transformer};
    lm_step("transformer_lm", &cfg);
}

Test(finite_step, seq_rnn_lm, .timeout = 300)
{
    char *seq_rnn = "seq_rnn";
    model_cfg cfg = {.lm = seq_rnn};
    lm_step("seq_rnn_lm", &cfg);
}
