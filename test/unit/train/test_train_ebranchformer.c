/* The E-Branchformer encoder through the binary on the tiny recipe (training_tiny_ebranchformer.yaml:
 * LibriSpeech-100's encoder_conf keys, small, with the Transformer decoder and ctc_weight 0.3, and
 * layer_drop_rate 0.1): stages 1-6 (train, joint CTC/attention decoding), bit-identical
 * resume, two ddp ranks equal to one rank accumulating two batches with stochastic depth on (the
 * blocks dropped follow the batch, not the rank), and the encoder_conf keys that are refused. */
#include <criterion/criterion.h>
#include <math.h>
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
             "cd '%s' && OMP_NUM_THREADS=1 timeout 300 '%s' -q --config " CONF "training_tiny_ebranchformer.yaml "
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
    test_tmpdir_make(dir, sizeof dir, "ebranchformer");
    /* The same in every test: once per run of the tests (test_sh_once). */
    cr_assert_eq(test_sh_once(dir, "%s >>%s/log 2>&1", command("exp0", "--stage 1 --stop_stage 3"), dir), 0,
                 "stages 1-3 failed:\n%s", slurp("log"));
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(ebranchformer_train, .init = setup, .fini = teardown);

/* max |a - b| / (1 + |b|) over the tensors of two model files, linear_k.bias aside (its gradient
 * is rounding noise that Adam scales into steps; test_dist_train.c says more). */
static double max_diff(const char *rel_a, const char *rel_b)
{
    return test_st_max_diff(test_path(dir, rel_a), test_path(dir, rel_b), NULL, "linear_k.bias");
}

Test(ebranchformer_train, stages_1_to_6_train_and_joint_decode)
{
    char extra[1024];
    snprintf(extra, sizeof extra,
             "--inference_config " CONF "inference_tiny_ebranchformer.yaml --stage 1 --stop_stage 6 "
             "trainer.max_epochs=2 dataloader.train.iter_factory.batches.batch_bins=80000");
    cr_assert_eq(run("full", extra), 0, "%s", slurp("log"));
    char *hyp = slurp("full/inference/test/hyp.scp");
    int lines = 0;
    for (char *p = hyp; *p; p++) lines += *p == '\n';
    cr_assert_eq(lines, 6, "hyp.scp:\n%s", hyp);
    free(hyp);
    char *cfg = slurp("full/config.yaml");
    cr_assert(strstr(cfg, "encoder: e_branchformer") && strstr(cfg, "cgmlp_linear_units: 64") &&
                  strstr(cfg, "merge_conv_kernel: 5"),
              "%s", cfg);
    free(cfg);
    /* The model file holds ESPnet's names: the cgMLP, the merge and the decoder. */
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(test_path(dir, "full/checkpoints/epoch=2-step=10/model.safetensors"), &f, &err), 0, "%s",
                 err.msg);
    static const char *const names[] = {"encoder.encoders.1.cgmlp.csgu.conv.weight",
                                        "encoder.encoders.0.depthwise_conv_fusion.weight",
                                        "encoder.encoders.0.merge_proj.weight", "encoder.encoders.1.attn.pos_bias_u",
                                        "encoder.encoders.0.feed_forward_macaron.w_1.weight",
                                        "decoder.decoders.0.src_attn.linear_q.weight"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) cr_assert_not_null(st_get(&f, names[i]), "%s", names[i]);
    const st_tensor *w = st_get(&f, "encoder.encoders.1.cgmlp.csgu.conv.weight");
    cr_assert(w->ndim == 3 && w->shape[0] == 32 && w->shape[1] == 1 && w->shape[2] == 7);
    st_close(&f);
}

/* Self-conditioned intermediate CTC after block 1 of 2 (model_conf.interctc_weight 0.3): training
 * writes the conditioning layer under ESPnet's name, logs the layer's CTC loss under ESPnet's
 * name (loss_interctc_layer1, train/ and valid/; valid/cer_interctc_layer1, its greedy CER, in
 * [0, 1] here, beside cer_ctc), and decoding (which feeds it back) runs. */
