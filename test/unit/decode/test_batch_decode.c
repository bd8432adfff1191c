/* Batched decoding (speech2text.h, ESPnet3's inference batch_size): on the ESPnet-trained fixture
 * models of test/fixtures/interop (Transformer, Conformer, E-Branchformer encoders, each with an
 * attention decoder), six spans of mixed lengths decoded in batches of every size 1..6 (and the
 * whole set in another order) give every utterance the hypotheses it gets alone: the joint search
 * with nbest 3 and token times, and the CTC-only searches (greedy, prefix beam). Scores and times
 * may differ in their last bits (the padded encoder's GEMMs); the largest differences are logged.
 * A CPU memory cap too small for the whole batch splits it in halves, with the same hypotheses. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/decode/speech2text.h"
#include "core/nn/model_files.h"
#include "test/unit/test_util.h"

enum { N_SPANS = 6 };

static const char *fx(const char *rel)
{
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/test/fixtures/interop/%s", test_root_dir(), rel);
    return p[k];
}

/* Spans of the three fixture utterances (0.46-0.64 s): whole, and cut shorter. */
static const char *span_wav[N_SPANS] = {"wav/utt1.wav", "wav/utt2.wav", "wav/utt3.wav",
                                        "wav/utt2.wav", "wav/utt3.wav", "wav/utt1.wav"};
static const double span_start[N_SPANS] = {0, 0, 0, 0.1, 0, 0.05};
static const double span_end[N_SPANS] = {0, 0, 0, 0.5, 0.3, 0.4};

typedef struct opened {
    model_files mf;
    backend *be;
    speech2text *s;
} opened;

/* The fixture model under interop/<dir>espnet_model with options o on a 1-thread CPU backend. */
static void open_model(opened *m, const char *dir, const s2t_opts *o)
{
    char cfg[600], pth[700];
    snprintf(cfg, sizeof cfg, "%s", fx(dir));
    snprintf(pth, sizeof pth, "%sespnet_model/exp/asr_train/valid.acc.ave.pth", cfg);
    strncat(cfg, "espnet_model/exp/asr_train/config.yaml", sizeof cfg - strlen(cfg) - 1);
    infer_model_cfg mc = {.asr_train_config = cfg, .asr_model_file = pth, .beam_size = 1, .nbest = 1};
    inference_cfg ic = {.model = &mc};
    esp_err err = {{0}};
    cr_assert_eq(model_files_locate(&m->mf, &ic, "inference.yaml", &err), 0, "%s", err.msg);
    m->be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(m->be, "%s", err.msg);
    m->s = speech2text_open(m->be, &m->mf, o, &err);
    cr_assert_not_null(m->s, "%s", err.msg);
}

static void close_model(opened *m)
{
    speech2text_close(m->s);
    backend_close(m->be);
    model_files_free(&m->mf);
}

/* Spans idx[0..n) as one batch into out. */
static void decode_spans(opened *m, const int *idx, int n, s2t_hyp *out)
{
    const char *paths[N_SPANS];
    double st[N_SPANS], en[N_SPANS];
    for (int i = 0; i < n; i++) paths[i] = fx(span_wav[idx[i]]), st[i] = span_start[idx[i]], en[i] = span_end[idx[i]];
    esp_err err;
    cr_assert_eq(speech2text_decode_spans(m->s, paths, st, en, n, out, &err), 0, "%s", err.msg);
}

typedef struct worst {
    double score, time;
    int hyps, with_tokens;
} worst;

static double diff_nan(double a, double b)
{
    if (isnan(a) || isnan(b)) {
        cr_assert(isnan(a) && isnan(b), "a time is NaN on one side only");
        return 0.0;
    }
    return fabs(a - b);
}

/* One hypothesis batched (g) against alone (h): the same ids, text and frames; score and times
 * within float rounding. */
static void expect_same_hyp(const s2t_hyp *g, const s2t_hyp *h, const char *what, int k, worst *w)
{
    cr_assert_eq(g->n_ids, h->n_ids, "%s hyp %d: %zu tokens batched, %zu alone", what, k, g->n_ids, h->n_ids);
    cr_assert(h->n_ids == 0 || !memcmp(g->ids, h->ids, h->n_ids * sizeof *h->ids), "%s hyp %d: tokens", what, k);
    cr_assert_str_eq(g->text, h->text, "%s hyp %d", what, k);
    cr_assert_eq(g->frames, h->frames, "%s hyp %d", what, k);
    if (isfinite(h->score)) {
        w->score = fmax(w->score, fabs(g->score - h->score));
        cr_assert(fabs(g->score - h->score) <= 1e-3 * fmax(1.0, fabs(h->score)), "%s hyp %d: score %.9g batched, "
                  "%.9g alone", what, k, g->score, h->score);
    } else {
        cr_assert_eq(g->score, h->score, "%s hyp %d", what, k);
    }
    cr_assert_eq(!g->tok_start, !h->tok_start, "%s hyp %d: times on one side only", what, k);
    for (size_t i = 0; h->tok_start && i < h->n_ids; i++) {
        w->time = fmax(w->time, fmax(diff_nan(g->tok_start[i], h->tok_start[i]), diff_nan(g->tok_end[i], h->tok_end[i])));
        cr_assert(w->time < 1e-6, "%s hyp %d token %zu: times differ", what, k, i);
    }
    w->hyps++;
    w->with_tokens += h->n_ids > 0;
}

static void expect_same(const s2t_hyp *g, const s2t_hyp *h, const char *what, worst *w)
{
    cr_assert_eq(g->n_found, h->n_found, "%s: %d hypotheses batched, %d alone", what, g->n_found, h->n_found);
    for (int k = 0; k < h->n_found; k++) expect_same_hyp(k ? &g->alt[k - 1] : g, k ? &h->alt[k - 1] : h, what, k, w);
}

