/* The encoder input layers (encoder_conf.input_layer: conv2d2, conv2d6, conv2d8, conv1d2, linear,
 * null) and utterance_mvn against the real ESPnet (fixtures by scripts/make_input_layer_fixtures.py:
 * ESPnet2's TransformerEncoder / ConformerEncoder / EBranchformerEncoder with that input layer + CTC, seeded weights, a
 * padded batch of 2, dropout off, training mode): encoder output lengths, encoder output,
 * log-probs, CTC loss and every parameter gradient within a relative 1e-4 (max |a - b| / max |b|
 * per tensor); the parameter table is ESPnet's state dict, entry for entry. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/data/normalize.h"
#include "core/formats/npz.h"
#include "core/nn/model.h"
#include "test/unit/test_util.h"

#define TOL 1e-4

static float *floats(const npy_array *a)
{
    float *v = malloc((a->count ? a->count : 1) * sizeof *v);
    for (size_t i = 0; i < a->count; i++)
        v[i] = a->dtype == NPY_F32 ? ((const float *)a->data)[i]
               : a->dtype == NPY_I64 ? (float)((const int64_t *)a->data)[i]
                                     : (float)((const double *)a->data)[i];
    return v;
}

static const npy_array *get(const npz_file *f, const char *name)
{
    const npy_array *a = npz_get(f, name);
    cr_assert_not_null(a, "fixture has no array %s", name);
    return a;
}

static double rel_err(const float *a, const float *b, size_t n)
{
    return test_err_ff(a, b, n, 1.0, NULL);
}

static double compare(const npz_file *f, const char *name, const float *ours, size_t n)
{
    const npy_array *a = get(f, name);
    cr_assert_eq(a->count, n, "%s: %zu values in the fixture, %zu here", name, a->count, n);
    float *ref = floats(a);
    double e = rel_err(ours, ref, n);
    free(ref);
    cr_expect_lt(e, TOL, "%s differs: %g", name, e);
    return e;
}

static model_dims dims_of(int conformer, int rel_pos, int idim, int layer)
{
    model_dims m = {.idim = idim, .d = 16, .heads = 2, .ff = 24, .blocks = 1, .vocab = 9, .input_layer = layer};
    if (conformer) m.encoder = ENC_CONFORMER, m.macaron = 1, m.rel_pos = rel_pos, m.use_cnn = 1, m.cnn_kernel = 5;
    m.f2 = input_layer_out_bins(layer, idim);
    return m;
}

/* As scripts/make_input_layer_fixtures.py's EBF. */
static model_dims ebf_dims(int rel_pos, int idim, int layer)
{
    model_dims m = {.idim = idim, .d = 16, .heads = 2, .ff = 24, .blocks = 1, .vocab = 9, .input_layer = layer,
                    .encoder = ENC_EBRANCHFORMER, .rel_pos = rel_pos, .use_ffn = 1, .macaron = 1, .act = ACT_SWISH,
                    .cgmlp_units = 24, .cgmlp_kernel = 5, .linear_after_conv = 0, .gate_act = ACT_IDENTITY,
                    .merge_kernel = 3};
    m.f2 = input_layer_out_bins(layer, idim);
    return m;
}

