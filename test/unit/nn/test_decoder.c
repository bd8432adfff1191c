/* The joint CTC/attention model against the real ESPnet2 (fixtures by
 * scripts/make_decoder_fixtures.py): ESPnetASRModel with a 2-block TransformerEncoder and
 * TransformerDecoder, a padded batch of 2, dropout off. Loss, loss_ctc, loss_att, acc and every
 * parameter gradient for ctc_weight 0.3 (lsm_weight 0.1) and 0.5 with length_normalized_loss;
 * ctc_weight 0 (no CTC branch) from the same numbers; the decoder's batch_score for prefixes of
 * several lengths, scored at once, step by step through the cache, and after a new utterance. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/nn/decoder_transformer.h"
#include "core/nn/model.h"
#include "test/unit/nn/fx_pack.h"
#include "test/unit/nn/nn_fixture.h"
#include "test/unit/nn/grads_final_check.h"
#include "test/unit/test_util.h"

/* Fixture packs (test/unit/nn/fx_pack.h) of test/fixtures/decoder/. */
static pack load(const char *name) { return load_pack("decoder", name); }

/* ---- the model -------------------------------------------------------------------------------- */

static model_dims fixture_dims(int no_ctc)
{
    model_dims d = {.idim = 80, .d = 32, .heads = 4, .ff = 64, .blocks = 2, .vocab = 12,
                    .dec_blocks = 2, .dec_heads = 4, .dec_ff = 64, .no_ctc = no_ctc};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    return d;
}

/* Copies the fixture's weights in (ESPnet2's names, as espnet3's); every parameter must be found once, and with `exact` every fixture tensor
 * must be a parameter. Records each parameter's ESPnet2 name for the gradients. */
static char espnet_name[512][128];

static void load_weights(asr_model *m, const pack *w, int exact)
{
    cr_assert(m->table.n <= 512);
    int *seen = calloc(m->table.n, sizeof *seen);
    size_t used = 0;
    for (size_t i = 0; i < w->n; i++) {
        const param_info *p = param_find_alias(&m->table, w->names[i]);
        if (!p) {
            cr_assert_not(exact, "ESPnet2's %s is not a parameter of espnet3's model", w->names[i]);
            continue;
        }
        size_t k = (size_t)(p - m->table.items);
        cr_assert_eq(w->count[i], p->count, "%s", p->name);
        cr_assert_not(seen[k]++, "%s twice", p->name);
        memcpy(m->params + p->offset, w->data + w->off[i], p->count * sizeof(float));
        snprintf(espnet_name[k], sizeof espnet_name[k], "%s", w->names[i]);
        used++;
    }
    cr_assert_eq(used, m->table.n, "the fixture has %zu of espnet3's %zu parameters", used, m->table.n);
    free(seen);
}

typedef struct batch_in {
    float *feats;
    int lens[2], ylens[2], labels[2 * 7], stride, T;
} batch_in;

static batch_in load_batch(const pack *c)
{
    batch_in b = {0};
    size_t nf, n, ny;
    const float *f = pack_must(c, "in.feats", &nf), *l = pack_must(c, "in.lens", &n), *y = pack_must(c, "in.ys", &ny),
                *yl = pack_must(c, "in.ylens", &n);
    b.feats = malloc(nf * sizeof(float));
    memcpy(b.feats, f, nf * sizeof(float));
    b.T = (int)(nf / 2 / 80);
    b.stride = (int)(ny / 2);
    cr_assert_eq(b.stride, 7);
    for (int i = 0; i < 2; i++) b.lens[i] = (int)l[i], b.ylens[i] = (int)yl[i];
    for (int i = 0; i < 2 * b.stride; i++) b.labels[i] = (int)y[i];
    return b;
}

