/* Speech2Text, the decoder stage 6 runs: an utterance decodes the same from its file, its samples
 * and its features; the hypothesis is the CTC search (greedy, prefix beam) over the model's
 * log-probabilities as a host forward gives them, read only from the host copy made after the
 * backend synchronized; errors name the file and leave no hypothesis behind. ctc_weight below 1
 * is the joint search: an error without an attention decoder, beam_search's n-best (blanks
 * dropped) with a stand-in decoder; the prefix beam's n-best is its final beam. */
#include <criterion/criterion.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_cpu.h" /* a recording backend wraps the CPU one by value */
#include "core/config/config.h"
#include "core/data/asr_data.h"
#include "core/decode/ctc_decode.h"
#include "core/decode/ctc_prefix_beam.h"
#include "core/decode/beam_search.h"
#include "core/decode/speech2text.h"
#include "core/formats/safetensors.h"
#include "core/nn/model.h"
#include "test/unit/test_util.h"

static char dir[64];
static char tokens_path[128], weights_path[128];
static encoder_conf_cfg enc = {.output_size = 16, .attention_heads = 2, .linear_units = 24, .num_blocks = 2};
static frontend_conf_cfg fc = {.n_fft = 512, .win_length = 400, .hop_length = 160, .n_mels = 20};
static normalize_conf_cfg nc = {.norm_means = 1, .norm_vars = 1, .eps = 1e-20};
static model_cfg mc = {.frontend_conf = &fc, .normalize = "utterance_mvn", .normalize_conf = &nc, .encoder_conf = &enc};
static training_cfg tc = {.model = &mc};
static esp_config train_cfg = {.kind = CONFIG_TRAINING, .typed = &tc};
static model_files mf = {.train_cfg = &train_cfg, .weights = weights_path, .tokens = tokens_path};

static void write_wav(const char *name, int n, double freq)
{
    SF_INFO info = {.samplerate = 16000, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(test_path(dir, name), SFM_WRITE, &info);
    cr_assert_not_null(sf);
    short *s = calloc((size_t)n, sizeof *s);
    for (int i = 0; i < n; i++) s[i] = (short)(6000 * sin(2 * M_PI * freq * i / 16000.0) + 2000 * sin(0.37 * i * i));
    sf_write_short(sf, s, n);
    sf_close(sf);
    free(s);
}

/* A random model of the config's sizes, written as the weights file. */
static void write_weights(void)
{
    esp_err err;
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0, "%s", err.msg);
    model_dims d;
    cr_assert_eq(model_dims_from_cfg(&d, &mc, (int)fc.n_mels, 7, &err), 0, "%s", err.msg);
    asr_model m;
    asr_model_init_inference(&m, &be, &d);
    cr_assert_eq(param_init(m.params, &m.table, "xavier_uniform", 11, &err), 0);
    st_tensor *t = calloc(m.table.n, sizeof *t);
    for (size_t i = 0; i < m.table.n; i++) {
        const param_info *p = &m.table.items[i];
        t[i] = (st_tensor){.name = p->name, .dtype = ST_F32, .ndim = p->ndim, .data = m.params + p->offset};
        for (int k = 0; k < p->ndim; k++) t[i].shape[k] = p->shape[k];
    }
    cr_assert_eq(st_write(weights_path, t, m.table.n, NULL, 0, &err), 0, "%s", err.msg);
    free(t);
    asr_model_free(&m);
    be.destroy(&be);
}

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "s2t");
    snprintf(tokens_path, sizeof tokens_path, "%s/tokens.txt", dir);
    snprintf(weights_path, sizeof weights_path, "%s/model.safetensors", dir);
    test_write_text(tokens_path, "<blank>\n<unk>\n<space>\nA\nB\nC\n<sos/eos>\n");
    write_weights();
    write_wav("a.wav", 9000, 440);
    write_wav("b.wav", 14000, 180);
    write_wav("short.wav", 100, 440);
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(speech2text, .init = setup, .fini = teardown);

/* A CPU backend that logs synchronize (S) and device-to-host copies (D), and poisons the device
 * side of every such copy afterwards, so a decoder that read device memory directly would not
 * see the log-probabilities. */
static backend rec;
static void (*cpu_copy)(backend *, void *, const void *, size_t, backend_copy_kind);
static void (*cpu_sync)(backend *);
static char events[256];
static size_t n_events;

static void log_event(char e)
{
    if (n_events + 1 < sizeof events) events[n_events++] = e;
}

