/* Language models through the binary on the tiny recipe (ESPnet3's LM task on the LM text
 * create_dataset writes): recipes/espeak_fortunes/conf/training_tiny_lm.yaml (SequentialRNNLM, an
 * LSTM, as the default recipe's): collect_stats' text shapes, training with its metrics and lm.*
 * checkpoints, bit-identical resume, and shallow fusion in stage 6 (joint CTC/attention + LM, and
 * CTC + LM), with the errors an inference config can make about it; training_tiny_lm_transformer.yaml
 * (TransformerLM): trained and fused the same way. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

static char dir[64];

/* The ASR fixture both tests decode with: the same command, run once per run of the tests (test_sh_once). */
static int run_asr(const char *extra)
{
    return test_sh_once(dir,
                        "cd '%s' && timeout 300 '%s' -q --config recipes/espeak_fortunes/conf/training_tiny_hybrid.yaml "
                        "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/asr %s >>%s/log 2>&1",
                        test_root_dir(), test_bin_path(), dir, dir, dir, dir, extra, dir);
}

static int run_lm_cfg(const char *cfg, const char *exp, const char *extra)
{
    return test_sh("cd '%s' && timeout 300 '%s' -q --config recipes/espeak_fortunes/conf/%s.yaml data_dir=%s/data "
                   "exp_dir=%s/%s %s >>%s/log 2>&1",
                   test_root_dir(), test_bin_path(), cfg, dir, dir, exp, extra, dir);
}

static int run_lm(const char *exp, const char *extra) { return run_lm_cfg("training_tiny_lm", exp, extra); }

static int stage_lm(const char *lm, const char *stages, const char *out, const char *extra)
{
    return test_sh("cd '%s' && timeout 300 '%s' -q --inference_config recipes/espeak_fortunes/conf/inference_tiny.yaml "
                   "data_dir=%s/data exp_dir=%s/asr inference_dir=%s/%s model.asr_model_file=valid.loss.ave "
                   "model.lm_train_config=%s/%s/config.yaml model.lm_file=valid.loss.ave --stages %s %s >>%s/log 2>&1",
                   test_root_dir(), test_bin_path(), dir, dir, dir, out, dir, lm, stages, extra, dir);
}

static int infer_lm(const char *lm, const char *out, const char *extra) { return stage_lm(lm, "infer", out, extra); }

static int infer(const char *out, const char *extra) { return infer_lm("lm", out, extra); }

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }
static int exists(const char *rel) { return test_exists(test_path(dir, rel)); }

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "lm"); }
static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(train_lm, .init = setup, .fini = teardown);