/* Forward, loss and backward of the fixture batch; checks the numbers against case `c`. */
static void check_case(const char *case_name, float ctc_weight, int length_normalized)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    pack w = load("weights"), c = load(case_name);
    model_dims d = fixture_dims(0);
    model_rates rates = {.ctc_weight = ctc_weight, .lsm_weight = 0.1f, .length_normalized_loss = length_normalized};
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    load_weights(&m, &w, 1);
    batch_in b = load_batch(&c);
    asr_model_zero_grad(&m);
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 0, 0);
    size_t n;
    const float *hl = pack_must(&c, "out.hlens", &n);
    cr_assert(m.hlens[0] == (int)hl[0] && m.hlens[1] == (int)hl[1]);
    double loss = asr_model_loss(&m, b.labels, b.ylens, b.stride, NULL);
    const char *names[] = {"out.loss", "out.loss_ctc", "out.loss_att"};
    double ours[] = {loss, m.loss_ctc, m.loss_att};
    for (int i = 0; i < 3; i++) {
        double ref = pack_must(&c, names[i], NULL)[0];
        cr_expect_lt(fabs(ours[i] - ref) / fabs(ref), 1e-5, "%s %s: %.8f vs ESPnet %.8f", case_name, names[i],
                     ours[i], ref);
    }
    double acc = (double)m.att_correct / (double)m.att_tokens, ref_acc = pack_must(&c, "out.acc", NULL)[0];
    cr_expect_lt(fabs(acc - ref_acc), 1e-6, "acc %f vs ESPnet %f", acc, ref_acc);
    cr_expect_eq(m.att_tokens, b.ylens[0] + b.ylens[1] + 2);
    gf_check gf;
    gf_arm(&gf, &m); /* DDP buckets: what the backward reports final stays so */
    asr_model_backward(&m, 1.0f);
    gf_verify(&gf);
    double worst = 0;
    for (size_t i = 0; i < m.table.n; i++) {
        const param_info *p = &m.table.items[i];
        char name[160 + 128];
        snprintf(name, sizeof name, "grad.%.127s", espnet_name[i]);
        const float *g = pack_must(&c, name, &n);
        if (strstr(p->name, "linear_k.bias")) {
            /* q.b_k is the same for every key of a query, which softmax ignores: the true gradient
             * is 0 and both sides hold rounding noise, so compare it absolutely. */
            double mx = 0;
            mx = fmax(mx, test_max_abs(m.grads + p->offset, n));
            cr_expect_lt(mx, 1e-5, "%s: gradient of %s should vanish: %g", case_name, p->name, mx);
            continue;
        }
        double e = pack_rel_err(m.grads + p->offset, g, n, 1.0);
        worst = fmax(worst, e);
        cr_expect_lt(e, 1e-4, "%s: gradient of %s differs: %g", case_name, p->name, e);
    }
    cr_log_info("%s: loss %.7f (ESPnet %.7f), worst gradient rel err %.2g", case_name, loss,
                pack_must(&c, "out.loss", NULL)[0], worst);
    free(b.feats);
    pack_free(&w), pack_free(&c);
    asr_model_free(&m);
    backend_close(be);
}

Test(decoder, joint_loss_acc_and_every_gradient_match_espnet_ctc_weight_0_3)
{
    check_case("ctc03", 0.3f, 0);
}

Test(decoder, joint_loss_acc_and_every_gradient_match_espnet_ctc_weight_0_5_length_normalized)
{
    check_case("ctc05_norm", 0.5f, 1);
}

/* ctc_weight 0: ESPnet2 has no ctc module. The loss is loss_att alone and the decoder's gradients
 * are those of ctc_weight 0.3 divided by 0.7 (only loss_att reaches the decoder). */
Test(decoder, ctc_weight_0_has_no_ctc_branch)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    pack w = load("weights"), c = load("ctc03");
    model_dims d = fixture_dims(1);
    model_rates rates = {.ctc_weight = 0, .lsm_weight = 0.1f};
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    cr_assert_null(param_find(&m.table, "ctc.ctc_lo.weight"));
    load_weights(&m, &w, 0);
    cr_assert_eq(w.n, m.table.n + 2); /* all but ctc.ctc_lo.{weight,bias} */
    batch_in b = load_batch(&c);
    asr_model_zero_grad(&m);
    asr_model_forward(&m, b.feats, b.lens, 2, b.T, 1, 3);
    double loss = asr_model_loss(&m, b.labels, b.ylens, b.stride, NULL), ref = pack_must(&c, "out.loss_att", NULL)[0];
    cr_assert(isnan(m.loss_ctc));
    cr_assert_lt(fabs(loss - ref) / ref, 1e-5, "%f vs %f", loss, ref);
    asr_model_backward(&m, 1.0f);
    for (size_t i = 0; i < m.table.n; i++) {
        const param_info *p = &m.table.items[i];
        if (strncmp(p->name, "decoder.", 8) || strstr(p->name, "linear_k.bias")) continue;
        char name[160 + 128];
        size_t n = 0;
        snprintf(name, sizeof name, "grad.%.127s", espnet_name[i]);
        const float *g = pack_must(&c, name, &n);
        double e = pack_rel_err(m.grads + p->offset, g, n, 1.0 / 0.7);
        cr_expect_lt(e, 1e-4, "gradient of %s differs: %g", p->name, e);
    }
    free(b.feats);
    pack_free(&w), pack_free(&c);
    asr_model_free(&m);
    backend_close(be);
}

