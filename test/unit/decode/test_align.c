/* espnet3 align's work (core/decode/align.h) on the synthesized-speech fixture: a 10-minute
 * recording made of the fixture's utterances one after another (half a second of silence between),
 * its transcript aligned: every segment around where the utterance was put (ESPnet's segments take
 * in half the silence on each side), its words inside it; the log-probs computed in windows equal those of one forward on a short file;
 * a transcript line with a deliberately wrong word scores below the others and is marked low. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/compute/backend.h"
#include "core/config/config.h"
#include "core/data/audio.h"
#include "core/decode/align.h"
#include "core/nn/model_files.h"
#include "test/unit/test_util.h"

typedef struct fx {
    esp_config *cfg;
    model_files mf;
    backend *be;
    speech2text *s;
    char *dir;
    int n;
    char *text[64];
    float *wav[64];
    size_t len[64];
} fx;

static void fx_open(fx *f)
{
    esp_err err;
    f->dir = path_join(test_root_dir(), "test/fixtures/synth_model");
    char *conf = path_join(f->dir, "conf/inference.yaml"), *tp = path_join(f->dir, "speech/text");
    config_load_opts lo = {.foreign = 1};
    cr_assert_eq(config_load(CONFIG_INFERENCE, conf, &lo, &f->cfg, &err), 0, "%s", err.msg);
    cr_assert_eq(model_files_locate(&f->mf, f->cfg->typed, conf, &err), 0, "%s", err.msg);
    cr_assert((f->be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    s2t_opts o = S2T_OPTS_DEFAULT;
    cr_assert((f->s = speech2text_open(f->be, &f->mf, &o, &err)) != NULL, "%s", err.msg);
    FILE *fp = fopen(tp, "r");
    cr_assert_not_null(fp);
    char line[1024];
    f->n = 0;
    while (fgets(line, sizeof line, fp) && f->n < 64) {
        line[strcspn(line, "\n")] = 0;
        char *sp = strchr(line, ' ');
        *sp = 0;
        char *wp = xasprintf("%s/speech/%s.flac", f->dir, line);
        cr_assert_eq(audio_read(wp, 16000, "fs", &f->wav[f->n], &f->len[f->n], &err), 0, "%s", err.msg);
        f->text[f->n++] = xstrdup(sp + 1);
        free(wp);
    }
    fclose(fp);
    free(conf), free(tp);
}

static void fx_close(fx *f)
{
    for (int i = 0; i < f->n; i++) free(f->text[i]), free(f->wav[i]);
    speech2text_close(f->s);
    backend_close(f->be);
    model_files_free(&f->mf);
    config_free(f->cfg);
    free(f->dir);
}

/* The utterances said k times over (utterance i % n at position i), 0.5 s of silence around each;
 * starts/ends (seconds) of each. */
static float *concat(const fx *f, int count, size_t *n, double *starts, double *ends)
{
    const size_t gap = 8000;
    size_t total = gap;
    for (int i = 0; i < count; i++) total += f->len[i % f->n] + gap;
    float *w = xcalloc(total, sizeof *w);
    size_t at = gap;
    for (int i = 0; i < count; i++) {
        memcpy(w + at, f->wav[i % f->n], f->len[i % f->n] * sizeof *w);
        starts[i] = at / 16000.0;
        at += f->len[i % f->n];
        ends[i] = at / 16000.0;
        at += gap;
    }
    *n = total;
    return w;
}

Test(align, windowed_log_probs_are_one_forwards_on_a_short_file, .timeout = 60)
{
    fx f;
    fx_open(&f);
    esp_err err;
    float *a, *b;
    int Ta, Tb, fa, fb;
    /* one window holds the file, and windows of 1 s: the frames away from the windows' edges are
     * computed with a quarter window of context, so they differ, but little */
    cr_assert_eq(speech2text_ctc_logp(f.s, f.wav[0], f.len[0], 600, &a, &Ta, &fa, &err), 0, "%s", err.msg);
    cr_assert_eq(speech2text_ctc_logp(f.s, f.wav[0], f.len[0], 1.0, &b, &Tb, &fb, &err), 0, "%s", err.msg);
    cr_assert_eq(Ta, Tb);
    cr_assert_eq(fa, fb);
    int V = speech2text_vocab(f.s), agree = 0;
    for (int t = 0; t < Ta; t++) {
        int ia = 0, ib = 0;
        for (int c = 1; c < V; c++) {
            if (a[(size_t)t * V + c] > a[(size_t)t * V + ia]) ia = c;
            if (b[(size_t)t * V + c] > b[(size_t)t * V + ib]) ib = c;
        }
        agree += ia == ib;
    }
    cr_expect_gt(agree, Ta * 9 / 10, "the best class of %d of %d frames agree", agree, Ta);
    free(a), free(b);
    fx_close(&f);
}