Test(ebranchformer_train, intermediate_ctc_trains_and_decodes)
{
    cr_assert_eq(run("ic", "--inference_config " CONF "inference_tiny_ebranchformer.yaml --stages train infer "
                           "trainer.max_epochs=1 dataloader.train.iter_factory.batches.batch_bins=80000 "
                           "+model.encoder_conf.interctc_layer_idx=[1] +model.encoder_conf.interctc_use_conditioning=true "
                           "+model.model_conf.interctc_weight=0.3"),
                 0, "%s", slurp("log"));
    char *hyp = slurp("ic/inference/test/hyp.scp");
    int lines = 0;
    for (char *p = hyp; *p; p++) lines += *p == '\n';
    cr_assert_eq(lines, 6, "hyp.scp:\n%s", hyp);
    free(hyp);
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(test_path(dir, "ic/checkpoints/epoch=1-step=5/model.safetensors"), &f, &err), 0, "%s", err.msg);
    const st_tensor *w = st_get(&f, "encoder.conditioning_layer.weight");
    cr_assert_not_null(w);
    cr_assert(w->ndim == 2 && w->shape[0] == 32, "conditioning_layer (output_size, vocab)");
    st_close(&f);
    char *csv = slurp("ic/metrics.csv");
    char *header = strndup(csv, strcspn(csv, "\n"));
    cr_assert(strstr(header, "train/loss_interctc_layer1") && strstr(header, "valid/loss_interctc_layer1") &&
                  strstr(header, "valid/cer_interctc_layer1") && strstr(header, "valid/cer_ctc"),
              "%s", header);
    free(header), free(csv);
    /* the valid value is a positive loss (a CTC loss of 6 untrained utterances) */
    cr_assert_eq(test_sh("cd '%s/ic' && /usr/bin/python3 -c \"import csv; r=[x for x in csv.DictReader(open('metrics.csv')) "
                         "if x.get('valid/loss_interctc_layer1')]; assert r and float(r[-1]['valid/loss_interctc_layer1']) > 0, r; "
                         "c=float(r[-1]['valid/cer_interctc_layer1']); assert 0 <= c <= 1, c\"",
                         dir),
                 0);
}

/* 3 epochs of 5 steps, one, then a resume to 3 (2 under ASan: the resume after epoch 1 and the
 * average over epochs before and after it are there too). */
Test(ebranchformer_train, resumes_bit_identically)
{
    const int epochs = test_sanitized() ? 2 : 3;
    const char *common = "--stages train dataloader.train.iter_factory.batches.batch_bins=80000";
    char a[512], b[512], model[128], state[128], ave[64];
    snprintf(a, sizeof a, "%s trainer.max_epochs=%d", common, epochs);
    snprintf(b, sizeof b, "%s trainer.max_epochs=1", common);
    snprintf(model, sizeof model, "checkpoints/epoch=%d-step=%d/model.safetensors", epochs, 5 * epochs);
    snprintf(state, sizeof state, "checkpoints/epoch=%d-step=%d/trainer_state.safetensors", epochs, 5 * epochs);
    snprintf(ave, sizeof ave, "valid.acc.ave_%dbest.safetensors", epochs);
    cr_assert_eq(run("full", a), 0, "%s", slurp("log"));
    cr_assert_eq(run("split", b), 0, "%s", slurp("log"));
    cr_assert_eq(run("split", a), 0, "%s", slurp("log"));
    cr_assert(same_file(test_path("full", model), test_path("split", model)),
              "resumed run differs from the uninterrupted one");
    cr_assert(same_file(test_path("full", state), test_path("split", state)));
    cr_assert(same_file(test_path("full", ave), test_path("split", ave)));
    cr_assert(same_file("full/metrics.csv", "split/metrics.csv"), "metrics differ after the resume");
}

/* Stochastic depth at 0.5 on 2 blocks: one rank accumulating 2 batches per step equals 2 ranks with
 * one batch each, as with dropout; the same run without layer drop trains other weights. */
