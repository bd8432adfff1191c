/* libespnet3: the public interface (include/espnet3.h) over core/decode's Speech2Text. A model
 * path becomes an inference config's model block (lib/model_source.h), model_files_locate finds its
 * files, and speech2text decodes; every utterance goes through decode(), the one decode path. */
#include "include/espnet3.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/version.h"
#include "core/compute/backend.h"
#include "core/config/config_values.h"
#include "core/data/audio.h"
#include "core/data/audio_stream.h"
#include "core/data/dataset_src.h"
#include "core/decode/longform.h"
#include "core/decode/s2t_config.h"
#include "core/decode/speech2text.h"
#include "core/decode/words.h"
#include "core/nn/body_conf.h"
#include "core/nn/decoder_conf.h"
#include "core/nn/model_files.h"
#include "lib/espnet3_cli.h"
#include "lib/model_source.h"
#include "recipes/keys.h"

/* The settings espnet3_options_set takes; bit k of given says setting k was set. */
enum { OPT_DEVICE, OPT_THREADS, OPT_BEAM, OPT_CTC_WEIGHT, OPT_PENALTY, OPT_NBEST, OPT_LM, OPT_LM_WEIGHT,
       OPT_LF_WINDOW, OPT_LF_OVERLAP, OPT_LF_THRESHOLD, OPT_PROGRESS, OPT_BATCH_SIZE, OPT_COUNT };
static const char *const opt_names[OPT_COUNT] = {"device", "threads", "beam", "ctc_weight", "penalty", "nbest", "lm",
                                                 "lm_weight", "longform_window", "longform_overlap",
                                                 "longform_threshold", "progress", "batch_size"};

struct espnet3_options {
    char *device, *lm;
    long threads, beam, nbest, progress, batch_size;
    double ctc_weight, penalty, lm_weight, lf_window, lf_overlap, lf_threshold;
    unsigned given;
};

typedef struct res_hyp {
    char *text;
    double score;
    espnet3_item *tok, *word;
    size_t n_tok, n_word;
} res_hyp;

struct espnet3_result {
    double duration;
    res_hyp *h;
    size_t n;
    char *error; /* espnet3_transcribe_files' result for a file that failed; else NULL */
};

struct espnet3_model {
    backend *be;
    speech2text *s2t;
    int fs;
    longform_opts lf;    /* audio longer than lf_threshold seconds is decoded in windows */
    double lf_threshold; /* INFINITY: never (a model without a CTC branch, whose words have no times) */
    int batch_size;      /* espnet3_transcribe_files' utterances per batch */
};

static _Thread_local char last_error[sizeof(((esp_err *)0)->msg)];

static void set_error(const esp_err *err) { snprintf(last_error, sizeof last_error, "%s", err->msg); }

int espnet3_api_version(void) { return ESPNET3_API_VERSION; }
const char *espnet3_version(void) { return ESPNET3_VERSION; }
const char *espnet3_last_error(void) { return last_error; }

espnet3_options *espnet3_options_new(void)
{
    espnet3_options *o = xcalloc(1, sizeof *o);
    o->threads = 1;
    return o;
}

void espnet3_options_free(espnet3_options *o)
{
    if (!o) return;
    free(o->device), free(o->lm), free(o);
}

static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int parse_double(const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (!*v || *end || errno || !(x >= lo && x <= hi)) return -1;
    *out = x;
    return 0;
}

/* "cpu", "cuda" or "cuda:N" into a backend kind and device index. */
static int parse_device(const char *v, backend_kind *kind, int *device, esp_err *err)
{
    long dev = 0;
    char *name = xstrndup(v, strcspn(v, ":"));
    const char *colon = strchr(v, ':');
    esp_err unknown;
    backend_kind k;
    /* a kind's name (core/compute/backend.c spells them), but not the tests' ref64 */
    int rc = backend_kind_parse(name, &k, &unknown) == 0 && k != BACKEND_REF64 ? 0 : -1;
    if (rc == 0 && colon && (k != BACKEND_CUDA || parse_long(colon + 1, 0, 1023, &dev) != 0)) rc = -1;
    if (rc != 0) {
        free(name);
        return esp_fail(err, "device '%s': use cpu, cuda or cuda:N", v);
    }
    rc = backend_kind_for(name, kind, err); /* cuda: an error where this build or machine has no GPU */
    free(name);
    *device = (int)dev;
    return rc;
}

