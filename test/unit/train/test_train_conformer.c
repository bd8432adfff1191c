/* The Conformer encoder through the binary on the tiny recipe (training_tiny_conformer.yaml):
 * stages 1-6 (train, then decode with eval-mode BatchNorm), bit-identical resume with the
 * BatchNorm buffers in the checkpoints, two ddp ranks (rank 0's running statistics saved; resume
 * identical there too), and the encoder_conf keys that are refused or warned about. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"

static char dir[64];

#define CONF "recipes/espeak_fortunes/conf/"

static char *command(const char *exp, const char *extra)
{
    static char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && OMP_NUM_THREADS=1 timeout 300 '%s' -q --config " CONF "training_tiny_conformer.yaml "
             "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s %s",
             test_root_dir(), test_bin_path(), dir, dir, dir, dir, exp, extra);
    return cmd;
}

static int run(const char *exp, const char *extra) { return test_sh("%s >>%s/log 2>&1", command(exp, extra), dir); }

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

static int exists(const char *rel) { return test_exists(test_path(dir, rel)); }

static int same_file(const char *a, const char *b) { return test_same_file(test_path(dir, a), test_path(dir, b)); }

static void truncate_log(void)
{
    FILE *fp = fopen(test_path(dir, "log"), "w");
    if (fp) fclose(fp);
}

/* Stages 1-3 once per test. */
static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "conformer");
    /* The same in every test: once per run of the tests (test_sh_once). */
    cr_assert_eq(test_sh_once(dir, "%s >>%s/log 2>&1", command("exp0", "--stage 1 --stop_stage 3"), dir), 0,
                 "stages 1-3 failed:\n%s", slurp("log"));
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(conformer_train, .init = setup, .fini = teardown);

/* num_batches_tracked of block 0's BatchNorm in a model file (an I64 scalar, as ESPnet has it), and
 * whether its running_var moved from 1. */
static long long batches_tracked(const char *rel, int *var_moved)
{
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(test_path(dir, rel), &f, &err), 0, "%s", err.msg);
    const st_tensor *c = st_get(&f, "encoder.encoders.0.conv_module.norm.num_batches_tracked");
    const st_tensor *v = st_get(&f, "encoder.encoders.0.conv_module.norm.running_var");
    cr_assert(c && v, "no BatchNorm buffers in %s", rel);
    cr_assert(c->dtype == ST_I64 && c->ndim == 0, "num_batches_tracked is %s with %d dims", st_dtype_name(c->dtype),
              c->ndim);
    long long n = *(const int64_t *)c->data;
    *var_moved = 0;
    for (int64_t i = 0; i < st_numel(v); i++) *var_moved |= ((const float *)v->data)[i] != 1.0f;
    st_close(&f);
    return n;
}

Test(conformer_train, stages_1_to_6_train_and_decode)
{
    char extra[1024];
    snprintf(extra, sizeof extra,
             "--inference_config " CONF "inference_tiny_conformer.yaml --stage 1 --stop_stage 6 trainer.max_epochs=2 "
             "dataloader.train.iter_factory.batches.batch_bins=80000");
    cr_assert_eq(run("full", extra), 0, "%s", slurp("log"));
    char *hyp = slurp("full/inference/test/hyp.scp");
    int lines = 0;
    for (char *p = hyp; *p; p++) lines += *p == '\n';
    cr_assert_eq(lines, 6, "hyp.scp:\n%s", hyp);
    free(hyp);
    char *cfg = slurp("full/config.yaml");
    cr_assert(strstr(cfg, "encoder: conformer") && strstr(cfg, "macaron_style: true"), "%s", cfg);
    free(cfg);
    /* One BatchNorm update per training batch: 5 batches in each of the 2 epochs. */
    int moved;
    cr_assert_eq(batches_tracked("full/checkpoints/epoch=2-step=10/model.safetensors", &moved), 10);
    cr_assert(moved, "running_var never moved from 1");
    /* The k-best average keeps the newest checkpoint's counter and averages the statistics. */
    cr_assert_eq(batches_tracked("full/valid.loss.ave_2best.safetensors", &moved), 10);
}

/* 3 epochs of 5 steps, one, then a resume to 3 (2 under ASan: the resume after epoch 1 and the
 * average over epochs before and after it are there too). */