Test(train_lm, trains_resumes_and_fuses_into_the_joint_search)
{
    /* The tiny dataset (with its LM text) and a hybrid ASR model to decode with. */
    cr_assert_eq(run_asr("--stage 1 --stop_stage 5 trainer.max_epochs=1"), 0, "%s", slurp("log"));
    cr_assert(exists("data/lm/train.txt") && exists("data/lm/valid.txt"), "create_dataset wrote no LM text");

    cr_assert_eq(run_lm("lm", "--stages collect_stats train"), 0, "%s", slurp("log"));
    char *shape = slurp("lm/stats/valid/text_shape");
    cr_assert_eq(test_count_lines(shape), test_count_lines(slurp("data/lm/valid.txt")), "%s", shape);
    free(shape);
    char *csv = slurp("lm/metrics.csv");
    const char *header = "epoch,step,train/grad_norm,train/loss,train/lr,valid/loss\r\n";
    cr_assert(!strncmp(csv, header, strlen(header)), "%s", csv);
    free(csv);
    /* ESPnet2's names (SequentialRNNLM under ESPnetLanguageModel), nothing of an ASR model. */
    char *model = slurp("lm/checkpoints/epoch=2-step=8/model.safetensors");
    cr_assert(strstr(model + 8, "\"lm.encoder.weight\"") && strstr(model + 8, "\"lm.rnn.weight_ih_l0\"") &&
              strstr(model + 8, "\"lm.rnn.bias_hh_l0\"") && strstr(model + 8, "\"lm.decoder.weight\"") &&
              !strstr(model + 8, "\"encoder.") && !strstr(model + 8, "ctc"));
    free(model);
    cr_assert(exists("lm/valid.loss.ave.safetensors") && exists("lm/config.yaml"));

    /* An ASR model's key in an LM config warns (ESPnet's LMTask builds the LM alone); waveform
     * augmentation of text is an error before any stage runs. */
    cr_assert_eq(run_lm("warned", "--stages collect_stats train trainer.max_epochs=1 model.encoder=conformer"), 0, "%s",
                 slurp("log"));
    char *log = slurp("log");
    cr_assert(strstr(log, "model.encoder: an ASR model's key; the LM task"), "%s", log);
    free(log);
    cr_assert_neq(run_lm("augmented", "--stages collect_stats train dataset.preprocessor.noise_scp=noise.scp"), 0);
    log = slurp("log");
    cr_assert(strstr(log, "dataset.preprocessor.noise_scp: a language model's data are text"), "%s", log);
    free(log);
    cr_assert(!exists("augmented"), "the refused run wrote its exp_dir");

    /* Resume: one epoch, then the second, gives the two-epoch run's bits. */
    cr_assert_eq(run_lm("split", "--stages collect_stats train trainer.max_epochs=1"), 0, "%s", slurp("log"));
    cr_assert_eq(run_lm("split", "--stages train"), 0, "%s", slurp("log"));
    const char *files[] = {"checkpoints/epoch=2-step=8/model.safetensors", "valid.loss.ave.safetensors"};
    for (int i = 0; i < 2; i++) {
        char a[256], b[256];
        snprintf(a, sizeof a, "lm/%s", files[i]);
        snprintf(b, sizeof b, "split/%s", files[i]);
        cr_assert(test_same_file(test_path(dir, a), test_path(dir, b)), "%s: resumed run differs", files[i]);
    }

    /* Shallow fusion: the joint search with the LM, and CTC + LM (label-synchronous). */
    cr_assert_eq(infer("joint", "model.beam_size=3 model.ctc_weight=0.3 model.lm_weight=0.5"), 0, "%s", slurp("log"));
    char *hyp = slurp("joint/test/hyp.scp");
    cr_assert_eq(test_count_lines(hyp), 6, "%s", hyp);
    free(hyp);
    /* Batched (inference_tiny.yaml's batch_size 4: one search over a batch's hypotheses, the LM
     * scoring them all in one call per step) and one at a time: the same hypotheses. */
    cr_assert_eq(infer("joint_b1", "model.beam_size=3 model.ctc_weight=0.3 model.lm_weight=0.5 model.batch_size=1"), 0,
                 "%s", slurp("log"));
    cr_assert(test_same_file(test_path(dir, "joint/test/hyp.scp"), test_path(dir, "joint_b1/test/hyp.scp")),
              "batch_size 4 and 1 decode differently with the LM");
    cr_assert_eq(infer("ctc_lm", "model.beam_size=3 model.ctc_weight=1.0 model.lm_weight=0.3"), 0, "%s",
                 slurp("log"));
    hyp = slurp("ctc_lm/test/hyp.scp");
    cr_assert_eq(test_count_lines(hyp), 6, "%s", hyp);
    free(hyp);
    /* Stage 8 packs the LM beside the model: the pack decodes what the run decoded. */
    cr_assert_eq(stage_lm("lm", "pack_model", "joint", "model.beam_size=3 model.ctc_weight=0.3 model.lm_weight=0.5"),
                 0, "%s", slurp("log"));
    cr_assert(exists("asr/model_pack/lm/model.safetensors") && exists("asr/model_pack/conf/lm_config.yaml"));
    cr_assert_eq(test_sh("cd '%s' && timeout 300 '%s' -q --inference_config %s/asr/model_pack/conf/inference.yaml "
                         "inference_dir=%s/packed --stages infer >>%s/log 2>&1",
                         test_root_dir(), test_bin_path(), dir, dir, dir),
                 0, "%s", slurp("log"));
    cr_assert(test_same_file(test_path(dir, "joint/test/hyp.scp"), test_path(dir, "packed/test/hyp.scp")),
              "the pack decodes differently");

    /* The LM is in the search: a heavy weight changes what lm_weight 0 finds. */
    cr_assert_eq(infer("no_lm", "model.beam_size=3 model.ctc_weight=0.3 model.lm_weight=0"), 0, "%s", slurp("log"));
    cr_assert_eq(infer("heavy", "model.beam_size=3 model.ctc_weight=0.3 model.lm_weight=5"), 0, "%s", slurp("log"));
    char *plain = slurp("no_lm/test/hyp.scp"), *heavy = slurp("heavy/test/hyp.scp");
    cr_assert(strcmp(plain, heavy) != 0, "lm_weight 5 decoded what lm_weight 0 did:\n%s", heavy);
    free(plain), free(heavy);

    /* An LM that is missing, or a config that is not an LM's, is an error before decoding. */
    cr_assert_neq(infer("bad1", "model.lm_weight=0.5 model.ctc_weight=0.3 model.lm_file=nothing_here"), 0);
    log = slurp("log");
    cr_assert(strstr(log, "nothing_here: no model weights"), "%s", log);
    free(log);
    char cfg[160];
    snprintf(cfg, sizeof cfg, "model.lm_weight=0.5 model.ctc_weight=0.3 model.lm_train_config=%s/asr/config.yaml", dir);
    cr_assert_neq(infer("bad2", cfg), 0);
    log = slurp("log");
    cr_assert(strstr(log, "not a language model's training config"), "%s", log);
    free(log);
    cr_assert(!exists("bad1/test/hyp.scp") && !exists("bad2/test/hyp.scp"));
}

/* TransformerLM (ESPnet2's lm: transformer, small sizes): trained, its checkpoint names, fused. */
Test(train_lm, transformer_lm_trains_and_fuses)
{
    cr_assert_eq(run_asr("--stage 1 --stop_stage 5 trainer.max_epochs=1"), 0, "%s", slurp("log"));
    cr_assert_eq(run_lm_cfg("training_tiny_lm_transformer", "tlm",
                            "--stages collect_stats train trainer.max_epochs=1 model.lm_conf.embed_unit=16 "
                            "model.lm_conf.att_unit=32 model.lm_conf.head=4 model.lm_conf.unit=64 model.lm_conf.layer=1"),
                 0, "%s", slurp("log"));
    char *model = slurp("tlm/checkpoints/epoch=1-step=4/model.safetensors");
    cr_assert(strstr(model + 8, "\"lm.embed.weight\"") && strstr(model + 8, "\"lm.encoder.embed.0.weight\"") &&
              strstr(model + 8, "\"lm.encoder.encoders.0.self_attn.linear_q.weight\"") &&
              strstr(model + 8, "\"lm.encoder.after_norm.bias\"") && strstr(model + 8, "\"lm.decoder.weight\""));
    free(model);
    cr_assert_eq(infer_lm("tlm", "tjoint", "model.beam_size=3 model.ctc_weight=0.3 model.lm_weight=0.5"), 0, "%s",
                 slurp("log"));
    char *hyp = slurp("tjoint/test/hyp.scp");
    cr_assert_eq(test_count_lines(hyp), 6, "%s", hyp);
    free(hyp);
}
