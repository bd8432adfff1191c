/* Speech2Text.streaming_decode of the asr_transducer task (see transducer_stream.h): the pushes cut
 * into decoding windows, OnlineAudioProcessor's sample and feature buffering, the encoder's chunks
 * and the search carried between them. */
#include "core/decode/transducer_stream.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/asr_data.h"
#include "core/nn/encoder_chunk.h"
#include "core/nn/model.h"
#include "core/nn/model_params.h"

struct ts_stream {
    const speech2text *s2t;
    asr_model *m;
    enc_chunk *enc;
    int hop, win_hop, trim, offset, idim, beam;
    ts_opts opts;
    size_t window; /* decoding_samples */
    /* OnlineAudioProcessor: the samples kept (wbuf, nw) and the last offset feature frames (kf) */
    float *wbuf;
    size_t nw, cap_w;
    float *feats, *kept;
    size_t cap_feats;
    int nkept, started;
    ts_result carry; /* the search's hypotheses between pieces */
    /* ts_stream_push: the samples not yet a whole window, and the text after the last push */
    float *pend;
    size_t np, cap_p;
    char *text;
};

ts_stream *ts_stream_open(const speech2text *s2t, int decoding_window_ms, int left_context, esp_err *err)
{
    const s2t_opts *o = speech2text_options(s2t);
    if (decoding_window_ms < 1 || left_context < 0) {
        esp_fail(err, "decoding_window %d and left_context %d: streaming needs a window of at least 1 ms and a "
                      "left context of 0 or more frames", decoding_window_ms, left_context);
        return NULL;
    }
    if (o->transducer.search_type == TS_ALSD) {
        esp_fail(err, "the alsd search is not available in streaming decoding (ESPnet2's BeamSearchTransducer "
                      "asserts it; use default, tsd or maes)");
        return NULL;
    }
    asr_model *m = speech2text_model(s2t);
    enc_chunk *enc = enc_chunk_open(m, left_context, err);
    if (!enc) return NULL;
    const frontend_opts *fo = speech2text_frontend(s2t);
    ts_stream *s = xcalloc(1, sizeof *s);
    s->s2t = s2t, s->m = m, s->enc = enc;
    s->hop = fo->hop_length;
    s->win_hop = fo->n_fft - fo->hop_length; /* win_sz: frontend_conf's "win_sz", never a DefaultFrontend key: n_fft */
    int frames = (fo->n_fft + s->hop - 1) / s->hop;
    s->trim = (frames + 1) / 2;
    s->offset = 2 * input_layer_subsampling(m->dims.input_layer) + 3; /* offset_frames */
    s->idim = fo->n_mels;
    s->window = (size_t)decoding_window_ms * 16; /* round(decoding_window * 16000 / 1000) */
    s->beam = o->beam_size, s->opts = o->transducer;
    s->kept = xmalloc((size_t)s->offset * s->idim * sizeof *s->kept);
    s->text = xcalloc(1, 1);
    return s;
}

size_t ts_stream_window(const ts_stream *s) { return s->window; }

void ts_stream_reset(ts_stream *s)
{
    s->nw = s->np = 0;
    s->nkept = s->started = 0;
    ts_result_free(&s->carry);
    enc_chunk_reset(s->enc);
}

void ts_stream_close(ts_stream *s)
{
    if (!s) return;
    enc_chunk_close(s->enc);
    ts_result_free(&s->carry);
    free(s->wbuf), free(s->feats), free(s->kept), free(s->pend), free(s->text);
    free(s);
}

static void grow(float **p, size_t *cap, size_t n)
{
    if (n <= *cap) return;
    *cap = n > 2 * *cap ? n : 2 * *cap;
    *p = xrealloc(*p, *cap * sizeof **p);
}

