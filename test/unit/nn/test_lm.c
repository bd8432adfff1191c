/* ESPnet2's language models in ESPnetLanguageModel (the model's LM forms) against the real ESPnet
 * (fixtures by scripts/make_lm_fixtures.py), vocabulary 12, dropout off: TransformerLM (embed_unit
 * 16, att_unit 32, 4 heads, unit 64, 2 layers; pos_enc null and sinusoidal) and SequentialRNNLM
 * (an LSTM: unit 16, nhid 24, 2 layers; and unit 20, 1 layer; a GRU: unit 16, nhid 24, 2 layers,
 * rnn_type gru). The loss (negative log-likelihood
 * per token), the log-probabilities and every parameter gradient of a padded batch of 3; the beam
 * search's batch_score for prefixes of several lengths, at once, step by step through the cache
 * and in a batch of two. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/nn/decoder_internal.h"
#include "core/nn/decoder_transformer.h"
#include "core/nn/lm_rnn.h"
#include "core/nn/model.h"
#include "test/unit/nn/fx_pack.h"
#include "test/unit/nn/grads_final_check.h"
#include "test/unit/test_util.h"

enum { V = 12, B = 3, STRIDE = 7 };

static model_dims lm_dims(int pos_enc)
{
    return (model_dims){.lm = LM_TRANSFORMER, .no_ctc = 1, .vocab = V, .lm_embed = 16, .d = 32, .heads = 4, .ff = 64,
                        .dec_blocks = 2, .dec_heads = 4, .dec_ff = 64, .lm_pos_enc = pos_enc};
}

static model_dims rnn_dims(int unit, int nhid, int layers)
{
    return (model_dims){.lm = LM_SEQ_RNN, .no_ctc = 1, .vocab = V, .lm_embed = unit, .d = nhid, .lm_layers = layers};
}

static model_dims gru_dims(void)
{
    model_dims d = rnn_dims(16, 24, 2);
    d.lm_gru = 1;
    return d;
}


/* ESPnet's weights into the model: every parameter once, every fixture tensor a parameter. */
static void load_weights(asr_model *m, const pack *w)
{
    cr_assert_eq(w->n, m->table.n, "the fixture has %zu tensors, espnet3's LM %zu", w->n, m->table.n);
    for (size_t i = 0; i < w->n; i++) {
        const param_info *p = param_find(&m->table, w->names[i]);
        cr_assert_not_null(p, "ESPnet's %s is not a parameter of espnet3's LM", w->names[i]);
        cr_assert_eq(w->count[i], p->count, "%s", p->name);
        cr_assert_eq((size_t)(p - m->table.items), i, "%s is not in ESPnet's state-dict order", p->name);
        memcpy(m->params + p->offset, w->data + w->off[i], p->count * sizeof(float));
    }
}

/* The fixture's padded batch as the model's labels: B rows of STRIDE ids, padding (0) as -1. */
static void fixture_labels(const pack *c, int *labels, int *label_lens)
{
    size_t n;
    const float *text = pack_must(c, "in.text", &n), *lens = pack_must(c, "in.text_lengths", NULL);
    cr_assert_eq(n, (size_t)B * STRIDE);
    for (int i = 0; i < B * STRIDE; i++) labels[i] = (int)text[i] ? (int)text[i] : -1;
    for (int b = 0; b < B; b++) label_lens[b] = (int)lens[b];
}

/* The forward's log-probabilities of text b at position t (batch-major in the transformer's buffer,
 * time-major in the LSTM's). */
static const float *lm_logp(const asr_model *m, int b, int t)
{
    if (m->rnn) return lm_rnn_logp(m) + ((size_t)t * B + b) * V;
    return m->dec->logp + ((size_t)b * m->dec->L + t) * V;
}

