/* Speech2Text: model files -> decoder; waveform -> features -> encoder -> search -> text.
 * See speech2text.h. */
#include "core/decode/speech2text.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/progress.h"

#include "core/data/asr_data.h"
#include "core/decode/ctc_decode.h"
#include "core/decode/ctc_times.h"
#include "core/decode/ctc_prefix_beam.h"
#include "core/decode/transducer_stream.h"
#include "core/nn/body_conf.h"
#include "core/nn/decoder_conf.h"
#include "core/nn/decoder_transformer.h"
#include "core/nn/lm_conf.h"
#include "core/nn/model.h"
#include "core/nn/model_params.h"
#include "core/nn/model_plan.h"

/* The attention decoder's contract with core/nn (decoder_score_utts): for n_hyps prefixes, each
 * starting with <sos> and belonging to utterance utt[i] of the batch, the next-token log-softmax
 * (n_hyps x vocab, host) given the encoder output hs_dev (B x T x d, device, hlens[b] valid). */
typedef void (*s2t_decoder_fn)(const asr_model *m, const float *hs_dev, const int *hlens, int B, int T,
                               const int *utt, const int *const *prefixes, const int *lens, int n_hyps,
                               float *logp_host);

struct speech2text {
    s2t_opts opts;
    ts_stream *stream;      /* opts.streaming: each utterance decoded chunk by chunk */
    backend *be;            /* borrowed */
    asr_data data;          /* no manifest: token list, frontend, normalization */
    asr_model model;
    int have_model;
    ctc_beam *beam;
    beam_search *bs;
    bs_scorer att;          /* the joint search's decoder: the model's, or opts.attention */
    asr_model lm;           /* shallow fusion's language model (have_lm) and its scorer */
    int have_lm;
    bs_scorer lm_scorer;
    s2t_decoder_fn decoder; /* the model's, when att calls it */
    err_calc ec;
    /* Work buffers, grown to the largest batch seen: host_logp holds the batch's log-probs (B x T2
     * x vocab), hl its encoder lengths, host_batch its padded features. */
    float *host_feats, *dev_feats, *host_logp, *dev_logp, *host_batch; /* dev_logp: the alignment's copy */
    size_t feats_cap, dev_cap, logp_cap, dev_logp_cap, batch_cap;
    int *hl, hl_cap;
    size_t planned;         /* the largest batch's planned bytes that ran (its buffers are held) */
    int splits;             /* batches split because they did not fit (speech2text_batch_splits) */
};

void s2t_hyp_free(s2t_hyp *h)
{
    if (!h) return;
    for (int k = 0; h->alt && k + 1 < h->n_found; k++) s2t_hyp_free(&h->alt[k]);
    free(h->alt);
    free(h->ids);
    free(h->text);
    free(h->tok_start);
    free(h->tok_end);
    free(h->tok_score);
    memset(h, 0, sizeof *h);
}

/* The model's attention decoder (core/nn/decoder_transformer.h), for a model that has one. */
static s2t_decoder_fn model_decoder(const asr_model *m)
{
    return m->dec ? decoder_score_utts : NULL;
}

/* The training config's model.decoder: transformer with model_conf.ctc_weight < 1. */
static int has_attention_decoder(const model_cfg *mc)
{
    return decoder_in_cfg(mc);
}

/* The model's decoder as the search's scorer, on the encoder output of the current batch (m->lnf:
 * after_norm, the input of ctc_lo; B x T2 x d). */
static void decoder_score(void *ctx, const int *utt, const int *const *prefixes, const int *lens, int n, float *logp)
{
    speech2text *s = ctx;
    const asr_model *m = &s->model;
    s->decoder(m, m->lnf, s->hl, m->B, m->T2, utt, prefixes, lens, n, logp);
}

/* The LM as the search's scorer: its next-token log-probs for each prefix. */
static void lm_score(void *ctx, const int *const *prefixes, const int *lens, int n, float *logp)
{
    speech2text *s = ctx;
    asr_model_lm_score(&s->lm, prefixes, lens, n, logp);
}

static int fusion_on(const s2t_opts *o) { return o->lm_weight > 0.0; }

/* ESPnet's Speech2Text reads the ASR model and the LM with one token list: the LM's must be the
 * ASR model's, token for token. */
static int check_lm_tokens(const model_files *mf, const model_files *lf, esp_err *err)
{
    token_list a = {0}, b = {0};
    int rc = token_list_read(mf->tokens, &a, err);
    if (rc == 0) rc = token_list_read(lf->tokens, &b, err);
    int same = rc == 0 && a.n == b.n;
    for (size_t i = 0; same && i < a.n; i++) same = !strcmp(a.tokens[i], b.tokens[i]);
    if (rc == 0 && !same)
        rc = esp_fail(err, "lm_train_config: the LM's token list %s (%zu tokens) is not the ASR model's %s (%zu): train "
                      "the LM with the ASR model's tokenizer", lf->tokens, b.n, mf->tokens, a.n);
    token_list_free(&a);
    token_list_free(&b);
    return rc;
}

