/* The Conformer-CTC model against the real ESPnet (fixtures by scripts/make_conformer_fixtures.py:
 * ESPnet2's ConformerEncoder + CTC, seeded weights, a padded batch of 2, dropout off): encoder
 * output, log-probs, CTC loss and every parameter gradient of a training-mode forward/backward,
 * BatchNorm's running statistics after it, and the eval-mode outputs with them; all within a
 * relative 1e-4 (max |a - b| / max |b| per tensor). Also: the decoding model (one shared block
 * workspace) computes the same bits as the training model in eval mode. */
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

typedef struct fixture_case {
    const char *name;
    model_dims dims;
} fixture_case;

static model_dims conformer_dims(int idim, int d, int heads, int ff, int blocks, int vocab, int macaron, int rel_pos,
                                 int use_cnn, int kernel, int act)
{
    model_dims m = {.idim = idim, .d = d, .heads = heads, .ff = ff, .blocks = blocks, .vocab = vocab,
                    .encoder = ENC_CONFORMER, .macaron = macaron, .rel_pos = rel_pos, .use_cnn = use_cnn,
                    .cnn_kernel = kernel, .act = act};
    m.f2 = ((idim - 1) / 2 - 1) / 2;
    return m;
}

static fixture_case case_of(const char *name)
{
    if (!strcmp(name, "main")) return (fixture_case){name, conformer_dims(80, 32, 4, 64, 2, 31, 1, 1, 1, 7, ACT_SWISH)};
    if (!strcmp(name, "abs_relu")) return (fixture_case){name, conformer_dims(20, 16, 2, 24, 1, 9, 0, 0, 1, 5, ACT_RELU)};
    if (!strcmp(name, "long")) return (fixture_case){name, conformer_dims(40, 32, 4, 64, 2, 31, 1, 1, 1, 15, ACT_SWISH)};
    return (fixture_case){name, conformer_dims(20, 16, 2, 24, 1, 9, 1, 1, 0, 31, ACT_SWISH)};
}