static void check_loss(const char *suffix, model_dims d)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    char wn[32], cn[32];
    snprintf(wn, sizeof wn, "weights%s", suffix);
    snprintf(cn, sizeof cn, "loss%s", suffix);
    if (!strcmp(suffix, "_rnn1")) snprintf(wn, sizeof wn, "weights_rnn1");
    pack w = load_pack("lm", wn), c = load_pack("lm", cn);
    model_rates rates = {.length_normalized_loss = 1};
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    load_weights(&m, &w);
    size_t n;
    int labels[B * STRIDE], label_lens[B];
    fixture_labels(&c, labels, label_lens);

    asr_model_zero_grad(&m);
    asr_model_forward(&m, NULL, NULL, B, 0, 0, 0);
    double loss = asr_model_loss(&m, labels, label_lens, STRIDE, NULL), ref = pack_must(&c, "out.loss", NULL)[0];
    cr_expect_lt(fabs(loss - ref) / ref, 1e-5, "%s: loss %.8f vs ESPnet %.8f", cn, loss, ref);
    cr_expect_eq(m.att_tokens, (int64_t)pack_must(&c, "out.ntokens", NULL)[0]);
    cr_expect(isnan(m.loss_ctc));
    /* The log-probabilities at every real position (padding rows are masked out of the loss). */
    const float *logp = pack_must(&c, "out.logp", &n);
    cr_assert_eq(n, (size_t)B * (STRIDE + 1) * V);
    double worst_logp = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t <= label_lens[b]; t++) {
            size_t row = ((size_t)b * (STRIDE + 1) + t) * V;
            worst_logp = fmax(worst_logp, pack_rel_err(lm_logp(&m, b, t), logp + row, V, 1.0));
        }
    cr_expect_lt(worst_logp, 1e-5, "%s: log-probabilities differ: %g", cn, worst_logp);

    gf_check gf;
    gf_arm(&gf, &m);
    asr_model_backward(&m, 1.0f);
    gf_verify(&gf);
    double worst = 0;
    for (size_t i = 0; i < m.table.n; i++) {
        const param_info *p = &m.table.items[i];
        char name[160];
        snprintf(name, sizeof name, "grad.%s", p->name);
        const float *g = pack_must(&c, name, &n);
        cr_assert_eq(n, p->count);
        if (strstr(p->name, "linear_k.bias")) { /* softmax ignores it: the true gradient is 0 */
            double mx = 0;
            mx = fmax(mx, test_max_abs(m.grads + p->offset, n));
            cr_expect_lt(mx, 1e-5, "%s: gradient of %s should vanish: %g", cn, p->name, mx);
            continue;
        }
        double e = pack_rel_err(m.grads + p->offset, g, n, 1.0);
        worst = fmax(worst, e);
        cr_expect_lt(e, 1e-4, "%s: gradient of %s differs: %g", cn, p->name, e);
    }
    /* Token 0 is only ever padding: its embedding row gets no gradient. */
    const param_info *emb = param_find(&m.table, m.rnn ? "lm.encoder.weight" : "lm.embed.weight");
    for (int k = 0; k < d.lm_embed; k++) cr_expect_eq(m.grads[emb->offset + k], 0.0f);
    cr_log_info("%s: loss %.7f (ESPnet %.7f), worst gradient rel err %.2g", cn, loss, ref, worst);
    pack_free(&w), pack_free(&c);
    asr_model_free(&m);
    backend_close(be);
}

Test(lm, loss_logp_and_every_gradient_match_espnet_without_positions)
{
    check_loss("", lm_dims(0));
}

Test(lm, loss_logp_and_every_gradient_match_espnet_with_sinusoidal_positions)
{
    check_loss("_sin", lm_dims(1));
}

Test(lm, lstm_loss_logp_and_every_gradient_match_espnet)
{
    check_loss("_rnn", rnn_dims(16, 24, 2));
}

Test(lm, one_layer_lstm_with_nhid_unit_matches_espnet)
{
    check_loss("_rnn1", rnn_dims(20, 20, 1));
}

Test(lm, gru_loss_logp_and_every_gradient_match_espnet)
{
    check_loss("_gru", gru_dims());
}