int espnet3_options_set(espnet3_options *o, const char *name, const char *value)
{
    esp_err err;
    int k = 0, rc = 0;
    while (k < OPT_COUNT && strcmp(opt_names[k], name)) k++;
    if (!o || !value || k == OPT_COUNT) {
        esp_fail(&err, "option '%s': unknown (use device, threads, beam, ctc_weight, penalty, nbest, lm, lm_weight, "
                 "longform_window, longform_overlap, longform_threshold, progress or batch_size)",
                 name ? name : "(null)");
        set_error(&err);
        return -1;
    }
    const char *want = NULL;
    switch (k) {
    case OPT_DEVICE: {
        backend_kind kind;
        int dev;
        if (parse_device(value, &kind, &dev, &err) != 0) {
            set_error(&err);
            return -1;
        }
        free(o->device), o->device = xstrdup(value);
        break;
    }
    case OPT_THREADS: rc = parse_long(value, 1, 1024, &o->threads), want = "1 to 1024"; break;
    case OPT_BEAM: rc = parse_long(value, 1, 10000, &o->beam), want = "1 to 10000"; break;
    case OPT_NBEST: rc = parse_long(value, 1, 1000, &o->nbest), want = "1 to 1000"; break;
    case OPT_CTC_WEIGHT: rc = parse_double(value, 0, 1, &o->ctc_weight), want = "a weight in [0, 1]"; break;
    case OPT_PENALTY: rc = parse_double(value, -1e6, 1e6, &o->penalty), want = "a number"; break;
    case OPT_LM_WEIGHT: rc = parse_double(value, 0, 1e6, &o->lm_weight), want = "a weight >= 0"; break;
    case OPT_LM: free(o->lm), o->lm = xstrdup(value); break;
    /* the ranges of the inference config's longform: keys (the overlap against the window: at open) */
    case OPT_LF_WINDOW: rc = parse_double(value, 1e-9, 3600, &o->lf_window), want = "seconds in (0, 3600]"; break;
    case OPT_LF_OVERLAP: rc = parse_double(value, 1e-9, 1800, &o->lf_overlap), want = "seconds in (0, 1800]"; break;
    case OPT_LF_THRESHOLD:
        rc = parse_double(value, 0, INFINITY, &o->lf_threshold), want = "seconds >= 0 (inf: never in windows)";
        break;
    case OPT_PROGRESS: rc = parse_long(value, 0, 1, &o->progress), want = "0 or 1"; break;
    /* the inference config's batch_size range (core/config/config_values.c) */
    case OPT_BATCH_SIZE: rc = parse_long(value, 1, 4096, &o->batch_size), want = "1 to 4096"; break;
    }
    if (rc != 0) {
        esp_fail(&err, "%s '%s': use %s", name, value, want);
        set_error(&err);
        return -1;
    }
    o->given |= 1u << k;
    return 0;
}

static int given(const espnet3_options *o, int k) { return o && (o->given >> k & 1u); }

/* The search: a pack's conf/inference.yaml, else ESPnet's Speech2Text defaults (beam 20, ctc_weight
 * 0.5, or 1.0 / 0.0 for a model without an attention decoder / a CTC branch), then the options. */
static void search_opts(s2t_opts *s, const model_source *ms, const model_files *mf, const espnet3_options *o)
{
    if (ms->cfg) {
        s2t_opts_from_cfg(s, ms->icfg, ms->name);
    } else {
        const model_cfg *mc = model_files_training(mf)->model;
        *s = (s2t_opts){.beam_size = 20, .nbest = 1, .ctc_weight = !decoder_in_cfg(mc) ? 1.0 : !ctc_in_cfg(mc) ? 0.0 : 0.5};
        if (body_in_cfg(mc)) /* asr_transducer_inference.Speech2Text's defaults: beam 5, its search's */
            s->beam_size = 5, s->transducer = (ts_opts)TS_OPTS_ASR_TRANSDUCER;
    }
    if (given(o, OPT_BEAM)) s->beam_size = (int)o->beam;
    if (given(o, OPT_NBEST)) s->nbest = (int)o->nbest;
    if (given(o, OPT_CTC_WEIGHT)) s->ctc_weight = o->ctc_weight;
    if (given(o, OPT_PENALTY)) s->penalty = o->penalty;
    if (given(o, OPT_LM) && s->lm_weight == 0) s->lm_weight = 1.0; /* Speech2Text's default lm_weight */
    if (given(o, OPT_LM_WEIGHT)) s->lm_weight = o->lm_weight;
    s->resample = 1;
    /* times need the CTC branch's; a streaming decode has none (and so no long-form windows either) */
    s->timestamps = !s->streaming && ctc_times_in_cfg(model_files_training(mf)->model);
}

