/* Stage 3 through the binary: ESPnet's files, numpy-readable stats with hand-computed values,
 * identical output for 1 and 2 workers, resume from finished shards, and the sample-rate error. */
#include <criterion/criterion.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/unit/test_util.h"

static char dir[64];

static void write_file(const char *rel, const char *text) { test_write_text(test_path(dir, rel), text); }

static void write_silence(const char *rel, int n, int fs)
{
    const char *path = test_path(dir, rel);
    SF_INFO info = {.samplerate = fs, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    cr_assert_not_null(sf);
    short *zeros = calloc((size_t)n, sizeof *zeros);
    cr_assert_eq(sf_write_short(sf, zeros, n), n);
    sf_close(sf);
    free(zeros);
}

/* Two silent utterances per split, a config, and a token list. */
static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "stats");
    cr_assert_eq(test_sh("mkdir -p %s/data/manifest %s/tok", dir, dir), 0);
    write_silence("a.wav", 16000, 16000);
    write_silence("b.wav", 8000, 16000);
    write_silence("c.wav", 4000, 16000);
    char tsv[1024];
    snprintf(tsv, sizeof tsv, "uttA\t%s/a.wav\tHELLO WORLD\nuttB\t%s/b.wav\tHI\n", dir, dir);
    write_file("data/manifest/train.tsv", tsv);
    snprintf(tsv, sizeof tsv, "uttC\t%s/c.wav\tOK\n", dir);
    write_file("data/manifest/valid.tsv", tsv);
    write_file("tok/tokens.txt", "<blank>\n<unk>\n<space>\nL\nO\nH\nE\nW\nR\nD\nI\nK\n<sos/eos>\n");
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "data_dir: %s/data\nstats_dir: %s/stats\ntokenizer:\n  save_path: %s/tok\n"
             "model:\n  frontend_conf:\n    n_fft: 512\n    win_length: 400\n    hop_length: 160\n",
             dir, dir, dir);
    write_file("cfg.yaml", yaml);
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(collect_stats, .init = setup, .fini = teardown);

static int run_stage(const char *extra)
{
    return test_sh("cd '%s' && timeout 120 '%s' --config %s/cfg.yaml --stages collect_stats %s >%s/out 2>%s/err",
                   test_root_dir(), test_bin_path(), dir, extra, dir, dir);
}

/* A file under the temporary folder; "" when missing (the assertion after it says so). */
static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

Test(collect_stats, silence_gives_hand_computed_stats_numpy_reads)
{
    cr_assert_eq(run_stage("parallel.n_workers=2"), 0, "%s", slurp("err"));
    /* T = len // hop + 1: 16000 -> 101 frames, 8000 -> 51; 80 mel bins each. */
    char *shape = slurp("stats/train/feats_shape");
    cr_assert_str_eq(shape, "uttA 101,80\nuttB 51,80\n");
    free(shape);
    char *text = slurp("stats/train/text_shape.char");
    cr_assert_str_eq(text, "uttA 11,13\nuttB 2,13\n");
    free(text);
    char *keys = slurp("stats/train/stats_keys");
    cr_assert_str_eq(keys, "feats\n");
    free(keys);
    /* Silence: every bin is log(1e-10); numpy must read count, sum and sum_square as ESPnet3 writes them. */
    char code[1024];
    snprintf(code, sizeof code,
             "/usr/bin/python3 -c \"import numpy as np, math\n"
             "d = np.load('%s/stats/train/feats_stats.npz')\n"
             "v = math.log(1e-10)\n"
             "assert d['count'].dtype == np.int64 and int(d['count']) == 152, d['count']\n"
             "assert d['sum'].dtype == np.float32 and d['sum'].shape == (80,)\n"
             "assert np.allclose(d['sum'], 152 * v, rtol=1e-6), d['sum'][:3]\n"
             "assert np.allclose(d['sum_square'], 152 * v * v, rtol=1e-6), d['sum_square'][:3]\n"
             "e = np.load('%s/stats/valid/feats_stats.npz')\n"
             "assert int(e['count']) == 26\"",
             dir, dir);
    cr_assert_eq(system(code), 0, "numpy check failed");
}

Test(collect_stats, identical_for_one_and_two_workers_and_resumes)
{
    cr_assert_eq(run_stage("parallel.n_workers=1"), 0, "%s", slurp("err"));
    char *shape1 = slurp("stats/train/feats_shape");
    cr_assert_eq(test_sh("cp %s/stats/train/feats_stats.npz %s/one.npz && rm -rf %s/stats", dir, dir, dir), 0);
    cr_assert_eq(run_stage("parallel.n_workers=2"), 0, "%s", slurp("err"));
    char *shape2 = slurp("stats/train/feats_shape");
    cr_assert_str_eq(shape1, shape2);
    cr_assert(test_same_file(test_path(dir, "one.npz"), test_path(dir, "stats/train/feats_stats.npz")),
              "feats_stats.npz differs between 1 and 2 workers");
    /* A rerun reuses the finished shards and writes the same files. */
    cr_assert_eq(run_stage("parallel.n_workers=2"), 0, "%s", slurp("err"));
    char *err = slurp("err");
    cr_assert(strstr(err, "resum") || strstr(err, "already"), "no resume message:\n%s", err);
    char *shape3 = slurp("stats/train/feats_shape");
    cr_assert_str_eq(shape1, shape3);
    free(shape1), free(shape2), free(shape3), free(err);
}

Test(collect_stats, sample_rate_mismatch_names_file_rates_and_key)
{
    cr_assert_eq(run_stage("model.frontend_conf.fs=8000"), 1);
    char *err = slurp("err");
    cr_assert(strstr(err, "espnet3: error: ") && strstr(err, "a.wav") && strstr(err, "16000") && strstr(err, "8000") &&
                  strstr(err, "model.frontend_conf.fs"),
              "stderr:\n%s", err);
    free(err);
}

Test(collect_stats, missing_token_list_says_which_stage_to_run)
{
    cr_assert_eq(test_sh("rm %s/tok/tokens.txt", dir), 0);
    cr_assert_eq(run_stage(""), 1);
    char *err = slurp("err");
    cr_assert(strstr(err, "run train_tokenizer, stage 2, first"), "stderr:\n%s", err);
    free(err);
}