static void rec_copy(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind)
{
    cpu_copy(be, dst, src, bytes, kind);
    if (kind != BACKEND_DEVICE_TO_HOST) return;
    log_event('D');
    memset((void *)src, 0xFF, bytes); /* NaN */
}

static void rec_sync(backend *be)
{
    cpu_sync(be);
    log_event('S');
}

static void rec_init(void)
{
    esp_err err;
    cr_assert_eq(backend_cpu_init(&rec, 1, &err), 0, "%s", err.msg);
    cpu_copy = rec.copy, cpu_sync = rec.synchronize;
    rec.copy = rec_copy, rec.synchronize = rec_sync;
    n_events = 0;
}

/* The CTC log-probabilities of a plain host forward of a file's features (hlen x vocab). */
static float *host_logp(const char *wav_name, int *hlen, int *frames, asr_data *d)
{
    esp_err err;
    cr_assert_eq(asr_data_open_files(d, &mc, NULL, tokens_path, 0, &err), 0, "%s", err.msg);
    float *wav;
    size_t n;
    cr_assert_eq(asr_data_read_wav(d, test_path(dir, wav_name), &wav, &n, &err), 0, "%s", err.msg);
    int T = (int)frontend_num_frames(d->fe, n);
    float *x = malloc((size_t)T * d->fo.n_mels * sizeof *x);
    asr_data_featurize(d, x, wav, n);
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0);
    model_dims dims;
    cr_assert_eq(model_dims_from_cfg(&dims, &mc, d->fo.n_mels, (int)d->tokens.n, &err), 0);
    asr_model m;
    asr_model_init_inference(&m, &be, &dims);
    cr_assert_eq(asr_model_load_weights(&m, weights_path, &err), 0, "%s", err.msg);
    asr_model_forward(&m, x, &T, 1, T, 0, 0); /* the CPU backend's buffers are host memory */
    *hlen = m.hlens[0];
    float *lp = malloc(((size_t)*hlen * dims.vocab + 1) * sizeof *lp);
    memcpy(lp, m.logp, (size_t)*hlen * dims.vocab * sizeof *lp);
    *frames = T;
    asr_model_free(&m);
    be.destroy(&be);
    free(x);
    free(wav);
    return lp;
}

/* What the decoder must find: the search over a plain host forward of the same features. */
static void reference(const char *wav_name, int beam_size, int **ids, int *n_ids, char **text, int *frames)
{
    asr_data d;
    int hlen, V = 7;
    float *lp = host_logp(wav_name, &hlen, frames, &d);
    *ids = malloc(((size_t)hlen + 1) * sizeof **ids);
    if (beam_size <= 1) {
        *n_ids = ctc_greedy_decode(*ids, lp, hlen, V);
    } else {
        ctc_beam *w = ctc_beam_new();
        ctc_beam_opts bo = {.beam_size = beam_size};
        *n_ids = ctc_prefix_beam_search(w, lp, hlen, V, &bo, *ids, NULL);
        ctc_beam_free(w);
    }
    err_calc ec;
    err_calc_init(&ec, &d.tokens);
    *text = token_ids_to_text(&ec, *ids, (size_t)*n_ids);
    free(lp);
    asr_data_close(&d);
}

static void expect_reference(const s2t_hyp *h, const char *wav_name, int beam_size)
{
    int *ids, n, frames;
    char *text;
    reference(wav_name, beam_size, &ids, &n, &text, &frames);
    cr_assert_eq(h->n_ids, (size_t)n, "%s beam %d", wav_name, beam_size);
    cr_assert(n == 0 || memcmp(h->ids, ids, (size_t)n * sizeof *ids) == 0, "%s beam %d", wav_name, beam_size);
    cr_assert_str_eq(h->text, text, "%s beam %d", wav_name, beam_size);
    cr_assert_eq(h->frames, frames);
    free(ids);
    free(text);
}