/* Long-form decoding: the pack's longform: block, else the keys' declared defaults, then the
 * options. Without times (no CTC branch) the windows cannot be merged, so audio decodes whole. */
static void longform_settings(espnet3_model *m, const model_source *ms, const s2t_opts *so, const espnet3_options *o)
{
    longform_opts_from_cfg(&m->lf, &m->lf_threshold, ms->cfg ? ms->icfg : NULL);
    if (given(o, OPT_LF_WINDOW)) m->lf.window = o->lf_window;
    if (given(o, OPT_LF_OVERLAP)) m->lf.overlap = o->lf_overlap;
    if (given(o, OPT_LF_THRESHOLD)) m->lf_threshold = o->lf_threshold;
    if (!so->timestamps) m->lf_threshold = INFINITY;
    m->lf.progress = given(o, OPT_PROGRESS) && o->progress ? "transcribe windows" : NULL;
}

/* A model's training config (an experiment folder's, a pack's) names its recipe's create_dataset
 * keys: the config layer knows them once the recipes' key tables are handed down, as the CLI does. */
static pthread_once_t recipes_once = PTHREAD_ONCE_INIT;
static void register_recipes(void) { config_recipes_set(recipes_all()); }

espnet3_model *espnet3_open(const char *path, const espnet3_options *o)
{
    pthread_once(&recipes_once, register_recipes);
    esp_err err;
    model_source ms;
    model_files mf = {0}, lmf = {0};
    espnet3_model *m = xcalloc(1, sizeof *m);
    backend_kind kind;
    int dev = 0, ok = 0;
    if (!path) {
        esp_fail(&err, "no model given");
        goto out_nosrc;
    }
    if (parse_device(o && o->device ? o->device : "cpu", &kind, &dev, &err) != 0) goto out_nosrc;
    if (model_source_open(&ms, path, &err) != 0) goto out;
    if (given(o, OPT_LM) && model_source_add_lm(&ms, o->lm, &err) != 0) goto out;
    if (model_files_locate(&mf, ms.icfg, ms.name, &err) != 0) goto out;
    s2t_opts so;
    search_opts(&so, &ms, &mf, o);
    if (so.lm_weight > 0) {
        if (lm_files_locate(&lmf, ms.icfg, ms.name, &err) != 0) goto out;
        so.lm = &lmf;
    }
    m->fs = (int)dataset_frontend_fs(model_files_training(&mf));
    if (!(m->be = backend_open(kind, dev, o ? (int)o->threads : 1, &err))) goto out;
    /* Loads everything it needs from the files, which the unpacked copies may then leave. */
    if (!(m->s2t = speech2text_open(m->be, &mf, &so, &err))) goto out;
    longform_settings(m, &ms, &so, o);
    /* the pack's inference.yaml batch_size, else the key's declared default */
    m->batch_size = ms.cfg ? (int)ms.icfg->model->batch_size : atoi(config_default_value("model.batch_size"));
    if (given(o, OPT_BATCH_SIZE)) m->batch_size = (int)o->batch_size;
    if (isfinite(m->lf_threshold) && longform_check(m->s2t, &m->lf, &err) != 0) goto out;
    ok = 1;
out:
    model_files_free(&mf), model_files_free(&lmf);
    model_source_free(&ms);
out_nosrc:
    if (ok) return m;
    set_error(&err);
    espnet3_close(m);
    return NULL;
}

