/* Speech2TextStreaming (see speech2text_stream.h): apply_frontend's waveform buffering and
 * trimming, the encoder online, the CTC head on its new frames, the blockwise search. */
#include "core/decode/speech2text_stream.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/asr_data.h"
#include "core/config/config_values.h"
#include "core/decode/beam_search_online.h"
#include "core/decode/transducer_stream.h"
#include "core/nn/decoder_transformer.h"
#include "core/nn/encoder_stream.h"
#include "core/nn/model.h"

struct s2t_stream {
    const speech2text *s2t;
    asr_model *m;
    asr_data *data;
    enc_stream *enc;
    bs_online *search;
    bs_scorer att;
    int win, hop, pad, keep_hops, sub, D, V, idim;
    /* The utterance: the waveform buffered (ESPnet's waveform_buffer; has_prev: its
     * prev_states is set), the encoder output so far (device, T x D) and its CTC log-probs (host). */
    float *wbuf;
    size_t nw, cap_w, samples;
    int has_prev;
    float *enc_dev, *ctc_dev;
    size_t cap_enc, cap_ctc; /* frames */
    float *logp;
    size_t cap_logp;
    int T, h_T;              /* frames; the frames the current block's decoder sees */
    float *feats;
    size_t cap_feats;
    char *text, *running;
    ts_stream *ts; /* an asr_transducer model: its chunk-by-chunk decoding instead of all the above */
};

/* The decoder over the current block's frames (ESPnet's score_full on x = h). */
static void att_score(void *ctx, const int *const *prefixes, const int *lens, int n, float *logp)
{
    s2t_stream *s = ctx;
    decoder_score_batch(s->m, s->enc_dev, s->h_T, prefixes, lens, n, logp);
}

static void on_block(void *ctx, int T, int first)
{
    s2t_stream *s = ctx;
    s->h_T = T;
    if (first) speech2text_new_utterance(s->s2t);
    else decoder_score_source_grew(s->m);
}

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* An asr_transducer model's stream: the inference config's decoding_window and left_context (their
 * defaults for options that did not come from one). */
static s2t_stream *open_transducer(const speech2text *s2t, esp_err *err)
{
    const s2t_opts *o = speech2text_options(s2t);
    int window = o->decoding_window, left = o->left_context;
    if (window == 0)
        window = atoi(config_default_value("model.decoding_window")), left = atoi(config_default_value("model.left_context"));
    ts_stream *ts = ts_stream_open(s2t, window, left, err);
    if (!ts) return NULL;
    s2t_stream *s = xcalloc(1, sizeof *s);
    s->s2t = s2t, s->m = speech2text_model(s2t), s->ts = ts;
    return s;
}

/* A push to the transducer stream: its best running hypothesis, the final one at is_final. */
static int push_transducer(s2t_stream *s, const float *pcm, size_t n, int is_final, s2t_partial *out, esp_err *err)
{
    const char *text;
    int fs = speech2text_fs(s->s2t), pieces = ts_stream_push(s->ts, pcm, n, is_final, &text, err);
    s->samples += n;
    if (pieces < 0) {
        s2t_stream_reset(s);
        return -1;
    }
    s->T += pieces; /* the pieces decoded in this utterance */
    double done = (double)s->T * (double)ts_stream_window(s->ts) / fs; /* the windows' samples, at the model's rate */
    *out = (s2t_partial){.text = is_final ? text : "", .running = is_final ? "" : text,
                         .audio_s = (double)s->samples / fs, .is_final = is_final};
    out->decoded_s = is_final ? out->audio_s : done;
    if (is_final) s->T = 0, s->samples = 0;
    return pieces;
}