Test(conformer_train, resumes_bit_identically)
{
    const int epochs = test_sanitized() ? 2 : 3;
    const char *common = "--stages train dataloader.train.iter_factory.batches.batch_bins=80000";
    char a[512], b[512], model[128], state[128], ave[64];
    snprintf(a, sizeof a, "%s trainer.max_epochs=%d", common, epochs);
    snprintf(b, sizeof b, "%s trainer.max_epochs=1", common);
    snprintf(model, sizeof model, "checkpoints/epoch=%d-step=%d/model.safetensors", epochs, 5 * epochs);
    snprintf(state, sizeof state, "checkpoints/epoch=%d-step=%d/trainer_state.safetensors", epochs, 5 * epochs);
    snprintf(ave, sizeof ave, "valid.loss.ave_%dbest.safetensors", epochs);
    cr_assert_eq(run("full", a), 0, "%s", slurp("log"));
    cr_assert_eq(run("split", b), 0, "%s", slurp("log"));
    cr_assert_eq(run("split", a), 0, "%s", slurp("log"));
    cr_assert(same_file(test_path("full", model), test_path("split", model)),
              "resumed run differs from the uninterrupted one");
    cr_assert(same_file(test_path("full", state), test_path("split", state)));
    cr_assert(same_file(test_path("full", ave), test_path("split", ave)));
    /* Validation (eval-mode BatchNorm with the resumed running statistics) gives the same numbers. */
    cr_assert(same_file("full/metrics.csv", "split/metrics.csv"), "metrics differ after the resume");
    int moved;
    cr_assert_eq(batches_tracked(test_path("split", model), &moved), 5 * epochs);
}

Test(conformer_train, ddp_two_ranks_save_rank_0s_statistics_and_resume)
{
    const char *common = "--stages train trainer.devices=2 dataloader.train.iter_factory.shuffle=false "
                         "dataloader.train.iter_factory.batches.batch_bins=40000";
    char a[512], b[512];
    snprintf(a, sizeof a, "%s trainer.max_epochs=2", common);
    snprintf(b, sizeof b, "%s trainer.max_epochs=1", common);
    cr_assert_eq(run("ddp", a), 0, "%s", slurp("log"));
    char *tl = slurp("ddp/train.log");
    cr_assert(strstr(tl, "train: epoch 2: parameters identical on all 2 ranks"), "%s", tl);
    free(tl);
    /* 9 batches, 8 of them split over 2 ranks: rank 0 ran 4 per epoch. */
    int moved;
    cr_assert_eq(batches_tracked("ddp/checkpoints/epoch=2-step=8/model.safetensors", &moved), 8);
    cr_assert_eq(run("ddp_split", b), 0, "%s", slurp("log"));
    cr_assert_eq(run("ddp_split", a), 0, "%s", slurp("log"));
    cr_assert(same_file("ddp/checkpoints/epoch=2-step=8/model.safetensors",
                        "ddp_split/checkpoints/epoch=2-step=8/model.safetensors"),
              "resumed ddp run differs from the uninterrupted one");
    /* Both validate with rank 0's statistics (broadcast before each validation). */
    cr_assert(same_file("ddp/metrics.csv", "ddp_split/metrics.csv"), "metrics differ after the resume");
}

/* trainer.sync_batchnorm: two ranks normalize with the statistics of both ranks' batches (core/nn/
 * encoder_syncbn.c; the math against one rank on the whole batch is test/unit/nn/test_syncbn.c). The
 * ranks stay identical (the trainer checks every epoch), the statistics update once per step, and
 * the result differs from the unsynchronized run of the same batches. */
Test(conformer_train, ddp_sync_batchnorm_two_ranks)
{
    const char *common = "--stages train trainer.devices=2 dataloader.train.iter_factory.shuffle=false "
                         "dataloader.train.iter_factory.batches.batch_bins=40000 trainer.max_epochs=1";
    char a[512];
    snprintf(a, sizeof a, "%s trainer.sync_batchnorm=true", common);
    cr_assert_eq(run("sync", a), 0, "%s", slurp("log"));
    char *tl = slurp("sync/train.log");
    cr_assert(strstr(tl, "train: epoch 1: parameters identical on all 2 ranks"), "%s", tl);
    cr_assert(!strstr(tl, "sync_batchnorm"), "sync_batchnorm should be implemented, not warned about:\n%s", tl);
    free(tl);
    int moved;
    cr_assert_eq(batches_tracked("sync/checkpoints/epoch=1-step=4/model.safetensors", &moved), 4);
    cr_assert(moved);
    cr_assert_eq(run("nosync", common), 0, "%s", slurp("log"));
    cr_assert(!same_file("sync/checkpoints/epoch=1-step=4/model.safetensors",
                         "nosync/checkpoints/epoch=1-step=4/model.safetensors"),
              "sync_batchnorm changed nothing");
}

/* Other input layers through stages 5-6 (the config written beside the model keeps them, decoding
 * builds the same model): conv2d6, linear, and null with n_mels = output_size and utterance_mvn. */
