/* espnet2/asr_transducer's BeamSearchTransducer (asr_transducer_inference.Speech2Text's search)
 * against the real one (fixtures by scripts/make_asr_transducer_fixtures.py, pack "search"): the
 * asr_transducer fixture model's RNNDecoder and joint on one utterance's Encoder output, with
 * TS_OPTS_ASR_TRANSDUCER (no greedy branch: beam 1 is default with a beam of one; score_norm false)
 * and the beam_search_config of each mode: the same n-best, in the same order, labels identical and
 * scores within float rounding. The same for the model with the StatelessDecoder (pack
 * stateless_search), with a GRU RNNDecoder of embed_size 8 (packs gru_weights, gru_search), and for
 * the model whose Encoder's blocks differ in type and sizes (packs mixed_*): there espnet3's inference
 * model encodes utterance 0 itself (its Encoder output against ESPnet2's) and searches its own
 * output; the same with conv1d blocks of kernel 1 between them (pointwise_*), with conv1d blocks
 * that shrink the frames (shrink_*: 6 encoder frames from 15), with conv1d blocks that change the
 * size (widen_*: an encoder output of 20), with a conv1d block first (convfirst_*) and with
 * main_conf's rms_norm and scale_norm gating units (norms_rms_*) and with main_conf
 * simplified_att_score (simplified_*). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/config/config.h"
#include "core/decode/s2t_config.h"
#include "core/decode/transducer_search.h"
#include "core/nn/model.h"
#include "test/unit/nn/fx_asr_transducer.h"
#include "test/unit/nn/fx_pack.h"
#include "test/unit/test_util.h"

typedef struct search_case {
    const char *name;
    int beam;
    ts_opts o;
} search_case;

/* The script's SEARCHES, as ts_opts over TS_OPTS_ASR_TRANSDUCER. */
static search_case case_of(int i)
{
    search_case c = {.o = (ts_opts)TS_OPTS_ASR_TRANSDUCER};
    switch (i) {
    case 0: c.name = "beam1", c.beam = 1; break;
    case 1: c.name = "default", c.beam = 4, c.o.nbest = 3; break;
    case 2: c.name = "default_norm", c.beam = 3, c.o.nbest = 2, c.o.score_norm = 1; break;
    case 3: c.name = "tsd", c.beam = 4, c.o.search_type = TS_TSD, c.o.max_sym_exp = 3, c.o.nbest = 3; break;
    case 4: c.name = "alsd", c.beam = 4, c.o.search_type = TS_ALSD, c.o.u_max = 10, c.o.nbest = 3; break;
    case 6: c.name = "tsd_defaults", c.beam = 3, c.o.search_type = TS_TSD, c.o.nbest = 2; break;
    case 7: c.name = "maes_defaults", c.beam = 3, c.o.search_type = TS_MAES, c.o.nbest = 2; break;
    default:
        c.name = "maes", c.beam = 4, c.o.search_type = TS_MAES, c.o.nstep = 3, c.o.expansion_gamma = 2.3;
        c.o.expansion_beta = 2, c.o.nbest = 3;
    }
    return c;
}

enum { RNN = 0, STATELESS = 1, MIXED = 2, POINTWISE = 3, RNN_GRU = 4, SHRINK = 5, WIDEN = 6, CONVFIRST = 7, NORMS_RMS = 8,
       SIMPLIFIED = 9 };

/* Utterance 0 of the loss pack's batch through m's Encoder (inference), into enc (T2 x d, device):
 * ESPnet2's Encoder output in the search pack. Returns T2. */
