/* ESPnet2's BeamSearchTransducer against the real one (fixtures by
 * scripts/make_transducer_fixtures.py, pack "search"): the fixture model's transducer on one
 * utterance's encoder output, every search mode with the transducer_conf keys the script used
 * (greedy, default, default with score_norm_during, tsd, alsd, nsc, maes): the same n-best, in the
 * same order, each hypothesis' labels identical and its score within float rounding. The same with
 * the decoder's rnn_type gru (packs gru_weights, gru_search). */
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
#include "test/unit/nn/fx_pack.h"
#include "test/unit/test_util.h"

typedef struct search_case {
    const char *name;
    int beam;
    ts_opts o;
} search_case;

/* The script's SEARCHES, as ts_opts over TS_OPTS_DEFAULT. */
static search_case case_of(int i)
{
    search_case c = {.o = (ts_opts)TS_OPTS_DEFAULT};
    switch (i) {
    case 0: c.name = "greedy", c.beam = 1; break;
    case 1: c.name = "default", c.beam = 4, c.o.nbest = 3; break;
    case 2:
        c.name = "default_norm_during", c.beam = 3, c.o.nbest = 2, c.o.score_norm_during = 1, c.o.score_norm = 0;
        break;
    case 3: c.name = "tsd", c.beam = 4, c.o.search_type = TS_TSD, c.o.max_sym_exp = 3, c.o.nbest = 3; break;
    case 4: c.name = "alsd", c.beam = 4, c.o.search_type = TS_ALSD, c.o.u_max = 10, c.o.nbest = 3; break;
    case 5:
        c.name = "nsc", c.beam = 4, c.o.search_type = TS_NSC, c.o.nstep = 2, c.o.prefix_alpha = 2, c.o.nbest = 3;
        break;
    default:
        c.name = "maes", c.beam = 4, c.o.search_type = TS_MAES, c.o.nstep = 3, c.o.expansion_gamma = 2.3;
        c.o.expansion_beta = 2, c.o.nbest = 3;
    }
    return c;
}

static void check_mode(int which, int gru)
{
    search_case sc = case_of(which);
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    pack w = load_pack("transducer", "weights"), s = load_pack("transducer", gru ? "gru_search" : "search");
    pack gw = gru ? load_pack("transducer", "gru_weights") : (pack){0};
    model_dims d = {.idim = 80, .d = 32, .heads = 4, .ff = 64, .blocks = 2, .vocab = 12, .tr_layers = 2,
                    .tr_hidden = 24, .tr_joint = 20, .tr_gru = gru};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
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
    int T = (int)(ne / 32);
    float *enc = be->alloc(be, ne * sizeof(float));
    be->copy(be, enc, enc_h, ne * sizeof(float), BACKEND_HOST_TO_DEVICE);
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
        cr_assert_eq((int)y[0], 0);
        for (int k = 0; k < r.hyps[i].n; k++)
            cr_assert_eq(r.hyps[i].ids[k], (int)y[k + 1], "%s hyp %d label %d: %d, ESPnet %d", sc.name, i, k,
                         r.hyps[i].ids[k], (int)y[k + 1]);
        double e = fabs(r.hyps[i].score - ref) / fmax(1.0, fabs(ref));
        worst = fmax(worst, e);
        cr_expect_lt(e, 1e-5, "%s hyp %d: score %.7f, ESPnet %.7f", sc.name, i, r.hyps[i].score, ref);
    }
    cr_log_info("%s%s: %d hypotheses as ESPnet's, worst score rel err %.2g", gru ? "gru " : "", sc.name, r.n, worst);
    ts_result_free(&r);
    be->free(be, enc);
    free(host);
    pack_free(&w), pack_free(&s);
    if (gru) pack_free(&gw);
    asr_model_free(&m);
    backend_close(be);
}

