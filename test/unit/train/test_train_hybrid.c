/* The joint CTC/attention model through the binary on the tiny recipe
 * (recipes/espeak_fortunes/conf/training_tiny_hybrid.yaml): stages 1-5, the metrics, checkpoints
 * with the decoder, selection by valid/acc, bit-identical resume, greedy CTC, prefix-beam and joint
 * CTC/attention decoding of the hybrid model, ctc_weight 0 (no CTC branch; attention-only
 * decoding) and a monitor nothing reports. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

static char dir[64];

static int run_cfg(const char *cfg, const char *exp, const char *extra)
{
    return test_sh("cd '%s' && timeout 300 '%s' -q --config recipes/espeak_fortunes/conf/%s.yaml data_dir=%s/data "
                   "dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s %s >>%s/log 2>&1",
                   test_root_dir(), test_bin_path(), cfg, dir, dir, dir, dir, exp, extra, dir);
}

static int run(const char *exp, const char *extra) { return run_cfg("training_tiny_hybrid", exp, extra); }

static int infer(const char *exp, const char *extra)
{
    return test_sh("cd '%s' && timeout 300 '%s' -q --inference_config recipes/espeak_fortunes/conf/inference_tiny.yaml "
                   "data_dir=%s/data exp_dir=%s/%s --stages infer %s >>%s/log 2>&1",
                   test_root_dir(), test_bin_path(), dir, dir, exp, extra, dir);
}

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }
static int exists(const char *rel) { return test_exists(test_path(dir, rel)); }

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "hybrid"); }
static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(train_hybrid, .init = setup, .fini = teardown);

Test(train_hybrid, recipe_stages_1_5_then_ctc_decoding_of_the_hybrid_model)
{
    cr_assert_eq(run("exp", "--stage 1 --stop_stage 5 trainer.max_epochs=3"), 0, "%s", slurp("log"));
    char *csv = slurp("exp/metrics.csv");
    const char *header = "epoch,step,train/acc,train/grad_norm,train/loss,train/loss_att,train/loss_ctc,train/lr,"
                         "valid/acc,valid/cer,valid/cer_ctc,valid/loss,valid/loss_att,valid/loss_ctc,valid/wer\r\n";
    cr_assert(!strncmp(csv, header, strlen(header)), "%s", csv);
    free(csv);
    /* each epoch's rates are finite, not negative (untrained: the decoder's argmax may emit
     * <sos/eos>, whose 9 characters count, as in ESPnet, so a rate may pass 1) */
    cr_assert_eq(test_sh("cd '%s/exp' && /usr/bin/python3 -c \"import csv, math; r=[x for x in csv.DictReader(open("
                         "'metrics.csv')) if x.get('valid/cer')]; assert len(r) == 3, r; "
                         "assert all(0 <= float(x[k]) < 20 and math.isfinite(float(x[k])) for x in r "
                         "for k in ('valid/cer', 'valid/wer', 'valid/cer_ctc')), r\"",
                         dir),
                 0);
    /* ESPnet2's parameter names for both branches; the averages by valid/loss and valid/acc. */
    char *model = slurp("exp/checkpoints/epoch=3-step=3/model.safetensors");
    cr_assert(strstr(model + 8, "\"decoder.embed.0.weight\"") && strstr(model + 8, "\"decoder.output_layer.bias\"") &&
              strstr(model + 8, "\"decoder.decoders.0.src_attn.linear_k.weight\"") &&
              strstr(model + 8, "\"ctc.ctc_lo.weight\""));
    free(model);
    cr_assert(exists("exp/valid.acc.ave_3best.safetensors") && exists("exp/valid.loss.ave_3best.safetensors"));
    char *state = slurp("exp/checkpoints/epoch=3-step=3/trainer_state.json");
    cr_assert(strstr(state, "\"monitor\": \"valid/acc\"") && strstr(state, "\"mode\": \"max\""), "%s", state);
    free(state);

    /* Stage 6 decodes the hybrid model with CTC alone: greedy and prefix beam. */
    cr_assert_eq(infer("exp", "model.beam_size=1"), 0, "%s", slurp("log"));
    char *hyp = slurp("exp/inference/test/hyp.scp");
    cr_assert_eq(test_count_lines(hyp), 6, "%s", hyp);
    free(hyp);
    char beam[256];
    snprintf(beam, sizeof beam, "model.beam_size=4 inference_dir=%s/exp/inference_beam", dir);
    cr_assert_eq(infer("exp", beam), 0, "%s", slurp("log"));
    hyp = slurp("exp/inference_beam/test/hyp.scp");
    cr_assert_eq(test_count_lines(hyp), 6, "%s", hyp);
    free(hyp);
    /* And the joint CTC/attention search with the model's decoder (decoder_score_batch). */
    snprintf(beam, sizeof beam, "model.beam_size=3 model.ctc_weight=0.3 inference_dir=%s/exp/inference_joint", dir);
    cr_assert_eq(infer("exp", beam), 0, "%s", slurp("log"));
    hyp = slurp("exp/inference_joint/test/hyp.scp");
    cr_assert_eq(test_count_lines(hyp), 6, "%s", hyp);
    free(hyp);
}

