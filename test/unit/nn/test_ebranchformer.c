/* The E-Branchformer model against the real ESPnet (fixtures by
 * scripts/make_ebranchformer_fixtures.py: ESPnet2's ESPnetASRModel with EBranchformerEncoder, seeded
 * weights, a padded batch of 2, dropout off): encoder output, CTC log-probs, the loss (the recipe's
 * joint CTC/attention loss with a TransformerDecoder for "main", CTC alone for the others) and
 * every parameter gradient of a training-mode forward/backward, all within a relative 1e-4 (max
 * |a - b| / max |b| per tensor). Also: the parameter table is ESPnet's state dict, the decoding
 * model computes the training model's bits, layer_drop_rate (stochastic depth) is seeded by the
 * batch and drops whole blocks, encoder_conf defaults and refusals, espnet_initialization_fn. */
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
    float ctc_weight;
} fixture_case;

static model_dims ebf_dims(int idim, int d, int heads, int ff, int blocks, int vocab, int rel_pos, int use_ffn,
                           int macaron, int act, int units, int ck, int lin, int gate, int mk)
{
    model_dims m = {.idim = idim, .d = d, .heads = heads, .ff = ff, .blocks = blocks, .vocab = vocab,
                    .encoder = ENC_EBRANCHFORMER, .rel_pos = rel_pos, .use_ffn = use_ffn, .macaron = macaron,
                    .act = act, .cgmlp_units = units, .cgmlp_kernel = ck, .linear_after_conv = lin, .gate_act = gate,
                    .merge_kernel = mk};
    m.f2 = ((idim - 1) / 2 - 1) / 2;
    return m;
}

/* As scripts/make_ebranchformer_fixtures.py's CASES. */
static fixture_case case_of(const char *name)
{
    if (!strcmp(name, "main")) {
        fixture_case c = {name, ebf_dims(40, 32, 4, 48, 2, 23, 1, 1, 1, ACT_SWISH, 64, 31, 0, ACT_IDENTITY, 31), 0.3f};
        c.dims.dec_blocks = 1, c.dims.dec_heads = 4, c.dims.dec_ff = 64;
        return c;
    }
    if (!strcmp(name, "abs_lin"))
        return (fixture_case){name, ebf_dims(20, 16, 2, 2048, 1, 9, 0, 0, 0, ACT_SWISH, 24, 5, 1, ACT_SWISH, 3), 1.0f};
    return (fixture_case){name, ebf_dims(20, 16, 2, 24, 2, 9, 1, 1, 0, ACT_RELU, 20, 7, 0, ACT_RELU, 5), 1.0f};
}

static void fixture_path(char *path, size_t n, const char *name)
{
    snprintf(path, n, "%s/test/fixtures/ebranchformer/%s.npz", test_root_dir(), name);
}

static void check_scalar(const npz_file *f, const char *name, double ours, const char *what)
{
    float *ref = fx_floats(fx_get(f, name));
    double e = fabs(ours - ref[0]) / fabs(ref[0]);
    cr_log_info("%s %.6f vs ESPnet %.6f, rel err %.3g", what, ours, ref[0], e);
    cr_expect_lt(e, TOL, "%s: %f vs %f", what, ours, ref[0]);
    free(ref);
}

