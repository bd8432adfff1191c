/* A transducer's validation error rates through stage 5 on the tiny recipe: valid/cer_transducer
 * and valid/wer_transducer in metrics.csv, the log and the TensorBoard events of the ASR task's
 * transducer (on by default, as ESPnetASRModel's report_cer / report_wer), usable as
 * best_model_criterion, each turned off by its key (with both off, ESPnet2's valid/cer_ctc instead);
 * the asr_transducer task's (off by default,
 * as ESPnetASRTransducerModel's); a sym_blank that names a token other than 0 refused at its line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

static char dir[64];

#define TRANSDUCER "model.decoder=transducer model.decoder_conf.hidden_size=8 model.joint_net_conf.joint_space_size=8"

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

static int run(const char *config, const char *exp, const char *extra)
{
    return test_sh("cd '%s' && timeout 300 '%s' -q --config %s data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats "
                   "exp_dir=%s/%s %s >>%s/log 2>&1",
                   test_root_dir(), test_bin_path(), config, dir, dir, dir, dir, exp, extra, dir);
}

static int run_tiny(const char *exp, const char *extra)
{
    return run("recipes/espeak_fortunes/conf/training_tiny.yaml", exp, extra);
}

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "trerr");
    cr_assert_eq(test_sh_once(dir,
                              "cd '%s' && timeout 300 '%s' -q --config recipes/espeak_fortunes/conf/training_tiny.yaml "
                              "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/exp0 --stage 1 "
                              "--stop_stage 3 >>%s/log 2>&1",
                              test_root_dir(), test_bin_path(), dir, dir, dir, dir, dir),
                 0, "stages 1-3 failed:\n%s", slurp("log"));
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(train_transducer_errors, .init = setup, .fini = teardown);

/* The column of `name` in metrics.csv's header (-1: none; lines end in \r\n, as Python's csv writes). */
static int column(const char *csv, const char *name)
{
    const char *end = csv + strcspn(csv, "\r\n");
    int col = 0;
    for (const char *p = csv; p && p < end; col++) {
        const char *comma = strchr(p, ',');
        size_t len = (size_t)((comma && comma < end ? comma : end) - p);
        if (len == strlen(name) && !strncmp(p, name, len)) return col;
        p = comma && comma < end ? comma + 1 : NULL;
    }
    return -1;
}

/* The values of column col over the rows that have one. */
static int values(const char *csv, int col, double *out, int cap)
{
    int n = 0;
    for (const char *line = strchr(csv, '\n'); line && line[1] && n < cap; line = strchr(line + 1, '\n')) {
        const char *p = line + 1;
        for (int k = 0; k < col && p; k++) {
            p = strpbrk(p, ",\n");
            p = p && *p == ',' ? p + 1 : NULL;
        }
        if (p && *p != ',' && *p != '\r' && *p != '\n') out[n++] = strtod(p, NULL);
    }
    return n;
}

Test(train_transducer_errors, asr_task_reports_them_and_they_pick_the_best_model)
{
    cr_assert_eq(run_tiny("on", "--stages train " TRANSDUCER " 'best_model_criterion=[[valid/cer_transducer, 1, min]]'"),
                 0, "%s", slurp("log"));
    char *csv = slurp("on/metrics.csv");
    int cc = column(csv, "valid/cer_transducer"), wc = column(csv, "valid/wer_transducer");
    cr_assert(cc > 0 && wc > 0 && column(csv, "valid/loss_transducer") > 0, "%s", csv);
    double v[8];
    int n = values(csv, cc, v, 8);
    cr_assert_eq(n, 2, "one valid/cer_transducer an epoch:\n%s", csv);
    for (int i = 0; i < n; i++) cr_expect(isfinite(v[i]) && v[i] >= 0, "%g", v[i]);
    cr_assert_eq(values(csv, wc, v, 8), 2, "%s", csv);
    free(csv);
    cr_assert(test_exists(test_path(dir, "on/valid.cer_transducer.ave_1best.safetensors")), "%s", slurp("log"));
    char *log = slurp("on/train.log");
    cr_expect(strstr(log, "valid/cer_transducer ") && strstr(log, "valid/wer_transducer "), "%s", log);
    free(log);
    cr_expect_eq(test_sh("grep -qa valid/wer_transducer %s/on/tensorboard/tb_logger/version_0/*tfevents*", dir), 0,
                 "no valid/wer_transducer in the TensorBoard events");
}

