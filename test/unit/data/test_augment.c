/* Waveform data augmentation: each effect against ESPnet2/torchaudio on fixtures
 * (scripts/make_augment_fixtures.py), the data_aug_effects config as ESPnet3's mini_an4 writes it
 * and its bounds, ESPnet's weighted choice, and draws keyed by (seed, epoch, utterance) only. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/asr_data.h"
#include "core/data/augment_conf.h"
#include "test/unit/test_util.h"

static void quiet(void) { log_set_quiet(1); }

TestSuite(augment, .init = quiet);

static float *read_f32(const char *path, size_t *n)
{
    size_t len;
    esp_err err;
    char *b = read_file(path, READ_LIST, &len, &err);
    cr_assert_not_null(b, "%s", err.msg);
    *n = len / sizeof(float);
    float *x = xmalloc((*n ? *n : 1) * sizeof *x);
    memcpy(x, b, *n * sizeof *x);
    free(b);
    return x;
}

/* Every case of cases.yaml: our effect from the same config entry, same length, max abs error
 * below 1e-4 of the input's peak (0.9). */
Test(augment, effects_match_torchaudio_fixtures)
{
    char *dir = path_join(test_root_dir(), "test/fixtures/augment");
    esp_err err;
    ynode *root = yt_parse_file(test_path(dir, "cases.yaml"), &err);
    cr_assert_not_null(root, "%s", err.msg);
    int64_t fs;
    cr_assert(yt_as_int(yt_map_get(root, "fs"), &fs));
    size_t n;
    float *x = read_f32(test_path(dir, "input.f32"), &n);
    float peak = 0;
    for (size_t i = 0; i < n; i++) peak = fmaxf(peak, fabsf(x[i]));
    const ynode *cases = yt_map_get(root, "cases");
    cr_assert(cases && cases->n >= 20);
    int kinds_seen[AUG_KIND_COUNT] = {0};
    for (size_t c = 0; c < cases->n; c++) {
        const ynode *cs = cases->items[c];
        const char *name = yt_map_get(cs, "name")->str;
        int64_t want_n;
        cr_assert(yt_as_int(yt_map_get(cs, "samples"), &want_n));
        double w;
        aug_effect e;
        cr_assert_eq(config_aug_effect_parse(yt_map_get(cs, "effect"), name, &w, &e, &err), 0, "%s", err.msg);
        kinds_seen[e.kind] = 1;
        char *file = xasprintf("%s.f32", name);
        size_t ref_n;
        float *ref = read_f32(test_path(dir, file), &ref_n);
        size_t m;
        rng r;
        rng_init(&r, 1); /* corrupt_phase's cases have scale 0: no noise */
        float *y = aug_effect_apply(&e, x, n, (int)fs, &r, &m);
        cr_assert_eq(m, (size_t)want_n, "%s: %zu samples, torchaudio %" PRId64, name, m, want_n);
        cr_assert_eq(m, ref_n);
        double maxerr = test_err_abs_ff(y, ref, m, NULL);
        cr_log_info("%s: max abs error %.3g", name, maxerr);
        cr_assert(maxerr <= 1e-4 * peak, "%s: max abs error %.3g (allowed %.3g)", name, maxerr, 1e-4 * peak);
        free(y);
        free(ref);
        free(file);
    }
    for (int k = 0; k < AUG_KIND_COUNT; k++) cr_assert(kinds_seen[k], "no fixture for %s", aug_kind_name((aug_kind)k));
    free(x);
    yt_free(root);
    free(dir);
}

