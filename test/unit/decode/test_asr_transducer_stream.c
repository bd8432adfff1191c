/* espnet2/asr_transducer's chunk-by-chunk decoding (Speech2Text.streaming_decode) against the real
 * one (fixtures by scripts/make_asr_transducer_stream_fixtures.py, pack conformer_search): ESPnet2's
 * encoder output of each call (Encoder.chunk_forward over decoding_window pieces of a 1.9 s
 * utterance, left_context 0, 4 and 8) searched chunk by chunk (transducer_search_chunk, the
 * hypotheses carried between calls, is_final on the last): after every call the same best running
 * hypothesis, and the same final n-best, labels identical and scores within float rounding, for
 * default beam 1 and 4, tsd and maes. Then the whole of it from ESPnet2's model folder and WAV
 * (conformer/, utt.wav; the frontend's buffering, the encoder's chunks with their left context, the
 * search): ESPnet2's best running hypothesis after every call (<model>_partial.txt) and its final n-best
 * (<model>_results.txt), for the conformer model, one of conformer, ebranchformer and
 * branchformer blocks (mixed/) and those blocks with causal convolutions (causal/, trained with
 * main_conf.dynamic_chunk_training: each convolution's cache of its last inputs carried between
 * chunks), those blocks with main_conf.simplified_att_score (simplified/: linear_pos to one scalar
 * per head, the attention cache's positions included), and pushes of random sizes end in the same
 * text. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/compute/backend_cpu.h"
#include "core/data/audio.h"
#include "core/decode/speech2text.h"
#include "core/decode/transducer_search.h"
#include "core/decode/transducer_stream.h"
#include "core/nn/model_files.h"
#include "core/nn/model.h"
#include "test/unit/nn/fx_pack.h"
#include "test/unit/test_util.h"

/* The script's DECODINGS: search type and beam (nbest 2). */
static const struct {
    int type, beam;
} decodings[] = {{TS_DEFAULT, 1}, {TS_DEFAULT, 4}, {TS_DEFAULT, 4}, {TS_DEFAULT, 4}, {TS_TSD, 3}, {TS_MAES, 3}};

/* The first hypothesis of the highest score (Python's max). */
static int best_of(const ts_result *r)
{
    int b = 0;
    for (int i = 1; i < r->n; i++) b = r->hyps[i].score > r->hyps[b].score ? i : b;
    return b;
}

/* hyp against the pack's <key>.yseq / <key>.score; the worst relative score error so far in worst. */
static void expect_hyp(const pack *s, const char *key, const ts_hyp *h, double *worst)
{
    char k[96];
    size_t ny;
    snprintf(k, sizeof k, "%s.yseq", key);
    const float *y = pack_must(s, k, &ny);
    snprintf(k, sizeof k, "%s.score", key);
    double ref = pack_must(s, k, NULL)[0];
    cr_assert_eq((size_t)h->n + 1, ny, "%s: %d labels, ESPnet %zu", key, h->n, ny - 1);
    for (int i = 0; i < h->n; i++)
        cr_assert_eq(h->ids[i], (int)y[i + 1], "%s label %d: %d, ESPnet %d", key, i, h->ids[i], (int)y[i + 1]);
    double e = fabs(h->score - ref) / fmax(1.0, fabs(ref));
    *worst = fmax(*worst, e);
    cr_expect_lt(e, 1e-5, "%s: score %.7f, ESPnet %.7f", key, h->score, ref);
}