/* grad_tol: relative, per parameter; zero_tol: absolute, for the gradients that vanish. */
static void check_case(const char *name, double grad_tol, double zero_tol)
{
    fixture_case c = case_of(name);
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/conformer/%s.npz", test_root_dir(), name);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    model_rates rates = {0};
    asr_model_init(&m, be, &c.dims, &rates);
    fx_load_state(&m, &f);
    fx_batch b;
    fx_load_batch(&b, &f, c.dims.idim, 0);
    double worst_out = 0, worst_grad = 0, e;

    /* Training mode: batch statistics, running statistics updated once. */
    asr_model_zero_grad(&m);
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 1, 0);
    float *hl = fx_floats(fx_get(&f, "out.hlens"));
    cr_assert(m.hlens[0] == (int)hl[0] && m.hlens[1] == (int)hl[1], "hlens %d %d vs %g %g", m.hlens[0], m.hlens[1],
              hl[0], hl[1]);
    free(hl);
    size_t nh = (size_t)2 * m.T2 * c.dims.d, nl = (size_t)2 * m.T2 * c.dims.vocab;
    e = fx_compare(&f, "out.enc", m.lnf, nh, &worst_out, TOL);
    cr_log_info("%s: encoder output (training mode) rel err %.3g", name, e);
    e = fx_compare(&f, "out.logp", m.logp, nl, &worst_out, TOL);
    cr_log_info("%s: log-probs (training mode) rel err %.3g", name, e);
    double loss = asr_model_loss(&m, b.labels, b.ylens, b.stride, NULL);
    float *ref_loss = fx_floats(fx_get(&f, "out.loss"));
    double le = fabs(loss - ref_loss[0]) / fabs(ref_loss[0]);
    cr_log_info("%s: CTC loss %.6f vs ESPnet %.6f, rel err %.3g", name, loss, ref_loss[0], le);
    cr_expect_lt(le, TOL, "loss %f vs %f", loss, ref_loss[0]);
    free(ref_loss);

    gf_check gf;
    gf_arm(&gf, &m); /* DDP buckets: what the backward reports final stays so */
    asr_model_backward(&m, 1.0f);
    gf_verify(&gf);
    const param_table *t = &m.table;
    size_t n_grads = 0;
    const char *worst_name = "";
    for (size_t i = 0; i < t->n; i++) {
        const param_info *p = &t->items[i];
        if (p->kind != PARAM_TRAINED) continue;
        char gname[160];
        snprintf(gname, sizeof gname, "grad.%s", p->name); /* the fixture's names are ESPnet's, as ours */
        /* A bias that softmax (linear_k) or BatchNorm's mean (depthwise_conv) cancels has a true
         * gradient of 0: both sides hold rounding noise, so it is compared absolutely. */
        if (strstr(p->name, "linear_k.bias") || strstr(p->name, "depthwise_conv.bias")) {
            double w = 0;
            w = fmax(w, test_max_abs(m.grads + p->offset, p->count));
            cr_expect_lt(w, zero_tol, "gradient of %s should vanish: %g", p->name, w);
        } else {
            double before = worst_grad;
            fx_compare(&f, gname, m.grads + p->offset, p->count, &worst_grad, grad_tol);
            if (worst_grad > before) worst_name = p->name;
        }
        n_grads++;
    }
    cr_log_info("%s: %zu parameter gradients, worst rel err %.3g (%s)", name, n_grads, worst_grad, worst_name);

    /* BatchNorm's buffers after the one training forward. */
    float *state = calloc(t->state_total, sizeof *state);
    asr_model_state_to_host(&m, state);
    double worst_buf = 0;
    for (size_t i = 0; i < t->n; i++) {
        const param_info *p = &t->items[i];
        if (p->kind == PARAM_TRAINED) continue;
        char an[160];
        snprintf(an, sizeof an, "after.%s", p->name);
        fx_compare(&f, an, state + p->offset, p->count, &worst_buf, TOL);
        if (p->kind == PARAM_COUNTER) cr_expect_eq(state[p->offset], 1.0f, "%s", p->name);
    }
    cr_log_info("%s: BatchNorm running statistics after one step, worst rel err %.3g", name, worst_buf);

    /* Eval mode: the running statistics. */
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 0, 0);
    double worst_eval = 0;
    fx_compare(&f, "eval.enc", m.lnf, nh, &worst_eval, TOL);
    fx_compare(&f, "eval.logp", m.logp, nl, &worst_eval, TOL);
    cr_log_info("%s: eval-mode encoder output and log-probs, worst rel err %.3g", name, worst_eval);
    float *state2 = calloc(t->state_total, sizeof *state2);
    asr_model_state_to_host(&m, state2);
    cr_assert(!memcmp(state, state2, t->state_total * sizeof *state), "eval mode changed the buffers");
    free(state), free(state2), free(b.feats);
    asr_model_free(&m);
    backend_close(be);
    npz_free(&f);
}

Test(conformer, main_matches_espnet)
{
    check_case("main", TOL, 1e-5);
}

Test(conformer, abs_pos_relu_matches_espnet)
{
    check_case("abs_relu", TOL, 1e-5);
}

/* 9 s and 6 s utterances (224 and 152 frames, 447 relative positions) with kernel 15: what the
 * short cases cannot show of the relative shift and the conv module's padding. Gradients within
 * 3e-4: ESPnet's float32 sums over 376 frames round; the float64 reference backend (ref64) on this
 * fixture differs from ESPnet by the same 1.6e-4 (norm_ff_macaron.weight) as the CPU backend; the
 * rounding noise of the vanishing biases grows with the frames summed (1.2e-5 here). */
Test(conformer, long_utterances_match_espnet)
{
    check_case("long", 3e-4, 5e-5);
}

Test(conformer, no_cnn_module_matches_espnet)
{
    check_case("no_cnn", TOL, 1e-5);
}

/* The decoding model shares one block workspace; per utterance at batch size 1 its eval-mode
 * log-probs are the training model's to the bit. */
