/* Batches for the model: lengths, padding, labels, global_mvn values and reproducible SpecAugment. */
#include <criterion/criterion.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/asr_data.h"
#include "core/formats/npz.h"
#include "test/unit/test_util.h"

static char dir[64];

static void write_wav(const char *name, int n, double freq)
{
    const char *path = test_path(dir, name);
    SF_INFO info = {.samplerate = 16000, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    cr_assert_not_null(sf);
    short *s = calloc((size_t)n, sizeof *s);
    for (int i = 0; i < n; i++) s[i] = (short)(freq > 0 ? 8000 * sin(2 * M_PI * freq * i / 16000.0) : 0);
    sf_write_short(sf, s, n);
    sf_close(sf);
    free(s);
}

static void write_text(const char *name, const char *text) { test_write_text(test_path(dir, name), text); }

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "asrdata");
    cr_assert_eq(test_sh("mkdir -p %s/data/manifest %s/tok", dir, dir), 0);
    write_wav("a.wav", 16000, 0);
    write_wav("b.wav", 8000, 440);
    char tsv[512];
    snprintf(tsv, sizeof tsv, "a\t%s/a.wav\tHI HI\nb\t%s/b.wav\tIH\n", dir, dir);
    write_text("data/manifest/train.tsv", tsv);
    write_text("tok/tokens.txt", "<blank>\n<unk>\n<space>\nH\nI\n<sos/eos>\n");
    /* Stats: mean -20, variance 4 (std 2) in every bin. */
    int64_t count = 10;
    float sum[80], sq[80];
    for (int i = 0; i < 80; i++) sum[i] = -200.0f, sq[i] = (float)(10 * (4 + 400));
    npy_array arrays[] = {
        {.name = "count", .dtype = NPY_I64, .count = 1, .data = &count},
        {.name = "sum", .dtype = NPY_F32, .ndim = 1, .shape = {80}, .count = 80, .data = sum},
        {.name = "sum_square", .dtype = NPY_F32, .ndim = 1, .shape = {80}, .count = 80, .data = sq},
    };
    char path[256];
    snprintf(path, sizeof path, "%s/stats.npz", dir);
    esp_err err;
    cr_assert_eq(npz_write(path, arrays, 3, &err), 0, "%s", err.msg);
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(asr_data, .init = setup, .fini = teardown);

static training_cfg *make_cfg(int specaug)
{
    static char data_dir[128], tok[128], stats[128];
    snprintf(data_dir, sizeof data_dir, "%s/data", dir);
    snprintf(tok, sizeof tok, "%s/tok", dir);
    snprintf(stats, sizeof stats, "%s/stats.npz", dir);
    static tokenizer_cfg tc;
    static normalize_conf_cfg nc;
    static frontend_conf_cfg fc;
    static specaug_conf_cfg sc;
    static model_cfg mc;
    static training_cfg t;
    tc = (tokenizer_cfg){.save_path = tok};
    nc = (normalize_conf_cfg){.stats_file = stats, .norm_means = 1, .norm_vars = 1, .eps = 1e-20}; /* eps: its default */
    fc = (frontend_conf_cfg){.n_fft = 512, .win_length = 400, .hop_length = 160};
    /* ESPnet2's default time-mask widths (up to 100 frames) would blank a 51-frame utterance. */
    static int64_t time_widths[2] = {0, 10};
    sc = (specaug_conf_cfg){.apply_freq_mask = 1, .num_freq_mask = 2, .apply_time_mask = 1, .num_time_mask = 2,
                            .time_mask_width_range = time_widths, .n_time_mask_width_range = 2};
    mc = (model_cfg){.frontend_conf = &fc, .normalize = "global_mvn", .normalize_conf = &nc,
                     .specaug = specaug ? "specaug" : NULL, .specaug_conf = &sc};
    t = (training_cfg){.data_dir = data_dir, .tokenizer = &tc, .model = &mc};
    return &t;
}

Test(asr_data, padded_batch_with_labels_and_global_mvn)
{
    asr_data d;
    esp_err err;
    cr_assert_eq(asr_data_open(&d, make_cfg(0), "train", 1, &err), 0, "%s", err.msg);
    size_t items[] = {0, 1};
    asr_batch b;
    cr_assert_eq(asr_batch_load(&b, &d, items, 2, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(b.feat_lens[0], 101);
    cr_assert_eq(b.feat_lens[1], 51);
    cr_assert_eq(b.Tmax, 101u);
    cr_assert_eq(b.label_lens[0], 5);
    int want0[] = {3, 4, 2, 3, 4}; /* H I <space> H I */
    for (int k = 0; k < 5; k++) cr_assert_eq(b.labels[k], want0[k]);
    cr_assert_eq(b.labels[5 + 0], 4);
    cr_assert_eq(b.labels[5 + 2], -1); /* padding */
    /* Silence: log(1e-10) normalized with mean -20 and std 2. */
    float want = (float)((log(1e-10) + 20.0) / 2.0);
    cr_assert_float_eq(b.feats[0], want, 1e-4);
    cr_assert_float_eq(b.feats[100 * 80 + 79], want, 1e-4);
    /* Padded frames of the shorter utterance stay zero. */
    for (size_t t = 51; t < 101; t++)
        for (int k = 0; k < 80; k++) cr_assert_eq(b.feats[(101 + t) * 80 + (size_t)k], 0.0f);
    asr_batch_free(&b);
    asr_data_close(&d);
}

Test(asr_data, specaug_reproducible_per_seed_and_off_for_validation)
{
    asr_data d;
    esp_err err;
    cr_assert_eq(asr_data_open(&d, make_cfg(1), "train", 1, &err), 0, "%s", err.msg);
    size_t items[] = {1};
    asr_batch a, b, c;
    cr_assert_eq(asr_batch_load(&a, &d, items, 1, 5, &err), 0);
    cr_assert_eq(asr_batch_load(&b, &d, items, 1, 5, &err), 0);
    cr_assert_eq(asr_batch_load(&c, &d, items, 1, 6, &err), 0);
    size_t n = a.Tmax * 80;
    cr_assert_eq(memcmp(a.feats, b.feats, n * sizeof(float)), 0);
    cr_assert_neq(memcmp(a.feats, c.feats, n * sizeof(float)), 0);
    asr_batch_free(&a), asr_batch_free(&b), asr_batch_free(&c);
    asr_data_close(&d);
    cr_assert_eq(asr_data_open(&d, make_cfg(1), "train", 0, &err), 0);
    cr_assert_not(d.specaug_on);
    asr_data_close(&d);
}

Test(asr_data, missing_stats_says_run_collect_stats)
{
    char path[256];
    snprintf(path, sizeof path, "%s/stats.npz", dir);
    remove(path);
    asr_data d;
    esp_err err;
    cr_assert_neq(asr_data_open(&d, make_cfg(0), "train", 1, &err), 0);
    cr_assert(strstr(err.msg, "run collect_stats, stage 3, first"), "%s", err.msg);
}