/* compute_features: this piece's feature frames into s->feats (returns their count). */
static int features(ts_stream *s, const float *pcm, size_t n, int is_final, esp_err *err)
{
    grow(&s->wbuf, &s->cap_w, s->nw + n + s->window);
    if (n) memcpy(s->wbuf + s->nw, pcm, n * sizeof *pcm);
    size_t S = s->nw + n, use = S, hop = (size_t)s->hop, wh = (size_t)s->win_hop;
    if (is_final) {
        if (S < s->window) memset(s->wbuf + S, 0, (s->window - S) * sizeof *s->wbuf), use = s->window;
    } else {
        if (S < wh)
            return esp_fail(err, "a streaming piece of %zu samples (with those kept) is shorter than n_fft - "
                                 "hop_length (%zu)", S, wh);
        use = wh + (S - wh) / hop * hop;
    }
    if (use < speech2text_min_samples(s->s2t))
        return esp_fail(err, "%zu samples is shorter than the STFT needs (%zu)", use, speech2text_min_samples(s->s2t));
    int F = (int)(use / hop) + 1, first = 0, last = s->trim;
    if (s->started) first = s->trim, last = is_final ? 0 : s->trim;
    int count = F - first - last;
    if (count < 0) count = 0;
    size_t idim = (size_t)s->idim;
    grow(&s->feats, &s->cap_feats, ((size_t)F + (size_t)s->nkept) * idim);
    asr_data_featurize(speech2text_data(s->s2t), s->feats + (size_t)s->nkept * idim, s->wbuf, use);
    memmove(s->feats + (size_t)s->nkept * idim, s->feats + ((size_t)s->nkept + first) * idim,
            (size_t)count * idim * sizeof *s->feats);
    if (s->nkept) memcpy(s->feats, s->kept, (size_t)s->nkept * idim * sizeof *s->feats);
    int total = s->nkept + count;
    /* waveform_buffer: from the first sample of the hop after the last whole frame */
    size_t keep = is_final ? 0 : S - (use - wh);
    memmove(s->wbuf, s->wbuf + (S - keep), keep * sizeof *s->wbuf);
    s->nw = keep;
    s->nkept = total < s->offset ? total : s->offset;
    memcpy(s->kept, s->feats + (size_t)(total - s->nkept) * idim, (size_t)s->nkept * idim * sizeof *s->kept);
    s->started = 1;
    return total;
}

int ts_stream_decode(ts_stream *s, const float *pcm, size_t n, int is_final, ts_result *out, esp_err *err)
{
    int T = features(s, pcm, n, is_final, err);
    if (T < 0) {
        ts_stream_reset(s);
        return -1;
    }
    const float *enc = NULL;
    int frames = T > 0 ? enc_chunk_forward(s->enc, s->feats, T, &enc) : 0;
    transducer_search_chunk(s->m, enc, frames, s->beam, &s->opts, &s->carry, is_final, out);
    if (is_final) ts_stream_reset(s);
    return 0;
}

int ts_stream_utterance(ts_stream *s, const float *wav, size_t n, ts_result *out, esp_err *err)
{
    ts_stream_reset(s);
    size_t at = 0;
    for (; n - at >= s->window; at += s->window) {
        if (ts_stream_decode(s, wav + at, s->window, 0, out, err) < 0) return -1;
        ts_result_free(out);
    }
    return ts_stream_decode(s, wav + at, n - at, 1, out, err);
}

/* The text of the best of r (the first highest score, as Python's max). */
static void set_best(ts_stream *s, const ts_result *r)
{
    free(s->text);
    int b = 0;
    for (int i = 1; i < r->n; i++) b = r->hyps[i].score > r->hyps[b].score ? i : b;
    s->text = r->n ? speech2text_text(s->s2t, r->hyps[b].ids, (size_t)r->hyps[b].n) : xcalloc(1, 1);
}

int ts_stream_push(ts_stream *s, const float *pcm, size_t n, int is_final, const char **text, esp_err *err)
{
    grow(&s->pend, &s->cap_p, s->np + n + 1);
    if (n) memcpy(s->pend + s->np, pcm, n * sizeof *pcm);
    s->np += n;
    int pieces = 0;
    size_t at = 0;
    /* every whole window not final, then the rest (maybe nothing) final: inference()'s loop */
    while (s->np - at >= s->window) {
        ts_result r;
        if (ts_stream_decode(s, s->pend + at, s->window, 0, &r, err) < 0) return -1;
        set_best(s, &r);
        ts_result_free(&r);
        at += s->window, pieces++;
    }
    if (is_final) {
        ts_result r;
        if (ts_stream_decode(s, s->pend + at, s->np - at, 1, &r, err) < 0) return -1;
        set_best(s, &r);
        ts_result_free(&r);
        at = s->np, pieces++;
    }
    memmove(s->pend, s->pend + at, (s->np - at) * sizeof *s->pend);
    s->np -= at;
    *text = s->text;
    return pieces;
}