static void inference_case(const char *name)
{
    fixture_case c = case_of(name);
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/conformer/%s.npz", test_root_dir(), name);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model tm, im;
    model_rates rates = {0};
    asr_model_init(&tm, be, &c.dims, &rates);
    asr_model_init_inference(&im, be, &c.dims);
    fx_load_state(&tm, &f);
    fx_load_state(&im, &f);
    fx_batch b;
    fx_load_batch(&b, &f, c.dims.idim, 0);
    for (int u = 0; u < 2; u++) {
        const float *x = b.feats + (size_t)u * b.T * c.dims.idim;
        asr_model_forward(&tm, x, &b.lens[u], 1, b.lens[u], 0, 0);
        asr_model_forward(&im, x, &b.lens[u], 1, b.lens[u], 0, 0);
        size_t n = (size_t)tm.T2 * c.dims.vocab;
        cr_assert(!memcmp(tm.logp, im.logp, n * sizeof(float)), "%s utterance %d", name, u);
    }
    free(b.feats);
    asr_model_free(&tm), asr_model_free(&im);
    backend_close(be);
    npz_free(&f);
}

Test(conformer, decoding_model_computes_the_same_bits)
{
    inference_case("main");
    inference_case("no_cnn");
}

/* The table holds ESPnet's state dict: the same names, shapes and order; trained parameters first in the flat layout, buffers after. */
Test(conformer, table_is_espnets_state_dict)
{
    static const char *const names[] = {"main", "abs_relu", "no_cnn"};
    for (int c = 0; c < 3; c++) {
        fixture_case fc = case_of(names[c]);
        char path[512];
        snprintf(path, sizeof path, "%s/test/fixtures/conformer/%s.npz", test_root_dir(), names[c]);
        npz_file f;
        esp_err err;
        cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
        param_table t;
        param_table_build(&t, &fc.dims);
        size_t k = 0;
        for (size_t i = 0; i < f.n; i++) {
            const npy_array *a = &f.arrays[i];
            if (strncmp(a->name, "param.", 6)) continue;
            cr_assert(k < t.n, "%s: more fixture tensors than table entries", names[c]);
            cr_assert_eq(param_find(&t, a->name + 6), &t.items[k], "%s: entry %zu is %s, ESPnet has %s", names[c],
                         k, t.items[k].name, a->name + 6);
            cr_assert_eq(a->ndim, t.items[k].ndim, "%s", a->name);
            for (int d = 0; d < a->ndim; d++) cr_assert_eq((int64_t)a->shape[d], t.items[k].shape[d], "%s", a->name);
            k++;
        }
        cr_assert_eq(k, t.n, "%s: table has %zu entries, ESPnet %zu", names[c], t.n, k);
        size_t trained = 0, state = 0;
        for (size_t i = 0; i < t.n; i++)
            if (t.items[i].kind == PARAM_TRAINED) {
                cr_assert_eq(t.items[i].offset, trained);
                trained += t.items[i].count;
            }
        state = trained;
        for (size_t i = 0; i < t.n; i++)
            if (t.items[i].kind != PARAM_TRAINED) {
                cr_assert_eq(t.items[i].offset, state);
                state += t.items[i].count;
            }
        cr_assert(t.total == trained && t.state_total == state);
        cr_assert_eq(state - trained, fc.dims.use_cnn ? (size_t)fc.dims.blocks * (2 * fc.dims.d + 1) : 0u);
        param_table_free(&t);
        npz_free(&f);
    }
}

/* Initialization: BatchNorm's affine parameters 1/0 under every scheme, pos_bias_u/v from
 * xavier_uniform under PyTorch's defaults (as RelPositionMultiHeadedAttention draws them), and the
 * buffers at torch's initial values, untouched by param_init. */