/* Dropout: a training forward is reproducible from its seed and differs from eval mode. */
Test(lm, training_dropout_follows_the_seed)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    pack w = load_pack("lm", "weights_sin"), c = load_pack("lm", "loss_sin");
    model_dims d = lm_dims(1);
    model_rates rates = {.dec_dropout = 0.3f, .dec_pos_dropout = 0.2f, .dec_self_att_dropout = 0.1f};
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    load_weights(&m, &w);
    int labels[B * STRIDE], label_lens[B];
    fixture_labels(&c, labels, label_lens);
    double l[4];
    uint64_t seeds[4] = {5, 5, 6, 0};
    for (int k = 0; k < 4; k++) {
        asr_model_forward(&m, NULL, NULL, B, 0, k < 3, seeds[k]);
        l[k] = asr_model_loss(&m, labels, label_lens, STRIDE, NULL);
    }
    cr_expect_eq(l[0], l[1], "same seed, same loss: %.9g vs %.9g", l[0], l[1]);
    cr_expect_neq(l[0], l[2], "another seed, other masks");
    cr_expect_lt(fabs(l[3] - pack_must(&c, "out.loss", NULL)[0]), 1e-5, "eval mode has no dropout");
    pack_free(&w), pack_free(&c);
    asr_model_free(&m);
    backend_close(be);
}

/* A train-mode loss and its gradients of the LSTM LM of "_rnn" (gru: the GRU LM of "_gru") at the
 * given embedding/between/output dropout rate and seed; the gradients are copied to grads (m's
 * table's total floats). */
static double rnn_train_loss(int gru, float rate, uint64_t seed, float *grads)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    pack w = load_pack("lm", gru ? "weights_gru" : "weights_rnn"), c = load_pack("lm", gru ? "loss_gru" : "loss_rnn");
    model_dims d = gru ? gru_dims() : rnn_dims(16, 24, 2);
    model_rates rates = {.dec_dropout = rate};
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    load_weights(&m, &w);
    int labels[B * STRIDE], label_lens[B];
    fixture_labels(&c, labels, label_lens);
    asr_model_zero_grad(&m);
    asr_model_forward(&m, NULL, NULL, B, 0, 1, seed);
    double loss = asr_model_loss(&m, labels, label_lens, STRIDE, NULL);
    asr_model_backward(&m, 1.0f);
    if (grads) memcpy(grads, m.grads, m.table.total * sizeof *grads);
    pack_free(&w), pack_free(&c);
    asr_model_free(&m);
    backend_close(be);
    return loss;
}

/* The LSTM's (and the GRU's) two routes into its first layer: without dropout on the embedding,
 * the input product runs through the vocabulary (core/nn/lm_rnn.c, layer_input; the ESPnet fixtures
 * above check that route), with dropout through every position's embedding. A rate of 1e-7 takes
 * the second route without dropping anything in this batch (its 1 / (1 - p) is one float ulp above
 * 1): the loss and every gradient equal the first route's to float rounding. A real rate follows
 * its seed. */
static void first_layer_routes(int gru)
{
    size_t total;
    {
        model_dims d = gru ? gru_dims() : rnn_dims(16, 24, 2);
        param_table t;
        param_table_build(&t, &d);
        total = t.total;
        param_table_free(&t);
    }
    float *g0 = malloc(total * sizeof *g0), *g1 = malloc(total * sizeof *g1);
    double l0 = rnn_train_loss(gru, 0.0f, 7, g0), l1 = rnn_train_loss(gru, 1e-7f, 7, g1);
    cr_expect_lt(fabs(l0 - l1) / l0, 1e-6, "loss %.9g (vocabulary route) vs %.9g (per position)", l0, l1);
    double e = pack_rel_err(g1, g0, total, 1.0);
    cr_expect_lt(e, 1e-5, "gradients of the two routes differ: %g", e);
    double a = rnn_train_loss(gru, 0.3f, 5, NULL), b = rnn_train_loss(gru, 0.3f, 5, NULL);
    double c = rnn_train_loss(gru, 0.3f, 6, NULL);
    cr_expect_eq(a, b, "same seed, same loss: %.9g vs %.9g", a, b);
    cr_expect_neq(a, c, "another seed, other masks");
    cr_expect_gt(fabs(a - l0), 1e-4, "dropout 0.3 changes the loss (%.9g vs %.9g)", a, l0);
    free(g0), free(g1);
}