/* ---- batch_score ------------------------------------------------------------------------------ */

typedef struct score_fx {
    pack w, s;
    int n;            /* prefixes */
    int *pfx[8], len[8];
    const float *hs;
    int T;
} score_fx;

static score_fx load_score(void)
{
    score_fx f = {.w = load("weights"), .s = load("score")};
    size_t n;
    f.hs = pack_must(&f.s, "in.hs", &n);
    f.T = (int)(n / 32);
    for (f.n = 0; f.n < 8; f.n++) {
        char name[32];
        snprintf(name, sizeof name, "prefix.%d", f.n);
        const float *p = pack_get(&f.s, name, &n);
        if (!p) break;
        f.pfx[f.n] = malloc(n * sizeof(int));
        for (size_t k = 0; k < n; k++) f.pfx[f.n][k] = (int)p[k];
        f.len[f.n] = (int)n;
    }
    cr_assert_eq(f.n, 6);
    return f;
}

static void score_free(score_fx *f)
{
    for (int i = 0; i < f->n; i++) free(f->pfx[i]);
    pack_free(&f->w), pack_free(&f->s);
}

/* Scores prefixes idx[0..k) in one call and compares with ESPnet's logp.<idx> (or logp_batch). */
static double score_and_check(asr_model *m, const float *hs, score_fx *f, const int *idx, int k, const char *ref)
{
    const int *pfx[8];
    int lens[8];
    for (int i = 0; i < k; i++) pfx[i] = f->pfx[idx[i]], lens[i] = f->len[idx[i]];
    float out[8 * 12];
    decoder_score_batch(m, hs, f->T, pfx, lens, k, out);
    double worst = 0;
    for (int i = 0; i < k; i++) {
        char name[32];
        if (ref) snprintf(name, sizeof name, "%s.%d", ref, i);
        else snprintf(name, sizeof name, "logp.%d", idx[i]);
        double e = pack_rel_err(out + i * 12, pack_must(&f->s, name, NULL), 12, 1.0);
        cr_expect_lt(e, 1e-5, "prefix %d (length %d): log-probs differ from ESPnet's batch_score: %g", idx[i],
                     lens[i], e);
        worst = fmax(worst, e);
    }
    return worst;
}