/* The LM of opts.lm (an LM task's model: lm_files_locate) onto be. */
static int open_lm(speech2text *s, const model_files *lf, esp_err *err)
{
    const training_cfg *lt = model_files_training(lf);
    ESP_CHECK(lt->lm_task); /* lm_files_locate checked it */
    model_dims dims;
    if (lm_dims_from_cfg(&dims, lt->model, (int)s->data.tokens.n, err) != 0) return -1;
    asr_model_init_inference(&s->lm, s->be, &dims);
    s->have_lm = 1;
    if (asr_model_load_weights(&s->lm, lf->weights, err) != 0) return -1;
    s->lm_scorer = (bs_scorer){.score = lm_score, .ctx = s};
    return 0;
}

static int no_decoder(esp_err *err, double ctc_weight)
{
    return esp_fail(err, "ctc_weight %g: model has no attention decoder (decoder: transformer): use ctc_weight 1.0",
                    ctc_weight);
}

/* A transducer model: its search's checks (ctc_weight is not read, as in ESPnet's Speech2Text). */
static int check_transducer(const model_cfg *mc, const s2t_opts *o, esp_err *err)
{
    if (o->lm_weight > 0.0)
        return esp_fail(err, "lm_weight %g: shallow fusion with a transducer model is not built in espnet3 (use "
                             "lm_weight 0)", o->lm_weight);
    if (o->timestamps && !ctc_in_cfg(mc))
        return esp_fail(err, "timestamps: they come from a CTC forced alignment, and the model has no CTC branch "
                             "(trained with model_conf.ctc_weight 0)");
    if (o->timestamps && body_shrinks_frames(mc))
        return esp_fail(err, "timestamps: a conv1d block of the Encoder shrinks its frames, and times from its CTC "
                             "branch are not built for such an Encoder (decode without timestamps, write_ctm or "
                             "longform)");
    return 0;
}

int speech2text_check(const model_files *mf, const s2t_opts *o, esp_err *err)
{
    if (!(o->ctc_weight >= 0.0 && o->ctc_weight <= 1.0))
        return esp_fail(err, "ctc_weight %g: use a weight in [0, 1] (1.0: CTC only)", o->ctc_weight);
    const model_cfg *mc = model_files_training(mf)->model;
    if (body_in_cfg(mc) && !o->transducer.no_greedy)
        return esp_fail(err, "the model is ESPnet2's asr_transducer task's: decode it with model._target_: "
                             TARGET_ASR_TRANSDUCER_S2T);
    if (!body_in_cfg(mc) && o->transducer.no_greedy)
        return esp_fail(err, TARGET_ASR_TRANSDUCER_S2T " decodes the asr_transducer task's models; this one is the "
                             "ASR task's (use espnet2.bin.asr_inference.Speech2Text)");
    if (o->streaming && o->timestamps) /* the chunks' search keeps no alignment (ESPnet2's neither) */
        return esp_fail(err, "streaming: true gives no token times (leave write_ctm / timestamps off)");
    if (transducer_in_cfg(mc)) return check_transducer(mc, o, err);
    if (o->ctc_weight < 1.0 && !o->attention && !has_attention_decoder(mc)) return no_decoder(err, o->ctc_weight);
    if (o->ctc_weight > 0.0 && !ctc_in_cfg(mc))
        return esp_fail(err, "ctc_weight %g: the model has no CTC branch (trained with model_conf.ctc_weight 0, "
                             "ESPnet2 then has no ctc module): use ctc_weight 0.0 (attention only)",
                        o->ctc_weight);
    if (!(o->lm_weight >= 0.0)) return esp_fail(err, "lm_weight %g: use a weight >= 0 (0: no LM)", o->lm_weight);
    if (fusion_on(o) && !o->lm)
        return esp_fail(err, "lm_weight %g: no language model (set lm_train_config and lm_file)", o->lm_weight);
    if (fusion_on(o) && check_lm_tokens(mf, o->lm, err) != 0) return -1;
    if (o->timestamps && !ctc_in_cfg(mc))
        return esp_fail(err, "timestamps: they come from a CTC forced alignment, and the model has no CTC branch "
                             "(trained with model_conf.ctc_weight 0)");
    return 0;
}

