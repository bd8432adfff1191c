/* Intermediate CTC (core/nn/interctc.c) against the real ESPnet2 (test/fixtures/interctc,
 * scripts/make_interctc_fixtures.py: loss, each layer's loss, every gradient and the decoding
 * encoder's CTC log-probs for a conditioned transformer, a conformer and a conditioned E-Branchformer
 * with the joint loss); and on its own: the loss mixes the final CTC with the listed blocks' CTC
 * as ESPnetASRModel does; an intermediate layer's loss is the CTC loss of the model cut after that
 * block (transformer, conformer: through after_norm; the E-Branchformer's is not normalized); the
 * gradients agree with a directional difference for the three encoders, with and without the
 * self-conditioning, dropout on, and what the backward reports final stays so; decoding applies the
 * conditioning as training does; the config's indices are ESPnet2's. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/config/config_types.h"
#include "core/nn/model.h"
#include "core/nn/model_params.h"
#include "test/unit/nn/grads_final_check.h"
#include "test/unit/nn/nn_fixture.h"
#include "test/unit/test_util.h"

enum { IDIM = 20, B = 2, T = 40, STRIDE = 3 };

typedef struct batch {
    float *feats;
    int lens[B], labels[B * STRIDE], ylens[B];
} batch;

static batch make_batch(void)
{
    batch b = {.lens = {40, 33}, .labels = {1, 2, 3, 4, 5, -1}, .ylens = {3, 2}};
    b.feats = malloc((size_t)B * T * IDIM * sizeof *b.feats);
    uint32_t s = 11;
    for (size_t i = 0; i < (size_t)B * T * IDIM; i++) {
        s = s * 1664525u + 1013904223u;
        b.feats[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
    }
    return b;
}

static model_dims dims_of(int encoder, int blocks)
{
    model_dims d = {.idim = IDIM, .d = 16, .heads = 2, .ff = 24, .blocks = blocks, .vocab = 7, .encoder = encoder};
    if (encoder == ENC_CONFORMER) d.macaron = 1, d.rel_pos = 1, d.use_cnn = 1, d.cnn_kernel = 5, d.act = ACT_SWISH;
    if (encoder == ENC_EBRANCHFORMER)
        d.rel_pos = 1, d.use_ffn = 1, d.macaron = 1, d.act = ACT_SWISH, d.cgmlp_units = 16, d.cgmlp_kernel = 3,
        d.gate_act = ACT_IDENTITY, d.merge_kernel = 3;
    d.f2 = input_layer_out_bins(IN_CONV2D, IDIM);
    return d;
}

static double loss_at(asr_model *m, const batch *b, int train)
{
    asr_model_forward(m, b->feats, b->lens, B, T, train, 99);
    return asr_model_loss(m, b->labels, b->ylens, STRIDE, NULL);
}

/* Every parameter of `to` from the one of the same name in `from`. */
static void copy_by_name(asr_model *to, const asr_model *from)
{
    for (size_t i = 0; i < to->table.n; i++) {
        const param_info *p = &to->table.items[i], *q = param_find(&from->table, p->name);
        cr_assert_not_null(q, "%s", p->name);
        memcpy(to->params + p->offset, from->params + q->offset, p->count * sizeof(float));
    }
}

static float *param_of(asr_model *m, const char *name)
{
    const param_info *p = param_find(&m->table, name);
    cr_assert_not_null(p, "%s", name);
    return m->params + p->offset;
}

static void rel_close(double a, double b, const char *what)
{
    cr_assert(fabs(a - b) <= 1e-5 * fabs(b), "%s: %.9g, expected %.9g", what, a, b);
}

/* ---- against ESPnet2 -------------------------------------------------------------------------- */

#define TOL 1e-4