Test(transducer_search, greedy_as_espnet) { check_mode(0, 0); }
Test(transducer_search, default_beam_search_as_espnet) { check_mode(1, 0); }
Test(transducer_search, default_with_score_norm_during_as_espnet) { check_mode(2, 0); }
Test(transducer_search, tsd_as_espnet) { check_mode(3, 0); }
Test(transducer_search, alsd_as_espnet) { check_mode(4, 0); }
Test(transducer_search, nsc_as_espnet) { check_mode(5, 0); }
Test(transducer_search, maes_as_espnet) { check_mode(6, 0); }

/* rnn_type gru: every mode on the GRU decoder (a hypothesis' state is h alone). */
Test(transducer_search, gru_every_mode_as_espnet)
{
    for (int i = 0; i < 7; i++) check_mode(i, 1);
}

/* An inference config's model.transducer_conf into ts_opts: every key, ESPnet's defaults for the
 * ones left out (and without the block), mbg and out-of-range values refused at their line. */
static int load_infer(const char *dir, const char *text, esp_config **cfg, esp_err *err)
{
    const char *p = test_path(dir, "inference.yaml");
    test_write_text(p, text);
    config_load_opts o = {0};
    return config_load(CONFIG_INFERENCE, p, &o, cfg, err);
}

Test(transducer_search, transducer_conf_keys_into_options)
{
    char dir[256];
    test_tmpdir_make(dir, sizeof dir, "transducer_conf");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(load_infer(dir, "model:\n  beam_size: 4\n  transducer_conf:\n    search_type: maes\n"
                                 "    max_sym_exp: 3\n    u_max: 7\n    nstep: 3\n    prefix_alpha: 0\n"
                                 "    expansion_gamma: 1.5\n    expansion_beta: 1\n    score_norm: false\n"
                                 "    score_norm_during: true\n    nbest: 5\n",
                            &cfg, &err),
                 0, "%s", err.msg);
    s2t_opts o;
    s2t_opts_from_cfg(&o, (const inference_cfg *)cfg->typed, "inference.yaml");
    const ts_opts *t = &o.transducer;
    cr_assert(t->search_type == TS_MAES && t->max_sym_exp == 3 && t->u_max == 7 && t->nstep == 3 &&
              t->prefix_alpha == 0 && t->expansion_beta == 1);
    cr_assert(!t->score_norm && t->score_norm_during && t->nbest == 5);
    cr_assert_float_eq(t->expansion_gamma, 1.5, 1e-12);
    config_free(cfg);
    cr_assert_eq(load_infer(dir, "model:\n  beam_size: 4\n", &cfg, &err), 0, "%s", err.msg);
    s2t_opts_from_cfg(&o, (const inference_cfg *)cfg->typed, "inference.yaml");
    ts_opts def = TS_OPTS_DEFAULT;
    cr_assert(!memcmp(&o.transducer, &def, sizeof def));
    config_free(cfg);
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"model:\n  transducer_conf:\n    search_type: mbg\n",
         "inference.yaml:3:18: model.transducer_conf.search_type: 'mbg' is not supported"},
        {"model:\n  transducer_conf:\n    nstep: 0\n", "model.transducer_conf.nstep: must be in [1, 1000], got 0"},
        {"model:\n  transducer_conf:\n    nbst: 2\n", "model.transducer_conf.nbst: unknown key"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cfg = NULL;
        int rc = load_infer(dir, bad[i].yaml, &cfg, &err);
        if (rc == 0) config_free(cfg);
        cr_assert_neq(rc, 0, "%s", bad[i].yaml);
        cr_assert(strstr(err.msg, bad[i].want), "%s\nlacks\n%s", err.msg, bad[i].want);
    }
    /* maes' candidates must fit the vocabulary (ESPnet's assertion) */
    ts_opts m = TS_OPTS_DEFAULT;
    m.search_type = TS_MAES;
    cr_assert_neq(ts_check(&m, 11, 12, &err), 0);
    cr_assert(strstr(err.msg, "beam_size (11) + expansion_beta (2)"), "%s", err.msg);
    test_tmpdir_remove(dir);
}