static void check_case(const char *name)
{
    fixture_case c = case_of(name);
    char path[512];
    fixture_path(path, sizeof path, name);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    model_rates rates = {.ctc_weight = c.ctc_weight, .lsm_weight = 0.1f};
    asr_model_init(&m, be, &c.dims, &rates);
    fx_load_state(&m, &f);
    fx_batch b;
    fx_load_batch(&b, &f, c.dims.idim, -1);
    double worst_out = 0, worst_grad = 0, e;

    asr_model_zero_grad(&m);
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 1, 0);
    float *hl = fx_floats(fx_get(&f, "out.hlens"));
    cr_assert(m.hlens[0] == (int)hl[0] && m.hlens[1] == (int)hl[1], "hlens %d %d vs %g %g", m.hlens[0], m.hlens[1],
              hl[0], hl[1]);
    free(hl);
    size_t nh = (size_t)2 * m.T2 * c.dims.d, nl = (size_t)2 * m.T2 * c.dims.vocab;
    e = fx_compare(&f, "out.enc", m.lnf, nh, &worst_out, TOL);
    cr_log_info("%s: encoder output rel err %.3g", name, e);
    e = fx_compare(&f, "out.logp", m.logp, nl, &worst_out, TOL);
    cr_log_info("%s: CTC log-probs rel err %.3g", name, e);
    double loss = asr_model_loss(&m, b.labels, b.ylens, b.stride, NULL);
    check_scalar(&f, "out.loss", loss, name);
    check_scalar(&f, "out.loss_ctc", m.loss_ctc, "loss_ctc");
    if (c.dims.dec_blocks) check_scalar(&f, "out.loss_att", m.loss_att, "loss_att");

    gf_check gf;
    gf_arm(&gf, &m); /* DDP buckets: what the backward reports final stays so */
    asr_model_backward(&m, 1.0f);
    gf_verify(&gf);
    const param_table *t = &m.table;
    size_t n_grads = 0;
    const char *worst_name = "";
    for (size_t i = 0; i < t->n; i++) {
        const param_info *p = &t->items[i];
        char gname[160];
        snprintf(gname, sizeof gname, "grad.%s", p->name); /* the fixture's names are ESPnet's, as ours */
        /* A bias that softmax cancels (linear_k) has a true gradient of 0: both sides hold rounding
         * noise, so it is compared absolutely. */
        if (strstr(p->name, "linear_k.bias")) {
            double w = 0;
            w = fmax(w, test_max_abs(m.grads + p->offset, p->count));
            cr_expect_lt(w, 1e-5, "gradient of %s should vanish: %g", p->name, w);
        } else {
            double before = worst_grad;
            fx_compare(&f, gname, m.grads + p->offset, p->count, &worst_grad, TOL);
            if (worst_grad > before) worst_name = p->name;
        }
        n_grads++;
    }
    cr_log_info("%s: %zu parameter gradients, worst rel err %.3g (%s)", name, n_grads, worst_grad, worst_name);
    free(b.feats);
    asr_model_free(&m);
    backend_close(be);
    npz_free(&f);
}

Test(ebranchformer, librispeech_100_structure_joint_loss_matches_espnet)
{
    check_case("main");
}

Test(ebranchformer, abs_pos_linear_after_conv_swish_gate_matches_espnet)
{
    check_case("abs_lin");
}

Test(ebranchformer, plain_ffn_relu_matches_espnet)
{
    check_case("ffn_relu");
}

/* The decoding model shares one block workspace; per utterance at batch size 1 its log-probs are
 * the training model's (eval mode) to the bit. */
