/* Data augmentation through the binary on the tiny recipe: ESPnet3's dataset.preprocessor
 * data_aug_* keys in stage 5 (the same weights on 1 rank accumulating 2 batches and on 2 ranks,
 * since each utterance's draws depend on (seed, epoch, utterance) only; other weights than
 * without augmentation), and speed_perturb_factors in stage 3 (copies in the manifest and in
 * feats_shape, reused on a rerun, trained on), with their config errors; batches loaded beside the
 * step (num_workers) give the same weights. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"

static char dir[64];

/* As test_dist_train.c: the tiny recipe in 9 batches, file order, 2 epochs, one thread per rank. */
static char *command(const char *exp, const char *extra)
{
    static char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && OMP_NUM_THREADS=1 timeout 120 '%s' -q --config recipes/espeak_fortunes/conf/training_tiny.yaml "
             "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s "
             "dataloader.train.iter_factory.shuffle=false dataloader.train.iter_factory.batches.batch_bins=40000 "
             "trainer.max_epochs=2 %s",
             test_root_dir(), test_bin_path(), dir, dir, dir, dir, exp, extra);
    return cmd;
}

static int run(const char *exp, const char *extra) { return test_sh("%s >>%s/log 2>&1", command(exp, extra), dir); }

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

static void truncate_log(void)
{
    FILE *fp = fopen(test_path(dir, "log"), "w");
    if (fp) fclose(fp);
}

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "trainaug");
    /* The same in every test: once per run of the tests (test_sh_once). */
    cr_assert_eq(test_sh_once(dir, "%s >>%s/log 2>&1", command("exp0", "--stage 1 --stop_stage 3"), dir), 0,
                 "stages 1-3 failed:\n%s", slurp("log"));
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(train_augment, .init = setup, .fini = teardown);

/* Largest |a - b| / (1 + |b|) over two safetensors files, leaving out linear_k.bias (its gradient
 * is rounding noise; see test_dist_train.c). */
static double max_diff(const char *rel_a, const char *rel_b)
{
    return test_st_max_diff(test_path(dir, rel_a), test_path(dir, rel_b), NULL, "linear_k.bias");
}

#define AUG                                                                                                      \
    "'dataset.preprocessor.data_aug_effects=[[0.1, contrast, {enhancement_amount: 75.0}], "                      \
    "[0.1, highpass, {cutoff_freq: 3000, Q: 0.707}], [0.1, reverse, {}], "                                        \
    "[0.1, [[0.3, speed_perturb, {factor: 0.9}], [0.3, speed_perturb, {factor: 1.1}]]]]' "                      \
    "'dataset.preprocessor.data_aug_num=[1, 2]' dataset.preprocessor.data_aug_prob=1.0"
#define FINAL "checkpoints/epoch=2-step=8/model.safetensors"

Test(train_augment, same_weights_on_one_and_two_ranks_and_other_than_without)
{
    cr_assert_eq(run("one", "--stages train trainer.accumulate_grad_batches=2 trainer.limit_train_batches=8 " AUG), 0,
                 "%s", slurp("log"));
    char *log = slurp("one/train.log");
    cr_assert(strstr(log, "waveform augmentation of the training split: 4 data_aug_effects entries, 1 to 2 per "
                          "utterance, data_aug_prob 1"), "%s", log);
    free(log);
    cr_assert_eq(run("ddp", "--stages train trainer.devices=2 " AUG), 0, "%s", slurp("log"));
    double d = max_diff("ddp/" FINAL, "one/" FINAL);
    cr_assert(d < 1e-6, "augmented ddp differs from augmented one rank by %g", d);
    cr_assert_eq(run("plain", "--stages train trainer.accumulate_grad_batches=2 trainer.limit_train_batches=8"), 0,
                 "%s", slurp("log"));
    d = max_diff("plain/" FINAL, "one/" FINAL);
    cr_assert(d > 1e-4, "augmentation changed nothing (max difference %g)", d);
}

/* dataloader num_workers > 0: the next batch is loaded (read, augmented, featurized, SpecAugment'd)
 * on a thread beside the step, also while a validation inside the epoch runs; every draw depends
 * on (seed, epoch, position, utterance) alone, so the weights are the same bits. */
Test(train_augment, batches_loaded_beside_the_step_give_the_same_weights)
{
#define LIM "trainer.accumulate_grad_batches=2 trainer.limit_train_batches=8 "
    cr_assert_eq(run("inline", "--stages train trainer.val_check_interval=2 " LIM AUG), 0, "%s", slurp("log"));
    cr_assert_eq(run("ahead", "--stages train trainer.val_check_interval=2 "
                              "dataloader.train.iter_factory.num_workers=2 " LIM AUG), 0, "%s", slurp("log"));
    cr_assert(test_same_file(test_path(dir, "inline/" FINAL), test_path(dir, "ahead/" FINAL)),
              "the weights differ when batches are loaded beside the step");
    char *a = slurp("ahead/train.log"), *b = slurp("inline/train.log");
    cr_assert(strstr(a, "train: epoch 2: the step waited ") && strstr(a, " ms per batch for it, ") &&
              strstr(a, " ms per batch (loaded beside the step)"), "%s", a);
    cr_assert(!strstr(b, "the step waited"), "%s", b);
    free(a), free(b);
#undef LIM
}