s2t_stream *s2t_stream_open(const speech2text *s2t, esp_err *err)
{
    asr_model *m = speech2text_model(s2t);
    if (m->dims.body) return open_transducer(s2t, err);
    enc_stream *enc = enc_stream_open(m, err);
    if (!enc) return NULL;
    s2t_stream *s = xcalloc(1, sizeof *s);
    s->s2t = s2t, s->m = m, s->data = speech2text_data(s2t), s->enc = enc;
    const frontend_opts *fo = speech2text_frontend(s2t);
    const s2t_opts *o = speech2text_options(s2t);
    s->win = fo->win_length > 0 ? fo->win_length : fo->n_fft, s->hop = fo->hop_length;
    s->pad = ceil_div(ceil_div(s->win, s->hop), 2);
    s->keep_hops = 2 * s->pad - 1;
    s->sub = input_layer_subsampling(m->dims.input_layer), s->D = m->dims.d, s->V = m->dims.vocab, s->idim = fo->n_mels;
    beam_search_opts bo = {.beam_size = o->beam_size > 1 ? o->beam_size : 1, .nbest = 1, .ctc_weight = o->ctc_weight,
                           .lm_weight = o->lm_weight, .penalty = o->penalty, .maxlenratio = o->maxlenratio,
                           .minlenratio = o->minlenratio};
    s->att = (bs_scorer){.score = att_score, .ctx = s};
    bs_online_io io = {.att = m->dec ? &s->att : NULL, .lm = speech2text_lm_scorer(s2t), .source = on_block, .ctx = s};
    s->search = bs_online_new(&io, &bo, s->V);
    s->text = xcalloc(1, 1), s->running = xcalloc(1, 1);
    return s;
}

void s2t_stream_set_repetition_check(s2t_stream *s, int on)
{
    if (s->search) bs_online_set_repetition_check(s->search, on);
}

void s2t_stream_reset(s2t_stream *s)
{
    if (s->ts) {
        ts_stream_reset(s->ts);
        s->samples = 0, s->T = 0;
        return;
    }
    s->nw = s->samples = 0;
    s->has_prev = 0;
    s->T = s->h_T = 0;
    enc_stream_reset(s->enc);
    bs_online_reset(s->search);
}

void s2t_stream_close(s2t_stream *s)
{
    if (!s) return;
    backend *be = s->m->be;
    ts_stream_close(s->ts);
    enc_stream_close(s->enc);
    bs_online_free(s->search);
    be->free(be, s->enc_dev), be->free(be, s->ctc_dev);
    free(s->wbuf), free(s->logp), free(s->feats), free(s->text), free(s->running);
    free(s);
}