speech2text *speech2text_open(backend *be, const model_files *mf, const s2t_opts *o, esp_err *err)
{
    const training_cfg *tc = model_files_training(mf);
    speech2text *s = NULL;
    if (speech2text_check(mf, o, err) != 0) goto fail;
    s = xcalloc(1, sizeof *s);
    s->opts = *o;
    if (s->opts.transducer.nbest == 0) s->opts.transducer = (ts_opts)TS_OPTS_DEFAULT;
    s->be = be;
    if (asr_data_open_files(&s->data, tc->model, NULL, mf->tokens, 0, err) != 0) goto fail;
    s->data.resample = o->resample;
    if (token_list_set_type(&s->data.tokens, mf->token_type, mf->bpemodel, err) != 0) goto fail;
    model_dims dims;
    if (model_dims_from_cfg(&dims, tc->model, s->data.fo.n_mels, (int)s->data.tokens.n, err) != 0) goto fail;
    /* A hybrid model's decoder weights load with the rest; CTC-only decoding does not use them. */
    asr_model_init_inference(&s->model, be, &dims);
    s->have_model = 1;
    if (asr_model_load_weights(&s->model, mf->weights, err) != 0) goto fail;
    s->beam = ctc_beam_new();
    s->bs = beam_search_new();
    if (o->attention) {
        s->att = *o->attention;
    } else if ((s->decoder = model_decoder(&s->model))) {
        s->att = (bs_scorer){.score_utts = decoder_score, .ctx = s};
    } else if (o->ctc_weight < 1.0 && !s->model.tr) {
        no_decoder(err, o->ctc_weight);
        goto fail;
    }
    if (s->model.tr && ts_check(&s->opts.transducer, o->beam_size, dims.vocab, err) != 0) goto fail;
    if (fusion_on(o) && open_lm(s, o->lm, err) != 0) goto fail;
    if (o->streaming && !(s->stream = ts_stream_open(s, o->decoding_window, o->left_context, err))) goto fail;
    err_calc_init(&s->ec, &s->data.tokens);
    return s;
fail: /* a reader's message about a file of a packed zip names the zip's entry */
    model_files_show_err(mf, err);
    if (o->lm) model_files_show_err(o->lm, err);
    speech2text_close(s);
    return NULL;
}

void speech2text_close(speech2text *s)
{
    if (!s) return;
    ts_stream_close(s->stream);
    if (s->have_model) {
        s->be->free(s->be, s->dev_feats);
        s->be->free(s->be, s->dev_logp);
        asr_model_free(&s->model);
    }
    if (s->have_lm) asr_model_free(&s->lm);
    asr_data_close(&s->data);
    ctc_beam_free(s->beam);
    beam_search_free(s->bs);
    free(s->host_feats);
    free(s->host_logp);
    free(s->host_batch);
    free(s->hl);
    free(s);
}

const token_list *speech2text_tokens(const speech2text *s) { return &s->data.tokens; }
const frontend_opts *speech2text_frontend(const speech2text *s) { return &s->data.fo; }
size_t speech2text_min_samples(const speech2text *s) { return frontend_min_samples(s->data.fe); }
const s2t_opts *speech2text_options(const speech2text *s) { return &s->opts; }

void speech2text_reserve(speech2text *s, size_t n)
{
    if (s->decoder != decoder_score_utts || !(s->opts.ctc_weight < 1.0 || fusion_on(&s->opts))) return;
    int F = (int)frontend_num_frames(s->data.fe, n), T = input_layer_out_len(s->model.dims.input_layer, F);
    int beam = s->opts.beam_size > 1 ? s->opts.beam_size : 1;
    /* prefixes hold <sos> and up to maxlen tokens (the last step appends <eos>) */
    decoder_score_reserve(&s->model, beam, beam_search_maxlen(s->opts.maxlenratio, T) + 2, T);
}
int speech2text_fs(const speech2text *s) { return s->data.fo.fs; }
int speech2text_vocab(const speech2text *s) { return s->model.dims.vocab; }
asr_model *speech2text_model(const speech2text *s) { return (asr_model *)&s->model; }
asr_data *speech2text_data(const speech2text *s) { return (asr_data *)&s->data; }
const bs_scorer *speech2text_lm_scorer(const speech2text *s) { return s->have_lm ? &s->lm_scorer : NULL; }

void speech2text_new_utterance(const speech2text *s)
{
    if (s->decoder) decoder_score_new_utterance(&s->model);
    if (s->have_lm) asr_model_lm_new_utterance(&s->lm);
}

char *speech2text_text(const speech2text *s, const int *ids, size_t n)
{
    int *kept = xmalloc((n + 1) * sizeof *kept);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] != 0) kept[k++] = ids[i];
    char *text = token_ids_to_text(&s->ec, kept, k);
    free(kept);
    return text;
}