Test(conformer_train, other_input_layers_train_and_decode)
{
    static const char *const layers[] = {
        "model.encoder_conf.input_layer=conv2d6",
        "model.encoder_conf.input_layer=linear model.normalize=utterance_mvn +model.normalize_conf.norm_vars=true",
        "model.encoder_conf.input_layer=null model.frontend_conf.n_mels=32",
    };
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        truncate_log();
        char extra[1024], exp[16];
        snprintf(exp, sizeof exp, "layer%zu", i);
        snprintf(extra, sizeof extra,
                 "--inference_config " CONF "inference_tiny_conformer.yaml --stages train infer trainer.max_epochs=1 "
                 "dataloader.train.iter_factory.batches.batch_bins=80000 %s", layers[i]);
        if (i == 2) { /* other features: their own stats (stage 3) */
            char s3[512];
            snprintf(s3, sizeof s3, "--stages collect_stats stats_dir=%s/stats32 %s", dir, layers[i]);
            cr_assert_eq(run(exp, s3), 0, "%s", slurp("log"));
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " stats_dir=%s/stats32", dir);
        }
        cr_assert_eq(run(exp, extra), 0, "%s: %s", layers[i], slurp("log"));
        char rel[64];
        snprintf(rel, sizeof rel, "%s/inference/test/hyp.scp", exp);
        char *hyp = slurp(rel);
        int lines = 0;
        for (char *p = hyp; *p; p++) lines += *p == '\n';
        cr_assert_eq(lines, 6, "%s: hyp.scp:\n%s", layers[i], hyp);
        free(hyp);
        snprintf(rel, sizeof rel, "%s/config.yaml", exp);
        char *cfg = slurp(rel);
        const char *want = i == 0 ? "input_layer: conv2d6" : i == 1 ? "input_layer: linear" : "input_layer: null";
        cr_assert(strstr(cfg, want), "%s not in config.yaml:\n%s", want, cfg);
        free(cfg);
    }
}

Test(conformer_train, encoder_keys_are_checked)
{
    static const struct {
        const char *override, *message;
    } bad[] = {
        {"model.encoder_conf.rel_pos_type=legacy", "model.encoder_conf.rel_pos_type: legacy (LegacyRelPositionalEncoding)"},
        {"~model.encoder_conf.rel_pos_type", "rel_pos_type: legacy, ESPnet2's default, (LegacyRelPositionalEncoding)"},
        {"model.encoder=transformer", "model.encoder_conf.macaron_style: a ConformerEncoder key"},
        {"model.encoder_conf.interctc_layer_idx=[2]", "interctc_layer_idx: 2 is outside [1, 1] (ESPnet2 asserts"},
        {"model.encoder_conf.activation_type=tanh", "'tanh' is not supported (supported: swish, relu)"},
        {"model.encoder_conf.zero_triu=true", "model.encoder_conf.zero_triu: 'true' is not supported (supported: false)"},
        {"+model.encoder_conf.stochastic_depth_rate=0.1", "stochastic_depth_rate: 0.1 is not supported"},
        {"+model.encoder_conf.layer_drop_rate=0.1", "layer_drop_rate: 0.1 is not supported"},
        {"model.encoder_conf.cnn_module_kernel=6", "cnn_module_kernel: 6 must be odd"},
        {"model.encoder_conf.selfattention_layer_type=selfattn", "rel_pos needs selfattention_layer_type rel_selfattn"},
        {"+model.encoder_conf.positionwise_layer_type=conv1d", "'conv1d' is not supported (supported: linear)"},
        {"model.encoder=branchformer", "'branchformer' is not supported (supported: transformer, conformer, e_branchformer, "
         "contextual_block_transformer, contextual_block_conformer)"},
        {"model.encoder_conf.input_layer=conv1d2", "conv1d2 is a TransformerEncoder input layer"},
        {"model.encoder_conf.input_layer=embed", "embed (nn.Embedding) takes token ids"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        truncate_log();
        char extra[512];
        snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=1 %s", bad[i].override);
        cr_assert_eq(run("bad", extra), 1, "%s was accepted:\n%s", bad[i].override, slurp("log"));
        char *log = slurp("log");
        cr_assert(strstr(log, bad[i].message), "%s: expected '%s' in:\n%s", bad[i].override, bad[i].message, log);
        free(log);
        cr_assert_not(exists("bad/checkpoints"), "%s: training started", bad[i].override);
    }
    /* ESPnet2's defaults and keys without effect on this model are accepted; sync_batchnorm on one
     * rank is accepted silently (there is nothing to synchronize, as in Lightning). */
    truncate_log();
    cr_assert_eq(run("ok", "--stages train trainer.max_epochs=1 +trainer.sync_batchnorm=true "
                           "+model.encoder_conf.interctc_layer_idx=[] +model.encoder_conf.padding_idx=-1 "
                           "+model.encoder_conf.use_flash_attn=true +model.encoder_conf.max_pos_emb_len=5000 "
                           "+model.encoder_conf.concat_after=false +model.encoder_conf.positionwise_conv_kernel_size=3"),
                 0, "%s", slurp("log"));
    char *log = slurp("log");
    cr_assert(!strstr(log, "sync_batchnorm"), "%s", log);
    cr_assert(strstr(log, "use_flash_attn: accepted for ESPnet3 compatibility but not implemented"), "%s", log);
    free(log);
}