static void check_case(const char *name, model_dims dims)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/input_layer/%s.npz", test_root_dir(), name);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    model_rates rates = {0};
    asr_model_init(&m, be, &dims, &rates);

    /* The state: every fixture param.<name> is a table entry (ESPnet's names), every entry set once. */
    const param_table *t = &m.table;
    float *state = calloc(t->state_total, sizeof *state);
    unsigned char *seen = calloc(t->n, 1);
    for (size_t i = 0; i < f.n; i++) {
        const npy_array *a = &f.arrays[i];
        if (strncmp(a->name, "param.", 6)) continue;
        const param_info *p = param_find_alias(t, a->name + 6);
        cr_assert_not_null(p, "%s: no entry for ESPnet's %s", name, a->name + 6);
        cr_assert_eq(a->count, p->count, "%s", p->name);
        float *v = floats(a);
        memcpy(state + p->offset, v, p->count * sizeof *v);
        free(v);
        seen[p - t->items]++;
    }
    for (size_t k = 0; k < t->n; k++) cr_assert_eq(seen[k], 1, "%s: %s set %d times", name, t->items[k].name, seen[k]);
    asr_model_state_from_host(&m, state);

    const npy_array *fe = get(&f, "in.feats"), *ys = get(&f, "in.ys");
    float *feats = floats(fe), *l = floats(get(&f, "in.lens")), *yl = floats(get(&f, "in.ylens")), *y = floats(ys);
    int T = (int)fe->shape[1], lens[2] = {(int)l[0], (int)l[1]}, ylens[2] = {(int)yl[0], (int)yl[1]}, labels[64];
    for (size_t i = 0; i < ys->count && i < 64; i++) labels[i] = y[i] < 0 ? 0 : (int)y[i];
    asr_model_zero_grad(&m);
    asr_model_forward(&m, feats, lens, 2, T, 1, 0);
    float *hl = floats(get(&f, "out.hlens"));
    cr_assert(m.hlens[0] == (int)hl[0] && m.hlens[1] == (int)hl[1], "%s: hlens %d %d vs %g %g", name, m.hlens[0],
              m.hlens[1], hl[0], hl[1]);
    double e_enc = compare(&f, "out.enc", m.lnf, (size_t)2 * m.T2 * dims.d);
    double e_logp = compare(&f, "out.logp", m.logp, (size_t)2 * m.T2 * dims.vocab);
    double loss = asr_model_loss(&m, labels, ylens, (int)ys->shape[1], NULL);
    float *ref_loss = floats(get(&f, "out.loss"));
    double le = fabs(loss - ref_loss[0]) / fabs(ref_loss[0]);
    cr_expect_lt(le, TOL, "%s: loss %f vs %f", name, loss, ref_loss[0]);
    asr_model_backward(&m, 1.0f);
    double worst = 0;
    const char *worst_name = "";
    size_t n_grads = 0;
    for (size_t i = 0; i < f.n; i++) {
        const npy_array *a = &f.arrays[i];
        if (strncmp(a->name, "grad.", 5)) continue;
        const param_info *p = param_find_alias(t, a->name + 5);
        cr_assert_not_null(p, "%s: no entry for ESPnet's %s", name, a->name + 5);
        n_grads++;
        if (strstr(p->name, "linear_k.bias") || strstr(p->name, "depthwise_conv.bias")) {
            double w = 0; /* cancelled by softmax / BatchNorm's mean: a true gradient of 0 */
            w = fmax(w, test_max_abs(m.grads + p->offset, p->count));
            cr_expect_lt(w, 1e-5, "%s: gradient of %s should vanish: %g", name, p->name, w);
            continue;
        }
        double e = compare(&f, a->name, m.grads + p->offset, p->count);
        if (e > worst) worst = e, worst_name = p->name;
    }
    size_t n_trained = 0;
    for (size_t k = 0; k < t->n; k++) n_trained += t->items[k].kind == PARAM_TRAINED;
    cr_assert_eq(n_grads, n_trained, "%s: %zu gradients in the fixture, %zu trained parameters", name, n_grads,
                 n_trained);
    cr_log_info("%s: hlens %d %d, encoder output rel err %.3g, log-probs %.3g, loss %.3g, %zu gradients, worst %.3g "
                "(%s)", name, m.hlens[0], m.hlens[1], e_enc, e_logp, le, n_grads, worst, worst_name);
    free(state), free(seen), free(feats), free(l), free(yl), free(y), free(hl), free(ref_loss);
    asr_model_free(&m);
    backend_close(be);
    npz_free(&f);
}