Test(decoder, batch_score_matches_espnet_at_once_step_by_step_per_utterance_and_reserved)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    score_fx f = load_score();
    model_dims d = fixture_dims(0);
    asr_model m;
    asr_model_init_inference(&m, be, &d);
    load_weights(&m, &f.w, 1);
    size_t nh = (size_t)f.T * 32;
    float *hs = malloc(nh * sizeof(float)), *hs2 = malloc(nh * sizeof(float));
    memcpy(hs, f.hs, nh * sizeof(float));
    memcpy(hs2, f.hs, nh * sizeof(float));

    /* All six at once: nothing cached, every prefix computed whole (mixed lengths). */
    static const int all[6] = {0, 1, 2, 3, 4, 5};
    double worst = score_and_check(&m, hs, &f, all, 6, NULL);
    /* Step by step: each prefix extends the previous call's (one new position each). */
    for (int i = 0; i < 4; i++) worst = fmax(worst, score_and_check(&m, hs, &f, &all[i], 1, NULL));
    /* Prefix 3 again (cached as itself) and prefix 4 (no parent): ESPnet's batch of the two. */
    static const int pair[2] = {3, 4};
    worst = fmax(worst, score_and_check(&m, hs, &f, pair, 2, "logp_batch"));
    /* Another utterance buffer (same values: the answers stay) and a changed utterance. */
    worst = fmax(worst, score_and_check(&m, hs2, &f, pair, 2, "logp_batch"));
    const int *p1[1] = {f.pfx[2]};
    float changed[12], again[12];
    for (size_t i = 0; i < nh; i++) hs2[i] *= 1.5f; /* a new utterance in the same buffer */
    decoder_score_new_utterance(&m);
    decoder_score_batch(&m, hs2, f.T, p1, &f.len[2], 1, changed);
    cr_assert(pack_rel_err(changed, pack_must(&f.s, "logp.2", NULL), 12, 1.0) > 1e-3,
              "a changed utterance must not hit the cache");
    worst = fmax(worst, score_and_check(&m, hs, &f, &all[2], 1, NULL));
    decoder_score_batch(&m, hs2, f.T, p1, &f.len[2], 1, again);
    cr_assert_lt(pack_rel_err(again, changed, 12, 1.0), 1e-6);
    /* Caches sized once for a search (decoder_score_reserve: more blocks and a longer stride than
     * these prefixes need, and room for one longest prefix's rows, so that the six computed whole
     * go in groups): the same answers, step by step and all at once. */
    int lmax = 1;
    for (int i = 0; i < f.n; i++) lmax = f.len[i] > lmax ? f.len[i] : lmax;
    decoder_score_reserve(&m, 8, lmax + 1, f.T);
    decoder_score_reserve(&m, 8, lmax + 1, f.T); /* only ever enlarges: again is the same */
    decoder_score_new_utterance(&m);
    for (int i = 0; i < 4; i++) worst = fmax(worst, score_and_check(&m, hs, &f, &all[i], 1, NULL));
    worst = fmax(worst, score_and_check(&m, hs, &f, all, 6, NULL));
    cr_log_info("batch_score: worst log-prob rel err vs ESPnet %.2g", worst);
    free(hs), free(hs2);
    score_free(&f);
    asr_model_free(&m);
    backend_close(be);
}

/* ---- the parameter table and initialization ----------------------------------------------------- */

/* The decoder's tensors come after ctc.ctc_lo, so a CTC model's tensors keep their places and
 * their initial values (init draws one stream per table index); ESPnet2's initialize() gives the
 * embedding N(0, 1) under every scheme (nn.Embedding.reset_parameters), the rest as the encoder's. */
Test(decoder, table_appends_the_decoder_and_init_follows_espnet2)
{
    model_dims ctc = fixture_dims(0), hyb = fixture_dims(0);
    ctc.dec_blocks = ctc.dec_heads = ctc.dec_ff = 0;
    hyb.vocab = ctc.vocab = 300; /* enough embedding values for the moments below */
    param_table tc, th;
    param_table_build(&tc, &ctc);
    param_table_build(&th, &hyb);
    cr_assert_eq(th.n, tc.n + 5 + 26 * 2);
    for (size_t i = 0; i < tc.n; i++)
        cr_assert(!strcmp(tc.items[i].name, th.items[i].name) && tc.items[i].offset == th.items[i].offset);
    cr_assert_str_eq(th.items[tc.n].name, "decoder.embed.0.weight");
    cr_assert_str_eq(th.items[th.n - 1].name, "decoder.decoders.1.norm3.bias");
    esp_err err;
    for (int scheme = 0; scheme < 2; scheme++) {
        const char *init = scheme ? "xavier_uniform" : NULL;
        float *a = calloc(tc.total, sizeof *a), *b = calloc(th.total, sizeof *b);
        cr_assert_eq(param_init(a, &tc, init, 7, &err), 0);
        cr_assert_eq(param_init(b, &th, init, 7, &err), 0);
        cr_assert(!memcmp(a, b, tc.total * sizeof *a), "the CTC model's initial values moved");
        const param_info *e = param_find(&th, "decoder.embed.0.weight");
        double s = 0, s2 = 0;
        for (size_t k = 0; k < e->count; k++) s += b[e->offset + k], s2 += (double)b[e->offset + k] * b[e->offset + k];
        double mean = s / (double)e->count, var = s2 / (double)e->count - mean * mean;
        cr_assert(fabs(mean) < 0.02 && fabs(var - 1) < 0.03, "embedding mean %g var %g", mean, var);
        if (scheme) {
            const param_info *w = param_find(&th, "decoder.decoders.1.src_attn.linear_v.weight");
            double bound = sqrt(6.0 / (32 + 32)), mx = 0;
            mx = fmax(mx, test_max_abs(b + w->offset, w->count));
            cr_assert(mx <= bound && mx > 0.9 * bound, "xavier bound %g, max %g", bound, mx);
            cr_assert_eq(b[param_find(&th, "decoder.output_layer.bias")->offset], 0.0f);
        }
        cr_assert_eq(b[param_find(&th, "decoder.decoders.0.norm2.weight")->offset], 1.0f);
        cr_assert_eq(b[param_find(&th, "decoder.after_norm.bias")->offset], 0.0f);
        free(a), free(b);
    }
    param_table_free(&tc);
    param_table_free(&th);
}

