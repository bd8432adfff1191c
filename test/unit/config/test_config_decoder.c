/* The attention decoder's config keys: model.decoder, every decoder_conf key of ESPnet2's
 * TransformerDecoder (implemented, refused with file:line:col, or warned), model_conf's joint-loss
 * keys with ESPnet2's defaults, and how they map into model_dims / model_rates. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/config/config.h"
#include "core/nn/decoder_conf.h"
#include "core/nn/lm_conf.h"
#include "test/unit/test_util.h"

static char tmp[256];

static void setup(void)
{
    test_tmpdir_make(tmp, sizeof tmp, "config_decoder");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmp); }

TestSuite(config_decoder, .init = setup, .fini = teardown);

static const char *path_of(const char *rel) { return test_path(tmp, rel); }

/* Loads text (no template) as a training config; stderr goes to tmp/stderr.txt. */
static int load(const char *text, esp_config **cfg, esp_err *err)
{
    const char *p = path_of("cfg.yaml");
    test_write_text(p, text);
    fflush(stderr);
    int saved = dup(2), fd = open(path_of("stderr.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0 && saved >= 0);
    dup2(fd, 2);
    close(fd);
    config_load_opts o = {0};
    int rc = config_load(CONFIG_TRAINING, p, &o, cfg, err);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    return rc;
}

static const char *load_error(const char *text)
{
    static esp_err err;
    esp_config *cfg = NULL;
    int rc = load(text, &cfg, &err);
    if (rc == 0) config_free(cfg);
    cr_assert_neq(rc, 0, "expected an error for:\n%s", text);
    return err.msg;
}

#define assert_has(msg, piece) cr_assert(strstr((msg), (piece)) != NULL, "message:\n  %s\nlacks:\n  %s", (msg), (piece))

static const char *const full =
    "model:\n"
    "  encoder_conf:\n    output_size: 32\n    attention_heads: 4\n"
    "  decoder: transformer\n"
    "  decoder_conf:\n"
    "    attention_heads: 2\n    linear_units: 48\n    num_blocks: 3\n    dropout_rate: 0.2\n"
    "    positional_dropout_rate: 0.05\n    self_attention_dropout_rate: 0.1\n"
    "    src_attention_dropout_rate: 0.15\n    input_layer: embed\n    use_output_layer: true\n"
    "    normalize_before: true\n    concat_after: false\n    layer_drop_rate: 0.0\n    qk_norm: false\n"
    "    use_flash_attn: true\n    gradient_checkpoint_layers: []\n"
    "  model_conf:\n    ctc_weight: 0.3\n    lsm_weight: 0.1\n    length_normalized_loss: true\n";

Test(config_decoder, every_key_maps_into_dims_and_rates)
{
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(load(full, &cfg, &err), 0, "%s", err.msg);
    char *warned = test_slurp(path_of("stderr.txt"));
    assert_has(warned, "model.decoder_conf.use_flash_attn: accepted for ESPnet3 compatibility but not implemented");
    assert_has(warned, "model.decoder_conf.gradient_checkpoint_layers");
    free(warned);
    const model_cfg *m = ((const training_cfg *)cfg->typed)->model;
    model_dims d = {.d = 32};
    cr_assert_eq(decoder_dims_from_cfg(&d, m, &err), 0, "%s", err.msg);
    cr_assert(d.dec_blocks == 3 && d.dec_heads == 2 && d.dec_ff == 48 && !d.no_ctc);
    model_rates r = {0};
    decoder_rates_from_cfg(&r, m);
    cr_assert_float_eq(r.dec_dropout, 0.2f, 1e-7);
    cr_assert_float_eq(r.dec_pos_dropout, 0.05f, 1e-7);
    cr_assert_float_eq(r.dec_self_att_dropout, 0.1f, 1e-7);
    cr_assert_float_eq(r.dec_src_att_dropout, 0.15f, 1e-7);
    cr_assert_float_eq(r.ctc_weight, 0.3f, 1e-7);
    cr_assert_float_eq(r.lsm_weight, 0.1f, 1e-7);
    cr_assert(r.length_normalized_loss);
    cr_assert(decoder_in_cfg(m));
    config_free(cfg);
}

/* ESPnet2's defaults: ctc_weight 0.5 (written into the config), dropout 0.1 / 0.1 / 0 / 0, 6 blocks
 * of 4 heads and 2048 units; ctc_weight 1.0 drops the decoder, 0.0 the CTC branch. */
Test(config_decoder, defaults_and_the_two_ends_of_ctc_weight)
{
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(load("model:\n  decoder: transformer\n  decoder_conf:\n    num_blocks: 1\n", &cfg, &err), 0, "%s",
                 err.msg);
    const model_cfg *m = ((const training_cfg *)cfg->typed)->model;
    cr_assert_not_null(m->model_conf);
    cr_assert_float_eq(m->model_conf->ctc_weight, 0.5, 1e-12);
    cr_assert(m->decoder_conf->use_output_layer && m->decoder_conf->normalize_before);
    model_rates r = {0};
    decoder_rates_from_cfg(&r, m);
    cr_assert(r.dec_dropout == 0.1f && r.dec_pos_dropout == 0.1f && r.dec_self_att_dropout == 0);
    model_dims d = {.d = 256};
    cr_assert_eq(decoder_dims_from_cfg(&d, m, &err), 0);
    cr_assert(d.dec_blocks == 1 && d.dec_heads == 4 && d.dec_ff == 2048);
    config_free(cfg);

    cr_assert_eq(load("model:\n  decoder: transformer\n  model_conf:\n    ctc_weight: 1.0\n", &cfg, &err), 0);
    cr_assert_eq(decoder_dims_from_cfg(&d, ((const training_cfg *)cfg->typed)->model, &err), 0);
    cr_assert_eq(d.dec_blocks, 0);
    cr_assert_not(decoder_in_cfg(((const training_cfg *)cfg->typed)->model));
    config_free(cfg);

    cr_assert_eq(load("model:\n  decoder: transformer\n  model_conf:\n    ctc_weight: 0\n", &cfg, &err), 0);
    cr_assert_eq(decoder_dims_from_cfg(&d, ((const training_cfg *)cfg->typed)->model, &err), 0);
    cr_assert(d.dec_blocks == 6 && d.no_ctc);
    config_free(cfg);

    /* No decoder (unset or none): CTC only, whatever ctc_weight says. */
    cr_assert_eq(load("model:\n  decoder: none\n  model_conf:\n    ctc_weight: 0.3\n", &cfg, &err), 0);
    cr_assert_eq(decoder_dims_from_cfg(&d, ((const training_cfg *)cfg->typed)->model, &err), 0);
    cr_assert(d.dec_blocks == 0 && !d.no_ctc);
    config_free(cfg);

    /* Ranges are the loader's (core/config/config_values.c). */
    assert_has(load_error("model:\n  decoder: transformer\n  model_conf:\n    ctc_weight: 1.5\n"),
               "cfg.yaml:4:17: model.model_conf.ctc_weight: must be in [0, 1], got 1.5");
    assert_has(load_error("model:\n  decoder_conf:\n    src_attention_dropout_rate: 1\n"),
               "model.decoder_conf.src_attention_dropout_rate: must be in [0, 1)");
    assert_has(load_error("model:\n  decoder_conf:\n    num_blocks: 0\n"),
               "model.decoder_conf.num_blocks: must be in [1, 1024], got 0");
}

/* What ESPnet2 has and espnet3 does not: an error at the key's line with what is supported. */
Test(config_decoder, unsupported_variants_fail_with_file_line_col)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"model:\n  decoder: rnn\n",
         "cfg.yaml:2:12: model.decoder: 'rnn' is not supported (supported: transformer, transducer, none)"},
        {"model:\n  decoder_conf:\n    input_layer: linear\n",
         "cfg.yaml:3:18: model.decoder_conf.input_layer: 'linear' is not supported (supported: embed)"},
        {"model:\n  decoder_conf:\n    concat_after: true\n",
         "model.decoder_conf.concat_after: 'true' is not supported (supported: false)"},
        {"model:\n  decoder_conf:\n    layer_drop_rate: 0.1\n",
         "model.decoder_conf.layer_drop_rate: '0.1' is not supported (supported: 0)"},
        {"model:\n  decoder_conf:\n    normalize_before: false\n",
         "model.decoder_conf.normalize_before: 'false' is not supported (supported: true)"},
        {"model:\n  decoder_conf:\n    use_output_layer: false\n",
         "model.decoder_conf.use_output_layer: 'false' is not supported (supported: true)"},
        {"model:\n  decoder_conf:\n    qk_norm: true\n", "model.decoder_conf.qk_norm: 'true' is not supported"},
        {"model:\n  decoder_conf:\n    num_block: 2\n",
         "model.decoder_conf.num_block: unknown key (did you mean num_blocks?)"},
        {"model:\n  decoder_conf:\n    num_blocks: two\n", "model.decoder_conf.num_blocks: expected an integer"},
        {"model:\n  model_conf:\n    lsm_weigth: 0.1\n",
         "model.model_conf.lsm_weigth: unknown key (did you mean lsm_weight?)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) assert_has(load_error(cases[i].yaml), cases[i].want);
    /* layer_drop_rate 0 in any spelling is fine. */
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(load("model:\n  decoder_conf:\n    layer_drop_rate: 0.0\n", &cfg, &err), 0, "%s", err.msg);
    config_free(cfg);
}

/* The ASR task's transducer (core/nn/decoder_conf.h): every TransducerDecoder and JointNetwork key
 * into dims and rates, ESPnet2's defaults, ctc_weight's default 0.5 written, and what is refused:
 * rnn_type gru taken (torch.nn.GRU layers), another rnn_type, another joint activation, a ranged
 * key out of range, keys of the other decoder class, joint_net_conf without a transducer. */
Test(config_decoder, transducer_keys_defaults_and_refusals)
{
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(load("model:\n  encoder_conf:\n    output_size: 8\n  decoder: transducer\n  decoder_conf:\n"
                      "    rnn_type: lstm\n    num_layers: 2\n    hidden_size: 6\n    dropout: 0.1\n"
                      "    dropout_embed: 0.2\n  joint_net_conf:\n    joint_space_size: 5\n"
                      "    joint_activation_type: tanh\n    lin_dec_bias: false\n",
                      &cfg, &err),
                 0, "%s", err.msg);
    const model_cfg *m = ((const training_cfg *)cfg->typed)->model;
    model_dims d = {.d = 8};
    cr_assert_eq(decoder_dims_from_cfg(&d, m, &err), 0, "%s", err.msg);
    cr_assert(d.tr_layers == 2 && d.tr_hidden == 6 && d.tr_joint == 5 && d.tr_no_dec_bias);
    cr_assert(!d.dec_blocks && !d.no_ctc);
    model_rates r = {0};
    decoder_rates_from_cfg(&r, m);
    cr_assert_float_eq(r.tr_dropout, 0.1f, 1e-7);
    cr_assert_float_eq(r.tr_dropout_embed, 0.2f, 1e-7);
    cr_assert_float_eq(r.ctc_weight, 0.5f, 1e-7); /* ESPnetASRModel's default */
    cr_assert(transducer_in_cfg(m) && !decoder_in_cfg(m) && ctc_in_cfg(m));
    config_free(cfg);

    cr_assert_eq(load("model:\n  decoder: transducer\n", &cfg, &err), 0, "%s", err.msg);
    m = ((const training_cfg *)cfg->typed)->model;
    d = (model_dims){.d = 8};
    cr_assert_eq(decoder_dims_from_cfg(&d, m, &err), 0, "%s", err.msg);
    cr_assert(d.tr_layers == 1 && d.tr_hidden == 320 && d.tr_joint == 256 && !d.tr_no_dec_bias);
    cr_assert_null(m->decoder_conf); /* TransformerDecoder's defaults are not written for a transducer */
    cr_assert(!d.tr_gru && !d.tr_embed);
    config_free(cfg);

    cr_assert_eq(load("model:\n  encoder_conf:\n    output_size: 8\n  decoder: transducer\n  decoder_conf:\n"
                      "    rnn_type: gru\n    hidden_size: 6\n",
                      &cfg, &err),
                 0, "%s", err.msg);
    m = ((const training_cfg *)cfg->typed)->model;
    d = (model_dims){.d = 8};
    cr_assert_eq(decoder_dims_from_cfg(&d, m, &err), 0, "%s", err.msg);
    cr_assert(d.tr_gru && d.tr_layers == 1 && d.tr_hidden == 6 && model_tr_embed(&d) == 6 && rnn_gates(d.tr_gru) == 3);
    config_free(cfg);

    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"model:\n  decoder: transducer\n  decoder_conf:\n    rnn_type: rnn\n",
         "cfg.yaml:4:15: model.decoder_conf.rnn_type: 'rnn' is not supported (supported: lstm, gru)"},
        {"model:\n  decoder: transducer\n  joint_net_conf:\n    joint_activation_type: relu\n",
         "model.joint_net_conf.joint_activation_type: 'relu' is not supported (supported: tanh)"},
        {"model:\n  decoder: transducer\n  decoder_conf:\n    hidden_size: 0\n",
         "model.decoder_conf.hidden_size: must be in [1, 65536], got 0"},
        {"model:\n  decoder: transducer\n  decoder_conf:\n    dropout_embed: 1.0\n",
         "model.decoder_conf.dropout_embed: must be in [0, 1)"},
        {"model:\n  decoder: transducer\n  joint_net_conf:\n    joint_space: 4\n",
         "cfg.yaml:4:5: model.joint_net_conf.joint_space: unknown key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) assert_has(load_error(cases[i].yaml), cases[i].want);
    /* the other class's keys, and a joint network without a transducer: errors when the model is made */
    static const struct {
        const char *yaml, *want;
    } dims_cases[] = {
        {"model:\n  decoder: transducer\n  decoder_conf:\n    num_blocks: 2\n",
         "attention_heads, linear_units and num_blocks are TransformerDecoder's"},
        {"model:\n  decoder: transformer\n  decoder_conf:\n    hidden_size: 4\n",
         "are TransducerDecoder's (model.decoder: transducer)"},
        {"model:\n  decoder: transformer\n  joint_net_conf:\n    joint_space_size: 4\n",
         "model.joint_net_conf: the joint network goes with model.decoder: transducer"},
    };
    for (size_t i = 0; i < sizeof dims_cases / sizeof *dims_cases; i++) {
        cr_assert_eq(load(dims_cases[i].yaml, &cfg, &err), 0, "%s", err.msg);
        d = (model_dims){.d = 8};
        cr_assert_neq(decoder_dims_from_cfg(&d, ((const training_cfg *)cfg->typed)->model, &err), 0);
        assert_has(err.msg, dims_cases[i].want);
        config_free(cfg);
    }
}

/* The LM task's SequentialRNNLM (core/nn/lm_conf.h): lm_conf.rnn_type gru (either case, as
 * SequentialRNNLM upper-cases it) into GRU layers, lstm (the default) not; rnn_tanh, which ESPnet2
 * has and espnet3 does not build, refused at its line. */
Test(config_decoder, seq_rnn_lm_rnn_type)
{
    static const struct {
        const char *type;
        int gru;
    } ok[] = {{"gru", 1}, {"GRU", 1}, {"lstm", 0}, {NULL, 0}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        char *text = ok[i].type ? xasprintf("model:\n  lm: seq_rnn\n  lm_conf:\n    rnn_type: %s\n", ok[i].type)
                                : xasprintf("model:\n  lm: seq_rnn\n");
        esp_config *cfg;
        esp_err err;
        cr_assert_eq(load(text, &cfg, &err), 0, "%s", err.msg);
        model_dims d;
        cr_assert_eq(lm_dims_from_cfg(&d, ((const training_cfg *)cfg->typed)->model, 12, &err), 0, "%s", err.msg);
        cr_assert_eq(d.lm_gru, ok[i].gru, "%s", ok[i].type ? ok[i].type : "(default)");
        cr_assert(d.lm == LM_SEQ_RNN && d.lm_layers == 2);
        config_free(cfg);
        free(text);
    }
    esp_config *cfg;
    esp_err err;
    cr_assert_neq(load("model:\n  lm: seq_rnn\n  lm_conf:\n    rnn_type: rnn_tanh\n", &cfg, &err), 0);
    cr_assert(strstr(err.msg, "cfg.yaml:4:15: model.lm_conf.rnn_type: 'rnn_tanh' is not supported"), "%s", err.msg);
}