Test(input_layer, transformer_conv2d2) { check_case("t_conv2d2", dims_of(0, 0, 20, IN_CONV2D2)); }
Test(input_layer, transformer_conv2d6) { check_case("t_conv2d6", dims_of(0, 0, 20, IN_CONV2D6)); }
Test(input_layer, transformer_conv2d8) { check_case("t_conv2d8", dims_of(0, 0, 20, IN_CONV2D8)); }
Test(input_layer, transformer_conv1d2) { check_case("t_conv1d2", dims_of(0, 0, 20, IN_CONV1D2)); }
Test(input_layer, transformer_linear) { check_case("t_linear", dims_of(0, 0, 20, IN_LINEAR)); }
Test(input_layer, transformer_null_same_size) { check_case("t_none_same", dims_of(0, 0, 16, IN_NONE)); }
Test(input_layer, transformer_null_linear) { check_case("t_none_linear", dims_of(0, 0, 20, IN_NONE)); }
Test(input_layer, conformer_conv2d2_rel_pos) { check_case("c_conv2d2_rel", dims_of(1, 1, 20, IN_CONV2D2)); }
Test(input_layer, conformer_conv2d6_abs_pos) { check_case("c_conv2d6_abs", dims_of(1, 0, 20, IN_CONV2D6)); }
Test(input_layer, conformer_conv2d8_rel_pos) { check_case("c_conv2d8_rel", dims_of(1, 1, 20, IN_CONV2D8)); }
Test(input_layer, conformer_linear_rel_pos) { check_case("c_linear_rel", dims_of(1, 1, 20, IN_LINEAR)); }
Test(input_layer, conformer_linear_abs_pos) { check_case("c_linear_abs", dims_of(1, 0, 20, IN_LINEAR)); }
Test(input_layer, conformer_null_rel_pos) { check_case("c_none_rel", dims_of(1, 1, 16, IN_NONE)); }
Test(input_layer, conformer_null_abs_pos) { check_case("c_none_abs", dims_of(1, 0, 16, IN_NONE)); }

Test(input_layer, e_branchformer_conv1d2_rel_pos) { check_case("e_conv1d2_rel", ebf_dims(1, 20, IN_CONV1D2)); }
Test(input_layer, e_branchformer_conv2d6_rel_pos) { check_case("e_conv2d6_rel", ebf_dims(1, 20, IN_CONV2D6)); }
Test(input_layer, e_branchformer_linear_rel_pos) { check_case("e_linear_rel", ebf_dims(1, 20, IN_LINEAR)); }
Test(input_layer, e_branchformer_null_rel_pos) { check_case("e_none_rel", ebf_dims(1, 16, IN_NONE)); }
Test(input_layer, e_branchformer_null_linear_abs_pos) { check_case("e_none_linear_abs", ebf_dims(0, 20, IN_NONE)); }

/* Output lengths: the exact conv formula per utterance, conv after conv. */
Test(input_layer, output_lengths)
{
    for (int t = 0; t < 300; t++) {
        int a = t < 3 ? 0 : (t - 1) / 2; /* a 3x3 stride-2 conv */
        cr_assert_eq(input_layer_out_len(IN_CONV2D, t), a < 3 ? 0 : (a - 1) / 2, "t %d", t);
        cr_assert_eq(input_layer_out_len(IN_CONV2D2, t), a < 3 ? 0 : a - 2, "t %d", t);
        cr_assert_eq(input_layer_out_len(IN_CONV2D6, t), a < 5 ? 0 : (a - 5) / 3 + 1, "t %d", t);
        int b = a < 3 ? 0 : (a - 1) / 2;
        cr_assert_eq(input_layer_out_len(IN_CONV2D8, t), b < 3 ? 0 : (b - 1) / 2, "t %d", t);
        int c = t < 3 ? 0 : t - 2;
        cr_assert_eq(input_layer_out_len(IN_CONV1D2, t), c < 3 ? 0 : (c - 1) / 2, "t %d", t);
        cr_assert_eq(input_layer_out_len(IN_LINEAR, t), t);
        cr_assert_eq(input_layer_out_len(IN_NONE, t), t);
    }
    /* Linear(d * bins, d) after the convs: ESPnet's formulas for idim 80. */
    cr_assert_eq(input_layer_out_bins(IN_CONV2D, 80), ((80 - 1) / 2 - 1) / 2);
    cr_assert_eq(input_layer_out_bins(IN_CONV2D2, 80), (80 - 1) / 2 - 2);
    cr_assert_eq(input_layer_out_bins(IN_CONV2D6, 80), ((80 - 1) / 2 - 2) / 3);
    cr_assert_eq(input_layer_out_bins(IN_CONV2D8, 80), (((80 - 1) / 2 - 1) / 2 - 1) / 2);
    cr_assert_eq(input_layer_out_bins(IN_CONV1D2, 80), 1);
    cr_assert_eq(input_layer_out_bins(IN_LINEAR, 80), 0);
}