void espnet3_close(espnet3_model *m)
{
    if (!m) return;
    speech2text_close(m->s2t); /* before the backend it borrows */
    backend_close(m->be);
    free(m);
}

int espnet3_sample_rate(const espnet3_model *m) { return m ? m->fs : -1; }

speech2text *lib_model_speech2text(espnet3_model *m) { return m->s2t; }

/* A time or score, -1 where there is none (no CTC branch; NaN: no CTC path emits the ids). */
static double timed(const double *v, size_t i) { return v && !isnan(v[i]) ? v[i] : -1; }

/* Hypothesis h as result hypothesis r: text, score, its tokens and its words with their times. */
static void take_hyp(const espnet3_model *m, const s2t_hyp *h, res_hyp *r)
{
    const token_list *tl = speech2text_tokens(m->s2t);
    r->text = xstrdup(h->text);
    r->score = h->score;
    r->n_tok = h->n_ids;
    r->tok = xcalloc(h->n_ids + 1, sizeof *r->tok);
    int have_times = h->tok_start && (h->n_ids == 0 || !isnan(h->tok_start[0]));
    for (size_t i = 0; i < h->n_ids; i++) {
        espnet3_item *t = &r->tok[i];
        *t = (espnet3_item){.text = xstrdup(tl->tokens[h->ids[i]]), .id = h->ids[i], .start = -1, .end = -1, .score = -1};
        if (have_times) t->start = timed(h->tok_start, i), t->end = timed(h->tok_end, i), t->score = timed(h->tok_score, i);
    }
    s2t_word *w;
    size_t n;
    esp_err err;
    if (!have_times || s2t_hyp_words(m->s2t, h, &w, &n, &err) != 0) return; /* no times: no words */
    r->n_word = n;
    r->word = xcalloc(n + 1, sizeof *r->word);
    for (size_t i = 0; i < n; i++)
        r->word[i] = (espnet3_item){.text = xstrdup(w[i].text), .id = -1, .start = w[i].start, .end = w[i].end,
                                    .score = w[i].score};
    s2t_words_free(w, n);
}

/* Hypothesis h (n_found of them) of `seconds` of audio as a result. */
static espnet3_result *make_result(const espnet3_model *m, s2t_hyp *h, double seconds)
{
    espnet3_result *r = xcalloc(1, sizeof *r);
    r->duration = seconds;
    r->n = (size_t)h->n_found;
    r->h = xcalloc(r->n + 1, sizeof *r->h);
    for (size_t k = 0; k < r->n; k++) take_hyp(m, k == 0 ? h : &h->alt[k - 1], &r->h[k]);
    s2t_hyp_free(h);
    return r;
}

/* Audio for decode(): a file (path, not yet read; "-": standard input) or n samples at fs Hz in
 * memory (wav, owned). */
typedef struct lib_audio {
    const char *name, *path;
    float *wav;
    size_t n;
    int fs;
} lib_audio;

/* Long audio in windows from a stream (the file's blocks, or the samples'); 0 or -1 with err. */
static int decode_long(espnet3_model *m, const lib_audio *a, audio_stream *st, s2t_hyp *h, double *secs, esp_err *err)
{
    esp_err why;
    if (!st) st = audio_stream_from_samples(a->wav, a->n, a->fs, m->fs, a->name, err);
    if (!st) return -1;
    int rc = longform_decode_stream(m->s2t, st, a->name, &m->lf, h, secs, &why);
    audio_stream_close(st);
    if (rc != 0) esp_fail(err, "%s", why.msg); /* it names the audio */
    return rc;
}

/* A stream's first samples, up to the long-form threshold and one more: all of it when it ends
 * there (a->wav, at the model's rate: *whole 1), else they go back to st for the windows. A pipe
 * is windowed by what arrives, not by its header (a streaming writer's length is a placeholder),
 * and never more than the threshold's samples are held. */
