/* Long-form decoding: block reading, windows, and each window's words handed to the merge. See
 * longform.h. */
#include "core/decode/longform.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/base/progress.h"
#include "core/data/audio_stream.h"
#include "core/decode/longform_merge.h"
#include "core/decode/words.h"

int longform_check(const speech2text *s, const longform_opts *o, esp_err *err)
{
    const frontend_opts *fo = speech2text_frontend(s);
    double min = (double)speech2text_min_samples(s) / fo->fs;
    if (!(o->window > 0 && o->window <= 3600))
        return esp_fail(err, "longform window %g s: use a length in (0, 3600] seconds", o->window);
    if (!(o->overlap >= min && o->overlap <= o->window / 2))
        return esp_fail(err, "longform overlap %g s: use a length from %g s (the shortest waveform the frontend "
                        "takes) to half the window (%g s)", o->overlap, min, o->window / 2);
    return 0;
}

/* Window hyp's tokens and words on the recording's axis (t0: the window's start there), with each
 * token's word found by time: a token inside a word's span is that word's, one between words is a
 * separator. That is words.h's grouping: a word is a run of consecutive tokens spanning its first
 * one's start to its last one's end, and ctc_times.h's token spans are the frames each token's
 * state holds on one Viterbi path, so they are in order and do not overlap (at most they touch). */
static int make_piece(speech2text *s, const s2t_hyp *h, double t0, double t1, lf_piece *p, esp_err *err)
{
    s2t_word *w;
    size_t nw;
    if (h->n_ids > 0 && isnan(h->tok_start[0])) /* only a search without CTC (ctc_weight 0) finds such a one */
        return esp_fail(err, "window %.2f-%.2f s: no CTC path emits its hypothesis, so its words have no times to "
                        "merge by (decode long recordings with ctc_weight above 0)", t0, t1);
    if (s2t_hyp_words(s, h, &w, &nw, err) != 0) return -1;
    size_t n = h->n_ids;
    *p = (lf_piece){.n = n, .n_words = nw, .t0 = t0, .t1 = t1, .hyp_score = h->score};
    p->ids = xmalloc((n + 1) * sizeof *p->ids);
    p->start = xmalloc((n + 1) * sizeof *p->start);
    p->end = xmalloc((n + 1) * sizeof *p->end);
    p->score = xmalloc((n + 1) * sizeof *p->score);
    p->word = xmalloc((n + 1) * sizeof *p->word);
    p->wstart = xmalloc((nw + 1) * sizeof *p->wstart);
    p->wend = xmalloc((nw + 1) * sizeof *p->wend);
    for (size_t j = 0; j < nw; j++) p->wstart[j] = t0 + w[j].start, p->wend[j] = t0 + w[j].end;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < nw && w[j].end <= h->tok_start[i]) j++;
        int in = j < nw && h->tok_start[i] >= w[j].start && h->tok_end[i] <= w[j].end;
        p->ids[i] = h->ids[i];
        p->start[i] = t0 + h->tok_start[i], p->end[i] = t0 + h->tok_end[i], p->score[i] = h->tok_score[i];
        p->word[i] = in ? (int)j : -1;
    }
    s2t_words_free(w, nw);
    return 0;
}

/* Decodes buf[0 .. len) as the window starting at t0 seconds and hands it to the merge. Errors
 * name the audio. */
static int decode_window(speech2text *s, const char *path, const float *buf, size_t len, double t0, lf_merge *m,
                         esp_err *err)
{
    double t1 = t0 + (double)len / speech2text_frontend(s)->fs;
    s2t_hyp h;
    lf_piece p;
    esp_err why;
    if (speech2text_decode_wav(s, buf, len, &h, &why) != 0) return esp_fail(err, "%s: %s", path, why.msg);
    int rc = make_piece(s, &h, t0, t1, &p, &why);
    s2t_hyp_free(&h);
    if (rc != 0) return esp_fail(err, "%s: %s", path, why.msg);
    lf_merge_add(m, &p);
    return 0;
}