static void inference_case(const char *name)
{
    fixture_case c = case_of(name);
    char path[512];
    fixture_path(path, sizeof path, name);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model tm, im;
    model_rates rates = {.ctc_weight = c.ctc_weight, .lsm_weight = 0.1f};
    asr_model_init(&tm, be, &c.dims, &rates);
    asr_model_init_inference(&im, be, &c.dims);
    fx_load_state(&tm, &f);
    fx_load_state(&im, &f);
    fx_batch b;
    fx_load_batch(&b, &f, c.dims.idim, -1);
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

Test(ebranchformer, decoding_model_computes_the_same_bits)
{
    inference_case("main");
    inference_case("abs_lin");
}

/* The encoder's entries are ESPnet's state dict: the same names, shapes and order; every fixture tensor has its entry. */
Test(ebranchformer, table_is_espnets_state_dict)
{
    static const char *const names[] = {"main", "abs_lin", "ffn_relu"};
    for (int c = 0; c < 3; c++) {
        fixture_case fc = case_of(names[c]);
        char path[512];
        fixture_path(path, sizeof path, names[c]);
        npz_file f;
        esp_err err;
        cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
        param_table t;
        param_table_build(&t, &fc.dims);
        size_t k = 0, found = 0;
        for (size_t i = 0; i < f.n; i++) {
            const npy_array *a = &f.arrays[i];
            if (strncmp(a->name, "param.", 6)) continue;
            const param_info *p = param_find_alias(&t, a->name + 6);
            cr_assert_not_null(p, "%s: no entry for ESPnet's %s", names[c], a->name + 6);
            cr_assert_eq(a->ndim, p->ndim, "%s", a->name);
            for (int d = 0; d < a->ndim; d++) cr_assert_eq((int64_t)a->shape[d], p->shape[d], "%s", a->name);
            found++;
            if (strncmp(a->name, "param.encoder.", 14)) continue;
            cr_assert_eq(p, &t.items[k], "%s: entry %zu is %s, ESPnet has %s", names[c], k, t.items[k].name,
                         a->name + 6);
            k++;
        }
        cr_assert_eq(found, t.n, "%s: table has %zu entries, ESPnet %zu", names[c], t.n, found);
        cr_assert(t.total == t.state_total, "no buffers");
        param_table_free(&t);
        npz_free(&f);
    }
}

/* layer_drop_rate: in training, block l is dropped when the batch seed's draw for l is below the
 * rate; a dropped block is the identity (its parameters get no gradient), eval never drops, and
 * the same seed drops the same blocks. Rate 1 drops them all: the encoder output is the embedding's. */
Test(ebranchformer, layer_drop_is_seeded_by_the_batch_and_skips_whole_blocks)
{
    fixture_case c = case_of("ffn_relu");
    char path[512];
    fixture_path(path, sizeof path, c.name);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    model_rates rates = {.ctc_weight = 1, .layer_drop = 1.0f};
    asr_model_init(&m, be, &c.dims, &rates);
    fx_load_state(&m, &f);
    fx_batch b;
    fx_load_batch(&b, &f, c.dims.idim, -1);
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 1, 7);
    cr_assert_eq(m.h_enc, m.h0, "rate 1: every block dropped");
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 0, 7);
    cr_assert_neq(m.h_enc, m.h0, "eval mode drops nothing");

    /* Rate 0.5 over seeds: both blocks run, one, or none, about as often as the draws say; the
     * dropped blocks' parameters get no gradient, the others do. */
    m.rates.layer_drop = 0.5f;
    size_t nl = (size_t)2 * m.T2 * c.dims.vocab;
    float *first = malloc(nl * sizeof *first);
    int seen[4] = {0}, drops = 0;
    for (uint64_t seed = 0; seed < 24; seed++) {
        asr_model_zero_grad(&m);
        asr_model_forward(&m, b.feats, b.lens, 2, b.T, 1, seed);
        memcpy(first, m.logp, nl * sizeof *first);
        asr_model_loss(&m, b.labels, b.ylens, b.stride, NULL);
        gf_check gf;
        gf_arm(&gf, &m); /* dropped blocks are reported final too */
        asr_model_backward(&m, 1.0f);
        gf_verify(&gf);
        int mask = 0;
        for (int l = 0; l < 2; l++) {
            char name[96];
            snprintf(name, sizeof name, "encoder.encoders.%d.merge_proj.weight", l);
            const param_info *p = param_find(&m.table, name);
            double g = 0;
            g = fmax(g, test_max_abs(m.grads + p->offset, p->count));
            if (g == 0) mask |= 1 << l, drops++;
        }
        seen[mask]++;
        asr_model_forward(&m, b.feats, b.lens, 2, b.T, 1, seed);
        cr_assert(!memcmp(first, m.logp, nl * sizeof *first), "seed %llu: another draw", (unsigned long long)seed);
    }
    cr_log_info("layer drop 0.5, 24 batches x 2 blocks: %d dropped; none %d, block 0 %d, block 1 %d, both %d", drops,
                seen[0], seen[1], seen[2], seen[3]);
    cr_assert(drops > 12 && drops < 36, "%d of 48 blocks dropped at rate 0.5", drops);
    for (int k = 0; k < 4; k++) cr_assert(seen[k] > 0, "pattern %d never drawn", k);
    free(first), free(b.feats);
    asr_model_free(&m);
    backend_close(be);
    npz_free(&f);
}

/* encoder_conf -> dims: EBranchformerEncoder's defaults (rel_pos latest, 12 blocks, cgMLP 2048 /
 * 31, identity gate, no FFN, merge kernel 3), its keys, and the refusals. */