Test(asr_transducer_stream, search_carried_across_espnets_encoder_chunks)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    pack s = load_pack("asr_transducer_stream", "conformer_search");
    model_dims d = {.idim = 20, .d = 16, .heads = 2, .ff = 24, .blocks = 2, .vocab = 12, .encoder = ENC_CONFORMER,
                    .macaron = 1, .rel_pos = 1, .use_cnn = 1, .cnn_kernel = 3, .act = ACT_SWISH,
                    .input_layer = IN_CONV2D, .tr_layers = 2, .tr_hidden = 12, .tr_joint = 10, .body = 1,
                    .no_ctc = 1}; /* auxiliary_ctc_weight 0: no ctc_lin */
    d.f2 = input_layer_out_bins(IN_CONV2D, d.idim);
    asr_model m;
    asr_model_init_inference(&m, be, &d);
    float *host = calloc(m.table.state_total, sizeof *host);
    for (size_t i = 0; i < m.table.n; i++) {
        const param_info *p = &m.table.items[i];
        size_t n;
        const float *v = pack_must(&s, p->name, &n);
        cr_assert_eq(n, p->count, "%s", p->name);
        memcpy(host + p->offset, v, n * sizeof *v);
    }
    asr_model_state_from_host(&m, host);
    float *enc = be->alloc(be, 4096 * sizeof(float));
    for (int c = 0; c < (int)(sizeof decodings / sizeof *decodings); c++) {
        ts_opts o = TS_OPTS_ASR_TRANSDUCER;
        o.search_type = decodings[c].type, o.nbest = 2;
        char key[96];
        snprintf(key, sizeof key, "c%d.calls", c);
        int calls = (int)pack_must(&s, key, NULL)[0];
        ts_result carry = {0};
        double worst = 0;
        for (int k = 0; k < calls; k++) {
            size_t ne = 0;
            snprintf(key, sizeof key, "c%d.%d.enc", c, k);
            const float *e = pack_get(&s, key, &ne);
            cr_assert(ne <= 4096);
            if (ne) be->copy(be, enc, e, ne * sizeof(float), BACKEND_HOST_TO_DEVICE);
            ts_result r;
            int final = k == calls - 1;
            transducer_search_chunk(&m, enc, (int)(ne / (size_t)d.d), decodings[c].beam, &o, &carry, final, &r);
            if (!final) {
                snprintf(key, sizeof key, "c%d.%d", c, k);
                expect_hyp(&s, key, &r.hyps[best_of(&r)], &worst);
            } else {
                snprintf(key, sizeof key, "c%d.n", c);
                cr_assert_eq(r.n, (int)pack_must(&s, key, NULL)[0], "decoding %d: %d final hypotheses", c, r.n);
                for (int i = 0; i < r.n; i++) {
                    snprintf(key, sizeof key, "c%d.%d.final", c, i);
                    expect_hyp(&s, key, &r.hyps[i], &worst);
                }
                cr_assert_eq(carry.n, 0, "the final call empties the carried hypotheses");
            }
            ts_result_free(&r);
        }
        cr_log_info("decoding %d (%s, beam %d): %d calls as ESPnet's, worst score rel err %.2g", c,
                    ts_type_name(decodings[c].type), decodings[c].beam, calls, worst);
    }
    be->free(be, enc);
    free(host);
    pack_free(&s);
    asr_model_free(&m);
    backend_close(be);
}

/* ---- the whole chunk-by-chunk decoding: frontend, encoder chunks and search ----------------- */

static const char *fx(const char *rel)
{
    static char p[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/test/fixtures/asr_transducer_stream/%s", test_root_dir(), rel);
    return p[k];
}

typedef struct opened {
    backend be;
    model_files mf;
    speech2text *s;
    ts_stream *st;
} opened;

static void open_model(opened *o, const char *model, int type, int beam, int window, int left)
{
    char cfg[600], pth[600];
    snprintf(cfg, sizeof cfg, "%s/config.yaml", fx(model));
    snprintf(pth, sizeof pth, "%s/valid.acc.ave.pth", fx(model));
    infer_model_cfg mc = {.asr_train_config = cfg, .asr_model_file = pth, .beam_size = beam, .nbest = 2};
    inference_cfg ic = {.model = &mc};
    esp_err err = {{0}};
    cr_assert_eq(model_files_locate(&o->mf, &ic, "inference.yaml", &err), 0, "%s", err.msg);
    cr_assert_eq(backend_cpu_init(&o->be, 1, &err), 0, "%s", err.msg);
    s2t_opts so = {.beam_size = beam, .nbest = 2, .transducer = TS_OPTS_ASR_TRANSDUCER};
    so.transducer.search_type = type, so.transducer.nbest = 2;
    o->s = speech2text_open(&o->be, &o->mf, &so, &err);
    cr_assert_not_null(o->s, "%s", err.msg);
    o->st = ts_stream_open(o->s, window, left, &err);
    cr_assert_not_null(o->st, "%s", err.msg);
}

static void close_model(opened *o)
{
    ts_stream_close(o->st);
    speech2text_close(o->s);
    o->be.destroy(&o->be);
    model_files_free(&o->mf);
}

static int type_of(const char *name)
{
    return !strcmp(name, "tsd") ? TS_TSD : !strcmp(name, "maes") ? TS_MAES : TS_DEFAULT;
}

/* h against <model>_partial.txt's best running hypothesis after call `call` of the decoding. */
static void expect_partial(const char *model, const char *search, int beam, int window, int left, int call,
                           const ts_hyp *h)
{
    char file[64], tag[128], *text, *save = NULL;
    snprintf(file, sizeof file, "%s_partial.txt", model);
    snprintf(tag, sizeof tag, "%s %s %d %d %d %d ", model, search, beam, window, left, call);
    text = test_slurp(fx(file));
    const char *line = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && !line; l = strtok_r(NULL, "\n", &save))
        if (!strncmp(l, tag, strlen(tag))) line = l + strlen(tag);
    cr_assert_not_null(line, "%s: no line %s", file, tag);
    double score;
    int k, at;
    cr_assert_eq(sscanf(line, "%lf %d%n", &score, &k, &at), 2);
    cr_assert_eq(h->n, k, "%s: %d labels, ESPnet %d", tag, h->n, k);
    for (int j = 0; j < k; j++) {
        int id, more;
        line += at;
        cr_assert_eq(sscanf(line, "%d%n", &id, &more), 1);
        at = more;
        cr_assert_eq(h->ids[j], id, "%s label %d", tag, j);
    }
    cr_expect_lt(fabs(h->score - score) / fmax(1.0, fabs(score)), 1e-4, "%s: score %.7f, ESPnet %.7f", tag, h->score,
                 score);
    free(text);
}