static int encode_utterance0(asr_model *m, const pack *s, float **enc)
{
    backend *be = m->be;
    pack in = load_pack("asr_transducer", "loss");
    size_t nf, n;
    const float *x = pack_must(&in, "in.feats", &nf), *lens = pack_must(&in, "in.lens", &n);
    int T = (int)(nf / 2 / (size_t)m->dims.idim), len = (int)lens[0];
    float *feats = be->alloc(be, (size_t)len * m->dims.idim * sizeof(float));
    be->copy(be, feats, x, (size_t)len * m->dims.idim * sizeof(float), BACKEND_HOST_TO_DEVICE);
    cr_assert_eq(len, T, "utterance 0 is the longest");
    asr_model_forward(m, feats, &len, 1, len, 0, 0);
    size_t ne;
    const float *ref = pack_must(s, "in.enc", &ne);
    cr_assert_eq(ne, (size_t)m->T2 * m->dims.d);
    float *host = malloc(ne * sizeof *host);
    be->synchronize(be);
    be->copy(be, host, m->lnf, ne * sizeof(float), BACKEND_DEVICE_TO_HOST);
    double e = pack_rel_err(host, ref, ne, 1.0);
    cr_expect_lt(e, 1e-5, "the Encoder's output differs from ESPnet2's: %g", e);
    *enc = be->alloc(be, ne * sizeof(float));
    be->copy(be, *enc, m->lnf, ne * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    be->free(be, feats);
    free(host);
    pack_free(&in);
    return m->T2;
}

static void check_mode(int which, int variant)
{
    int stateless = variant == STATELESS, gru = variant == RNN_GRU;
    search_case sc = case_of(which);
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    static const char *const weights[] = {"weights", "weights", "mixed_weights", "pointwise_weights", "weights",
                                           "shrink_weights", "widen_weights", "convfirst_weights", "norms_rms_weights",
                                           "simplified_weights"};
    static const char *const searches[] = {"search", "stateless_search", "mixed_search", "pointwise_search",
                                           "gru_search", "shrink_search", "widen_search", "convfirst_search",
                                           "norms_rms_search", "simplified_search"};
    pack w = load_pack("asr_transducer", weights[variant]);
    pack s = load_pack("asr_transducer", searches[variant]);
    pack gw = gru ? load_pack("asr_transducer", "gru_weights") : (pack){0};
    model_dims d = {.idim = 20, .d = 16, .heads = 2, .ff = 24, .blocks = 2, .vocab = 12, .encoder = ENC_CONFORMER,
                    .macaron = 1, .rel_pos = 1, .use_cnn = 1, .cnn_kernel = 3, .act = ACT_SWISH,
                    .input_layer = IN_CONV2D, .tr_layers = stateless ? 0 : 2, .tr_stateless = stateless,
                    .tr_hidden = 12, .tr_joint = 10, .body = 1, .tr_gru = gru, .tr_embed = gru ? 8 : 0};
    d.f2 = input_layer_out_bins(IN_CONV2D, d.idim);
    if (variant == MIXED) d = fx_mixed_dims();
    if (variant == POINTWISE) d = fx_pointwise_dims();
    if (variant == SHRINK) d = fx_shrink_dims();
    if (variant == WIDEN) d = fx_widen_dims();
    if (variant == CONVFIRST) d = fx_convfirst_dims();
    if (variant == NORMS_RMS) d = fx_norms_dims(NORM_RMS);
    if (variant == SIMPLIFIED) d = fx_mixed_dims(), d.simplified_att = 1;
    asr_model m;
    asr_model_init_inference(&m, be, &d);
    float *host = calloc(m.table.state_total, sizeof *host);
    for (size_t i = 0; i < m.table.n; i++) {
        const param_info *p = &m.table.items[i];
        char scaled[160];
        snprintf(scaled, sizeof scaled, "weight.%s", p->name);
        size_t n;
        const float *v = pack_get(&s, scaled, &n);
        if (!v && gru) v = pack_get(&gw, p->name, &n);
        if (!v) v = pack_must(&w, p->name, &n);
        cr_assert_eq(n, p->count, "%s", p->name);
        memcpy(host + p->offset, v, n * sizeof *v);
    }
    asr_model_state_from_host(&m, host);
    size_t ne;
    const float *enc_h = pack_must(&s, "in.enc", &ne);
    int T = (int)(ne / (size_t)d.d);
    float *enc;
    if (variant == MIXED || variant == POINTWISE || variant >= SHRINK) {
        T = encode_utterance0(&m, &s, &enc);
    } else {
        enc = be->alloc(be, ne * sizeof(float));
        be->copy(be, enc, enc_h, ne * sizeof(float), BACKEND_HOST_TO_DEVICE);
    }
    ts_result r;
    cr_assert_eq(ts_check(&sc.o, sc.beam, d.vocab, &err), 0, "%s", err.msg);
    transducer_search(&m, enc, T, sc.beam, &sc.o, &r);
    char key[96];
    snprintf(key, sizeof key, "%s.n", sc.name);
    int n_ref = (int)pack_must(&s, key, NULL)[0];
    cr_assert_eq(r.n, n_ref, "%s: %d hypotheses, ESPnet %d", sc.name, r.n, n_ref);
    double worst = 0;
    for (int i = 0; i < r.n; i++) {
        size_t ny;
        snprintf(key, sizeof key, "%s.%d.yseq", sc.name, i);
        const float *y = pack_must(&s, key, &ny);
        snprintf(key, sizeof key, "%s.%d.score", sc.name, i);
        double ref = pack_must(&s, key, NULL)[0];
        cr_assert_eq((size_t)r.hyps[i].n + 1, ny, "%s hyp %d: %d labels, ESPnet %zu", sc.name, i, r.hyps[i].n, ny - 1);
        for (int k = 0; k < r.hyps[i].n; k++)
            cr_assert_eq(r.hyps[i].ids[k], (int)y[k + 1], "%s hyp %d label %d: %d, ESPnet %d", sc.name, i, k,
                         r.hyps[i].ids[k], (int)y[k + 1]);
        double e = fabs(r.hyps[i].score - ref) / fmax(1.0, fabs(ref));
        worst = fmax(worst, e);
        cr_expect_lt(e, 1e-5, "%s hyp %d: score %.7f, ESPnet %.7f", sc.name, i, r.hyps[i].score, ref);
    }
    static const char *const what[] = {"", " (stateless)", " (mixed blocks, espnet3's Encoder)",
                                       " (pointwise conv1d blocks, espnet3's Encoder)", " (gru)",
                                       " (conv1d blocks that shrink the frames, espnet3's Encoder)",
                                       " (conv1d blocks that change the size, espnet3's Encoder)",
                                       " (a conv1d block first, espnet3's Encoder)",
                                       " (rms_norm and scale_norm gating units, espnet3's Encoder)",
                                       " (simplified_att_score, espnet3's Encoder)"};
    cr_log_info("%s%s: %d hypotheses as ESPnet's, worst score rel err %.2g", sc.name, what[variant], r.n, worst);
    ts_result_free(&r);
    be->free(be, enc);
    free(host);
    pack_free(&w), pack_free(&s);
    if (gru) pack_free(&gw);
    asr_model_free(&m);
    backend_close(be);
}

Test(asr_transducer_search, beam_1_is_default_with_a_beam_of_one) { check_mode(0, 0); }
Test(asr_transducer_search, default_as_espnet) { check_mode(1, 0); }
Test(asr_transducer_search, default_with_score_norm_as_espnet) { check_mode(2, 0); }
Test(asr_transducer_search, tsd_as_espnet) { check_mode(3, 0); }
Test(asr_transducer_search, alsd_as_espnet) { check_mode(4, 0); }
Test(asr_transducer_search, maes_as_espnet) { check_mode(5, 0); }
Test(asr_transducer_search, tsd_and_maes_with_its_defaults_as_espnet) { check_mode(6, 0), check_mode(7, 0); }
Test(asr_transducer_search, stateless_decoder_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, STATELESS);
}
Test(asr_transducer_search, gru_decoder_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, RNN_GRU);
}
Test(asr_transducer_search, mixed_blocks_encoder_then_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, MIXED);
}
Test(asr_transducer_search, pointwise_conv1d_blocks_encoder_then_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, POINTWISE);
}
Test(asr_transducer_search, shrinking_conv1d_blocks_encoder_then_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, SHRINK);
}
Test(asr_transducer_search, widening_conv1d_blocks_encoder_then_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, WIDEN);
}
Test(asr_transducer_search, conv1d_block_first_encoder_then_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, CONVFIRST);
}
Test(asr_transducer_search, rms_norm_encoder_then_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, NORMS_RMS);
}
Test(asr_transducer_search, simplified_att_score_encoder_then_every_mode_as_espnet)
{
    for (int i = 0; i < 8; i++) check_mode(i, SIMPLIFIED);
}