static void grow_dev(backend *be, float **p, size_t *cap, size_t rows, size_t width, size_t keep_rows)
{
    if (rows <= *cap) return;
    size_t n = rows > 2 * *cap ? rows : 2 * *cap;
    float *q = be->alloc(be, n * width * sizeof(float) + 64);
    if (keep_rows) be->copy(be, q, *p, keep_rows * width * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    be->free(be, *p);
    *p = q, *cap = n;
}

/* Appends n encoder output frames (device) and their CTC log-probs. */
static void append_frames(s2t_stream *s, const float *y, int n)
{
    if (n <= 0) return;
    backend *be = s->m->be;
    size_t D = (size_t)s->D, V = (size_t)s->V;
    grow_dev(be, &s->enc_dev, &s->cap_enc, (size_t)(s->T + n), D, (size_t)s->T);
    be->copy(be, s->enc_dev + (size_t)s->T * D, y, (size_t)n * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    if (!s->m->dims.no_ctc) {
        grow_dev(be, &s->ctc_dev, &s->cap_ctc, (size_t)n, V, 0);
        be->linear_forward(be, s->ctc_dev, y, s->m->w.ctc_lo.weight, s->m->w.ctc_lo.bias, n, s->D, s->V);
        be->log_softmax_forward(be, s->ctc_dev, s->ctc_dev, n, s->V);
        if ((size_t)(s->T + n) * V > s->cap_logp) {
            s->cap_logp = 2 * (size_t)(s->T + n) * V;
            s->logp = xrealloc(s->logp, s->cap_logp * sizeof *s->logp);
        }
        be->synchronize(be);
        be->copy(be, s->logp + (size_t)s->T * V, s->ctc_dev, (size_t)n * V * sizeof(float), BACKEND_DEVICE_TO_HOST);
        be->synchronize(be);
    }
    s->T += n;
}

/* apply_frontend: the features of this push into s->feats (*nf frames); 0 when it only buffered. */
static int frontend_push(s2t_stream *s, const float *pcm, size_t n, int is_final, int *nf, esp_err *err)
{
    *nf = 0;
    size_t need = s->nw + n + (size_t)s->win;
    if (need > s->cap_w) {
        s->cap_w = need > 2 * s->cap_w ? need : 2 * s->cap_w;
        s->wbuf = xrealloc(s->wbuf, s->cap_w * sizeof *s->wbuf);
    }
    if (n) memcpy(s->wbuf + s->nw, pcm, n * sizeof *pcm);
    s->nw += n;
    size_t L = s->nw, use = L, keep = 0, win = (size_t)s->win, hop = (size_t)s->hop;
    if (L <= win) {
        if (!is_final) {
            s->has_prev = 1;
            return 0;
        }
        memset(s->wbuf + L, 0, (win - L) * sizeof *s->wbuf);
        L = use = win;
    }
    if (!is_final) use = L / hop * hop, keep = (size_t)s->keep_hops * hop + L % hop;
    if (use < speech2text_min_samples(s->s2t))
        return esp_fail(err, "%zu samples is shorter than the STFT needs (%zu)", use,
                        speech2text_min_samples(s->s2t));
    size_t F = use / hop + 1;
    if (F * (size_t)s->idim > s->cap_feats) {
        s->cap_feats = F * (size_t)s->idim;
        s->feats = xrealloc(s->feats, s->cap_feats * sizeof *s->feats);
    }
    asr_data_featurize(s->data, s->feats, s->wbuf, use);
    int first = s->has_prev ? s->pad : 0, last = is_final ? 0 : s->pad, count = (int)F - first - last;
    if (count < 0) count = 0;
    memmove(s->feats, s->feats + (size_t)first * s->idim, (size_t)count * s->idim * sizeof *s->feats);
    memmove(s->wbuf, s->wbuf + (L - keep), keep * sizeof *s->wbuf);
    s->nw = keep;
    s->has_prev = !is_final;
    *nf = count;
    return 1;
}

static void set_text(char **dst, char *text)
{
    free(*dst);
    *dst = text;
}

int s2t_stream_push(s2t_stream *s, const float *pcm, size_t n, int is_final, s2t_partial *out, esp_err *err)
{
    if (s->ts) return push_transducer(s, pcm, n, is_final, out, err);
    s->samples += n;
    const frontend_opts *fo = speech2text_frontend(s->s2t);
    *out = (s2t_partial){.audio_s = (double)s->samples / fo->fs, .is_final = is_final};
    int nf, blocks = 0;
    int rc = frontend_push(s, pcm, n, is_final, &nf, err);
    if (rc < 0) {
        s2t_stream_reset(s);
        return -1;
    }
    bs_nbest nb = {0};
    if (rc > 0) {
        const float *y;
        int ny = enc_stream_push(s->enc, s->feats, nf, is_final, &y);
        append_frames(s, y, ny);
        out->frames = bs_online_frames(s->search);
        blocks = bs_online_push(s->search, s->m->dims.no_ctc ? NULL : s->logp, s->T, is_final, &nb);
        if (!is_final) out->frames = bs_online_frames(s->search);
        else out->frames = s->T;
    } else {
        out->frames = bs_online_frames(s->search);
    }
    set_text(&s->text, nb.n > 0 ? speech2text_text(s->s2t, nb.hyps[0].ids, (size_t)nb.hyps[0].n_ids) : xcalloc(1, 1));
    bs_nbest_free(&nb);
    const int *ids;
    int nr = is_final ? 0 : bs_online_running(s->search, &ids);
    set_text(&s->running, nr > 0 ? speech2text_text(s->s2t, ids, (size_t)nr) : xcalloc(1, 1));
    out->text = s->text, out->running = s->running;
    out->decoded_s = (double)out->frames * s->sub * s->hop / fo->fs;
    if (is_final) s2t_stream_reset(s);
    return blocks;
}