Test(ebranchformer_train, layer_drop_is_the_same_on_any_number_of_ranks)
{
    const char *common = "--stages train trainer.max_epochs=2 dataloader.train.iter_factory.shuffle=false "
                         "dataloader.train.iter_factory.batches.batch_bins=40000 model.encoder_conf.layer_drop_rate=0.5";
    char one[512], ddp[512], none[512];
    snprintf(one, sizeof one, "%s trainer.accumulate_grad_batches=2 trainer.limit_train_batches=8", common);
    snprintf(ddp, sizeof ddp, "%s trainer.devices=2", common);
    snprintf(none, sizeof none, "%s model.encoder_conf.layer_drop_rate=0.0 trainer.devices=2", common);
    cr_assert_eq(run("one", one), 0, "%s", slurp("log"));
    cr_assert_eq(run("ddp", ddp), 0, "%s", slurp("log"));
    cr_assert_eq(run("none", none), 0, "%s", slurp("log"));
#define FINAL "/checkpoints/epoch=2-step=8/model.safetensors"
    /* Equal up to the float rounding of the gradient sums (the two agree to 1e-9 after one step),
     * which Adam magnifies where a gradient is near zero and which can tip a ReLU of the first conv
     * over zero, after which the subsampling convs train apart: 4.4e-5 at most after these 8 steps
     * (embed.conv.2's weight; 1e-6 before the first conv's gradient sums changed order), against
     * 9e-3 between layer drop on and off. */
    double d = max_diff("ddp" FINAL, "one" FINAL), dn = max_diff("ddp" FINAL, "none" FINAL);
    cr_assert(dn > 1e-4, "layer_drop_rate 0.5 trained the same weights as 0.0 (%g)", dn);
    cr_assert(d < dn / 50, "ddp differs from one rank by %g (layer drop on and off: %g)", d, dn);
#undef FINAL
}

Test(ebranchformer_train, encoder_keys_are_checked)
{
    static const struct {
        const char *override, *message;
    } bad[] = {
        {"model.encoder_conf.rel_pos_type=legacy", "model.encoder_conf.rel_pos_type: legacy (LegacyRelPositionalEncoding)"},
        {"model.encoder=conformer", "model.encoder_conf.attention_layer_type: an EBranchformerEncoder key, which the "
                                    "conformer encoder does not take"},
        {"+model.encoder_conf.macaron_style=true", "model.encoder_conf.macaron_style: not a key of EBranchformerEncoder"},
        {"+model.encoder_conf.cnn_module_kernel=31", "cnn_module_kernel: not a key of EBranchformerEncoder"},
        {"model.encoder_conf.interctc_layer_idx=[2]", "interctc_layer_idx: 2 is outside [1, 1] (ESPnet2 asserts"},
        {"model.encoder_conf.gate_activation=tanh", "'tanh' is not supported (supported: identity, swish, relu)"},
        {"model.encoder_conf.ffn_activation_type=selu", "'selu' is not supported (supported: swish, relu)"},
        {"model.encoder_conf.attention_layer_type=fast_selfattn", "'fast_selfattn' is not supported"},
        {"model.encoder_conf.attention_layer_type=selfattn", "rel_pos needs attention_layer_type rel_selfattn"},
        {"+model.encoder_conf.zero_triu=true", "model.encoder_conf.zero_triu: 'true' is not supported (supported: false)"},
        {"model.encoder_conf.cgmlp_conv_kernel=6", "cgmlp_conv_kernel: 6 must be odd"},
        {"model.encoder_conf.merge_conv_kernel=0", "merge_conv_kernel: 0 must be odd"},
        {"model.encoder_conf.cgmlp_linear_units=63", "cgmlp_linear_units: must be even and in [2, 262144]"},
        {"model.encoder_conf.layer_drop_rate=1.5", "layer_drop_rate: must be in [0, 1]"},
        {"model.encoder_conf.positionwise_layer_type=conv1d", "'conv1d' is not supported (supported: linear)"},
        {"model.encoder=branchformer", "'branchformer' is not supported (supported: transformer, conformer, e_branchformer, "
         "contextual_block_transformer, contextual_block_conformer)"},
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
    /* ESPnet2's defaults and keys without effect on this model are accepted; gradient_checkpoint_layers warns. */
    truncate_log();
    cr_assert_eq(run("ok", "--stages train trainer.max_epochs=1 +model.encoder_conf.interctc_layer_idx=[] "
                           "+model.encoder_conf.padding_idx=-1 +model.encoder_conf.max_pos_emb_len=5000 "
                           "+model.encoder_conf.gradient_checkpoint_layers=[] +model.encoder_conf.qk_norm=false "
                           "+model.encoder_conf.interctc_use_conditioning=false"),
                 0, "%s", slurp("log"));
    char *log = slurp("log");
    cr_assert(strstr(log, "model.encoder_conf.gradient_checkpoint_layers: accepted for ESPnet3 compatibility but not "
                          "implemented"),
              "%s", log);
    /* The tiny recipe's base config writes normalize_before: true, which EBranchformerEncoder does not take. */
    cr_assert(strstr(log, "model.encoder_conf.normalize_before: not a key of EBranchformerEncoder"), "%s", log);
    free(log);
}