/* The encoder over n utterances (feats[b]: T[b] x n_mels) as one batch padded with zeros to the
 * longest: the log-probabilities (n x T2 x vocab) copied to s->host_logp, the encoder lengths to
 * s->hl; m->lnf keeps the encoder output for the decoder. */
static void encode_batch(speech2text *s, const float *const *feats, const int *T, int n)
{
    backend *be = s->be;
    asr_model *m = &s->model;
    size_t M = (size_t)s->data.fo.n_mels;
    int Tmax = 0;
    for (int b = 0; b < n; b++) Tmax = T[b] > Tmax ? T[b] : Tmax;
    size_t nf = (size_t)n * Tmax * M;
    if (nf > s->dev_cap) {
        be->free(be, s->dev_feats);
        s->dev_feats = be->alloc(be, nf * sizeof(float));
        s->dev_cap = nf;
    }
    const float *src = feats[0];
    if (n > 1) { /* one host block, padded */
        if (nf > s->batch_cap) {
            s->batch_cap = nf;
            s->host_batch = xrealloc(s->host_batch, nf * sizeof *s->host_batch);
        }
        memset(s->host_batch, 0, nf * sizeof *s->host_batch);
        for (int b = 0; b < n; b++) memcpy(s->host_batch + (size_t)b * Tmax * M, feats[b], (size_t)T[b] * M * sizeof(float));
        src = s->host_batch;
    }
    be->copy(be, s->dev_feats, src, nf * sizeof(float), BACKEND_HOST_TO_DEVICE);
    asr_model_forward(m, s->dev_feats, T, n, Tmax, 0, 0);
    if (n > s->hl_cap) {
        s->hl_cap = n;
        s->hl = xrealloc(s->hl, (size_t)n * sizeof *s->hl);
    }
    memcpy(s->hl, m->hlens, (size_t)n * sizeof *s->hl); /* host */
    size_t nl = (size_t)n * m->T2 * (size_t)m->dims.vocab;
    if (nl + 1 > s->logp_cap) {
        s->logp_cap = nl + 1;
        s->host_logp = xrealloc(s->host_logp, s->logp_cap * sizeof *s->host_logp);
    }
    /* m->logp is device memory: wait for the forward, copy, and wait for the copy before the
     * search reads it (a no-op on the synchronous CPU backend). */
    be->synchronize(be);
    if (!m->dims.no_ctc) /* without a CTC branch (attention-only search) there are none */
        be->copy(be, s->host_logp, m->logp, nl * sizeof(float), BACKEND_DEVICE_TO_HOST);
    be->synchronize(be);
}

/* The log-probabilities of utterance b of the last batch (host, hl[b] rows). */
static const float *batch_logp(const speech2text *s, int b)
{
    return s->host_logp + (size_t)b * s->model.T2 * s->model.dims.vocab;
}

/* The encoder's log-probabilities of one utterance into s->host_logp; returns their frame count. */
static int encode(speech2text *s, const float *feats, int T)
{
    encode_batch(s, &feats, &T, 1);
    return s->hl[0];
}

/* One hypothesis: ids without blanks (ESPnet drops id 0 from token_int), text, score. */
static void set_hyp(const speech2text *s, s2t_hyp *h, const int *ids, int n, double score, int frames)
{
    h->ids = xmalloc(((size_t)n + 1) * sizeof *h->ids);
    h->n_ids = 0;
    for (int k = 0; k < n; k++)
        if (ids[k] != 0) h->ids[h->n_ids++] = ids[k];
    h->text = token_ids_to_text(&s->ec, h->ids, h->n_ids);
    h->score = score;
    h->frames = frames;
}

/* Room for the 2nd .. n-th best. */
static void alloc_alt(s2t_hyp *out, int n_found)
{
    out->n_found = n_found;
    if (n_found > 1) out->alt = xcalloc((size_t)n_found - 1, sizeof *out->alt);
}

static int nbest_of(const s2t_opts *o) { return o->nbest > 1 ? o->nbest : 1; }