/* As scripts/make_interctc_fixtures.py's CASES. */
static void fixture_case(const char *name, model_dims *d, model_rates *r)
{
    if (!strcmp(name, "transformer_cond")) {
        *d = dims_of(ENC_TRANSFORMER, 3);
        d->n_interctc = 2, d->interctc[0] = 0, d->interctc[1] = 1, d->interctc_cond = 1;
        *r = (model_rates){.ctc_weight = 1.0f, .interctc_weight = 0.3f};
    } else if (!strcmp(name, "conformer")) {
        *d = dims_of(ENC_CONFORMER, 2);
        d->n_interctc = 1, d->interctc[0] = 0;
        *r = (model_rates){.ctc_weight = 1.0f, .interctc_weight = 0.5f};
    } else {
        *d = dims_of(ENC_EBRANCHFORMER, 2);
        d->cgmlp_units = 24, d->cgmlp_kernel = 5, d->n_interctc = 1, d->interctc[0] = 0, d->interctc_cond = 1;
        d->dec_blocks = 1, d->dec_heads = 2, d->dec_ff = 24;
        *r = (model_rates){.ctc_weight = 0.3f, .lsm_weight = 0.1f, .interctc_weight = 0.4f};
    }
    d->vocab = 9;
}

static void check_scalar(double ours, double ref, const char *what)
{
    double e = fabs(ours - ref) / fabs(ref);
    cr_log_info("%s %.6f vs ESPnet %.6f, rel err %.3g", what, ours, ref, e);
    cr_expect_lt(e, TOL, "%s: %f vs ESPnet's %f", what, ours, ref);
}

static void check_fixture(const char *name)
{
    model_dims d;
    model_rates r;
    fixture_case(name, &d, &r);
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/interctc/%s.npz", test_root_dir(), name);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    asr_model_init(&m, be, &d, &r);
    fx_load_state(&m, &f); /* every tensor, encoder.conditioning_layer among them, under ESPnet's name */
    fx_batch b;
    fx_load_batch(&b, &f, IDIM, -1);
    asr_model_zero_grad(&m);
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 1, 0);
    double loss = asr_model_loss(&m, b.labels, b.ylens, b.stride, NULL);
    float *ref = fx_floats(fx_get(&f, "out.loss"));
    check_scalar(loss, ref[0], "loss");
    free(ref);
    ref = fx_floats(fx_get(&f, "out.loss_ctc"));
    check_scalar(m.loss_ctc, ref[0], "loss_ctc (the final layer's)");
    free(ref);
    ref = fx_floats(fx_get(&f, "out.loss_interctc"));
    for (int k = 0; k < d.n_interctc; k++) check_scalar(m.loss_interctc[k], ref[k], "loss_interctc");
    free(ref);
    asr_model_backward(&m, 1.0f);
    double worst = 0;
    const char *worst_name = "";
    for (size_t i = 0; i < m.table.n; i++) {
        const param_info *p = &m.table.items[i];
        if (p->kind != PARAM_TRAINED) continue;
        char gname[160];
        snprintf(gname, sizeof gname, "grad.%s", p->name);
        /* Softmax cancels linear_k's bias, the conformer's BatchNorm the depthwise conv's: their true
         * gradients are 0, rounding noise on both sides. */
        if (strstr(p->name, "linear_k.bias") || strstr(p->name, "depthwise_conv.bias")) {
            double w = 0;
            w = fmax(w, test_max_abs(m.grads + p->offset, p->count));
            cr_expect_lt(w, 1e-5, "gradient of %s should vanish: %g", p->name, w);
            continue;
        }
        double before = worst;
        fx_compare(&f, gname, m.grads + p->offset, p->count, &worst, TOL);
        if (worst > before) worst_name = p->name;
    }
    cr_log_info("%s: worst gradient rel err %.3g (%s)", name, worst, worst_name);
    /* Decoding's encoder (eval mode, the running statistics this forward left, the conditioning). */
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 0, 0);
    double e = fx_compare(&f, "out.logp", m.logp, (size_t)2 * m.T2 * d.vocab, &worst, TOL);
    cr_log_info("%s: decoding log-probs rel err %.3g", name, e);
    free(b.feats);
    asr_model_free(&m);
    backend_close(be);
    npz_free(&f);
}

Test(intermediate_ctc, conditioned_transformer_matches_espnet) { check_fixture("transformer_cond"); }
Test(intermediate_ctc, conformer_matches_espnet) { check_fixture("conformer"); }
Test(intermediate_ctc, conditioned_ebranchformer_joint_loss_matches_espnet) { check_fixture("ebf_cond_joint"); }

/* ---- the loss -------------------------------------------------------------------------------- */