/* Dropout everywhere (the masks fixed by the seed): each group of parameters' gradient against a
 * central difference of the loss along that gradient, in float (catches a mask that the backward
 * regenerates differently from the forward, or a branch whose gradient goes astray). */
static double loss_at(asr_model *m, const batch_in *b)
{
    asr_model_forward(m, b->feats, b->lens, 2, b->T, 1, 99);
    return asr_model_loss(m, b->labels, b->ylens, b->stride, NULL);
}

Test(decoder, gradient_with_dropout_matches_directional_differences)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    pack w = load("weights"), c = load("ctc03");
    model_dims d = fixture_dims(0);
    model_rates rates = {.dropout = 0.1f, .pos_dropout = 0.1f, .att_dropout = 0.1f, .ctc_dropout = 0.1f,
                         .dec_dropout = 0.2f, .dec_pos_dropout = 0.15f, .dec_self_att_dropout = 0.1f,
                         .dec_src_att_dropout = 0.25f, .ctc_weight = 0.3f, .lsm_weight = 0.1f};
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    load_weights(&m, &w, 1);
    batch_in b = load_batch(&c);
    asr_model_zero_grad(&m);
    loss_at(&m, &b);
    asr_model_backward(&m, 1.0f);
    size_t n = m.table.total;
    float *p0, *g;
    fx_snapshot(&m, &p0, &g);
    static const char *const groups[] = {
        "decoder.embed.", "decoder.decoders.0.self_attn.", "decoder.decoders.0.src_attn.linear_q",
        "decoder.decoders.0.src_attn.linear_v", "decoder.decoders.0.feed_forward.", "decoder.decoders.0.norm",
        "decoder.decoders.1.self_attn.linear_v", "decoder.decoders.1.src_attn.linear_out",
        "decoder.decoders.1.feed_forward.w_1", "decoder.after_norm.", "decoder.output_layer.",
        "encoder.after_norm.", "encoder.encoders.1.feed_forward.", "ctc.ctc_lo."};
    double worst = 0;
    for (size_t k = 0; k < sizeof groups / sizeof *groups; k++) {
        double g2 = 0;
        for (size_t i = 0; i < m.table.n; i++) {
            const param_info *p = &m.table.items[i];
            if (strncmp(p->name, groups[k], strlen(groups[k])) || strstr(p->name, "linear_k.bias")) continue;
            for (size_t e = 0; e < p->count; e++) g2 += (double)g[p->offset + e] * g[p->offset + e];
        }
        double gn = sqrt(g2), eps = 0.01 / gn, l[2];
        if (eps > 0.02) eps = 0.02;
        for (int s = 0; s < 2; s++) {
            memcpy(m.params, p0, n * sizeof *p0);
            for (size_t i = 0; i < m.table.n; i++) {
                const param_info *p = &m.table.items[i];
                if (strncmp(p->name, groups[k], strlen(groups[k])) || strstr(p->name, "linear_k.bias")) continue;
                for (size_t e = 0; e < p->count; e++)
                    m.params[p->offset + e] = p0[p->offset + e] + (float)((s ? -eps : eps) * g[p->offset + e] / gn);
            }
            l[s] = loss_at(&m, &b);
        }
        double fd = (l[0] - l[1]) / (2 * eps), e = fabs(fd - gn) / gn;
        worst = fmax(worst, e);
        cr_expect_lt(e, 5e-3, "%s: directional difference %g vs |grad| %g", groups[k], fd, gn);
    }
    cr_log_info("dropout on: worst directional-difference rel err %.2g", worst);
    free(p0), free(g), free(b.feats);
    pack_free(&w), pack_free(&c);
    asr_model_free(&m);
    backend_close(be);
}