/* The joint search over the last batch's n utterances at once (frames[b]: their feature frames). */
static void decode_joint(speech2text *s, int n, const int *frames, s2t_hyp *out)
{
    const s2t_opts *o = &s->opts;
    beam_search_opts bo = {.beam_size = o->beam_size > 1 ? o->beam_size : 1, .nbest = nbest_of(o),
                           .ctc_weight = o->ctc_weight, .lm_weight = o->lm_weight, .penalty = o->penalty,
                           .maxlenratio = o->maxlenratio, .minlenratio = o->minlenratio};
    bs_nbest *nb = xcalloc((size_t)n, sizeof *nb);
    bs_utt *u = xmalloc((size_t)n * sizeof *u);
    for (int b = 0; b < n; b++) u[b] = (bs_utt){.ctc_logp = s->model.dims.no_ctc ? NULL : batch_logp(s, b), .T = s->hl[b]};
    speech2text_new_utterance(s); /* m->lnf holds new utterances */
    beam_search_run_batch(s->bs, u, n, s->model.dims.vocab, &s->att, s->have_lm ? &s->lm_scorer : NULL, &bo, nb);
    for (int b = 0; b < n; b++) {
        alloc_alt(&out[b], nb[b].n);
        for (int k = 0; k < nb[b].n; k++)
            set_hyp(s, k == 0 ? &out[b] : &out[b].alt[k - 1], nb[b].hyps[k].ids, nb[b].hyps[k].n_ids,
                    nb[b].hyps[k].score, frames[b]);
        if (nb[b].n == 0) set_hyp(s, &out[b], NULL, 0, -INFINITY, frames[b]);
        bs_nbest_free(&nb[b]);
    }
    free(nb);
    free(u);
}

/* ESPnet's BeamSearchTransducer on utterance b's encoder output of the last batch (m->lnf: B x T2
 * x d, its first hl[b] frames), its n-best cut to nbest. */
static void decode_transducer(speech2text *s, int b, int frames, s2t_hyp *out)
{
    asr_model *m = &s->model;
    ts_result r;
    transducer_search(m, m->lnf + (size_t)b * m->T2 * m->dims.d, s->hl[b], s->opts.beam_size, &s->opts.transducer,
                      &r);
    int n = r.n < nbest_of(&s->opts) ? r.n : nbest_of(&s->opts);
    alloc_alt(out, n);
    for (int k = 0; k < n; k++)
        set_hyp(s, k == 0 ? out : &out->alt[k - 1], r.hyps[k].ids, r.hyps[k].n, r.hyps[k].score, frames);
    if (n == 0) set_hyp(s, out, NULL, 0, -INFINITY, frames);
    ts_result_free(&r);
}

static void decode_ctc(speech2text *s, const float *logp, int hlen, int frames, s2t_hyp *out)
{
    int V = s->model.dims.vocab, *ids = xmalloc(((size_t)hlen + 1) * sizeof *ids);
    if (s->opts.beam_size <= 1) {
        int n = ctc_greedy_decode(ids, logp, hlen, V);
        double best = 0.0;
        for (int t = 0; t < hlen; t++) {
            const float *row = logp + (size_t)t * V;
            float m = row[0];
            for (int c = 1; c < V; c++) m = row[c] > m ? row[c] : m;
            best += m;
        }
        alloc_alt(out, 1);
        set_hyp(s, out, ids, n, best, frames);
    } else {
        ctc_beam_opts bo = {.beam_size = s->opts.beam_size, .penalty = s->opts.penalty};
        double score;
        int n = ctc_prefix_beam_search(s->beam, logp, hlen, V, &bo, ids, &score), found = 1;
        set_hyp(s, out, ids, n, score, frames);
        int want = nbest_of(&s->opts);
        while (found < want && ctc_prefix_beam_nth(s->beam, found, &bo, ids, NULL) >= 0) found++;
        alloc_alt(out, found);
        for (int k = 1; k < found; k++) {
            n = ctc_prefix_beam_nth(s->beam, k, &bo, ids, &score);
            set_hyp(s, &out->alt[k - 1], ids, n, score, frames);
        }
    }
    free(ids);
}

/* Token times of h against hlen frames of log-probs (host_logp, and the same on the device in
 * s->dev_logp), frame 0 being encoder frame t0 of a waveform of `frames` feature frames. */
static double add_times_at(speech2text *s, const float *host_logp, int hlen, int t0, int frames, s2t_hyp *h)
{
    ctc_clock ck = ctc_clock_of(s->model.dims.input_layer, s->data.fo.hop_length, s->data.fo.fs, frames);
    ck.origin += t0 * ck.step;
    size_t n = h->n_ids + 1; /* never a zero-size allocation */
    h->tok_start = xmalloc(n * sizeof *h->tok_start);
    h->tok_end = xmalloc(n * sizeof *h->tok_end);
    h->tok_score = xmalloc(n * sizeof *h->tok_score);
    double best = ctc_token_times(s->be, s->dev_logp, host_logp, hlen, s->model.dims.vocab, h->ids, h->n_ids, &ck,
                                  h->tok_start, h->tok_end, h->tok_score);
    if (best == -INFINITY)
        log_warn("timestamps: no CTC path emits the %zu tokens of \"%s\" in %d frames (times left NaN)", h->n_ids,
                 h->text, hlen);
    return best;
}