static int read_head(espnet3_model *m, audio_stream *st, lib_audio *a, int *whole, esp_err *err)
{
    double lim = m->lf_threshold * m->fs; /* INFINITY: all of it */
    size_t cap = 1 << 16, n = 0;
    float *x = xmalloc(cap * sizeof *x);
    for (*whole = 0;;) {
        if (n == cap) x = xrealloc(x, (cap *= 2) * sizeof *x);
        size_t want = cap - n;
        if ((double)(n + want) > lim + 1) want = (size_t)(lim + 1 - (double)n);
        long r = audio_stream_read(st, x + n, want, err);
        if (r < 0) {
            free(x);
            return -1;
        }
        n += (size_t)r;
        if ((size_t)r < want) *whole = 1;
        if (*whole || (double)n > lim) break;
    }
    if (*whole) a->wav = x, a->n = n, a->fs = m->fs;
    else audio_stream_unread(st, x, n);
    return 0;
}

/* The one decode path. Audio longer than the long-form threshold (a file's length from its header,
 * unknown counting as long; standard input's by what arrives, read_head) is decoded in windows,
 * read in blocks; shorter audio is decoded whole, resampled at once to the model's rate. */
static espnet3_result *decode(espnet3_model *m, lib_audio *a)
{
    esp_err err, why;
    s2t_hyp h = {0};
    espnet3_result *r = NULL;
    audio_stream *st = NULL;
    double secs = a->fs > 0 ? (double)a->n / a->fs : 0;
    if (a->path) {
        int piped = !strcmp(a->path, "-"), whole;
        st = piped ? audio_stream_open_fd(0, a->name, m->fs, &err)
                   : audio_stream_open(a->path, m->fs, NULL, 1, 0, 0, &err);
        if (!st) goto out;
        secs = audio_stream_seconds(st);
        if (piped) {
            if (read_head(m, st, a, &whole, &err) != 0) goto out;
            secs = whole ? (double)a->n / a->fs : INFINITY;
            if (whole) audio_stream_close(st), st = NULL, a->path = NULL; /* decoded as samples */
        }
    }
    if (!a->path && a->n == 0) {
        esp_fail(&err, "%s: no audio samples (an empty recording)", a->name);
    } else if (!a->path && a->fs <= 0) {
        esp_fail(&err, "%s: sample rate %d Hz (give the rate of the samples)", a->name, a->fs);
    } else if (secs > m->lf_threshold) {
        if (decode_long(m, a, st, &h, &secs, &err) == 0) r = make_result(m, &h, secs);
        st = NULL; /* closed there */
    } else if ((!a->path || audio_read_fs(a->path, 0, NULL, &a->wav, &a->n, &a->fs, &err) == 0) &&
               audio_resample(a->name, &a->wav, &a->n, a->fs, m->fs, &err) == 0) {
        if (a->n == 0) esp_fail(&err, "%s: no audio samples (an empty recording)", a->name);
        else if (speech2text_decode_wav(m->s2t, a->wav, a->n, &h, &why) != 0) esp_fail(&err, "%s: %s", a->name, why.msg);
        else r = make_result(m, &h, (double)a->n / m->fs);
    }
out:
    audio_stream_close(st);
    free(a->wav);
    if (!r) set_error(&err);
    return r;
}

/* A result that holds the error of a file that failed. */
static espnet3_result *error_result(const char *msg)
{
    espnet3_result *r = xcalloc(1, sizeof *r);
    r->h = xcalloc(1, sizeof *r->h);
    r->error = xstrdup(msg);
    return r;
}

/* Reads file a->path whole at the model's rate when it is decoded whole (not standard input, not
 * longer than the long-form threshold, readable, not empty): 1 with a->wav, a->n set; else 0. */
static int read_short(espnet3_model *m, lib_audio *a)
{
    esp_err err;
    if (!strcmp(a->path, "-")) return 0;
    audio_stream *st = audio_stream_open(a->path, m->fs, NULL, 1, 0, 0, &err);
    int whole = st && audio_stream_seconds(st) <= m->lf_threshold;
    audio_stream_close(st);
    if (!whole || audio_read_fs(a->path, 0, NULL, &a->wav, &a->n, &a->fs, &err) != 0) return 0;
    if (audio_resample(a->name, &a->wav, &a->n, a->fs, m->fs, &err) == 0 && a->n > 0) return 1;
    free(a->wav), a->wav = NULL;
    return 0;
}

/* One batch of files: those read whole go through the decoder together; the others (and, should
 * the batch fail, all of them, so each gets its own error) one by one through decode(). */