Test(augment, resample_lengths_as_torchaudio)
{
    float x[1000] = {0};
    size_t m;
    /* speed_perturb 0.9 at 16 kHz: 14400 -> 16000 = 9 -> 10: ceil(10 n / 9). */
    int o, nf;
    cr_assert_eq(aug_speed_rates(0.9, 16000, &o, &nf), 0);
    cr_assert_eq(o, 9);
    cr_assert_eq(nf, 10);
    float *y = aug_resample(x, 1000, 9, 10, &m);
    cr_assert_eq(m, 1112u);
    free(y);
    y = aug_resample(x, 1000, 11, 10, &m);
    cr_assert_eq(m, 910u);
    free(y);
    /* A constant stays constant away from the edges (the kernel sums to ~1 per phase). */
    for (int i = 0; i < 1000; i++) x[i] = 0.5f;
    y = aug_resample(x, 1000, 9, 10, &m);
    for (size_t i = 100; i < 1000; i++) cr_assert_float_eq(y[i], 0.5f, 5e-3);
    free(y);
    /* pitch_shift's 17959 -> 16000 (gcd 1): computed without tabulating the 16000 x 17973 kernel. */
    y = aug_resample(x, 1000, 17959, 16000, &m);
    cr_assert_eq(m, 891u);
    for (size_t i = 100; i < 800; i++) cr_assert_float_eq(y[i], 0.5f, 5e-3);
    free(y);
}

static const char *MINI_AN4 =
    "dataset:\n"
    "  preprocessor:\n"
    "    _target_: espnet2.train.preprocessor.CommonPreprocessor\n"
    "    fs: 16000\n"
    "    train: true\n"
    "    data_aug_effects:\n"
    "        - [0.1, \"contrast\", {\"enhancement_amount\": 75.0}]\n"
    "        - [0.1, \"highpass\", {\"cutoff_freq\": 5000, \"Q\": 0.707}]\n"
    "        - [0.1, \"equalization\", {\"center_freq\": 1000, \"gain\": 0, \"Q\": 0.707}]\n"
    "        - - 0.1\n"
    "          - - [0.3, \"speed_perturb\", {\"factor\": 0.9}]\n"
    "            - [0.3, \"speed_perturb\", {\"factor\": 1.1}]\n"
    "            - [0.3, \"speed_perturb\", {\"factor\": 1.3}]\n"
    "    data_aug_num: [1, 4]\n"
    "    data_aug_prob: 1.0\n";

/* text loaded as a training config (its rules checked, its effect list parsed), then its augmentation read. */
static int parse_text(const char *text, augment_conf *c, esp_err *err)
{
    ynode *root = yt_parse_string(text, strlen(text), "conf.yaml", err);
    cr_assert_not_null(root, "%s", err->msg);
    esp_config *cfg;
    if (config_load_tree(CONFIG_TRAINING, root, "conf.yaml", 0, &cfg, err) != 0) return -1; /* errors: the load's */
    const preprocessor_cfg *pc = ((const training_cfg *)cfg->typed)->dataset ?
                                 ((const training_cfg *)cfg->typed)->dataset->preprocessor : NULL;
    augment_conf_read(cfg, c);
    /* the typed view holds the parsed list; the reader's copy is its own */
    cr_assert_eq(pc && pc->data_aug_effects ? pc->data_aug_effects->n : 0, c->n);
    cr_assert(!c->n || c->entries != pc->data_aug_effects->entries);
    config_free(cfg);
    return 0;
}