static void decode_both_files(int beam_size)
{
    rec_init();
    esp_err err;
    s2t_opts o = {.beam_size = beam_size, .ctc_weight = 1.0};
    speech2text *s = speech2text_open(&rec, &mf, &o, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_eq(speech2text_tokens(s)->n, 7);
    const char *paths[2] = {test_path(dir, "a.wav"), test_path(dir, "b.wav")};
    s2t_hyp h[2];
    cr_assert_eq(speech2text_decode_files(s, paths, 2, h, &err), 0, "%s", err.msg);
    cr_assert(h[0].n_ids > 0 && h[1].n_ids > 0, "the random model says something, so the comparison means something");
    expect_reference(&h[0], "a.wav", beam_size);
    expect_reference(&h[1], "b.wav", beam_size);
    /* One host copy for the batch of both, with the backend synchronized before and after it. */
    events[n_events] = '\0';
    size_t copies = 0;
    for (size_t i = 0; i < n_events; i++) {
        if (events[i] != 'D') continue;
        copies++;
        cr_assert(i > 0 && events[i - 1] == 'S' && events[i + 1] == 'S', "events %s", events);
    }
    cr_assert_eq(copies, 1, "events %s", events);
    s2t_hyp_free(&h[0]);
    s2t_hyp_free(&h[1]);
    speech2text_close(s);
    rec.destroy(&rec);
}

Test(speech2text, greedy_is_the_search_over_the_host_copy) { decode_both_files(1); }

Test(speech2text, prefix_beam_is_the_search_over_the_host_copy) { decode_both_files(3); }

Test(speech2text, file_samples_and_features_decode_alike)
{
    esp_err err;
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0);
    s2t_opts o = {.beam_size = 2, .ctc_weight = 1.0};
    speech2text *s = speech2text_open(&be, &mf, &o, &err);
    cr_assert_not_null(s, "%s", err.msg);
    asr_data d;
    cr_assert_eq(asr_data_open_files(&d, &mc, NULL, tokens_path, 0, &err), 0, "%s", err.msg);
    float *wav;
    size_t n;
    cr_assert_eq(asr_data_read_wav(&d, test_path(dir, "b.wav"), &wav, &n, &err), 0, "%s", err.msg);
    int T = (int)frontend_num_frames(d.fe, n);
    float *x = malloc((size_t)T * d.fo.n_mels * sizeof *x);
    asr_data_featurize(&d, x, wav, n);

    const char *path = test_path(dir, "b.wav");
    s2t_hyp from_file, from_wav, from_feats;
    cr_assert_eq(speech2text_decode_files(s, &path, 1, &from_file, &err), 0, "%s", err.msg);
    cr_assert_eq(speech2text_decode_wav(s, wav, n, &from_wav, &err), 0, "%s", err.msg);
    speech2text_decode_feats(s, x, T, &from_feats);
    const s2t_hyp *other[2] = {&from_wav, &from_feats};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(other[k]->n_ids, from_file.n_ids);
        cr_assert_eq(memcmp(other[k]->ids, from_file.ids, from_file.n_ids * sizeof(int)), 0);
        cr_assert_str_eq(other[k]->text, from_file.text);
        cr_assert_eq(other[k]->frames, T);
    }
    s2t_hyp_free(&from_file), s2t_hyp_free(&from_wav), s2t_hyp_free(&from_feats);
    free(x);
    free(wav);
    asr_data_close(&d);
    speech2text_close(s);
    be.destroy(&be);
}

Test(speech2text, errors_name_the_file_and_leave_no_hypothesis)
{
    esp_err err;
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0);
    s2t_opts o = S2T_OPTS_DEFAULT;
    speech2text *s = speech2text_open(&be, &mf, &o, &err);
    cr_assert_not_null(s, "%s", err.msg);
    const char *paths[2] = {test_path(dir, "a.wav"), test_path(dir, "short.wav")};
    s2t_hyp h[2];
    memset(h, 0x5A, sizeof h);
    cr_assert_eq(speech2text_decode_files(s, paths, 2, h, &err), -1);
    cr_assert(strstr(err.msg, "short.wav") && strstr(err.msg, "shorter than the STFT needs"), "%s", err.msg);
    cr_assert_null(h[0].ids, "the first hypothesis is freed");
    cr_assert_null(h[0].text);
    paths[1] = test_path(dir, "missing.wav");
    cr_assert_eq(speech2text_decode_files(s, paths, 2, h, &err), -1);
    cr_assert(strstr(err.msg, "missing.wav"), "%s", err.msg);
    float few[10] = {0};
    cr_assert_eq(speech2text_decode_wav(s, few, 10, &h[0], &err), -1);
    cr_assert(strstr(err.msg, "shorter than the STFT needs"), "%s", err.msg);
    speech2text_close(s);

    /* Weights of another model: open fails with the loader's message, and nothing leaks. */
    enc.num_blocks = 3;
    cr_assert_null(speech2text_open(&be, &mf, &o, &err));
    cr_assert(strstr(err.msg, "encoder.encoders.2"), "%s", err.msg);
    enc.num_blocks = 2;
    be.destroy(&be);
}