Test(conformer, init_of_batchnorm_pos_bias_and_buffers)
{
    model_dims d = case_of("main").dims;
    param_table t;
    param_table_build(&t, &d);
    float *w = calloc(t.state_total, sizeof *w);
    for (size_t i = t.total; i < t.state_total; i++) w[i] = 7;
    const char *schemes[] = {NULL, "xavier_uniform", "kaiming_normal"};
    esp_err err;
    for (int s = 0; s < 3; s++) {
        cr_assert_eq(param_init(w, &t, schemes[s], 5, &err), 0, "%s", err.msg);
        const param_info *bw = param_find(&t, "encoder.encoders.1.conv_module.norm.weight");
        const param_info *bb = param_find(&t, "encoder.encoders.1.conv_module.norm.bias");
        for (size_t k = 0; k < bw->count; k++) cr_assert(w[bw->offset + k] == 1 && w[bb->offset + k] == 0);
        for (size_t i = t.total; i < t.state_total; i++) cr_assert_eq(w[i], 7, "param_init wrote a buffer");
    }
    cr_assert_eq(param_init(w, &t, NULL, 5, &err), 0);
    const param_info *u = param_find(&t, "encoder.encoders.0.self_attn.pos_bias_u");
    double bound = sqrt(6.0 / (8 + 4)), mx = 0; /* (heads 4, d_k 8) */
    mx = fmax(mx, test_max_abs(w + u->offset, u->count));
    cr_assert(mx <= bound && mx > 0.8 * bound, "pos_bias_u max %g, xavier bound %g", mx, bound);
    param_buffers_init(w, &t);
    const param_info *rv = param_find(&t, "encoder.encoders.0.conv_module.norm.running_var");
    const param_info *rm = param_find(&t, "encoder.encoders.0.conv_module.norm.running_mean");
    const param_info *nb = param_find(&t, "encoder.encoders.0.conv_module.norm.num_batches_tracked");
    cr_assert(rv->kind == PARAM_BUFFER && rm->kind == PARAM_BUFFER && nb->kind == PARAM_COUNTER && nb->ndim == 0);
    for (size_t k = 0; k < rv->count; k++) cr_assert(w[rv->offset + k] == 1 && w[rm->offset + k] == 0);
    cr_assert_eq(w[nb->offset], 0);
    free(w);
    param_table_free(&t);
}

/* encoder_conf -> dims: ESPnet2's ConformerEncoder defaults, and the values refused. */
Test(conformer, encoder_conf_defaults_and_refusals)
{
    char *latest = "latest", *conformer = "conformer", *transformer = "transformer", *relu = "relu", *abs = "abs_pos";
    char *selfattn = "selfattn";
    encoder_conf_cfg e = {.rel_pos_type = latest};
    model_cfg m = {.encoder = conformer, .encoder_conf = &e};
    model_dims d;
    esp_err err;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), 0, "%s", err.msg);
    cr_assert(d.encoder == ENC_CONFORMER && d.d == 256 && d.heads == 4 && d.ff == 2048 && d.blocks == 6);
    cr_assert(!d.macaron && d.rel_pos && d.use_cnn && d.cnn_kernel == 31 && d.act == ACT_SWISH);
    int yes = 1, no = 0;
    int64_t k = 15, bad_k = 4, idx[] = {6};
    double rate = 0.1;
    e.macaron_style = &yes, e.use_cnn_module = &no, e.cnn_module_kernel = &k, e.activation_type = relu;
    e.pos_enc_layer_type = abs, e.selfattention_layer_type = selfattn;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), 0, "%s", err.msg);
    cr_assert(d.macaron && !d.rel_pos && !d.use_cnn && d.cnn_kernel == 15 && d.act == ACT_RELU);
    e = (encoder_conf_cfg){0}; /* rel_pos_type left out: ESPnet2's legacy */
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    cr_assert(strstr(err.msg, "rel_pos_type: legacy, ESPnet2's default,"), "%s", err.msg);
    e = (encoder_conf_cfg){.rel_pos_type = latest, .cnn_module_kernel = &bad_k};
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    e = (encoder_conf_cfg){.rel_pos_type = latest, .interctc_layer_idx = idx, .n_interctc_layer_idx = 1};
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    cr_assert(strstr(err.msg, "interctc_layer_idx: 6 is outside [1, 5] (ESPnet2 asserts 0 < idx < num_blocks 6"), "%s",
              err.msg);
    e = (encoder_conf_cfg){.rel_pos_type = latest, .stochastic_depth_rate = &rate};
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    e = (encoder_conf_cfg){.rel_pos_type = latest, .zero_triu = &yes};
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    /* The transformer refuses the Conformer's keys, takes the shared ones at their defaults. */
    m.encoder = transformer;
    e = (encoder_conf_cfg){.concat_after = &no, .pos_enc_layer_type = abs};
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), 0, "%s", err.msg);
    cr_assert_eq(d.encoder, ENC_TRANSFORMER);
    e.cnn_module_kernel = &k;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    cr_assert(strstr(err.msg, "model.encoder_conf.cnn_module_kernel: a ConformerEncoder key"), "%s", err.msg);
}