/* 3 epochs, one, then a resume to 3 (2 under ASan: the resume after epoch 1 and the averages over
 * epochs before and after it are there too). */
Test(train_hybrid, resumes_bit_identically)
{
    const int n = test_sanitized() ? 2 : 3;
    char full[128], split[128], files[4][96];
    snprintf(full, sizeof full, "--stage 1 --stop_stage 5 trainer.max_epochs=%d", n);
    snprintf(split, sizeof split, "--stages train trainer.max_epochs=%d", n);
    cr_assert_eq(run("full", full), 0, "%s", slurp("log"));
    cr_assert_eq(run("split", "--stages train trainer.max_epochs=1"), 0, "%s", slurp("log"));
    cr_assert_eq(run("split", split), 0, "%s", slurp("log"));
    snprintf(files[0], sizeof files[0], "checkpoints/epoch=%d-step=%d/model.safetensors", n, n);
    snprintf(files[1], sizeof files[1], "checkpoints/epoch=%d-step=%d/trainer_state.safetensors", n, n);
    snprintf(files[2], sizeof files[2], "valid.acc.ave_%dbest.safetensors", n);
    snprintf(files[3], sizeof files[3], "valid.loss.ave_%dbest.safetensors", n);
    for (int i = 0; i < 4; i++) {
        char a[256], b[256];
        snprintf(a, sizeof a, "%s/full", dir);
        snprintf(b, sizeof b, "%s/split", dir);
        cr_assert(test_same_file(test_path(a, files[i]), test_path(b, files[i])), "%s: resumed run differs", files[i]);
    }
}

/* ctc_weight 0: ESPnet2 drops the ctc module, so does the checkpoint; CTC decoding says why it
 * cannot run. A criterion on a metric the model does not report is announced. */
Test(train_hybrid, ctc_weight_0_and_an_unreported_monitor)
{
    cr_assert_eq(run("att", "--stage 1 --stop_stage 5 trainer.max_epochs=1 model.model_conf.ctc_weight=0 "
                            "+model.model_conf.report_wer=false"),
                 0, "%s", slurp("log"));
    char *model = slurp("att/checkpoints/epoch=1-step=1/model.safetensors");
    cr_assert(strstr(model + 8, "\"decoder.embed.0.weight\"") && !strstr(model + 8, "\"ctc.ctc_lo"));
    free(model);
    char *csv = slurp("att/metrics.csv");
    /* ESPnetASRModel's stats without a CTC branch: the decoder's teacher-forced cer (report_wer false) */
    const char *header = "epoch,step,train/acc,train/grad_norm,train/loss,train/loss_att,train/lr,valid/acc,valid/cer,"
                         "valid/loss,valid/loss_att\r\n";
    cr_assert(!strncmp(csv, header, strlen(header)), "%s", csv);
    free(csv);
    cr_assert_eq(infer("att", "model.beam_size=1"), 1);
    char *log = slurp("log");
    cr_assert(strstr(log, "model.ctc_weight 1: the model has no CTC branch (trained with model_conf.ctc_weight 0"),
              "%s", log);
    free(log);
    /* The attention-only search (ctc_weight 0) decodes it. */
    cr_assert_eq(infer("att", "model.beam_size=2 model.ctc_weight=0.0"), 0, "%s", slurp("log"));
    char *hyp = slurp("att/inference/test/hyp.scp");
    cr_assert_eq(test_count_lines(hyp), 6, "%s", hyp);
    free(hyp);

    cr_assert_eq(run_cfg("training_tiny", "ctc", "--stages train trainer.max_epochs=1 "
                                                 "best_model_criterion=[[valid/acc,1,max]] "
                                                 "+model.model_conf.report_cer=false +model.model_conf.report_wer=false"),
                 0, "%s", slurp("log"));
    log = slurp("log");
    cr_assert(strstr(log, "best_model_criterion[0]: valid/acc is not reported by this model's validation "
                          "(valid/loss, valid/loss_ctc)"),
              "%s", log);
    free(log);
}