static void check_the_mix(int encoder, const char *name)
{
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    model_rates rates = {.ctc_weight = 1.0f, .interctc_weight = 0.3f};
    model_dims dic = dims_of(encoder, 2), dcut = dims_of(encoder, 1), dplain = dims_of(encoder, 2);
    dic.n_interctc = 1, dic.interctc[0] = 0;
    asr_model ic, cut, plain;
    asr_model_init(&ic, be, &dic, &rates);
    asr_model_init(&cut, be, &dcut, &rates);
    asr_model_init(&plain, be, &dplain, &rates);
    cr_assert_eq(param_init(ic.params, &ic.table, NULL, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(ic.table.n, plain.table.n, "%s: no parameters of its own without the conditioning", name);
    copy_by_name(&cut, &ic);
    copy_by_name(&plain, &ic);
    batch b = make_batch();
    double l_ic = loss_at(&ic, &b, 0), l_plain = loss_at(&plain, &b, 0), l_cut = loss_at(&cut, &b, 0);
    rel_close(ic.loss_ctc, l_plain, "loss_ctc is the final layer's");
    if (encoder == ENC_EBRANCHFORMER) { /* not normalized: after_norm leaves the intermediate loss */
        float *w = param_of(&ic, "encoder.after_norm.weight");
        double before = ic.loss_interctc[0];
        for (int i = 0; i < dic.d; i++) w[i] *= 1.5f + 0.1f * (float)i;
        loss_at(&ic, &b, 0);
        cr_assert_eq(ic.loss_interctc[0], before, "%s: after_norm changed the intermediate loss", name);
        cr_assert_neq(ic.loss_ctc, l_plain, "%s: after_norm did not change the final loss", name);
    } else {
        rel_close(ic.loss_interctc[0], l_cut, "the intermediate loss is that of the model cut after block 1");
    }
    rel_close(l_ic, 0.7 * l_plain + 0.3 * (encoder == ENC_EBRANCHFORMER ? ic.loss_interctc[0] : l_cut),
              "(1 - w) loss_ctc + w loss_interctc");
    free(b.feats);
    asr_model_free(&ic), asr_model_free(&cut), asr_model_free(&plain);
    backend_close(be);
}

Test(intermediate_ctc, transformer_loss_mixes_the_cut_models_ctc) { check_the_mix(ENC_TRANSFORMER, "transformer"); }
Test(intermediate_ctc, conformer_loss_mixes_the_cut_models_ctc) { check_the_mix(ENC_CONFORMER, "conformer"); }
Test(intermediate_ctc, ebranchformer_intermediate_output_is_not_normalized)
{
    check_the_mix(ENC_EBRANCHFORMER, "e_branchformer");
}

/* With a decoder, the CTC branch's part is the mix: ctc_weight * mix + (1 - ctc_weight) * loss_att. */
Test(intermediate_ctc, joint_loss_weighs_the_mix)
{
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    model_rates rates = {.ctc_weight = 0.4f, .interctc_weight = 0.5f};
    model_dims d = dims_of(ENC_TRANSFORMER, 3);
    d.dec_blocks = 1, d.dec_heads = 2, d.dec_ff = 24, d.n_interctc = 2, d.interctc[0] = 0, d.interctc[1] = 1;
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    cr_assert_eq(param_init(m.params, &m.table, NULL, 4, &err), 0, "%s", err.msg);
    batch b = make_batch();
    double l = loss_at(&m, &b, 0);
    double mix = 0.5 * m.loss_ctc + 0.5 * (m.loss_interctc[0] + m.loss_interctc[1]) / 2;
    rel_close(l, 0.4 * mix + 0.6 * m.loss_att, "ctc_weight * mix + (1 - ctc_weight) * loss_att");
    cr_assert(m.loss_interctc[0] != m.loss_interctc[1]);
    free(b.feats);
    asr_model_free(&m);
    backend_close(be);
}

/* ---- gradients ------------------------------------------------------------------------------- */

/* A trained parameter of the group (BatchNorm's running statistics have no gradient). */
static int in_group(const param_info *p, const char *group)
{
    return p->kind == PARAM_TRAINED && !strncmp(p->name, group, strlen(group));
}

/* The directional difference of the loss along the gradient of the parameters in `group`,
 * relative to the gradient's norm. */
static double directional_error(asr_model *m, const batch *b, const float *p0, const float *g, const char *group)
{
    double g2 = 0;
    for (size_t i = 0; i < m->table.n; i++) {
        const param_info *p = &m->table.items[i];
        if (!in_group(p, group)) continue;
        for (size_t e = 0; e < p->count; e++) g2 += (double)g[p->offset + e] * g[p->offset + e];
    }
    double gn = sqrt(g2), eps = fmin(2e-3 / gn, 2e-3), l[2]; /* small: ReLU kinks */
    cr_assert(gn > 0, "%s: no gradient", group);
    for (int s = 0; s < 2; s++) {
        memcpy(m->params, p0, m->table.total * sizeof *p0);
        for (size_t i = 0; i < m->table.n; i++) {
            const param_info *p = &m->table.items[i];
            if (!in_group(p, group)) continue;
            for (size_t e = 0; e < p->count; e++)
                m->params[p->offset + e] = p0[p->offset + e] + (float)((s ? -eps : eps) * g[p->offset + e] / gn);
        }
        l[s] = loss_at(m, b, 1);
    }
    memcpy(m->params, p0, m->table.total * sizeof *p0);
    return fabs((l[0] - l[1]) / (2 * eps) - gn) / gn;
}

static void check_gradients(int encoder, int cond, const char *name)
{
    esp_err err;
    backend *be = backend_open(BACKEND_REF64, 0, 1, &err); /* double inside: the differences are not float noise */
    cr_assert_not_null(be, "%s", err.msg);
    model_rates rates = {.dropout = 0.1f, .pos_dropout = 0.1f, .ctc_dropout = 0.1f, .ctc_weight = 1.0f,
                         .interctc_weight = 0.4f, .layer_drop = 0.5f};
    model_dims d = dims_of(encoder, 3);
    d.n_interctc = 2, d.interctc[0] = 0, d.interctc[1] = 1, d.interctc_cond = cond;
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    const param_info *w = param_find(&m.table, "encoder.conditioning_layer.weight");
    if (cond) cr_assert(w && w->ndim == 2 && w->shape[0] == d.d && w->shape[1] == d.vocab, "%s", name);
    else cr_assert_null(w, "%s", name);
    cr_assert_eq(param_init(m.params, &m.table, NULL, 5, &err), 0, "%s", err.msg);
    batch b = make_batch();
    asr_model_zero_grad(&m);
    loss_at(&m, &b, 1);
    gf_check gf;
    gf_arm(&gf, &m); /* DDP buckets: the head's gradients grow in the blocks' backward now */
    asr_model_backward(&m, 1.0f);
    gf_verify(&gf);
    float *p0, *g;
    fx_snapshot(&m, &p0, &g);
    static const char *const groups[] = {"encoder.embed.",     "encoder.encoders.0.",        "encoder.encoders.1.",
                                         "encoder.encoders.2.", "encoder.after_norm.",        "ctc.ctc_lo.",
                                         "encoder.conditioning_layer."};
    for (size_t k = 0; k < sizeof groups / sizeof *groups - !cond; k++) {
        double e = directional_error(&m, &b, p0, g, groups[k]);
        cr_expect_lt(e, 1e-3, "%s%s, %s: directional difference off by %g", name, cond ? " conditioned" : "",
                     groups[k], e);
    }
    free(p0), free(g), free(b.feats);
    asr_model_free(&m);
    backend_close(be);
}

Test(intermediate_ctc, transformer_gradients) { check_gradients(ENC_TRANSFORMER, 0, "transformer"); }
Test(intermediate_ctc, transformer_gradients_conditioned) { check_gradients(ENC_TRANSFORMER, 1, "transformer"); }
Test(intermediate_ctc, conformer_gradients_conditioned) { check_gradients(ENC_CONFORMER, 1, "conformer"); }
/* layer_drop 0.5 above: ESPnet2 runs the blocks one by one with intermediate CTC, so none is dropped. */
Test(intermediate_ctc, ebranchformer_gradients_conditioned) { check_gradients(ENC_EBRANCHFORMER, 1, "e_branchformer"); }

/* ---- decoding -------------------------------------------------------------------------------- */

/* The decoding model (shared block buffers, no losses) feeds the conditioning back as the
 * training model's eval forward does; zeroing the conditioning layer changes the output. Both
 * utterances fill the batch: the decoding model zeroes the padding before the Conformer's
 * depthwise conv (a batch decodes as its utterances alone), the training model does not. */
Test(intermediate_ctc, decoding_applies_the_conditioning)
{
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    model_rates rates = {.ctc_weight = 1.0f, .interctc_weight = 0.3f};
    model_dims d = dims_of(ENC_CONFORMER, 3);
    d.n_interctc = 2, d.interctc[0] = 0, d.interctc[1] = 1, d.interctc_cond = 1;
    asr_model tr, dec;
    asr_model_init(&tr, be, &d, &rates);
    asr_model_init_inference(&dec, be, &d);
    cr_assert_eq(param_init(tr.params, &tr.table, NULL, 8, &err), 0, "%s", err.msg);
    memcpy(dec.params, tr.params, tr.table.state_total * sizeof(float));
    batch b = make_batch();
    b.lens[0] = b.lens[1] = T;
    asr_model_forward(&tr, b.feats, b.lens, B, T, 0, 1);
    asr_model_forward(&dec, b.feats, b.lens, B, T, 0, 1);
    size_t n = (size_t)B * tr.T2 * d.vocab;
    cr_assert_lt(fx_rel_err(dec.logp, tr.logp, n), 1e-6, "decoding and training disagree");
    float *keep = malloc(n * sizeof *keep);
    memcpy(keep, tr.logp, n * sizeof *keep);
    memset(param_of(&dec, "encoder.conditioning_layer.weight"), 0, (size_t)d.d * d.vocab * sizeof(float));
    memset(param_of(&dec, "encoder.conditioning_layer.bias"), 0, (size_t)d.d * sizeof(float));
    asr_model_forward(&dec, b.feats, b.lens, B, T, 0, 1);
    cr_assert_gt(fx_rel_err(dec.logp, keep, n), 1e-3, "the conditioning made no difference");
    free(keep), free(b.feats);
    asr_model_free(&tr), asr_model_free(&dec);
    backend_close(be);
}

/* ---- the config ------------------------------------------------------------------------------ */

Test(intermediate_ctc, indices_from_the_config)
{
    int64_t idx[] = {3, 1, 3}, bad0[] = {0}, badn[] = {4}, blocks = 4;
    int yes = 1;
    encoder_conf_cfg e = {.num_blocks = blocks, .interctc_layer_idx = idx, .n_interctc_layer_idx = 3,
                          .interctc_use_conditioning = &yes};
    model_conf_cfg mc = {.ctc_weight = 1.0, .interctc_weight = 0.3};
    model_cfg m = {.encoder_conf = &e, .model_conf = &mc};
    model_dims d;
    esp_err err;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), 0, "%s", err.msg);
    cr_assert(d.n_interctc == 2 && d.interctc[0] == 0 && d.interctc[1] == 2 && d.interctc_cond,
              "ascending, once each, 0-based");
    param_table t;
    param_table_build(&t, &d);
    const param_info *w = param_find(&t, "encoder.conditioning_layer.weight");
    cr_assert(w && w->shape[0] == 256 && w->shape[1] == 30);
    cr_assert_not_null(param_find(&t, "encoder.conditioning_layer.bias"));
    param_table_free(&t);
    e.interctc_layer_idx = bad0, e.n_interctc_layer_idx = 1;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    cr_assert(strstr(err.msg, "model.encoder_conf.interctc_layer_idx: 0 is outside [1, 3]"), "%s", err.msg);
    e.interctc_layer_idx = badn;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    cr_assert(strstr(err.msg, "interctc_layer_idx: 4 is outside [1, 3] (ESPnet2 asserts 0 < idx < num_blocks 4"), "%s",
              err.msg);
    /* ctc_weight 0: ESPnet2 has no ctc module to take the intermediate losses with. */
    char *transformer = "transformer";
    m.decoder = transformer, mc.ctc_weight = 0.0;
    e.interctc_layer_idx = idx, e.n_interctc_layer_idx = 1;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    cr_assert(strstr(err.msg, "interctc_layer_idx: intermediate CTC needs the CTC branch"), "%s", err.msg);
}