/* ---- the joint CTC/attention search ---- */

/* A stand-in attention decoder: a fixed distribution per last token (blank unlikely), and it checks
 * the prefixes it is given. */
static int stand_in_calls;
static void stand_in(void *ctx, const int *const *prefixes, const int *lens, int n, float *logp)
{
    (void)ctx;
    stand_in_calls++;
    for (int i = 0; i < n; i++) {
        cr_assert(lens[i] >= 1 && prefixes[i][0] == 6, "every prefix starts with <sos>");
        int last = prefixes[i][lens[i] - 1];
        double z[7], m = -INFINITY, sum = 0;
        for (int c = 0; c < 7; c++) z[c] = c == 0 ? -4.0 : sin(1.7 * c + 2.3 * last) * 2.0, m = fmax(m, z[c]);
        for (int c = 0; c < 7; c++) sum += exp(z[c] - m);
        for (int c = 0; c < 7; c++) logp[i * 7 + c] = (float)(z[c] - m - log(sum));
    }
}

Test(speech2text, joint_search_needs_an_attention_decoder)
{
    esp_err err;
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0);
    s2t_opts o = {.beam_size = 4, .ctc_weight = 0.5, .nbest = 1};
    cr_assert_neq(speech2text_check(&mf, &o, &err), 0);
    cr_assert(strstr(err.msg, "model has no attention decoder (decoder: transformer): use ctc_weight 1.0"), "%s",
              err.msg);
    cr_assert_null(speech2text_open(&be, &mf, &o, &err));
    cr_assert(strstr(err.msg, "ctc_weight 0.5: model has no attention decoder (decoder: transformer): use ctc_weight 1.0"),
              "%s", err.msg);
    o.ctc_weight = 0.0;
    cr_assert_null(speech2text_open(&be, &mf, &o, &err));
    cr_assert(strstr(err.msg, "model has no attention decoder"), "%s", err.msg);
    o.ctc_weight = 1.5;
    cr_assert_null(speech2text_open(&be, &mf, &o, &err));
    cr_assert(strstr(err.msg, "ctc_weight 1.5: use a weight in [0, 1]"), "%s", err.msg);
    o.ctc_weight = 1.0;
    cr_assert_eq(speech2text_check(&mf, &o, &err), 0, "CTC only needs no decoder");
    be.destroy(&be);
}

/* With a decoder in place, the joint path is beam_search over the host log-probs: same n-best,
 * blanks dropped from the ids, text from the ids, one decoder call per step. */
Test(speech2text, joint_search_with_a_stand_in_decoder)
{
    esp_err err;
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0);
    bs_scorer att = {.score = stand_in};
    s2t_opts o = {.beam_size = 3, .ctc_weight = 0.3, .penalty = 0.2, .nbest = 3, .attention = &att};
    speech2text *s = speech2text_open(&be, &mf, &o, &err);
    cr_assert_not_null(s, "%s", err.msg);
    const char *path = test_path(dir, "b.wav");
    s2t_hyp h;
    stand_in_calls = 0;
    cr_assert_eq(speech2text_decode_files(s, &path, 1, &h, &err), 0, "%s", err.msg);
    int calls = stand_in_calls;

    asr_data d;
    int hlen, frames;
    float *lp = host_logp("b.wav", &hlen, &frames, &d);
    beam_search *w = beam_search_new();
    beam_search_opts bo = {.beam_size = 3, .nbest = 3, .ctc_weight = 0.3, .penalty = 0.2};
    bs_nbest nb;
    stand_in_calls = 0;
    beam_search_run(w, lp, hlen, 7, &att, NULL, &bo, &nb);
    cr_assert_eq(calls, stand_in_calls, "one decoder call per step");
    cr_assert_gt(nb.n, 1);
    cr_assert_eq(h.n_found, nb.n);
    err_calc ec;
    err_calc_init(&ec, &d.tokens);
    for (int k = 0; k < nb.n; k++) {
        const s2t_hyp *g = k == 0 ? &h : &h.alt[k - 1];
        int want[256], n = 0;
        for (int j = 0; j < nb.hyps[k].n_ids; j++)
            if (nb.hyps[k].ids[j] != 0) want[n++] = nb.hyps[k].ids[j];
        cr_assert_eq(g->n_ids, (size_t)n, "hyp %d", k);
        cr_assert(n == 0 || memcmp(g->ids, want, (size_t)n * sizeof(int)) == 0, "hyp %d", k);
        cr_assert_eq(g->score, nb.hyps[k].score, "hyp %d", k);
        char *text = token_ids_to_text(&ec, want, (size_t)n);
        cr_assert_str_eq(g->text, text);
        free(text);
        cr_assert_eq(g->frames, frames);
        if (k > 0) cr_assert_geq(h.score, g->score);
    }
    bs_nbest_free(&nb);
    beam_search_free(w);
    free(lp);
    asr_data_close(&d);
    s2t_hyp_free(&h);
    speech2text_close(s);
    be.destroy(&be);
}