Test(train_transducer_errors, each_key_turns_its_rate_off)
{
    cr_assert_eq(run_tiny("nocer", "--stages train trainer.max_epochs=1 " TRANSDUCER " model.model_conf.report_cer=false"),
                 0, "%s", slurp("log"));
    char *csv = slurp("nocer/metrics.csv");
    cr_expect(column(csv, "valid/cer_transducer") < 0 && column(csv, "valid/wer_transducer") > 0, "%s", csv);
    cr_expect(column(csv, "valid/cer_ctc") < 0, "ESPnet2 builds no CTC error calculator here:\n%s", csv);
    free(csv);
    cr_assert_eq(run_tiny("none", "--stages train trainer.max_epochs=1 " TRANSDUCER
                                  " model.model_conf.report_cer=false model.model_conf.report_wer=false"),
                 0, "%s", slurp("log"));
    csv = slurp("none/metrics.csv");
    cr_expect(column(csv, "valid/cer_transducer") < 0 && column(csv, "valid/wer_transducer") < 0 &&
              column(csv, "valid/loss_transducer") > 0, "%s", csv);
    /* with both false ESPnetASRModel's constructor builds the CTC branch's calculator instead */
    cr_expect(column(csv, "valid/cer_ctc") > 0 && column(csv, "valid/loss_ctc") > 0, "%s", csv);
    free(csv);
}

Test(train_transducer_errors, sym_blank_other_than_token_0_is_refused)
{
    cr_assert_neq(run_tiny("blank", "--stages train " TRANSDUCER " model.model_conf.sym_blank='<space>'"), 0);
    char *log = slurp("log");
    cr_expect(strstr(log, "espnet3: error: model.model_conf.sym_blank") && strstr(log, "token 2 of the token list"),
              "%s", log);
    free(log);
    /* token 0 by name, and another sym_space (read as text by the calculator): trains */
    cr_assert_eq(run_tiny("blank0", "--stages train trainer.max_epochs=1 " TRANSDUCER
                                    " model.model_conf.sym_blank='<blank>' model.model_conf.sym_space=_"),
                 0, "%s", slurp("log"));
}

/* The asr_transducer task: off when left out (ESPnetASRTransducerModel's defaults), on when set. */
Test(train_transducer_errors, asr_transducer_task)
{
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/at.yaml", dir);
    test_write_text(cfg, "tokenizer:\n  model_type: char\n  save_path: ${data_dir}/tokens_char\n"
                         "model:\n  encoder: conformer\n  encoder_conf:\n    body_conf:\n"
                         "      - {block_type: conformer, hidden_size: 8, linear_size: 16, heads: 2, conv_mod_kernel_size: 3}\n"
                         "  decoder_conf: {embed_size: 8, hidden_size: 8}\n"
                         "  joint_network_conf: {joint_space_size: 8}\n"
                         "  normalize: global_mvn\n"
                         "  normalize_conf: {stats_file: '${stats_dir}/train/feats_stats.npz'}\n"
                         "optimizer: {_target_: torch.optim.Adam, lr: 0.002}\n"
                         "dataloader:\n  train:\n    iter_factory:\n      batches: {type: numel, batch_bins: 1000000}\n"
                         "trainer: {max_epochs: 1, num_sanity_val_steps: 0}\n");
    cr_assert_eq(run(cfg, "off", "--stages train"), 0, "%s", slurp("log"));
    char *csv = slurp("off/metrics.csv");
    cr_expect(column(csv, "valid/loss_transducer") > 0 && column(csv, "valid/cer_transducer") < 0 &&
              column(csv, "valid/wer_transducer") < 0, "%s", csv);
    free(csv);
    cr_assert_eq(run(cfg, "on", "--stages train model.model_conf.report_cer=true model.model_conf.report_wer=true "
                                "model.model_conf.validation_nstep=1 'best_model_criterion=[[valid/wer_transducer, 1, min]]'"),
                 0, "%s", slurp("log"));
    csv = slurp("on/metrics.csv");
    double v[4];
    cr_expect(column(csv, "valid/cer_transducer") > 0 && values(csv, column(csv, "valid/wer_transducer"), v, 4) == 1 &&
              isfinite(v[0]), "%s", csv);
    free(csv);
    cr_expect(test_exists(test_path(dir, "on/valid.wer_transducer.ave_1best.safetensors")), "%s", slurp("log"));
}