/* Every decoding of <model>_results.txt: ESPnet's pieces through ts_stream_decode (the same
 * final n-best), then the WAV pushed in seeded random sizes through ts_stream_push (the text of
 * that n-best's first). Returns the decodings compared. */
static int compare_results(const char *model)
{
    char results[64];
    snprintf(results, sizeof results, "%s_results.txt", model);
    FILE *f = fopen(fx(results), "r");
    cr_assert_not_null(f);
    float *wav;
    size_t n;
    esp_err err;
    cr_assert_eq(audio_read(fx("utt.wav"), 16000, "fs", &wav, &n, &err), 0, "%s", err.msg);
    char line[8192], name[32], search[16];
    int done = 0;
    unsigned rng = 7;
    while (fgets(line, sizeof line, f)) {
        int beam, window, left, calls, nh, used;
        cr_assert_eq(sscanf(line, "%31s %15s %d %d %d %d %d%n", name, search, &beam, &window, &left, &calls, &nh, &used),
                     7);
        if (strcmp(name, model)) continue;
        opened o;
        open_model(&o, model, type_of(search), beam, window, left);
        size_t ds = ts_stream_window(o.st), steps = n / ds;
        cr_assert_eq((int)steps + 1, calls);
        ts_result r = {0};
        for (size_t i = 0; i <= steps; i++) {
            ts_result_free(&r);
            int fin = i == steps;
            cr_assert_eq(ts_stream_decode(o.st, wav + i * ds, fin ? n - i * ds : ds, fin, &r, &err), 0, "%s", err.msg);
            if (!fin) expect_partial(model, search, beam, window, left, (int)i, &r.hyps[best_of(&r)]);
        }
        cr_assert_eq(r.n, nh, "%s: %d hypotheses, ESPnet %d", line, r.n, nh);
        const char *q = line + used;
        double worst = 0;
        int best_ids[512], nbest_ids = 0;
        for (int i = 0; i < nh; i++) {
            double score;
            int k, at;
            cr_assert_eq(sscanf(q, "%lf %d%n", &score, &k, &at), 2);
            q += at;
            cr_assert_eq(r.hyps[i].n, k, "%s hyp %d: %d labels, ESPnet %d", line, i, r.hyps[i].n, k);
            for (int j = 0; j < k; j++) {
                int id;
                cr_assert_eq(sscanf(q, "%d%n", &id, &at), 1);
                q += at;
                cr_assert_eq(r.hyps[i].ids[j], id, "%s hyp %d label %d", line, i, j);
                if (i == 0 && j < 512) best_ids[nbest_ids++] = id;
            }
            double e = fabs(r.hyps[i].score - score) / fmax(1.0, fabs(score));
            worst = fmax(worst, e);
            cr_expect_lt(e, 1e-4, "%s hyp %d: score %.7f, ESPnet %.7f", line, i, r.hyps[i].score, score);
        }
        ts_result_free(&r);
        /* pushes of random sizes: the same pieces, the same text */
        char *want = speech2text_text(o.s, best_ids, (size_t)nbest_ids);
        const char *text = NULL;
        for (size_t at = 0; at < n;) {
            rng = rng * 1103515245u + 12345u;
            size_t step = 1 + (rng >> 8) % 9000, take = step < n - at ? step : n - at;
            int fin = at + take == n;
            cr_assert_geq(ts_stream_push(o.st, wav + at, take, fin, &text, &err), 0, "%s", err.msg);
            at += take;
        }
        cr_assert_str_eq(text, want, "%s: pushes of random sizes end in '%s', ESPnet '%s'", line, text, want);
        cr_log_info("%s %s beam %d, window %d ms, left_context %d: %d calls, the n-best as ESPnet's (worst score rel "
                    "err %.2g); random pushes: '%s'", model, search, beam, window, left, calls, worst, want);
        free(want);
        close_model(&o);
        done++;
    }
    fclose(f);
    free(wav);
    return done;
}

Test(asr_transducer_stream, conformer_model_streamed_as_espnet) { cr_assert_eq(compare_results("conformer"), 6); }
Test(asr_transducer_stream, mixed_blocks_model_streamed_as_espnet) { cr_assert_eq(compare_results("mixed"), 3); }
Test(asr_transducer_stream, causal_model_streamed_as_espnet) { cr_assert_eq(compare_results("causal"), 3); }
Test(asr_transducer_stream, simplified_att_score_model_streamed_as_espnet)
{
    cr_assert_eq(compare_results("simplified"), 3);
}