Test(lm, lstm_first_layer_routes_agree_and_dropout_follows_the_seed) { first_layer_routes(0); }
Test(lm, gru_first_layer_routes_agree_and_dropout_follows_the_seed) { first_layer_routes(1); }

/* ---- batch_score -------------------------------------------------------------------------------- */

/* Scores prefixes idx[0..k) in one call against ESPnet's <ref>.<prefix> (by_prefix) or <ref>.<i>. */
static double score_check(const asr_model *m, const pack *s, int *const *pfx, const int *len, const int *idx, int k,
                          const char *ref, int by_prefix)
{
    const int *p[8];
    int lens[8];
    for (int i = 0; i < k; i++) p[i] = pfx[idx[i]], lens[i] = len[idx[i]];
    float out[8 * V];
    asr_model_lm_score(m, p, lens, k, out);
    double worst = 0;
    for (int i = 0; i < k; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s.%d", ref, by_prefix ? idx[i] : i);
        double e = pack_rel_err(out + i * V, pack_must(s, name, NULL), V, 1.0);
        cr_expect_lt(e, 1e-5, "prefix %d (length %d): log-probs differ from ESPnet's %s: %g", idx[i], lens[i], name,
                     e);
        worst = fmax(worst, e);
    }
    return worst;
}

static void check_score(const char *suffix, model_dims d)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    char wn[32], sn[32];
    snprintf(wn, sizeof wn, "weights%s", suffix);
    snprintf(sn, sizeof sn, "score%s", suffix);
    pack w = load_pack("lm", wn), s = load_pack("lm", sn);
    asr_model m;
    asr_model_init_inference(&m, be, &d);
    load_weights(&m, &w);
    int *pfx[5], len[5];
    for (int i = 0; i < 5; i++) {
        char name[32];
        size_t n;
        snprintf(name, sizeof name, "prefix.%d", i);
        const float *p = pack_must(&s, name, &n);
        pfx[i] = malloc(n * sizeof(int));
        for (size_t k = 0; k < n; k++) pfx[i][k] = (int)p[k];
        len[i] = (int)n;
    }
    static const int all[5] = {0, 1, 2, 3, 4};
    double worst = score_check(&m, &s, pfx, len, all, 5, "logp", 1);
    /* Prefix 4 grown one token per call: every step but the first reuses the previous call's cache. */
    asr_model_lm_new_utterance(&m);
    for (int t = 1; t <= len[4]; t++) {
        int keep = len[4];
        len[4] = t;
        char ref[32];
        snprintf(ref, sizeof ref, "logp_inc.%d", t - 1);
        const int *p[1] = {pfx[4]};
        float out[V];
        asr_model_lm_score(&m, p, &len[4], 1, out);
        double e = pack_rel_err(out, pack_must(&s, ref, NULL), V, 1.0);
        cr_expect_lt(e, 1e-5, "step %d: %g", t, e);
        worst = fmax(worst, e);
        len[4] = keep;
    }
    static const int pair[2] = {3, 4};
    worst = fmax(worst, score_check(&m, &s, pfx, len, pair, 2, "logp_batch", 0));
    cr_log_info("lm batch_score%s: worst log-prob rel err vs ESPnet %.2g", suffix, worst);
    for (int i = 0; i < 5; i++) free(pfx[i]);
    pack_free(&w), pack_free(&s);
    asr_model_free(&m);
    backend_close(be);
}

Test(lm, batch_score_matches_espnet_at_once_step_by_step_and_in_a_batch)
{
    check_score("", lm_dims(0));
}

Test(lm, batch_score_matches_espnet_with_sinusoidal_positions)
{
    check_score("_sin", lm_dims(1));
}

Test(lm, lstm_batch_score_matches_espnet_at_once_step_by_step_and_in_a_batch)
{
    check_score("_rnn", rnn_dims(16, 24, 2));
}

Test(lm, gru_batch_score_matches_espnet_at_once_step_by_step_and_in_a_batch)
{
    check_score("_gru", gru_dims());
}