Test(align, ten_minutes_with_a_wrong_word, .timeout = 600)
{
    fx f;
    fx_open(&f);
    enum { MAXU = 400 };
    double starts[MAXU], ends[MAXU];
    size_t n = 0;
    int count = 0;
    /* as many utterances as make 10 minutes */
    double minutes = test_sanitized() ? 2 : 10; /* the same code, a shorter file under ASan */
    for (double dur = 0.5; dur < 60 * minutes && count < MAXU; count++) dur += f.len[count % f.n] / 16000.0 + 0.5;
    float *wav = concat(&f, count, &n, starts, ends);
    const char **texts = xcalloc((size_t)count, sizeof *texts);
    for (int i = 0; i < count; i++) texts[i] = f.text[i % f.n];
    /* utterance 7's transcript has a word the speech does not */
    char *wrong = xstrdup(f.text[7 % f.n]);
    char *sp = strchr(wrong, ' ');
    cr_assert_not_null(sp);
    char *fixed = xasprintf("ELEPHANT%s", sp);
    texts[7] = fixed;
    align_opts o = {.seg = CTCSEG_OPTS_DEFAULT, .window_s = 15, .min_score = -1.2, .words = 1};
    o.seg.min_window_size = 1500;
    align_result *r = xcalloc((size_t)count, sizeof *r);
    esp_err err;
    cr_assert_eq(align_recording(f.s, wav, n, texts, count, &o, r, &err), 0, "%s", err.msg);
    int low = 0;
    for (int i = 0; i < count; i++) {
        /* ESPnet's segments reach into the silences around (half of it, at most 0.5 s): each starts in
         * the gap before its speech and ends after most of it, before the next */
        double gap_lo = i ? ends[i - 1] : 0, next = i + 1 < count ? starts[i + 1] : n / 16000.0;
        if (i != 7) /* the wrong line's (stretched) times are what min_score flags */
            cr_expect(r[i].seg.start >= gap_lo - 0.1 && r[i].seg.start <= starts[i] + 0.1 &&
                      r[i].seg.end >= ends[i] - 0.3 && r[i].seg.end <= next + 0.05,
                  "utterance %d: [%.2f, %.2f], spoken [%.2f, %.2f]", i, r[i].seg.start, r[i].seg.end, starts[i],
                  ends[i]);
        if (i != 7) cr_expect(!r[i].low, "utterance %d: score %.3f marked low", i, r[i].seg.score);
        low += r[i].low;
        cr_expect_gt(r[i].n_words, 0);
        for (size_t k = 0; k < r[i].n_words; k++)
            cr_expect(r[i].words[k].start >= r[i].seg.start - 0.1 && r[i].words[k].end <= r[i].seg.end + 0.1,
                      "utterance %d word %zu [%.2f, %.2f] outside [%.2f, %.2f]", i, k, r[i].words[k].start,
                      r[i].words[k].end, r[i].seg.start, r[i].seg.end);
    }
    cr_expect(r[7].low, "the wrong line scores %.3f (threshold %.1f)", r[7].seg.score, o.min_score);
    double worst_ok = 0;
    for (int i = 0; i < count; i++)
        if (i != 7 && r[i].seg.score < worst_ok) worst_ok = r[i].seg.score;
    fprintf(stderr, "align: %d utterances, %.0f s; scores: wrong line %.3f, the lowest right one %.3f\n", count,
            n / 16000.0, r[7].seg.score, worst_ok);
    align_results_free(r, count);
    free(r), free(texts), free(fixed), free(wrong), free(wav);
    fx_close(&f);
}
