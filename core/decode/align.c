/* Aligning a transcript to a recording; see align.h. */
#include "core/decode/align.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The text's token ids without <unk> (ESPnet's tokenize converter filters them). */
static int text_ids(const token_list *tl, const char *text, int **ids, size_t *n, size_t *n_unk, esp_err *err)
{
    long *raw;
    size_t m;
    if (text_to_ids(tl, text, &raw, &m, n_unk, err) != 0) return -1;
    long unk = token_list_find(tl, TOKEN_UNK);
    *ids = xmalloc((m + 1) * sizeof **ids);
    *n = 0;
    for (size_t i = 0; i < m; i++)
        if (raw[i] != unk) (*ids)[(*n)++] = (int)raw[i];
    free(raw);
    return 0;
}

/* The words of segment r: its tokens force-aligned within its frames (a frame of margin each side). */
static void segment_words(speech2text *s, const float *logp, int T, int frames, double index_duration,
                          const int *ids, size_t n_ids, align_result *r)
{
    int t0 = (int)floor(r->seg.start / index_duration) - 1, t1 = (int)ceil(r->seg.end / index_duration) + 1;
    t0 = t0 < 0 ? 0 : t0 > T ? T : t0;
    t1 = t1 > T ? T : t1 < t0 ? t0 : t1;
    s2t_hyp h;
    speech2text_align_frames(s, logp, t0, t1, frames, ids, n_ids, &h);
    esp_err err;
    if (s2t_hyp_words(s, &h, &r->words, &r->n_words, &err) != 0) esp_die("align: %s", err.msg); /* h is timed */
    s2t_hyp_free(&h);
}

int align_recording(speech2text *s, const float *wav, size_t n_samples, const char *const *texts, int n,
                    const align_opts *o, align_result *out, esp_err *err)
{
    memset(out, 0, (size_t)n * sizeof *out);
    const token_list *tl = speech2text_tokens(s);
    int **ids = xcalloc((size_t)n, sizeof *ids);
    size_t *lens = xcalloc((size_t)n, sizeof *lens);
    float *logp = NULL;
    int rc = 0, T = 0, frames = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = text_ids(tl, texts[i], &ids[i], &lens[i], &out[i].n_unk, err);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    if (rc == 0 && total == 0)
        rc = esp_fail(err, "the transcript has no text the model has tokens for (%d utterances; the model's token "
                           "list decides: letters in another case, another script?)", n);
    if (rc == 0) rc = speech2text_ctc_logp(s, wav, n_samples, o->window_s, &logp, &T, &frames, err);
    ctcseg_opts so = o->seg;
    ctcseg_text text = {0};
    if (rc == 0) {
        so.index_duration = (double)n_samples / T / speech2text_fs(s); /* ESPnet's time_stamps "auto" */
        ctcseg_text_build(&text, (const int *const *)ids, lens, n, so.blank);
        ctcseg_segment *seg = xcalloc((size_t)n + 1, sizeof *seg);
        rc = ctcseg_run(&so, logp, T, speech2text_vocab(s), &text, seg, err);
        for (int i = 0; i < n && rc == 0; i++) {
            out[i].seg = seg[i];
            out[i].low = !(seg[i].score >= o->min_score);
            if (o->words) segment_words(s, logp, T, frames, so.index_duration, ids[i], lens[i], &out[i]);
        }
        free(seg);
    }
    ctcseg_text_free(&text);
    for (int i = 0; i < n; i++) free(ids[i]);
    free(ids), free(lens), free(logp);
    if (rc != 0) align_results_free(out, n);
    return rc;
}

void align_results_free(align_result *r, int n)
{
    for (int i = 0; i < n; i++) {
        s2t_words_free(r[i].words, r[i].n_words);
        r[i].words = NULL;
        r[i].n_words = 0;
    }
}