/* hlen frames of log-probs (host) on the device for the alignment op. */
static void upload_logp(speech2text *s, const float *host_logp, int hlen)
{
    backend *be = s->be;
    size_t nl = (size_t)hlen * (size_t)s->model.dims.vocab;
    if (nl + 1 > s->dev_logp_cap) {
        be->free(be, s->dev_logp);
        s->dev_logp_cap = nl + 1;
        s->dev_logp = be->alloc(be, s->dev_logp_cap * sizeof(float));
    }
    be->copy(be, s->dev_logp, host_logp, nl * sizeof(float), BACKEND_HOST_TO_DEVICE);
}

static void add_all_times(speech2text *s, const float *logp, int hlen, int frames, s2t_hyp *out)
{
    upload_logp(s, logp, hlen);
    add_times_at(s, logp, hlen, 0, frames, out);
    for (int k = 0; k + 1 < out->n_found; k++) add_times_at(s, logp, hlen, 0, frames, &out->alt[k]);
}

/* One batch: the encoder over all, then the searches (the joint one over all at once). */
static void run_batch(speech2text *s, const float *const *feats, const int *T, int n, s2t_hyp *out)
{
    memset(out, 0, (size_t)n * sizeof *out);
    encode_batch(s, feats, T, n);
    /* With an LM even CTC alone runs label-synchronously, as ESPnet's search with scorers ctc and lm. */
    if (s->model.tr)
        for (int b = 0; b < n; b++) decode_transducer(s, b, T[b], &out[b]);
    else if (s->opts.ctc_weight < 1.0 || fusion_on(&s->opts)) decode_joint(s, n, T, out);
    else
        for (int b = 0; b < n; b++) decode_ctc(s, batch_logp(s, b), s->hl[b], T[b], &out[b]);
    if (s->opts.timestamps)
        for (int b = 0; b < n; b++) add_all_times(s, batch_logp(s, b), s->hl[b], T[b], &out[b]);
}

/* The forward's activations (the model's own allocation code, model_plan.h), the features, and the
 * joint search's decoder caches at full length (the source keys/values, two steps of
 * self-attention blocks for beam hypotheses per utterance, a step's rows). */
size_t speech2text_batch_bytes(const speech2text *s, int n, int Tmax)
{
    const model_dims *d = &s->model.dims;
    size_t T2 = (size_t)input_layer_out_len(d->input_layer, Tmax), floats = (size_t)n * Tmax * s->data.fo.n_mels;
    if (s->decoder && (s->opts.ctc_weight < 1.0 || fusion_on(&s->opts))) {
        size_t nl = (size_t)d->dec_blocks, D = (size_t)d->d, hyps = (size_t)n * (s->opts.beam_size > 1 ? s->opts.beam_size : 1);
        floats += 2 * nl * n * T2 * D + 4 * nl * hyps * (T2 + 10) * D + hyps * (8 * D + (size_t)d->dec_ff + d->vocab);
    }
    return model_infer_act_bytes(d, n, Tmax) + floats * sizeof(float);
}

/* Whether a batch fits in what the backend has left, counting the buffers an earlier batch holds
 * (a larger batch frees them as it grows them). */
static int batch_fits(speech2text *s, const int *T, int n, size_t *need)
{
    *need = 0;
    size_t avail = s->be->mem_available ? s->be->mem_available(s->be) : SIZE_MAX;
    if (avail == SIZE_MAX) return 1;
    int Tmax = 0;
    for (int b = 0; b < n; b++) Tmax = T[b] > Tmax ? T[b] : Tmax;
    *need = speech2text_batch_bytes(s, n, Tmax);
    return *need <= s->planned || *need - s->planned <= avail;
}

void speech2text_decode_feats_batch(speech2text *s, const float *const *feats, const int *T, int n, s2t_hyp *out)
{
    ESP_CHECK(n >= 1);
    size_t need = 0;
    if (n > 1 && !batch_fits(s, T, n, &need)) {
        /* What ESPnet3 does on CUDA's out of memory, before anything is allocated: halves. */
        log_info("speech2text: a batch of %d utterances plans %.1f MB, more than the %.1f MB the %s backend has "
                 "left: decoding it in halves", n, need / 1e6, s->be->mem_available(s->be) / 1e6, s->be->name);
        s->splits++;
        int h = n / 2;
        speech2text_decode_feats_batch(s, feats, T, h, out);
        speech2text_decode_feats_batch(s, feats + h, T + h, n - h, out + h);
        return;
    }
    run_batch(s, feats, T, n, out);
    if (need > s->planned) s->planned = need;
}

int speech2text_batch_splits(const speech2text *s) { return s->splits; }