/* Every span alone, then in batches of every size from every start and all in reverse order. */
static worst batches_are_each_alone(const char *dir, const s2t_opts *o)
{
    opened m;
    open_model(&m, dir, o);
    s2t_hyp alone[N_SPANS], got[N_SPANS];
    for (int i = 0; i < N_SPANS; i++) decode_spans(&m, &i, 1, &alone[i]);
    worst w = {0};
    int idx[N_SPANS], rev[N_SPANS];
    for (int i = 0; i < N_SPANS; i++) idx[i] = i, rev[i] = N_SPANS - 1 - i;
    for (int n = 2; n <= N_SPANS + 1; n++)
        for (int k0 = 0; k0 + (n > N_SPANS ? N_SPANS : n) <= N_SPANS; k0 += n) {
            int size = n > N_SPANS ? N_SPANS : n;
            const int *order = n > N_SPANS ? rev : idx + k0;
            decode_spans(&m, order, size, got);
            for (int i = 0; i < size; i++) {
                char what[128];
                snprintf(what, sizeof what, "%s: span %d in a batch of %d", dir[0] ? dir : "transformer/", order[i],
                         size);
                expect_same(&got[i], &alone[order[i]], what, &w);
                s2t_hyp_free(&got[i]);
            }
        }
    for (int i = 0; i < N_SPANS; i++) s2t_hyp_free(&alone[i]);
    close_model(&m);
    cr_assert_gt(w.with_tokens, 0, "%s: every hypothesis is empty, so the comparison means little", dir);
    cr_log_info("%s: %d hypotheses compared (beam %d, ctc_weight %g, nbest %d): largest score difference %.3g, "
                "time difference %.3g s", dir, w.hyps, o->beam_size, o->ctc_weight, o->nbest, w.score, w.time);
    return w;
}

TestSuite(batch_decode);

Test(batch_decode, joint_search_in_batches_is_each_utterance_alone, .timeout = 120)
{
    s2t_opts o = {.beam_size = 4, .ctc_weight = 0.3, .nbest = 3, .timestamps = 1};
    batches_are_each_alone("", &o);
    batches_are_each_alone("conformer/", &o);
    batches_are_each_alone("e_branchformer/", &o);
}

Test(batch_decode, joint_search_variants_in_batches, .timeout = 120)
{
    /* attention only, a length bonus with a fixed length, and minlenratio's retry */
    s2t_opts a = {.beam_size = 3, .ctc_weight = 0.0, .nbest = 2};
    batches_are_each_alone("", &a);
    s2t_opts b = {.beam_size = 5, .ctc_weight = 0.5, .nbest = 5, .penalty = 0.5, .maxlenratio = -4};
    batches_are_each_alone("", &b);
    s2t_opts c = {.beam_size = 2, .ctc_weight = 0.3, .nbest = 1, .minlenratio = 0.9, .maxlenratio = 0.5};
    batches_are_each_alone("", &c);
}

Test(batch_decode, ctc_searches_in_batches_are_each_utterance_alone, .timeout = 60)
{
    s2t_opts greedy = {.beam_size = 1, .ctc_weight = 1.0, .nbest = 1, .timestamps = 1};
    batches_are_each_alone("", &greedy);
    s2t_opts prefix = {.beam_size = 3, .ctc_weight = 1.0, .nbest = 2};
    batches_are_each_alone("conformer/", &prefix);
}

/* A cap on the CPU backend's memory that one utterance fits in but not the batch: the batch is
 * split in halves (and again), and decodes as it does whole. */
Test(batch_decode, a_batch_over_the_memory_cap_is_split_in_halves, .timeout = 60)
{
    s2t_opts o = {.beam_size = 4, .ctc_weight = 0.3, .nbest = 2};
    opened m;
    open_model(&m, "", &o);
    int idx[N_SPANS] = {0, 1, 2, 3, 4, 5};
    s2t_hyp whole[N_SPANS], split[N_SPANS];
    decode_spans(&m, idx, N_SPANS, whole);
    cr_assert_eq(speech2text_batch_splits(m.s), 0, "no cap, no split");
    close_model(&m);

    open_model(&m, "", &o);
    cr_assert_not_null(m.be->set_mem_limit);
    /* The backend's own scratch (per frame count, not per batch; not in the plan) grown first by the
     * longest span alone. */
    s2t_hyp warm;
    decode_spans(&m, &idx[1], 1, &warm);
    s2t_hyp_free(&warm);
    m.be->set_mem_limit(m.be, SIZE_MAX / 2);
    size_t held = SIZE_MAX / 2 - m.be->mem_available(m.be), one = speech2text_batch_bytes(m.s, 1, 100);
    cr_assert_gt(one, 0);
    m.be->set_mem_limit(m.be, held + one + one / 2); /* one utterance (at most 100 frames) and a half */
    decode_spans(&m, idx, N_SPANS, split);
    int splits = speech2text_batch_splits(m.s);
    cr_assert_geq(splits, 1, "a batch of 6 split %d times under a cap of 1.5 utterances", splits);
    worst w = {0};
    for (int i = 0; i < N_SPANS; i++) {
        expect_same(&split[i], &whole[i], "split under the cap", &w);
        s2t_hyp_free(&split[i]);
        s2t_hyp_free(&whole[i]);
    }
    cr_log_info("memory cap %zu bytes over the model's %zu: %d splits", one + one / 2, held, splits);
    close_model(&m);
}