/* The merged hypothesis as out (the merge's arrays move into it). */
static void take_merge(speech2text *s, lf_merge *m, size_t samples, s2t_hyp *out)
{
    memset(out, 0, sizeof *out);
    out->n_ids = m->n;
    out->ids = m->ids ? m->ids : xmalloc(sizeof *out->ids);
    out->tok_start = m->start ? m->start : xmalloc(sizeof *out->tok_start);
    out->tok_end = m->end ? m->end : xmalloc(sizeof *out->tok_end);
    out->tok_score = m->score ? m->score : xmalloc(sizeof *out->tok_score);
    out->text = ids_to_text(speech2text_tokens(s), out->ids, out->n_ids);
    out->score = m->hyp_score;
    out->frames = (int)(samples / (size_t)speech2text_frontend(s)->hop_length + 1);
    out->n_found = 1;
    m->ids = NULL, m->start = m->end = m->score = NULL;
}

int longform_decode_stream(speech2text *s, audio_stream *st, const char *name, const longform_opts *o, s2t_hyp *out,
                           double *seconds, esp_err *err)
{
    ESP_CHECK(speech2text_options(s)->timestamps); /* the merge goes by the tokens' times */
    memset(out, 0, sizeof *out);
    *seconds = 0;
    if (longform_check(s, o, err) != 0) return -1;
    const frontend_opts *fo = speech2text_frontend(s);
    size_t wn = (size_t)llround(o->window * fo->fs), on = (size_t)llround(o->overlap * fo->fs), hop = wn - on;
    speech2text_reserve(s, wn); /* the windows' peak memory from the first on */
    double secs = audio_stream_seconds(st);
    float *buf = xmalloc((wn + hop) * sizeof *buf); /* a window and the next hop's samples */
    lf_merge m = {0};
    progress pr;
    size_t n_win = 1, k = 0; /* for the progress line: 0 when the header does not say the length */
    if (!isfinite(secs)) n_win = 0;
    else if (secs * fo->fs > (double)wn) n_win = (size_t)ceil((secs * fo->fs - (double)on) / (double)hop);
    if (o->progress) progress_start(&pr, o->progress, n_win);
    long got = audio_stream_read(st, buf, wn, err);
    size_t len = got > 0 ? (size_t)got : 0, total = len, start = 0;
    int rc = got < 0 ? -1 : got == 0 ? esp_fail(err, "%s: no audio samples (an empty recording)", name) : 0;
    while (rc == 0) {
        if ((rc = decode_window(s, name, buf, len, (double)start / fo->fs, &m, err)) != 0) break;
        k++;
        if (o->progress) progress_update(&pr, k < n_win || !n_win ? k : n_win);
        if (len < wn) break; /* the recording is one window, shorter than the others would be */
        /* The next window starts a hop later, or, when less than a hop is left, ends with the
         * recording (overlapping this one more): every window has the same length, so the same
         * features, activations and convolution tiling, and the same memory. */
        if ((got = audio_stream_read(st, buf + wn, hop, err)) <= 0) {
            rc = got < 0 ? -1 : 0;
            break; /* this window ended with the audio */
        }
        memmove(buf, buf + got, wn * sizeof *buf);
        start += (size_t)got, total += (size_t)got;
    }
    if (o->progress) progress_finish(&pr);
    free(buf);
    if (rc == 0) {
        lf_merge_finish(&m);
        take_merge(s, &m, total, out);
        *seconds = (double)total / fo->fs;
    }
    lf_merge_free(&m);
    return rc;
}

int longform_decode(speech2text *s, const char *path, double start, double end, const longform_opts *o, s2t_hyp *out,
                    esp_err *err)
{
    memset(out, 0, sizeof *out);
    const frontend_opts *fo = speech2text_frontend(s);
    audio_stream *st = audio_stream_open(path, fo->fs, "model.frontend_conf.fs", speech2text_options(s)->resample,
                                         start, end, err);
    if (!st) return -1;
    double secs;
    int rc = longform_decode_stream(s, st, path, o, out, &secs, err);
    audio_stream_close(st);
    return rc;
}