/* CTC only: nbest does not change the best (the frame-synchronous search), and the others are its
 * final beam in rank order. */
Test(speech2text, prefix_beam_nbest_is_its_final_beam)
{
    esp_err err;
    backend be;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0);
    s2t_opts o1 = {.beam_size = 4, .ctc_weight = 1.0, .nbest = 1}, o3 = o1;
    o3.nbest = 3;
    speech2text *s1 = speech2text_open(&be, &mf, &o1, &err), *s3 = speech2text_open(&be, &mf, &o3, &err);
    cr_assert(s1 && s3, "%s", err.msg);
    const char *path = test_path(dir, "a.wav");
    s2t_hyp h1, h3;
    cr_assert_eq(speech2text_decode_files(s1, &path, 1, &h1, &err), 0, "%s", err.msg);
    cr_assert_eq(speech2text_decode_files(s3, &path, 1, &h3, &err), 0, "%s", err.msg);
    cr_assert_eq(h1.n_found, 1);
    cr_assert_null(h1.alt);
    cr_assert_eq(h3.n_found, 3);
    cr_assert_str_eq(h1.text, h3.text);
    cr_assert_eq(h1.score, h3.score);
    for (int k = 0; k < 2; k++) {
        cr_assert_geq(k == 0 ? h3.score : h3.alt[k - 1].score, h3.alt[k].score);
        cr_assert(strcmp(h3.alt[k].text, h3.text) != 0 || h3.alt[k].n_ids != h3.n_ids, "alternatives differ");
    }
    s2t_hyp_free(&h1), s2t_hyp_free(&h3);
    speech2text_close(s1), speech2text_close(s3);
    be.destroy(&be);
}

#ifdef ESPNET3_CUDA
/* Stage 6 with `device: cuda`: backend_kind_for maps it to the CUDA backend and the decoder runs
 * on it; the hypotheses equal the CPU backend's. Needs a CUDA device (make CUDA=1 cuda-check runs
 * it on a GPU and on the CPU emulation); without one it prints why it is skipped. */
Test(speech2text, decodes_on_the_cuda_backend_as_on_the_cpu, .timeout = 600)
{
    esp_err err;
    backend_kind kind;
    if (backend_kind_for("cuda", &kind, &err) != 0) cr_skip_test("no CUDA device (%s)", err.msg);
    cr_assert_eq(kind, BACKEND_CUDA);
    backend *be[2] = {backend_open(BACKEND_CPU, 0, 1, &err), backend_open(kind, 0, 1, &err)};
    cr_assert(be[0] && be[1], "%s", err.msg);
    const char *paths[2] = {test_path(dir, "a.wav"), test_path(dir, "b.wav")};
    s2t_hyp h[2][2];
    for (int k = 0; k < 2; k++) {
        s2t_opts o = {.beam_size = 3, .ctc_weight = 1.0};
        speech2text *s = speech2text_open(be[k], &mf, &o, &err);
        cr_assert_not_null(s, "%s", err.msg);
        cr_assert_eq(speech2text_decode_files(s, paths, 2, h[k], &err), 0, "%s", err.msg);
        speech2text_close(s);
    }
    for (int i = 0; i < 2; i++) {
        cr_assert(h[0][i].n_ids > 0);
        cr_assert_str_eq(h[1][i].text, h[0][i].text, "%s: cuda '%s', cpu '%s'", paths[i], h[1][i].text, h[0][i].text);
        fprintf(stderr, "speech2text: %s decodes on %s as on cpu: '%s'\n", paths[i], be[1]->name, h[1][i].text);
        s2t_hyp_free(&h[0][i]);
        s2t_hyp_free(&h[1][i]);
    }
    backend_close(be[0]);
    backend_close(be[1]);
}
#endif