Test(train_augment, bad_augmentation_values_stop_the_stage_with_the_key)
{
    truncate_log();
    cr_assert_neq(run("bad", "--stages train " AUG " dataset.preprocessor.data_aug_prob=1.5"), 0);
    char *log = slurp("log");
    cr_assert(strstr(log, "espnet3: error: ") && strstr(log, "dataset.preprocessor.data_aug_prob: must be in [0, 1], got 1.5"),
              "%s", log);
    free(log);
    truncate_log();
    cr_assert_neq(run("bad", "--stages train 'dataset.preprocessor.data_aug_effects=[[1, codecs, {format: gsm}]]' "
                             "dataset.preprocessor.data_aug_prob=1"), 0);
    log = slurp("log");
    cr_assert(strstr(log, "data_aug_effects[0][1]: 'codecs' is not implemented by espnet3"), "%s", log);
    free(log);
}

/* The frames of utterance `utt` in a feats_shape file (-1 when absent). */
static long frames_of(const char *shape_rel, const char *utt)
{
    char *s = slurp(shape_rel);
    long t = -1;
    size_t n = strlen(utt);
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        if (!strncmp(line, utt, n) && line[n] == ' ') t = atol(line + n + 1);
    free(s);
    return t;
}

static size_t count_lines(const char *rel)
{
    char *s = slurp(rel);
    size_t n = 0;
    for (char *p = s; *p; p++) n += *p == '\n';
    free(s);
    return n;
}

#define SP "'speed_perturb_factors=[0.9, 1.0, 1.1]' stats_dir=%s/stats_sp"

Test(train_augment, speed_perturb_factors_copies_counted_reused_and_trained_on)
{
    char extra[512];
    snprintf(extra, sizeof extra, "--stages collect_stats " SP, dir);
    truncate_log();
    cr_assert_eq(run("sp", extra), 0, "%s", slurp("log"));
    size_t n = count_lines("data/manifest/train.tsv");
    cr_assert(n >= 20, "%zu training utterances", n);
    cr_assert_eq(count_lines("data/manifest/train_sp.tsv"), 3 * n);
    cr_assert_eq(count_lines("stats_sp/train/feats_shape"), 3 * n);
    cr_assert_eq(count_lines("stats_sp/valid/feats_shape"), count_lines("data/manifest/valid.tsv"));
    /* The first training utterance and its copies: frames scale as 1 / factor. */
    char *m = slurp("data/manifest/train.tsv");
    *strchr(m, '\t') = '\0';
    char id[256];
    long t = frames_of("stats_sp/train/feats_shape", m);
    snprintf(id, sizeof id, "sp0.9-%s", m);
    long t09 = frames_of("stats_sp/train/feats_shape", id);
    snprintf(id, sizeof id, "sp1.1-%s", m);
    long t11 = frames_of("stats_sp/train/feats_shape", id);
    free(m);
    cr_assert(t > 50 && labs(t09 - lround(t / 0.9)) <= 1 && labs(t11 - lround(t / 1.1)) <= 1, "frames %ld %ld %ld",
              t, t09, t11);
    char *log = slurp("stats_sp/collect_stats.log");
    snprintf(id, sizeof id, "(%zu copies made, 0 reused)", 2 * n);
    cr_assert(strstr(log, id), "%s not in:\n%s", id, log);
    free(log);
    /* A rerun makes no copy again. */
    truncate_log();
    cr_assert_eq(run("sp", extra), 0, "%s", slurp("log"));
    log = slurp("stats_sp/collect_stats.log");
    snprintf(id, sizeof id, "(0 copies made, %zu reused)", 2 * n);
    cr_assert(strstr(log, id), "%s not in:\n%s", id, log);
    free(log);
    /* Training reads train_sp.tsv: one epoch over all copies. */
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=1 " SP, dir);
    cr_assert_eq(run("sp", extra), 0, "%s", slurp("log"));
    /* Out of bounds: the key and value named. */
    truncate_log();
    cr_assert_neq(run("sp", "--stages collect_stats 'speed_perturb_factors=[0.9, 3.0]'"), 0);
    log = slurp("log");
    cr_assert(strstr(log, "speed_perturb_factors[1]: must be in [0.5, 2], got 3.0"), "%s", log);
    free(log);
    truncate_log();
    cr_assert_neq(run("sp", "--stages train 'speed_perturb_factors=[0.9, 0.9]'"), 0);
    log = slurp("log");
    cr_assert(strstr(log, "speed_perturb_factors[1]: factor 0.9 is listed twice"), "%s", log);
    free(log);
}