/* asr_transducer_inference.Speech2Text's model.beam_search_config into ts_opts (its search's
 * defaults for the keys left out); the other Speech2Text's transducer_conf, the keys its
 * BeamSearchTransducer lacks and nsc refused at their line. */
static int load_infer(const char *dir, const char *text, esp_config **cfg, esp_err *err)
{
    const char *p = test_path(dir, "inference.yaml");
    test_write_text(p, text);
    config_load_opts o = {0};
    return config_load(CONFIG_INFERENCE, p, &o, cfg, err);
}

#define TARGET "model:\n  _target_: " TARGET_ASR_TRANSDUCER_S2T "\n"

/* yaml fails to load with want in the message. */
static void expect_refused(const char *dir, const char *yaml, const char *want)
{
    esp_config *cfg = NULL;
    esp_err err;
    int rc = load_infer(dir, yaml, &cfg, &err);
    if (rc == 0) config_free(cfg);
    cr_assert_neq(rc, 0, "%s", yaml);
    cr_assert(strstr(err.msg, want), "%s\nlacks\n%s", err.msg, want);
}

Test(asr_transducer_search, beam_search_config_keys_into_options)
{
    char dir[256];
    test_tmpdir_make(dir, sizeof dir, "beam_search_config");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(load_infer(dir, TARGET "  beam_size: 4\n  beam_search_config:\n    search_type: alsd\n    u_max: 7\n"
                                        "    score_norm: true\n",
                            &cfg, &err),
                 0, "%s", err.msg);
    s2t_opts o;
    s2t_opts_from_cfg(&o, (const inference_cfg *)cfg->typed, "inference.yaml");
    cr_assert(o.transducer.search_type == TS_ALSD && o.transducer.u_max == 7 && o.transducer.score_norm);
    cr_assert(o.transducer.no_greedy);
    config_free(cfg);
    cr_assert_eq(load_infer(dir, TARGET "  beam_size: 1\n", &cfg, &err), 0, "%s", err.msg);
    s2t_opts_from_cfg(&o, (const inference_cfg *)cfg->typed, "inference.yaml");
    ts_opts def = TS_OPTS_ASR_TRANSDUCER;
    cr_assert(!memcmp(&o.transducer, &def, sizeof def));
    config_free(cfg);
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {TARGET "  transducer_conf:\n    nbest: 2\n",
         "inference.yaml:4:5: model.transducer_conf: not a key of asr_transducer_inference's Speech2Text"},
        {"model:\n  beam_search_config:\n    u_max: 2\n",
         "model.beam_search_config: not a key of asr_inference's Speech2Text"},
        {TARGET "  beam_search_config:\n    prefix_alpha: 2\n",
         "inference.yaml:4:19: model.beam_search_config.prefix_alpha: not a key of espnet2/asr_transducer's"},
        {TARGET "  beam_search_config:\n    search_type: nsc\n",
         "inference.yaml:4:18: model.beam_search_config.search_type: 'nsc' is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_refused(dir, bad[i].yaml, bad[i].want);
    test_tmpdir_remove(dir);
}

/* asr_transducer_inference.Speech2Text's streaming keys (core/decode/transducer_stream.h) into
 * s2t_opts (ESPnet2's defaults when left out, a negative left_context 0); under asr_inference's
 * Speech2Text they are refused at their line, and so is a decoding_window below 1 ms. */
Test(asr_transducer_search, streaming_keys_into_options_and_refused_where_not_built)
{
    char dir[256];
    test_tmpdir_make(dir, sizeof dir, "tstream_keys");
    esp_config *cfg;
    esp_err err;
    s2t_opts o;
    cr_assert_eq(load_infer(dir, TARGET "  streaming: true\n", &cfg, &err), 0, "%s", err.msg);
    s2t_opts_from_cfg(&o, (const inference_cfg *)cfg->typed, "inference.yaml");
    cr_assert(o.streaming && o.decoding_window == 640 && o.left_context == 32, "%d %d %d", o.streaming,
              o.decoding_window, o.left_context);
    config_free(cfg);
    cr_assert_eq(load_infer(dir, TARGET "  streaming: true\n  decoding_window: 200\n  left_context: -3\n", &cfg, &err),
                 0, "%s", err.msg);
    s2t_opts_from_cfg(&o, (const inference_cfg *)cfg->typed, "inference.yaml");
    cr_assert(o.streaming && o.decoding_window == 200 && o.left_context == 0);
    config_free(cfg);
    cr_assert_eq(load_infer(dir, "model:\n  streaming: false\n", &cfg, &err), 0, "%s", err.msg); /* changes nothing */
    config_free(cfg);
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"model:\n  beam_size: 2\n  streaming: true\n",
         "inference.yaml:3:14: model.streaming: asr_inference's streaming decoding (BatchBeamSearchOnlineSim) is not "
         "built"},
        {"model:\n  left_context: 4\n", "inference.yaml:2:17: model.left_context: not a key of asr_inference's"},
        {TARGET "  decoding_window: 0\n", "model.decoding_window"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_refused(dir, bad[i].yaml, bad[i].want);
    test_tmpdir_remove(dir);
}