Test(augment, mini_an4_config_parses)
{
    augment_conf c;
    esp_err err;
    cr_assert_eq(parse_text(MINI_AN4, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.n, 4u);
    cr_assert_eq(c.num[0], 1);
    cr_assert_eq(c.num[1], 4);
    cr_assert_float_eq(c.prob, 1.0, 0);
    cr_assert_eq(c.entries[0].effects[0].kind, AUG_CONTRAST);
    cr_assert_float_eq(c.entries[1].effects[0].freq, 5000, 0);
    cr_assert(c.entries[3].group);
    cr_assert_eq(c.entries[3].n, 3u);
    cr_assert_float_eq(c.entries[3].effects[2].factor, 1.3, 0);
    cr_assert_float_eq(c.entries[3].weights[1], 0.3, 0);
    cr_assert_eq(augment_conf_check_fs(&c, 16000, "fs", &err), 0, "%s", err.msg);
    /* At 8 kHz the 5000 Hz highpass is above Nyquist: the error points at the effect's name. */
    cr_assert_eq(augment_conf_check_fs(&c, 8000, "fs", &err), -1);
    cr_assert(strstr(err.msg, "conf.yaml:8:") && strstr(err.msg, "Nyquist"), "%s", err.msg);
    augment_conf_free(&c);
    /* No data_aug_effects: nothing to do. */
    cr_assert_eq(parse_text("dataset:\n  preprocessor:\n    fs: 16000\n", &c, &err), 0);
    cr_assert_eq(c.n, 0u);
}

/* Each bad value: an error at file:line:col naming the key path. */
Test(augment, config_errors_name_file_line_col)
{
    static const struct {
        const char *effects, *extra, *want;
    } bad[] = {
        {"[[0.1, \"lowpass\", {\"Q\": 0}]]", "", "conf.yaml:3:47: dataset.preprocessor.data_aug_effects[0][2].Q: must be in (0, 100], got 0 (0.707: Butterworth)"},
        {"[[0.1, \"lowpass\", {\"Q\": 101}]]", "", "Q: must be in (0, 100], got 101"},
        {"[[0, \"reverse\", {}]]", "", "data_aug_effects[0][0]: must be in (0, 1e+06], got 0"},
        {"[[-1, \"reverse\", {}]]", "", "data_aug_effects[0][0]: must be in (0, 1e+06], got -1"},
        {"[[0.1, \"bandwidth_limitation\", {}]]", "", "'bandwidth_limitation' is not implemented by espnet3"},
        {"[[0.1, \"pitch_shift\", {\"bins_per_octave\": 12}]]", "", "pitch_shift needs n_steps"},
        {"[[0.1, \"time_stretch\", {\"window\": \"hamming\"}]]", "", "only \"hann\" or null is supported"},
        {"[[0.1, \"time_stretch\", {\"factor\": 1.1, \"win_length\": 400.5}]]", "", "win_length: must be an integer in [1, 100000], got 400.5 (ESPnet uses it as a number of samples)"},
        {"[[0.1, \"corrupt_phase\", {\"scale\": 11}]]", "", "scale: must be in [0, 10], got 11"},
        {"[[0.1, \"pitch_shift\", {\"n_steps\": -24, \"bins_per_octave\": 1}]]", "", "is more than two octaves"},
        {"[[0.1, \"reverb\", {}]]", "", "unknown effect 'reverb'"},
        {"[[0.1, \"contrast\", {\"enhancement_amount\": 150}]]", "", "enhancement_amount: must be in [0, 100], got 150"},
        {"[[0.1, \"contrast\", {\"cutoff_freq\": 1}]]", "", "contrast takes no argument 'cutoff_freq'"},
        {"[[0.1, \"speed_perturb\", {}]]", "", "speed_perturb needs a factor"},
        {"[[0.1, \"speed_perturb\", {\"factor\": 3}]]", "", "factor: must be in [0.5, 2], got 3"},
        {"[[0.1, \"speed_perturb\", {\"factor\": .nan}]]", "", "factor: expected a finite number, got '.nan'"},
        {"[[0.1, \"equalization\", {\"gain\": 80}]]", "", "gain: must be in [-60, 60] dB, got 80"},
        {"[[0.1, \"clipping\", {\"min_quantile\": 0.9, \"max_quantile\": 0.1}]]", "", "min_quantile 0.9 is above"},
        {"[[0.1, \"reverse\", {}]]", "    data_aug_num: [1, 2]\n", "data_aug_num: max 2 is more than the 1 entries"},
        {"[[0.1, \"reverse\", {}]]", "    data_aug_num: [1, 0.5]\n", "data_aug_num[1]: expected an integer, got a float '0.5'"},
        {"[[0.1, \"reverse\", {}]]", "    data_aug_num: [1, 65]\n", "data_aug_num[1]: must be an integer in [0, 64], got 65"},
        {"[[0.1, \"reverse\", {}], [0.1, \"reverse\", {}]]", "    data_aug_num: [2, 1]\n", "min 2 is above max 1"},
        {"[[0.1, \"reverse\", {}]]", "    data_aug_prob: 1.5\n", "data_aug_prob: must be in [0, 1], got 1.5 (the share of utterances augmented; leave it out for 0.0)"},
        {"[[0.1, \"reverse\", {}]]", "    data_aug_prob: abc\n", "data_aug_prob: expected a number"},
        {"[[0.1, [[0.5, [[1, \"reverse\", {}]]]]]]", "", "groups do not nest"},
        {"[[0.1, []]]", "", "a group needs 1 to 64 effects"},
        {"[\"reverse\"]", "", "expected [weight, \"effect\", {arguments}]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *text = xasprintf("dataset:\n  preprocessor:\n    data_aug_effects: %s\n%s", bad[i].effects, bad[i].extra);
        augment_conf c;
        esp_err err = {{0}};
        cr_assert_eq(parse_text(text, &c, &err), -1, "case %zu accepted", i);
        cr_assert(strstr(err.msg, bad[i].want) && strstr(err.msg, "conf.yaml:"), "case %zu: %s", i, err.msg);
        free(text);
    }
}

/* speed_perturb_factors' rules are the config load's: the typed list holds what passed them. */
static int load_factors(const char *text, esp_config **cfg, esp_err *err)
{
    ynode *root = yt_parse_string(text, strlen(text), "c.yaml", err);
    cr_assert_not_null(root, "%s", err->msg);
    return config_load_tree(CONFIG_TRAINING, root, "c.yaml", 0, cfg, err);
}

Test(augment, speed_perturb_factors_key)
{
    esp_err err;
    esp_config *cfg;
    cr_assert_eq(load_factors("speed_perturb_factors: [0.9, 1.0, 1.1]\n", &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_eq(t->n_speed_perturb_factors, 3u);
    cr_assert_float_eq(t->speed_perturb_factors[2], 1.1, 0);
    config_free(cfg);
    cr_assert_eq(load_factors("speed_perturb_factors: [0.9, 0.9]\n", &cfg, &err), -1);
    cr_assert(strstr(err.msg, "c.yaml:1:30: speed_perturb_factors[1]: factor 0.9 is listed twice"), "%s", err.msg);
    cr_assert_eq(load_factors("speed_perturb_factors: [0.1]\n", &cfg, &err), -1);
    cr_assert(strstr(err.msg, "c.yaml:1:25: speed_perturb_factors[0]: must be in [0.5, 2], got 0.1"), "%s", err.msg);
}

/* Efraimidis-Spirakis with k = 1 picks item i with probability w_i / sum(w); with k = n it
 * returns every item. */
Test(augment, weighted_choice_follows_weights)
{
    rng r;
    rng_init(&r, 42);
    double w[3] = {0.1, 0.3, 0.6};
    int count[3] = {0};
    for (int t = 0; t < 30000; t++) {
        size_t pick;
        aug_weighted_sample(&r, w, 3, 1, &pick);
        count[pick]++;
    }
    for (int i = 0; i < 3; i++) cr_assert(fabs(count[i] / 30000.0 - w[i]) < 0.015, "item %d: %d", i, count[i]);
    size_t all[3];
    aug_weighted_sample(&r, w, 3, 3, all);
    cr_assert_eq(all[0] + all[1] + all[2], 3u);
    cr_assert(all[0] != all[1] && all[1] != all[2] && all[0] != all[2]);
}

Test(augment, apply_prob_num_and_seed)
{
    augment_conf c;
    esp_err err;
    cr_assert_eq(parse_text(MINI_AN4, &c, &err), 0, "%s", err.msg);
    float x[4000];
    for (int i = 0; i < 4000; i++) x[i] = (float)(0.5 * sin(i * 0.05));
    rng r1, r2, r3;
    rng_init(&r1, augment_utt_seed(7, 0, "utt1"));
    rng_init(&r2, augment_utt_seed(7, 0, "utt1"));
    rng_init(&r3, augment_utt_seed(7, 1, "utt1"));
    size_t n1, n2, n3;
    float *a = augment_apply(&c, x, 4000, 16000, &r1, &n1), *b = augment_apply(&c, x, 4000, 16000, &r2, &n2);
    cr_assert(a && b);
    cr_assert_eq(n1, n2);
    cr_assert_eq(memcmp(a, b, n1 * sizeof *a), 0);
    /* Over epochs the draws differ (some epoch changes the waveform differently). */
    int differs = 0;
    for (int64_t ep = 1; ep < 8 && !differs; ep++) {
        rng_init(&r3, augment_utt_seed(7, ep, "utt1"));
        float *d = augment_apply(&c, x, 4000, 16000, &r3, &n3);
        differs = n3 != n1 || memcmp(d, a, n1 * sizeof *a);
        free(d);
    }
    cr_assert(differs);
    free(a), free(b);
    /* data_aug_prob 0: never; a stream of draws otherwise used is not consumed. */
    c.prob = 0;
    cr_assert_null(augment_apply(&c, x, 4000, 16000, &r1, &n1));
    c.prob = 0.5;
    int applied = 0;
    for (int t = 0; t < 400; t++) {
        rng_init(&r1, augment_utt_seed(1, t, "u"));
        float *y = augment_apply(&c, x, 4000, 16000, &r1, &n1);
        applied += y != NULL;
        free(y);
    }
    cr_assert(applied > 150 && applied < 250, "%d of 400 with data_aug_prob 0.5", applied);
    augment_conf_free(&c);
}

/* ---- the training data path ---------------------------------------------------------------- */

static char dir[64];

static void write_wav(const char *name, int n, double freq)
{
    SF_INFO info = {.samplerate = 16000, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(test_path(dir, name), SFM_WRITE, &info);
    cr_assert_not_null(sf);
    short *s = calloc((size_t)n, sizeof *s);
    for (int i = 0; i < n; i++) s[i] = (short)(8000 * sin(2 * M_PI * freq * i / 16000.0));
    sf_write_short(sf, s, n);
    sf_close(sf);
    free(s);
}

static void data_setup(void)
{
    log_set_quiet(1);
    test_tmpdir_make(dir, sizeof dir, "augdata");
    cr_assert_eq(test_sh("mkdir -p %s/data/manifest %s/tok", dir, dir), 0);
    write_wav("a.wav", 8000, 300);
    write_wav("b.wav", 6400, 700);
    write_wav("c.wav", 7200, 1300);
    char tsv[512];
    snprintf(tsv, sizeof tsv, "a\t%s/a.wav\tHI\nb\t%s/b.wav\tIH\nc\t%s/c.wav\tHH\n", dir, dir, dir);
    test_write_text(test_path(dir, "data/manifest/train.tsv"), tsv);
    test_write_text(test_path(dir, "tok/tokens.txt"), "<blank>\n<unk>\n<space>\nH\nI\n<sos/eos>\n");
}

static void data_teardown(void) { test_tmpdir_remove(dir); }

static training_cfg *make_cfg(void)
{
    static char data_dir[128], tok[128];
    snprintf(data_dir, sizeof data_dir, "%s/data", dir);
    snprintf(tok, sizeof tok, "%s/tok", dir);
    static tokenizer_cfg tc;
    static frontend_conf_cfg fc;
    static normalize_conf_cfg nc;
    static model_cfg mc;
    static training_cfg t;
    tc = (tokenizer_cfg){.save_path = tok};
    fc = (frontend_conf_cfg){.n_fft = 512, .win_length = 400, .hop_length = 160};
    nc = (normalize_conf_cfg){.norm_means = 1, .eps = 1e-20}; /* the loader's defaults for utterance_mvn */
    mc = (model_cfg){.frontend_conf = &fc, .normalize = "utterance_mvn", .normalize_conf = &nc};
    t = (training_cfg){.data_dir = data_dir, .tokenizer = &tc, .model = &mc};
    return &t;
}

/* Features of utterance `want` (manifest index) in a batch of items, loaded with batch seed bseed. */
static float *utt_feats(asr_data *d, const size_t *items, int n, size_t want, uint64_t bseed, int *T)
{
    asr_batch b;
    esp_err err;
    cr_assert_eq(asr_batch_load(&b, d, items, n, bseed, &err), 0, "%s", err.msg);
    int i = 0;
    while (items[i] != want) i++;
    *T = b.feat_lens[i];
    float *f = xmalloc((size_t)*T * 80 * sizeof *f);
    memcpy(f, b.feats + (size_t)i * b.Tmax * 80, (size_t)*T * 80 * sizeof *f);
    asr_batch_free(&b);
    return f;
}

TestSuite(augment_data, .init = data_setup, .fini = data_teardown);

/* What one rank loads in batch [b, c] at global position 0 and what rank 1 of 2 loads in batch
 * [c, a] at another position: utterance c gets the same augmented features, since its draws are
 * keyed by (seed, epoch, "c") only; another epoch gives it others; no augmentation for valid. */
Test(augment_data, keyed_by_seed_epoch_utterance_not_batch_or_rank)
{
    augment_conf c;
    esp_err err;
    cr_assert_eq(parse_text(MINI_AN4, &c, &err), 0, "%s", err.msg);
    c.num[0] = c.num[1] = 2; /* always two effects, so a plain copy cannot pass by chance */
    asr_data d1, d2, plain;
    cr_assert_eq(asr_data_open(&d1, make_cfg(), "train", 1, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_open(&d2, make_cfg(), "train", 1, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_open(&plain, make_cfg(), "train", 1, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_set_augment(&d1, &c, 1234, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_set_augment(&d2, &c, 1234, &err), 0, "%s", err.msg);
    asr_data_set_epoch(&d1, 3);
    asr_data_set_epoch(&d2, 3);
    size_t one_rank[] = {1, 2}, rank1[] = {2, 0}, alone[] = {2};
    int T1, T2, T0, Tp;
    float *f1 = utt_feats(&d1, one_rank, 2, 2, 111, &T1);
    float *f2 = utt_feats(&d2, rank1, 2, 2, 999, &T2);
    float *f0 = utt_feats(&d2, alone, 1, 2, 5, &T0);
    float *fp = utt_feats(&plain, alone, 1, 2, 5, &Tp);
    cr_assert_eq(T1, T2);
    cr_assert_eq(T1, T0);
    cr_assert_eq(memcmp(f1, f2, (size_t)T1 * 80 * sizeof *f1), 0);
    cr_assert_eq(memcmp(f1, f0, (size_t)T1 * 80 * sizeof *f1), 0);
    cr_assert(T1 != Tp || memcmp(f1, fp, (size_t)T1 * 80 * sizeof *f1), "augmentation changed nothing");
    /* Other epochs give other draws. */
    int differs = 0;
    for (int64_t ep = 4; ep < 10 && !differs; ep++) {
        asr_data_set_epoch(&d2, ep);
        int Te;
        float *fe = utt_feats(&d2, alone, 1, 2, 5, &Te);
        differs = Te != T1 || memcmp(fe, f1, (size_t)T1 * 80 * sizeof *f1);
        free(fe);
    }
    cr_assert(differs);
    free(f1), free(f2), free(f0), free(fp);
    asr_data_close(&d1), asr_data_close(&d2), asr_data_close(&plain);
    /* Validation data refuses it. */
    cr_assert_eq(asr_data_open(&d1, make_cfg(), "train", 0, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_set_augment(&d1, &c, 1, &err), -1);
    cr_assert(strstr(err.msg, "training data only"), "%s", err.msg);
    asr_data_close(&d1);
    augment_conf_free(&c);
}

/* A batch loaded on 1, 2 or 3 threads (utterances read, augmented and featurized in parallel parts,
 * each with its own frontend) is the same bits: features, lengths, labels; with an unreadable
 * utterance the error names the first one in batch order, whatever the thread count. */
Test(augment_data, batch_same_bits_on_any_thread_count)
{
    augment_conf c;
    esp_err err;
    cr_assert_eq(parse_text(MINI_AN4, &c, &err), 0, "%s", err.msg);
    c.num[0] = c.num[1] = 2;
    enum { N = 12 }; /* enough work that the pool's workers take parts, not only this thread */
    size_t items[N];
    for (int i = 0; i < N; i++) items[i] = (size_t)(i * 2 + 2) % 3; /* c a b c a b ... */
    asr_batch ref = {0};
    for (int threads = 1; threads <= 3; threads++) {
        asr_data d;
        cr_assert_eq(asr_data_open(&d, make_cfg(), "train", 1, &err), 0, "%s", err.msg);
        cr_assert_eq(asr_data_set_augment(&d, &c, 77, &err), 0, "%s", err.msg);
        asr_data_set_epoch(&d, 2);
        asr_data_set_threads(&d, threads);
        asr_batch b;
        cr_assert_eq(asr_batch_load(&b, &d, items, N, 31, &err), 0, "%s", err.msg);
        if (threads == 1) {
            ref = b;
        } else {
            cr_assert_eq(b.Tmax, ref.Tmax);
            cr_assert_eq(b.Lmax, ref.Lmax);
            cr_assert_eq(memcmp(b.feat_lens, ref.feat_lens, N * sizeof *b.feat_lens), 0);
            cr_assert_eq(memcmp(b.label_lens, ref.label_lens, N * sizeof *b.label_lens), 0);
            cr_assert_eq(memcmp(b.labels, ref.labels, N * b.Lmax * sizeof *b.labels), 0);
            cr_assert_eq(memcmp(b.feats, ref.feats, N * b.Tmax * 80 * sizeof *b.feats), 0, "threads %d", threads);
            const char *names[] = {"a", "b", "c"}; /* ref's are the closed manifest's */
            for (int i = 0; i < N; i++) cr_assert_str_eq(b.utts[i], names[items[i]]);
            asr_batch_free(&b);
        }
        /* Utterances 0 and 2 unreadable: the error is utterance c's (first in the batch). */
        char *wa = xasprintf("%s/a.wav", dir), *wc = xasprintf("%s/c.wav", dir);
        char *ha = xasprintf("%s.away", wa), *hc = xasprintf("%s.away", wc);
        cr_assert_eq(rename(wa, ha), 0);
        cr_assert_eq(rename(wc, hc), 0);
        size_t bad[] = {1, 2, 0};
        cr_assert_eq(asr_batch_load(&b, &d, bad, 3, 31, &err), -1);
        cr_assert(strstr(err.msg, "c.wav") && !strstr(err.msg, "a.wav"), "threads %d: %s", threads, err.msg);
        cr_assert_eq(rename(ha, wa), 0);
        cr_assert_eq(rename(hc, wc), 0);
        free(wa), free(wc), free(ha), free(hc);
        asr_data_close(&d);
    }
    cr_assert(ref.feat_lens[0] != ref.feat_lens[1] || ref.feat_lens[1] != ref.feat_lens[2], "no padding tested");
    asr_batch_free(&ref);
    augment_conf_free(&c);
}

/* corrupt_phase's noise comes from the utterance's generator: the same draws give the same
 * waveform, other draws another; time_stretch's length is round(n / factor); an input too short
 * for torch.stft's reflect padding comes back as it is. */
Test(augment, stft_effects_noise_length_and_short_input)
{
    size_t n = 3000;
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.4 * sin(0.03 * (double)i) + 0.1 * sin(0.7 * (double)i));
    aug_effect e;
    aug_effect_default(&e, AUG_CORRUPT_PHASE);
    rng r1, r2, r3;
    rng_init(&r1, 9), rng_init(&r2, 9), rng_init(&r3, 10);
    size_t m1, m2, m3;
    float *a = aug_effect_apply(&e, x, n, 16000, &r1, &m1), *b = aug_effect_apply(&e, x, n, 16000, &r2, &m2);
    float *c = aug_effect_apply(&e, x, n, 16000, &r3, &m3);
    cr_assert_eq(m1, n);
    cr_assert_eq(memcmp(a, b, n * sizeof *a), 0);
    cr_assert_neq(memcmp(a, c, n * sizeof *a), 0);
    double diff = 0;
    for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)a[i] - x[i]));
    cr_assert(diff > 0.01, "scale 0.5 changed the waveform by only %g", diff);
    free(a), free(b), free(c);
    aug_effect_default(&e, AUG_TIME_STRETCH);
    e.factor = 1.25;
    a = aug_effect_apply(&e, x, n, 16000, &r1, &m1);
    cr_assert_eq(m1, 2400u);
    free(a);
    a = aug_effect_apply(&e, x, 256, 16000, &r1, &m1); /* 256 = n_fft / 2 samples */
    cr_assert_eq(m1, 256u);
    cr_assert_eq(memcmp(a, x, 256 * sizeof *a), 0);
    free(a);
    free(x);
}

/* rir_scp / noise_scp on the data path: utterance c gets the same reverberant, noisy features in
 * any batch (keyed by seed, epoch, utterance), unlike the plain ones; valid data refuses it. */
Test(augment_data, noise_rir_keyed_by_utterance_and_changes_features)
{
    static double rir[400], noise[5000];
    for (int i = 0; i < 400; i++) rir[i] = (i == 0) + 0.3 * sin(1.7 * i) * exp(-i / 80.0);
    for (int i = 0; i < 5000; i++) noise[i] = sin(0.9 * i) * cos(0.013 * i);
    nr_signal r = {rir, 400, 16000, "rir.wav"}, z = {noise, 5000, 16000, "noise.wav"};
    noise_rir_conf c = {.rirs = &r, .n_rirs = 1, .rir_prob = 1, .noises = &z, .n_noises = 1, .noise_prob = 1,
                        .db_lo = 0, .db_hi = 5, .short_thres = 0.5};
    esp_err err;
    asr_data d1, d2, plain;
    cr_assert_eq(asr_data_open(&d1, make_cfg(), "train", 1, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_open(&d2, make_cfg(), "train", 1, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_open(&plain, make_cfg(), "train", 1, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_set_noise_rir(&d1, &c, 77, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_set_noise_rir(&d2, &c, 77, &err), 0, "%s", err.msg);
    size_t one_rank[] = {1, 2}, alone[] = {2};
    int T1, T2, Tp;
    float *f1 = utt_feats(&d1, one_rank, 2, 2, 111, &T1);
    float *f2 = utt_feats(&d2, alone, 1, 2, 999, &T2);
    float *fp = utt_feats(&plain, alone, 1, 2, 5, &Tp);
    cr_assert_eq(T1, T2);
    cr_assert_eq(T1, Tp); /* length kept */
    cr_assert_eq(memcmp(f1, f2, (size_t)T1 * 80 * sizeof *f1), 0);
    cr_assert_neq(memcmp(f1, fp, (size_t)T1 * 80 * sizeof *f1), 0, "noise and reverberation changed nothing");
    free(f1), free(f2), free(fp);
    asr_data_close(&d1), asr_data_close(&d2), asr_data_close(&plain);
    cr_assert_eq(asr_data_open(&d1, make_cfg(), "train", 0, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_set_noise_rir(&d1, &c, 1, &err), -1);
    cr_assert(strstr(err.msg, "training data only"), "%s", err.msg);
    asr_data_close(&d1);
    /* a file at another rate than the frontend's is refused */
    r.fs = 8000;
    cr_assert_eq(asr_data_open(&d1, make_cfg(), "train", 1, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_data_set_noise_rir(&d1, &c, 1, &err), -1);
    cr_assert(strstr(err.msg, "rir.wav: 8000 Hz"), "%s", err.msg);
    asr_data_close(&d1);
}