static void decode_files(espnet3_model *m, const char *const *paths, size_t n, espnet3_result **out)
{
    lib_audio *a = xcalloc(n, sizeof *a);
    const float **wavs = xcalloc(n, sizeof *wavs);
    size_t *ns = xcalloc(n, sizeof *ns), *at = xcalloc(n, sizeof *at), k = 0;
    for (size_t i = 0; i < n; i++) {
        a[i] = (lib_audio){.name = paths[i], .path = paths[i]};
        out[i] = NULL;
        if (read_short(m, &a[i])) wavs[k] = a[i].wav, ns[k] = a[i].n, at[k++] = i;
    }
    s2t_hyp *h = xcalloc(k + 1, sizeof *h);
    esp_err why;
    if (k > 0 && speech2text_decode_wavs(m->s2t, wavs, ns, (int)k, h, &why) == 0)
        for (size_t j = 0; j < k; j++) out[at[j]] = make_result(m, &h[j], (double)ns[j] / m->fs);
    for (size_t i = 0; i < n; i++) {
        free(a[i].wav);
        if (out[i]) continue;
        if (!(out[i] = espnet3_transcribe_file(m, paths[i]))) out[i] = error_result(last_error);
    }
    free(a), free(wavs), free(ns), free(at), free(h);
}

size_t espnet3_transcribe_files(espnet3_model *m, const char *const *paths, size_t n, espnet3_result **out)
{
    size_t failed = 0, bs = (size_t)m->batch_size;
    for (size_t i = 0; i < n; i += bs) decode_files(m, paths + i, n - i < bs ? n - i : bs, out + i);
    for (size_t i = 0; i < n; i++) failed += out[i]->error != NULL;
    return failed;
}

const char *espnet3_result_error(const espnet3_result *r) { return r ? r->error : NULL; }
int espnet3_batch_size(const espnet3_model *m) { return m->batch_size; }

espnet3_result *espnet3_transcribe(espnet3_model *m, const float *samples, size_t n, int sample_rate)
{
    lib_audio a = {.name = "samples", .wav = xmalloc((n ? n : 1) * sizeof(float)), .n = n, .fs = sample_rate};
    if (n) memcpy(a.wav, samples, n * sizeof *a.wav);
    return decode(m, &a);
}

espnet3_result *espnet3_transcribe_file(espnet3_model *m, const char *path)
{
    return decode(m, &(lib_audio){.name = strcmp(path, "-") ? path : "<stdin>", .path = path});
}

static void items_free(espnet3_item *it, size_t n)
{
    for (size_t i = 0; i < n; i++) free((char *)it[i].text);
    free(it);
}

void espnet3_result_free(espnet3_result *r)
{
    if (!r) return;
    for (size_t k = 0; k < r->n; k++) {
        free(r->h[k].text);
        items_free(r->h[k].tok, r->h[k].n_tok);
        items_free(r->h[k].word, r->h[k].n_word);
    }
    free(r->h);
    free(r->error);
    free(r);
}

size_t espnet3_result_count(const espnet3_result *r) { return r ? r->n : 0; }
double espnet3_result_duration(const espnet3_result *r) { return r ? r->duration : 0; }
const char *espnet3_result_text(const espnet3_result *r, size_t k) { return r && k < r->n ? r->h[k].text : ""; }
double espnet3_result_score(const espnet3_result *r, size_t k) { return r && k < r->n ? r->h[k].score : -INFINITY; }
size_t espnet3_result_tokens(const espnet3_result *r, size_t k) { return r && k < r->n ? r->h[k].n_tok : 0; }
size_t espnet3_result_words(const espnet3_result *r, size_t k) { return r && k < r->n ? r->h[k].n_word : 0; }

int espnet3_result_token(const espnet3_result *r, size_t k, size_t i, espnet3_item *out)
{
    if (!r || k >= r->n || i >= r->h[k].n_tok) return -1;
    *out = r->h[k].tok[i];
    return 0;
}

int espnet3_result_word(const espnet3_result *r, size_t k, size_t i, espnet3_item *out)
{
    if (!r || k >= r->n || i >= r->h[k].n_word) return -1;
    *out = r->h[k].word[i];
    return 0;
}