Test(ebranchformer, encoder_conf_defaults_and_refusals)
{
    char *ebf = "e_branchformer", *conformer = "conformer", *legacy = "legacy", *relu = "relu", *swish = "swish";
    char *abs = "abs_pos", *selfattn = "selfattn", *rel = "rel_selfattn";
    encoder_conf_cfg e = {0};
    model_cfg m = {.encoder = ebf, .encoder_conf = &e};
    model_dims d;
    esp_err err;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), 0, "%s", err.msg);
    cr_assert(d.encoder == ENC_EBRANCHFORMER && d.d == 256 && d.heads == 4 && d.ff == 2048 && d.blocks == 12);
    cr_assert(d.rel_pos && !d.use_ffn && !d.macaron && d.act == ACT_SWISH && d.cgmlp_units == 2048);
    cr_assert(d.cgmlp_kernel == 31 && !d.linear_after_conv && d.gate_act == ACT_IDENTITY && d.merge_kernel == 3);
    int yes = 1, no = 0;
    int64_t units = 1024, k31 = 31, k6 = 6, odd_units = 7, blocks = 4, idx[] = {0};
    e = (encoder_conf_cfg){.num_blocks = blocks, .cgmlp_linear_units = &units, .merge_conv_kernel = &k31,
                           .use_ffn = &yes, .macaron_ffn = &yes, .ffn_activation_type = relu, .gate_activation = swish,
                           .use_linear_after_conv = &yes, .pos_enc_layer_type = abs, .attention_layer_type = selfattn,
                           .zero_triu = &no};
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), 0, "%s", err.msg);
    cr_assert(d.blocks == 4 && d.cgmlp_units == 1024 && d.merge_kernel == 31 && d.use_ffn && d.macaron);
    cr_assert(d.act == ACT_RELU && d.gate_act == ACT_SWISH && d.linear_after_conv && !d.rel_pos);
    static const char *const refused[] = {"rel_pos_type: legacy", "needs attention_layer_type rel_selfattn",
                                          "cgmlp_conv_kernel: 6", "cgmlp_linear_units: 7", "zero_triu: true",
                                          "interctc_layer_idx: 0 is outside [1, 11]", "macaron_style: not a key of EBranchformerEncoder",
                                          "concat_after: not a key"};
    for (int i = 0; i < 8; i++) {
        e = (encoder_conf_cfg){0};
        if (i == 0) e.rel_pos_type = legacy;
        if (i == 1) e.attention_layer_type = selfattn;
        if (i == 2) e.cgmlp_conv_kernel = &k6;
        if (i == 3) e.cgmlp_linear_units = &odd_units;
        if (i == 4) e.zero_triu = &yes;
        if (i == 5) e.interctc_layer_idx = idx, e.n_interctc_layer_idx = 1;
        if (i == 6) e.macaron_style = &yes;
        if (i == 7) e.concat_after = &no;
        cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1, "%s accepted", refused[i]);
        cr_assert(strstr(err.msg, refused[i]), "%s: %s", refused[i], err.msg);
    }
    /* The other encoders refuse the E-Branchformer's keys; rel_selfattn is its attention_layer_type only. */
    m.encoder = conformer;
    e = (encoder_conf_cfg){.rel_pos_type = "latest", .attention_layer_type = rel};
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    cr_assert(strstr(err.msg, "attention_layer_type: an EBranchformerEncoder key, which the conformer"), "%s", err.msg);
    m.encoder = NULL;
    e = (encoder_conf_cfg){.use_ffn = &no};
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 30, &err), -1);
    cr_assert(strstr(err.msg, "use_ffn: an EBranchformerEncoder key, which the transformer"), "%s", err.msg);
}

/* Initialization: under an init scheme ESPnet's initialize() ends with the gating unit's
 * espnet_initialization_fn (conv and linear weights N(0, 1e-6), biases 1); PyTorch's defaults
 * (init none, LibriSpeech-100's) leave them as torch's Conv1d / Linear draws. */
Test(ebranchformer, init_of_the_gating_unit)
{
    model_dims d = case_of("abs_lin").dims;
    param_table t;
    param_table_build(&t, &d);
    float *w = calloc(t.total, sizeof *w);
    esp_err err;
    static const char *const leaves[] = {"conv", "linear"};
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(param_init(w, &t, s ? "xavier_uniform" : NULL, 5, &err), 0, "%s", err.msg);
        for (int i = 0; i < 2; i++) {
            char wn[96], bn[96];
            snprintf(wn, sizeof wn, "encoder.encoders.0.cgmlp.csgu.%s.weight", leaves[i]);
            snprintf(bn, sizeof bn, "encoder.encoders.0.cgmlp.csgu.%s.bias", leaves[i]);
            const param_info *pw = param_find(&t, wn), *pb = param_find(&t, bn);
            cr_assert(pw && pb && pw->is_csgu && pb->is_csgu, "%s", wn);
            double mx = 0, sum = 0;
            mx = fmax(mx, test_max_abs(w + pw->offset, pw->count));
            for (size_t k = 0; k < pb->count; k++) sum += w[pb->offset + k];
            if (s) {
                cr_assert(mx > 0 && mx < 1e-5, "%s: max %g, want N(0, 1e-6)", wn, mx);
                cr_assert_eq(sum, (double)pb->count, "%s: biases 1", bn);
            } else {
                cr_assert(mx > 0.05, "%s: max %g, want torch's uniform bound", wn, mx);
                cr_assert(fabs(sum) < (double)pb->count, "%s", bn);
            }
        }
    }
    /* The other weights keep the scheme's draw (xavier_uniform, zero biases). */
    const param_info *p = param_find(&t, "encoder.encoders.0.cgmlp.channel_proj1.0.bias");
    for (size_t k = 0; k < p->count; k++) cr_assert_eq(w[p->offset + k], 0.0f);
    free(w);
    param_table_free(&t);
}