void speech2text_decode_feats(speech2text *s, const float *feats, int T, s2t_hyp *out)
{
    speech2text_decode_feats_batch(s, &feats, &T, 1, out);
}

/* The waveform's normalized features into s->host_feats; returns their frame count, -1 with err
 * when the waveform is shorter than the STFT needs. */
static int featurize(speech2text *s, const float *wav, size_t n, esp_err *err)
{
    size_t min = frontend_min_samples(s->data.fe);
    if (n < min) return esp_fail(err, "%zu samples is shorter than the STFT needs (%zu)", n, min);
    size_t T = frontend_num_frames(s->data.fe, n), nf = T * (size_t)s->data.fo.n_mels;
    const model_dims *d = &s->model.dims;
    if (d->n_groups > 1 && model_encoder_frames(d, input_layer_out_len(d->input_layer, (int)T)) < 1)
        return esp_fail(err, "%zu samples is shorter than the encoder's conv1d blocks need (no frame is left "
                             "after their kernels)", n);
    if (nf > s->feats_cap) {
        s->feats_cap = nf;
        s->host_feats = xrealloc(s->host_feats, nf * sizeof *s->host_feats);
    }
    asr_data_featurize(&s->data, s->host_feats, wav, n);
    return (int)T;
}

/* streaming: the utterance chunk by chunk (inference()'s loop), its n-best cut to nbest. */
static int decode_streaming(speech2text *s, const float *wav, size_t n, s2t_hyp *out, esp_err *err)
{
    ts_result r;
    memset(out, 0, sizeof *out);
    if (ts_stream_utterance(s->stream, wav, n, &r, err) != 0) return -1;
    int k = r.n < nbest_of(&s->opts) ? r.n : nbest_of(&s->opts);
    alloc_alt(out, k);
    for (int i = 0; i < k; i++)
        set_hyp(s, i == 0 ? out : &out->alt[i - 1], r.hyps[i].ids, r.hyps[i].n, r.hyps[i].score, 0);
    if (k == 0) set_hyp(s, out, NULL, 0, -INFINITY, 0);
    ts_result_free(&r);
    return 0;
}

int speech2text_decode_wav(speech2text *s, const float *wav, size_t n, s2t_hyp *out, esp_err *err)
{
    if (s->stream) return decode_streaming(s, wav, n, out, err);
    int T = featurize(s, wav, n, err);
    if (T < 0) return -1;
    speech2text_decode_feats(s, s->host_feats, T, out);
    return 0;
}

int speech2text_decode_files(speech2text *s, const char *const *paths, int n, s2t_hyp *out, esp_err *err)
{
    return speech2text_decode_spans(s, paths, NULL, NULL, n, out, err);
}

int speech2text_decode_wavs(speech2text *s, const float *const *wavs, const size_t *ns, int n, s2t_hyp *out,
                            esp_err *err)
{
    if (s->stream) {
        memset(out, 0, (size_t)n * sizeof *out);
        for (int i = 0; i < n; i++)
            if (decode_streaming(s, wavs[i], ns[i], &out[i], err) != 0) return -1;
        return 0;
    }
    float **feats = xcalloc((size_t)n + 1, sizeof *feats);
    int *T = xmalloc(((size_t)n + 1) * sizeof *T), rc = 0;
    size_t M = (size_t)s->data.fo.n_mels;
    for (int i = 0; i < n && rc == 0; i++) {
        if ((T[i] = featurize(s, wavs[i], ns[i], err)) < 0) {
            rc = -1;
            break;
        }
        feats[i] = xmalloc((size_t)T[i] * M * sizeof **feats);
        memcpy(feats[i], s->host_feats, (size_t)T[i] * M * sizeof **feats);
    }
    if (rc == 0 && n > 0) speech2text_decode_feats_batch(s, (const float *const *)feats, T, n, out);
    else if (rc != 0) memset(out, 0, (size_t)n * sizeof *out); /* nothing left in out */
    for (int i = 0; i < n; i++) free(feats[i]);
    free(feats);
    free(T);
    return rc;
}

int speech2text_decode_spans(speech2text *s, const char *const *paths, const double *starts, const double *ends, int n,
                             s2t_hyp *out, esp_err *err)
{
    float **wavs = xcalloc((size_t)n + 1, sizeof *wavs);
    size_t *ns = xcalloc((size_t)n + 1, sizeof *ns);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        rc = asr_data_read_span(&s->data, paths[i], starts ? starts[i] : 0, ends ? ends[i] : 0, &wavs[i], &ns[i], err);
    if (rc == 0) rc = speech2text_decode_wavs(s, (const float *const *)wavs, ns, n, out, err);
    else memset(out, 0, (size_t)n * sizeof *out);
    for (int i = 0; i < n; i++) free(wavs[i]);
    free(wavs);
    free(ns);
    return rc;
}