/* ESPnet2's utterance_mvn on a padded batch, every (norm_means, norm_vars), two eps. */
Test(input_layer, utterance_mvn_matches_espnet)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/input_layer/utterance_mvn.npz", test_root_dir());
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    const npy_array *xa = get(&f, "in.x");
    int B = (int)xa->shape[0], T = (int)xa->shape[1], D = (int)xa->shape[2];
    float *lens = floats(get(&f, "in.lens"));
    for (int mv = 0; mv < 8; mv++) {
        int means = mv >> 2 & 1, vars = mv >> 1 & 1, big_eps = mv & 1;
        float *x = floats(xa);
        for (int b = 0; b < B; b++)
            utterance_mvn_apply(x + (size_t)b * T * D, (size_t)T, (size_t)lens[b], D, means, vars, big_eps ? 0.01 : 1e-20);
        char name[32];
        snprintf(name, sizeof name, "out.%d%d%s", means, vars, big_eps ? "_eps" : "");
        double e = compare(&f, name, x, (size_t)B * T * D);
        cr_log_info("utterance_mvn %s: rel err %.3g", name, e);
        free(x);
    }
    free(lens);
    npz_free(&f);
}

/* An inference model reorders embed.out's weight once, not per call (model.h's wout_fc_ready):
 * after new weights are loaded into it, its input layer gives what a model made with those weights
 * gives, bit for bit (the stale order would not). */
static float *embed_of(backend *be, const model_dims *dims, const float *state, const float *feats, int T,
                       asr_model *keep)
{
    asr_model fresh, *m = keep ? keep : &fresh;
    if (!keep) asr_model_init_inference(m, be, dims);
    asr_model_state_from_host(m, state);
    const float *e = asr_model_embed(m, feats, 1, T);
    size_t n = (size_t)m->T2 * dims->d;
    float *out = malloc(n * sizeof *out);
    memcpy(out, e, n * sizeof *out);
    if (!keep) asr_model_free(m);
    return out;
}

Test(input_layer, inference_reorders_new_weights)
{
    model_dims dims = dims_of(0, 0, 20, IN_CONV2D2);
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    asr_model_init_inference(&m, be, &dims);
    const param_info *p = param_find_alias(&m.table, "encoder.embed.out.0.weight");
    cr_assert_not_null(p);
    int T = 16;
    float *state = calloc(m.table.state_total, sizeof *state), *feats = malloc((size_t)T * 20 * sizeof *feats);
    for (size_t i = 0; i < m.table.state_total; i++) state[i] = (float)((i * 7919 % 201) - 100) / 400.0f;
    for (int i = 0; i < T * 20; i++) feats[i] = (float)((i * 31 % 17) - 8) / 8.0f;
    float *a = embed_of(be, &dims, state, feats, T, &m);
    for (size_t i = 0; i < p->count; i++) state[p->offset + i] *= -0.5f; /* embed.out's weight only */
    float *b = embed_of(be, &dims, state, feats, T, &m), *want = embed_of(be, &dims, state, feats, T, NULL);
    size_t n = (size_t)m.T2 * dims.d;
    cr_assert(memcmp(a, b, n * sizeof *a) != 0, "the new weight changed nothing");
    cr_assert(memcmp(b, want, n * sizeof *b) == 0, "the reused model's input layer differs from a fresh one's");
    free(state), free(feats), free(a), free(b), free(want);
    asr_model_free(&m);
    backend_close(be);
}
