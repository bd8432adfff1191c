/* model.normalize left out is ESPnet2's ASR tasks' default, utterance_mvn (ESPnet3 builds the model
 * from Task.get_default_config() updated by the config's model block); null is none. Checked in the
 * typed view, in the data's normalization (what the model trains and decodes with), in the
 * resolved config.yaml (what a later decode and the ESPnet pack read) and in --show_config; the LM
 * task, which has no normalize, gets none. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/config/config.h"
#include "core/data/asr_data.h"
#include "test/unit/config/config_test_util.h"
#include "test/unit/test_util.h"

static char tmp[256];

static void setup(void)
{
    test_tmpdir_make(tmp, sizeof tmp, "config_normalize");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmp); }

TestSuite(config_normalize, .init = setup, .fini = teardown);

Test(config_normalize, left_out_is_utterance_mvn_and_null_is_none)
{
    static const struct {
        const char *yaml;
        const char *kind;    /* the typed model.normalize; NULL: none */
        norm_kind norm;      /* the data's */
        const char *written; /* in config.yaml; NULL: no normalize key */
    } cases[] = {
        {"model:\n  encoder: transformer\n", "utterance_mvn", NORM_UTTERANCE, "  normalize: utterance_mvn\n"},
        {"model:\n  encoder: transformer\n  normalize: null\n", NULL, NORM_NONE, "  normalize: null\n"},
        {"model:\n  normalize: ~\n", NULL, NORM_NONE, "  normalize: null\n"},
        {"model:\n  normalize: global_mvn\n", "global_mvn", NORM_GLOBAL, "  normalize: global_mvn\n"},
        {"task: espnet3.systems.esp2_asr.lm_task.LMTask\nmodel:\n  lm: seq_rnn\n", NULL, NORM_NONE, NULL},
        {"model:\n  lm: transformer\n", NULL, NORM_NONE, NULL},
    };
    const char *path = test_path(tmp, "training.yaml"), *out = test_path(tmp, "config.yaml");
    const char *tokens = test_path(tmp, "tokens.txt");
    test_write_text(tokens, "<blank>\n<unk>\na\n<sos/eos>\n");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        test_write_text(path, cases[i].yaml);
        esp_config *cfg;
        esp_err err;
        cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s: %s", cases[i].yaml, err.msg);
        const model_cfg *m = ((const training_cfg *)cfg->typed)->model;
        if (cases[i].kind) cr_assert_str_eq(m->normalize, cases[i].kind, "%s", cases[i].yaml);
        else cr_assert_null(m->normalize, "%s: %s", cases[i].yaml, m->normalize);
        if (cases[i].norm != NORM_GLOBAL) { /* global_mvn reads feats_stats.npz, which this test has not */
            asr_data d;
            cr_assert_eq(asr_data_open_files(&d, m, NULL, tokens, 0, &err), 0, "%s", err.msg);
            cr_assert_eq(d.norm, cases[i].norm, "%s", cases[i].yaml);
            if (d.norm == NORM_UTTERANCE) /* UtteranceMVN's defaults: means, not variances */
                cr_assert(d.utt_norm_means && !d.utt_norm_vars && d.norm_eps == 1e-20, "%s", cases[i].yaml);
            asr_data_close(&d);
        }
        cr_assert_eq(config_write_resolved(cfg, out, &err), 0, "%s", err.msg);
        char *text = test_slurp(out);
        if (cases[i].written) cr_assert(strstr(text, cases[i].written), "%s\nwrote:\n%s", cases[i].yaml, text);
        else cr_assert(!strstr(text, "normalize"), "%s\nwrote:\n%s", cases[i].yaml, text);
        free(text);
        config_free(cfg);
    }
    /* What config.yaml says is read back alike: utterance_mvn stays, null stays none. */
    for (int k = 0; k < 2; k++) {
        test_write_text(path, k ? "model:\n  normalize: null\n" : "model:\n  encoder: transformer\n");
        esp_config *cfg;
        esp_err err;
        cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
        cr_assert_eq(config_write_resolved(cfg, out, &err), 0, "%s", err.msg);
        config_free(cfg);
        cr_assert_eq(cfg_load(CONFIG_TRAINING, out, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
        const char *kind = ((const training_cfg *)cfg->typed)->model->normalize;
        cr_assert(k ? !kind : kind && !strcmp(kind, "utterance_mvn"), "%s", kind ? kind : "(none)");
        config_free(cfg);
    }
}

/* --show_config prints the default; a quoted 'null' (a string) and none (ESPnet3 raises on it as
 * well: no class of that name) are errors at their line that say how to write none. */
Test(config_normalize, show_config_prints_it_and_none_is_written_null)
{
    const char *path = test_path(tmp, "training.yaml");
    test_write_text(path, "model:\n  encoder: transformer\n");
    const bin_run *r = CFG_RUN(tmp, "--config", path, "--template_dir", "", "--show_config");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert(strstr(r->out, "  normalize: utterance_mvn\n  normalize_conf:\n    eps: 1e-20\n    norm_means: true\n"
                             "    norm_vars: false\n"),
              "%s", r->out);
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        {"model:\n  normalize: \"null\"\n", "training.yaml:2:14: model.normalize: 'null' in quotes is the string null, "
                                            "not None (write null without quotes for no normalization; left out, it is "
                                            "the task's utterance_mvn)"},
        {"model:\n  normalize: none\n",
         "training.yaml:2:14: model.normalize: 'none' is not supported (supported: global_mvn, utterance_mvn, null)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        test_write_text(path, bad[i].yaml);
        r = CFG_RUN(tmp, "--config", path, "--template_dir", "", "--show_config");
        cr_assert_eq(r->status, 1, "%s", r->err);
        cr_assert(strstr(r->err, bad[i].want) && !strchr(strchr(r->err, '\n') + 1, '\n'), "%s", r->err);
    }
}