int speech2text_align_wav(speech2text *s, const float *wav, size_t n, const int *ids, size_t n_ids, s2t_hyp *out,
                          esp_err *err)
{
    memset(out, 0, sizeof *out);
    if (s->model.dims.no_ctc)
        return esp_fail(err, "align: the model has no CTC branch (trained with model_conf.ctc_weight 0)");
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] <= 0 || ids[i] >= s->model.dims.vocab - 1)
            return esp_fail(err, "align: token id %d is not a token the model emits (1 .. %d)", ids[i],
                            s->model.dims.vocab - 2);
    int T = featurize(s, wav, n, err);
    if (T < 0) return -1;
    int hlen = encode(s, s->host_feats, T);
    alloc_alt(out, 1);
    set_hyp(s, out, ids, (int)n_ids, 0.0, T);
    upload_logp(s, s->host_logp, hlen);
    out->score = add_times_at(s, s->host_logp, hlen, 0, T, out);
    return 0;
}

int speech2text_align_file(speech2text *s, const char *path, const int *ids, size_t n_ids, s2t_hyp *out, esp_err *err)
{
    float *wav = NULL;
    size_t ns;
    int rc = asr_data_read_span(&s->data, path, 0, 0, &wav, &ns, err);
    if (rc == 0) rc = speech2text_align_wav(s, wav, ns, ids, n_ids, out, err);
    free(wav);
    return rc;
}

int speech2text_ctc_logp(speech2text *s, const float *wav, size_t n, double window_s, float **logp, int *T,
                         int *frames, esp_err *err)
{
    *logp = NULL;
    if (s->model.dims.no_ctc)
        return esp_fail(err, "align: the model has no CTC branch (trained with model_conf.ctc_weight 0)");
    const int V = s->model.dims.vocab, hop = s->data.fo.hop_length, kind = s->model.dims.input_layer;
    input_conv c[3];
    size_t unit = (size_t)hop; /* samples per encoder frame: the hop times the convolutions' strides */
    for (int i = 0, nc = input_layer_convs(kind, c); i < nc; i++) unit *= (size_t)c[i].s;
    size_t win = (size_t)(window_s * s->data.fo.fs) / (4 * unit) * (4 * unit), quarter = win / 4;
    if (win < 4 * unit) return esp_fail(err, "align: a window of %g s is shorter than 4 encoder frames", window_s);
    int F = (int)frontend_num_frames(s->data.fe, n), total = input_layer_out_len(kind, F);
    float *out = xmalloc(((size_t)total + 1) * (size_t)V * sizeof *out);
    int filled = 0;
    size_t n_windows = n > win ? (n - win + 2 * quarter - 1) / (2 * quarter) + 1 : 1, done = 0;
    progress pr;
    if (n_windows > 1) progress_start(&pr, "align: log-probs", n_windows);
    for (size_t a = 0;; a += 2 * quarter) {
        int last = a + win >= n;
        size_t len = last ? n - a : win;
        int Tw = featurize(s, wav + a, len, err);
        if (Tw < 0) {
            if (n_windows > 1) progress_finish(&pr);
            free(out);
            return -1;
        }
        int hw = encode(s, s->host_feats, Tw), g0 = (int)(a / unit);
        int hi = last ? hw : hw - (int)(quarter / unit), j = filled - g0;
        /* the frames a window keeps start where the last one's stop (its quarter of context, or
         * one frame less where the input layer's edge gives a window a frame more) */
        ESP_CHECK(j >= 0 && (a == 0 || j >= (int)(quarter / unit) - 1));
        for (; j < hi && g0 + j < total; j++) {
            memcpy(out + (size_t)(g0 + j) * V, s->host_logp + (size_t)j * V, (size_t)V * sizeof *out);
            filled++;
        }
        if (n_windows > 1) progress_update(&pr, ++done);
        if (last) break;
    }
    if (n_windows > 1) progress_finish(&pr);
    ESP_CHECK(filled == total);
    *logp = out;
    *T = total;
    *frames = F;
    return 0;
}

void speech2text_align_frames(speech2text *s, const float *logp, int t0, int t1, int frames, const int *ids,
                              size_t n_ids, s2t_hyp *out)
{
    memset(out, 0, sizeof *out);
    const float *seg = logp + (size_t)t0 * s->model.dims.vocab;
    alloc_alt(out, 1);
    set_hyp(s, out, ids, (int)n_ids, 0.0, frames);
    upload_logp(s, seg, t1 - t0);
    out->score = add_times_at(s, seg, t1 - t0, t0, frames, out);
}
