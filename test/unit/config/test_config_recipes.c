/* The config system, part three of suite `config` (declared in test_config.c): the recipe's
 * configs with the conf/ template, writing the resolved config, the inference and metrics kinds,
 * and regressions (the validator and libcyaml must agree; written configs must re-load; bounded
 * aliases; UTF-8 inputs; ESPnet2 switches). Helpers: config_suite_util.{h,c}. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config.h"
#include "recipes/espeak_fortunes/keys.h"
#include "test/unit/config/config_suite_util.h"
#include "test/unit/test_util.h"

/* ---- the recipe configs with the conf/ template --------------------------------------------- */

/* create_dataset fields by name, to compare the typed struct with the YAML text. */
typedef enum { F_STR, F_INT, F_STRS, F_INTS, F_ENGINES, F_ENGINE } ftype;
static const struct {
    const char *key;
    ftype type;
    size_t off, count_off;
    int recipe_key; /* in the recipe's struct (create_dataset_cfg.keys) */
} cd_fields[] = {
#define CG(k, t) {#k, t, offsetof(create_dataset_cfg, k), 0, 0}
#define CD(k, t) {#k, t, offsetof(espeak_fortunes_cfg, k), 0, 1}
#define CDL(k, t) {#k, t, offsetof(espeak_fortunes_cfg, k), offsetof(espeak_fortunes_cfg, n_##k), 1}
    CG(func, F_STR), CG(dataset_dir, F_STR), CG(recipe_dir, F_STR), CD(synthesizer, F_STR), CD(text_source, F_STR),
    CD(seed, F_INT), CD(num_train, F_INT), CD(num_valid, F_INT), CD(num_test, F_INT),
    CDL(train_voices, F_STRS), CDL(test_voices, F_STRS), CDL(train_variants, F_STRS), CDL(test_variants, F_STRS),
    CDL(speed_range, F_INTS), CDL(pitch_range, F_INTS), CD(min_words, F_INT), CD(max_words, F_INT), CD(fs, F_INT),
    CD(nj, F_INT), CD(num_test_engine, F_INT), CD(num_rirs, F_INT), CD(num_noises, F_INT),
    CDL(engines, F_ENGINES), CD(test_engine, F_ENGINE),
#undef CG
#undef CD
#undef CDL
};

/* Every literal (non-interpolated) create_dataset value in `expect` equals the typed field. */
static int check_create_dataset(const create_dataset_cfg *cd, const ynode *expect)
{
    int checked = 0;
    for (size_t i = 0; i < expect->n; i++) {
        const char *key = expect->keys[i];
        const ynode *v = expect->items[i];
        if (v->kind == YN_SCALAR && strstr(v->str, "${")) continue;
        size_t f = 0;
        while (f < sizeof cd_fields / sizeof *cd_fields && strcmp(cd_fields[f].key, key)) f++;
        cr_assert(f < sizeof cd_fields / sizeof *cd_fields, "create_dataset.%s has no typed field", key);
        const char *base = cd_fields[f].recipe_key ? (const char *)cd->keys : (const char *)cd;
        if (yt_is_null(v)) { /* null in a config on top: the field is left unset */
            cr_assert_null(*(void *const *)(base + cd_fields[f].off), "create_dataset.%s is set", key);
            checked++;
            continue;
        }
        switch (cd_fields[f].type) {
        case F_ENGINES:
        case F_ENGINE: { /* names and voices of each engine */
            const synth_engine_cfg *e = *(const synth_engine_cfg *const *)(base + cd_fields[f].off);
            unsigned n = cd_fields[f].type == F_ENGINES ? *(const unsigned *)(base + cd_fields[f].count_off) : 1;
            cr_assert_eq(n, cd_fields[f].type == F_ENGINES ? v->n : 1, "create_dataset.%s count", key);
            for (unsigned k = 0; k < n; k++) {
                const ynode *m = cd_fields[f].type == F_ENGINES ? v->items[k] : v;
                cr_assert_str_eq(e[k].name, yt_map_get(m, "name")->str, "create_dataset.%s[%u].name", key, k);
                const ynode *voices = yt_map_get(m, "voices");
                cr_assert_eq(e[k].n_voices, voices->n, "create_dataset.%s[%u].voices", key, k);
                for (unsigned j = 0; j < e[k].n_voices; j++) cr_assert_str_eq(e[k].voices[j], voices->items[j]->str);
            }
            break;
        }
        case F_STR:
            cr_assert_str_eq(*(char *const *)(base + cd_fields[f].off), v->str, "create_dataset.%s", key);
            break;
        case F_INT: {
            int64_t want;
            cr_assert(yt_as_int(v, &want));
            cr_assert_eq(*(const int64_t *)(base + cd_fields[f].off), want, "create_dataset.%s", key);
            break;
        }
        case F_STRS: {
            char *const *arr = *(char *const *const *)(base + cd_fields[f].off);
            unsigned n = *(const unsigned *)(base + cd_fields[f].count_off);
            cr_assert_eq(n, v->n, "create_dataset.%s count", key);
            for (unsigned k = 0; k < n; k++) cr_assert_str_eq(arr[k], v->items[k]->str, "create_dataset.%s[%u]", key, k);
            break;
        }
        case F_INTS: {
            const int64_t *arr = *(const int64_t *const *)(base + cd_fields[f].off);
            unsigned n = *(const unsigned *)(base + cd_fields[f].count_off);
            cr_assert_eq(n, v->n, "create_dataset.%s count", key);
            for (unsigned k = 0; k < n; k++) {
                int64_t want;
                cr_assert(yt_as_int(v->items[k], &want));
                cr_assert_eq(arr[k], want, "create_dataset.%s[%u]", key, k);
            }
            break;
        }
        }
        checked++;
    }
    return checked;
}

static esp_config *load_recipe(const char *name)
{
    char path[1024], tdir[1024];
    snprintf(path, sizeof path, "%s/recipes/espeak_fortunes/conf/%s", test_root_dir(), name);
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    config_load_opts o = {.template_dir = tdir};
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(config_load(CONFIG_TRAINING, path, &o, &cfg, &err), 0, "%s: %s", name, err.msg);
    return cfg;
}

Test(config, recipe_training_yaml_loads_as_written)
{
    esp_config *cfg = load_recipe("training.yaml");
    const training_cfg *t = cfg->typed;
    char path[1024];
    snprintf(path, sizeof path, "%s/recipes/espeak_fortunes/conf/training.yaml", test_root_dir());
    esp_err err;
    ynode *raw = yt_parse_file(path, &err);
    cr_assert_not_null(raw, "%s", err.msg);
    cr_assert_not_null(t->create_dataset);
    cr_assert_gt(check_create_dataset(t->create_dataset, yt_map_get(raw, "create_dataset")), 5);
    cr_assert_str_eq(t->exp_tag, "training");
    /* The default is the joint CTC/attention model; the CTC-only one is training_ctc.yaml. */
    cr_assert_str_eq(t->model->encoder, "transformer");
    cr_assert_str_eq(t->model->decoder, "transformer");
    cr_assert_float_eq(t->model->model_conf->ctc_weight, 0.3, 1e-12);
    cr_assert_not_null(t->trainer, "the template's trainer section is missing");
    cr_assert_eq(t->trainer->devices, t->num_device);
    ynode *emitted_check = cfg->tree;
    char *yaml = yt_emit(emitted_check, NULL);
    cr_assert_null(strstr(yaml, "${"), "unresolved interpolation in:\n%s", yaml);
    free(yaml);
    yt_free(raw);
    config_free(cfg);
}

Test(config, recipe_training_ctc_yaml_is_the_ctc_only_model)
{
    esp_config *cfg = load_recipe("training_ctc.yaml");
    const training_cfg *t = cfg->typed;
    cr_assert_str_eq(t->exp_tag, "training_ctc");
    cr_assert_str_eq(t->model->encoder, "transformer");
    cr_assert(!t->model->decoder || !strcmp(t->model->decoder, "none"), "decoder %s", t->model->decoder);
    config_free(cfg);
}

Test(config, recipe_training_tiny_yaml_loads_as_written)
{
    esp_config *cfg = load_recipe("training_tiny.yaml");
    const training_cfg *t = cfg->typed;
    char path[1024];
    esp_err err;
    /* What the tiny config means: training_ctc.yaml with training_tiny.yaml's keys on top. */
    snprintf(path, sizeof path, "%s/recipes/espeak_fortunes/conf/training_ctc.yaml", test_root_dir());
    ynode *expect = yt_parse_file(path, &err);
    cr_assert_not_null(expect, "%s", err.msg);
    snprintf(path, sizeof path, "%s/recipes/espeak_fortunes/conf/training_tiny.yaml", test_root_dir());
    ynode *tiny = yt_parse_file(path, &err);
    cr_assert_not_null(tiny, "%s", err.msg);
    yt_map_remove(tiny, "defaults");
    yt_merge(expect, tiny);
    cr_assert_gt(check_create_dataset(t->create_dataset, yt_map_get(expect, "create_dataset")), 5);
    cr_assert_str_eq(t->exp_tag, "training_tiny");
    const char *dd = t->data_dir;
    cr_assert(strlen(dd) >= 9 && !strcmp(dd + strlen(dd) - 9, "data_tiny"), "data_dir %s", dd);
    yt_free(expect);
    yt_free(tiny);
    config_free(cfg);
}

/* ---- writing the resolved config ------------------------------------------------------------ */

Test(config, write_resolved_reloads_to_same_values)
{
    esp_config *cfg = load_recipe("training_tiny.yaml");
    const char *out = tpath("resolved.yaml");
    esp_err err;
    cr_assert_eq(config_write_resolved(cfg, out, &err), 0, "%s", err.msg);
    esp_config *again;
    cr_assert_eq(load_file(out, NULL, 0, &again, &err), 0, "%s", err.msg);
    char *a = yt_emit(cfg->tree, NULL), *b = yt_emit(again->tree, NULL);
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
    const training_cfg *t1 = cfg->typed, *t2 = again->typed;
    cr_assert_eq(((const espeak_fortunes_cfg *)t1->create_dataset->keys)->num_train,
                 ((const espeak_fortunes_cfg *)t2->create_dataset->keys)->num_train);
    cr_assert_str_eq(t1->data_dir, t2->data_dir);
    cr_assert_eq(t1->trainer->max_epochs, t2->trainer->max_epochs);
    cr_assert_eq(t1->n_best_model_criterion, t2->n_best_model_criterion);
    config_free(again);
    config_free(cfg);
}

Test(config, write_resolved_keeps_types_and_strings)
{
    esp_config *cfg;
    must_load("exp_tag: '007'\nseed: 7\ntrainer:\n  precision: '32'\n  deterministic: Yes\n"
              "  gradient_clip_val: 0.5\noptimizer:\n  betas: [0.9, 0.98]\n",
              &cfg);
    const char *out = tpath("resolved.yaml");
    esp_err err;
    cr_assert_eq(config_write_resolved(cfg, out, &err), 0, "%s", err.msg);
    esp_config *again;
    cr_assert_eq(load_file(out, NULL, 0, &again, &err), 0, "%s", err.msg);
    const training_cfg *t = again->typed;
    cr_assert_str_eq(t->exp_tag, "007");
    cr_assert_eq(t->seed, 7);
    cr_assert_str_eq(t->trainer->precision, "32");
    cr_assert_eq(t->trainer->deterministic, 1);
    cr_assert_float_eq(t->trainer->gradient_clip_val, 0.5, 1e-12);
    cr_assert_float_eq(t->optimizer->betas[1], 0.98, 1e-12);
    config_free(again);
    config_free(cfg);
}

/* ---- inference and metrics kinds ------------------------------------------------------------ */

Test(config, inference_and_metrics_templates_load)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    config_load_opts o = {.template_dir = tdir};
    esp_config *cfg;
    esp_err err;
    const char *inf = fixture("decode.yaml", "model:\n  beam_size: 10\n");
    cr_assert_eq(config_load(CONFIG_INFERENCE, inf, &o, &cfg, &err), 0, "%s", err.msg);
    const inference_cfg *ic = cfg->typed;
    cr_assert_eq(ic->model->beam_size, 10);
    cr_assert_str_eq(ic->exp_tag, "decode");
    size_t il = strlen(ic->inference_dir); /* ESPnet3's template: ${exp_dir}/<the file's stem> */
    cr_assert(il > 17 && !strcmp(ic->inference_dir + il - 17, "exp/decode/decode"), "%s", ic->inference_dir);
    config_free(cfg);

    const char *met = fixture("score.yaml", "test_sets: [test, test_other]\n");
    cr_assert_eq(config_load(CONFIG_METRICS, met, &o, &cfg, &err), 0, "%s", err.msg);
    const metrics_cfg *mc = cfg->typed;
    cr_assert_eq(mc->n_test_sets, 2);
    cr_assert_gt(mc->n_metrics, 0);
    config_free(cfg);

    cr_assert_neq(config_load(CONFIG_INFERENCE, tpath("nothere.yaml"), &o, &cfg, &err), 0);
    assert_has(err.msg, "config file not found (check --inference_config)");
}

/* Decoding keys: the template's defaults (weights stage 5 writes, CTC only, nbest 1), ESPnet's
 * `penalty` and `maxlenratio`, the LM's keys (lm_file, lm_train_config) read, Speech2Text keys this
 * build does not use warn, a typo is an error with a suggestion. */
Test(config, inference_model_keys)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    config_load_opts o = {.template_dir = tdir};
    esp_config *cfg;
    esp_err err;
    const char *inf = fixture("decode.yaml", "model:\n  beam_size: 5\n  penalty: 0.5\n  maxlenratio: 0.3\n"
                                             "  lm_file: lm.pth\n  ngram_weight: 0.5\n");
    capture_begin();
    int rc = config_load(CONFIG_INFERENCE, inf, &o, &cfg, &err);
    const char *warned = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    const infer_model_cfg *m = ((const inference_cfg *)cfg->typed)->model;
    cr_assert_eq(m->beam_size, 5);
    cr_assert_float_eq(m->penalty, 0.5, 1e-12);
    cr_assert_float_eq(m->ctc_weight, 1.0, 1e-12);
    cr_assert(strstr(m->asr_model_file, "/valid.loss.ave.safetensors"), "%s", m->asr_model_file);
    cr_assert(strstr(m->asr_train_config, "/config.yaml"), "%s", m->asr_train_config);
    cr_assert_float_eq(m->maxlenratio, 0.3, 1e-12);
    cr_assert_float_eq(m->minlenratio, 0.0, 1e-12);
    cr_assert_eq(m->nbest, 1);
    cr_assert_null(strstr(warned, "maxlenratio"), "%s", warned);
    cr_assert_str_eq(m->lm_file, "lm.pth");
    cr_assert_null(strstr(warned, "model.lm_file"), "%s", warned);
    assert_has(warned, "model.ngram_weight");
    config_free(cfg);

    inf = fixture("decode2.yaml", "model:\n  beam_sise: 5\n");
    cr_assert_neq(config_load(CONFIG_INFERENCE, inf, &o, &cfg, &err), 0);
    assert_has(err.msg, "did you mean beam_size?");
}

/* ---- regressions: validator and libcyaml must agree; written configs must re-load --------------- */

/* The validator accepts .inf/.nan (yt_as_float) but libcyaml rejects them: config_load aborts. */
Test(config, float_specials_load_or_fail_cleanly)
{
    esp_config *cfg;
    esp_err err;
    if (load_text("trainer:\n  gradient_clip_val: .inf\n", &cfg, &err) == 0) {
        cr_assert_gt(((const training_cfg *)cfg->typed)->trainer->gradient_clip_val, 1e300);
        config_free(cfg);
    } else {
        assert_has(err.msg, "%s:2:22: trainer.gradient_clip_val", tpath("cfg.yaml"));
    }
}

/* The validator reads 1_0 as 10 but libcyaml's strtod stops at '_' and loads 1. */
Test(config, float_underscores_load_what_was_validated)
{
    esp_config *cfg;
    esp_err err;
    if (load_text("trainer:\n  gradient_clip_val: 1_0\n", &cfg, &err) == 0) {
        cr_assert_float_eq(((const training_cfg *)cfg->typed)->trainer->gradient_clip_val, 10.0, 1e-12);
        config_free(cfg);
    }
}

/* A literal "${" (written \${) is emitted unescaped, so the written config no longer re-loads. */
Test(config, write_resolved_keeps_escaped_dollar)
{
    esp_config *cfg;
    must_load("exp_tag: a\\${x}\n", &cfg);
    cr_assert_str_eq(((const training_cfg *)cfg->typed)->exp_tag, "a${x}");
    esp_err err;
    cr_assert_eq(config_write_resolved(cfg, tpath("resolved.yaml"), &err), 0, "%s", err.msg);
    esp_config *again;
    cr_assert_eq(load_file(tpath("resolved.yaml"), NULL, 0, &again, &err), 0, "%s", err.msg);
    cr_assert_str_eq(((const training_cfg *)again->typed)->exp_tag, "a${x}");
    config_free(again);
    config_free(cfg);
}

/* An empty `fit: {}` (TEMPLATE's) says nothing; fit.ckpt_path is typed, other fit keys are errors.
 * dataset: is typed (ESPnet3's DataOrganizer block): its _target_ is checked. */
Test(config, free_form_blocks_warn_when_not_empty)
{
    esp_config *cfg;
    esp_err err;
    const char *path = fixture("cfg.yaml", "fit: {}\n");
    capture_begin();
    int rc = load_file(path, NULL, 0, &cfg, &err);
    const char *out = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(count_lines_with(out, "WARNING"), 0, "stderr:\n%s", out);
    config_free(cfg);
    /* fit: is Lightning's trainer.fit arguments: ckpt_path is read (Training), other keys are not fit's */
    path = fixture("cfg.yaml", "fit:\n  ckpt_path: last\n");
    cr_assert_eq(load_file(path, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    cr_assert_str_eq(((const training_cfg *)cfg->typed)->fit->ckpt_path, "last");
    config_free(cfg);
    path = fixture("cfg.yaml", "fit:\n  max_epochs: 3\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:2:3: fit.max_epochs: unknown key", tpath("cfg.yaml"));
    path = fixture("cfg.yaml", "dataset:\n  _target_: x.DataOrganizer\n  train: []\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:2:13: dataset._target_: unknown _target_ 'x.DataOrganizer' (supported: "
               "espnet3.components.data.data_organizer.DataOrganizer, espnet3.components.data_organizer.DataOrganizer)",
               tpath("cfg.yaml"));
}

/* ESPnet3's dataset: block as the egs3 recipes write it loads typed; a data_src espnet3 does not read
 * is an error at its position, a Python one a warning; metrics' `- metric:` entries flatten. */
Test(config, dataset_block_loads_typed_and_checks_data_src)
{
    esp_config *cfg;
    esp_err err;
    const training_cfg *t = must_load("dataset:\n  train:\n    - data_src_args:\n        split: train\n"
                                      "  valid:\n    - data_src: kaldi\n      data_src_args:\n        path: /d/dev\n"
                                      "    - data_src: src.dataset.MyDataset\n      data_src_args:\n        split: dev2\n"
                                      "  preprocessor:\n    _target_: espnet2.train.preprocessor.CommonPreprocessor\n"
                                      "    fs: 16000\n    token_type: bpe\n    text_cleaner:\n",
                                      &cfg);
    cr_assert_eq(t->dataset->n_train, 1);
    cr_assert_str_eq(t->dataset->train[0].data_src_args->split, "train");
    cr_assert_eq(t->dataset->n_valid, 2);
    cr_assert_str_eq(t->dataset->valid[0].data_src, "kaldi");
    cr_assert_str_eq(t->dataset->valid[0].data_src_args->path, "/d/dev");
    cr_assert_eq(t->dataset->preprocessor->fs, 16000);
    config_free(cfg);
    const char *path = fixture("cfg.yaml", "dataset:\n  train:\n    - data_src: hdf5\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:3:17: dataset.train[0].data_src: 'hdf5' is not a data source espnet3 reads", tpath("cfg.yaml"));
    path = fixture("cfg.yaml", "dataset:\n  preprocessor:\n    text_cleaner: tacotron\n");
    cr_assert_neq(load_file(path, NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "dataset.preprocessor.text_cleaner: 'tacotron' is not supported");
}

/* ESPnet3's tag data_src "<recipe>/<task>" names a recipe's dataset module (egs3.<recipe>.<task>.dataset):
 * accepted when it names the recipe this config runs (its recipe_dir ends in <recipe>/<task>, ESPnet3's
 * layout, or <recipe>, ours; hyphens as underscores), an error naming both otherwise. */
Test(config, dataset_tag_must_name_this_recipe)
{
    char rd[600], text[1024];
    snprintf(rd, sizeof rd, "%s/egs3/mini_an4/asr", config_tmp);
    esp_err merr;
    cr_assert_eq(mkdir_p(rd, &merr), 0, "%s", merr.msg);
    const char *tags[] = {"mini_an4/asr", "mini-an4/asr"};
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof text, "recipe_dir: %s\ndataset:\n  train:\n    - data_src: %s\n      data_src_args:\n"
                 "        split: train\n", rd, tags[i]);
        esp_config *cfg;
        const training_cfg *t = must_load(text, &cfg);
        cr_assert_str_eq(t->dataset->train[0].data_src, tags[i]);
        config_free(cfg);
    }
    snprintf(text, sizeof text, "recipe_dir: %s/recipes/mini_an4\ndataset:\n  train:\n    - data_src: mini_an4/asr\n",
             config_tmp);
    esp_config *cfg;
    must_load(text, &cfg);
    config_free(cfg);
    snprintf(text, sizeof text, "recipe_dir: %s\ndataset:\n  train:\n    - data_src: librispeech_100/asr\n", rd);
    esp_err err;
    cr_assert_neq(load_file(fixture("cfg.yaml", text), NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "%s:4:17: dataset.train[0].data_src: 'librispeech_100/asr' names ESPnet3 recipe "
               "librispeech_100's dataset, and this config's recipe_dir is %s", tpath("cfg.yaml"), rd);
}

/* Older ESPnet3 entries `dataset: {_target_: <Python class>, split: ..., <other arguments>}`: split
 * is read, the class's other arguments are warned about and dropped. */
Test(config, legacy_dataset_entry_keeps_split_and_warns_about_other_arguments)
{
    const char *path = fixture("cfg.yaml", "dataset:\n  valid:\n    - name: dev\n      dataset:\n"
                                           "        _target_: src.dataset.LibriSpeechDataset\n"
                                           "        data_dir: /corpus\n        split: dev-clean\n");
    esp_config *cfg;
    esp_err err;
    capture_begin();
    int rc = load_file(path, NULL, 0, &cfg, &err);
    const char *out = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_str_eq(t->dataset->valid[0].dataset->split, "dev-clean");
    assert_has(out, "%s:6:9: dataset.valid[0].dataset.data_dir: accepted for ESPnet3 compatibility but not "
               "implemented by espnet3; ignored", tpath("cfg.yaml"));
    assert_has(out, "or its split of the recipe's dataset");
    config_free(cfg);
}

/* ESPnet3's older names of the folder stage 6 writes: an inference or metrics file that sets
 * infer_dir or decode_dir and not inference_dir means that folder; the command line still wins. */
Test(config, infer_dir_and_decode_dir_name_the_inference_dir)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    const char *names[] = {"infer_dir", "decode_dir"};
    for (int i = 0; i < 2; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s: /out/%s\n", names[i], names[i]);
        const char *p = fixture("decode.yaml", text);
        config_load_opts o = {.template_dir = tdir};
        esp_config *cfg;
        esp_err err;
        cr_assert_eq(config_load(CONFIG_INFERENCE, p, &o, &cfg, &err), 0, "%s", err.msg);
        char want[64];
        snprintf(want, sizeof want, "/out/%s", names[i]);
        cr_assert_str_eq(((const inference_cfg *)cfg->typed)->inference_dir, want);
        config_free(cfg);
        const char *ov[] = {"inference_dir=/cli"};
        o.overrides = ov, o.n_overrides = 1;
        cr_assert_eq(config_load(CONFIG_METRICS, p, &o, &cfg, &err), 0, "%s", err.msg);
        cr_assert_str_eq(((const metrics_cfg *)cfg->typed)->inference_dir, "/cli");
        config_free(cfg);
    }
    /* the older name given on the command line means the folder too */
    {
        const char *p0 = fixture("decode.yaml", "model:\n  beam_size: 2\n");
        const char *ov[] = {"decode_dir=/cli_decode"};
        config_load_opts o = {.template_dir = tdir, .overrides = ov, .n_overrides = 1};
        esp_config *cfg;
        esp_err err;
        cr_assert_eq(config_load(CONFIG_METRICS, p0, &o, &cfg, &err), 0, "%s", err.msg);
        cr_assert_str_eq(((const metrics_cfg *)cfg->typed)->inference_dir, "/cli_decode");
        config_free(cfg);
    }
    /* inference_dir in the file itself wins over the older names */
    const char *p = fixture("decode.yaml", "decode_dir: /old\ninference_dir: /new\n");
    config_load_opts o = {.template_dir = tdir};
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(config_load(CONFIG_METRICS, p, &o, &cfg, &err), 0, "%s", err.msg);
    cr_assert_str_eq(((const metrics_cfg *)cfg->typed)->inference_dir, "/new");
    config_free(cfg);
}

/* ESPnet3's inference/metrics scaffolds copy training keys: a warning each (they are not used
 * there); a key no config knows is still an error. */
Test(config, training_keys_in_an_inference_config_warn)
{
    const char *path = fixture("decode.yaml", "num_device: 1\ndataloader:\n  train: {}\n"
                                              "dataset:\n  dataset_module: src/dataset.py\n"
                                              "  test:\n    - name: t\n      dataset:\n        split: test-clean\n");
    esp_config *cfg;
    esp_err err;
    capture_begin();
    int rc = config_load(CONFIG_INFERENCE, path, NULL, &cfg, &err);
    const char *out = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    assert_has(out, "%s:1:1: num_device: a training config key; the inference config does not use it; ignored",
               tpath("decode.yaml"));
    assert_has(out, "%s:2:1: dataloader: a training config key", tpath("decode.yaml"));
    assert_has(out, "dataset.dataset_module: accepted for ESPnet3 compatibility but not implemented");
    cr_assert_str_eq(((const inference_cfg *)cfg->typed)->dataset->test[0].dataset->split, "test-clean");
    config_free(cfg);
    path = fixture("decode.yaml", "beam: 3\n");
    cr_assert_neq(config_load(CONFIG_INFERENCE, path, NULL, &cfg, &err), 0);
    assert_has(err.msg, "beam: unknown key");
}

/* Numbers reach the typed struct as the validator read them (no octal surprise). */
Test(config, integers_load_as_decimal)
{
    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  max_epochs: 010\n", &cfg);
    cr_assert_eq(t->trainer->max_epochs, 10);
    config_free(cfg);
}

/* "Billion laughs": aliases that expand without bound are refused, not followed. */
Test(config, alias_expansion_is_bounded)
{
    char text[4096];
    size_t n = (size_t)snprintf(text, sizeof text, "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 9; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n",
                              i, i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
    const char *msg = resolve_error(text);
    assert_has(msg, "aliases expand to more than 1000000 values");
}

/* Text from outside YAML files must be UTF-8, since the resolved config is written as YAML. */
Test(config, non_utf8_inputs_are_errors)
{
    fixture("bin.txt", "ok\n\xff\xfe\n");
    char text[512];
    snprintf(text, sizeof text, "v: ${load_line:%s}\n", tpath("bin.txt"));
    assert_has(resolve_error(text), "is not UTF-8 text");
    setenv("ESPNET3_TEST_BAD", "\xc3\x28", 1);
    assert_has(resolve_error("v: ${oc.env:ESPNET3_TEST_BAD}\n"), "environment variable ESPNET3_TEST_BAD is not UTF-8 text");
    unsetenv("ESPNET3_TEST_BAD");
    esp_err err;
    const char *ov[] = {"seed=\xff"};
    cr_assert_null(resolve_file(fixture("cfg.yaml", "seed: 1\n"), ov, 1, &err));
    assert_has(err.msg, "not UTF-8 text");
}

/* ESPnet2 switches default to true: a block that omits them must not turn them off. */
Test(config, espnet2_true_switches_default_on)
{
    esp_config *cfg;
    const training_cfg *t = must_load("model:\n  normalize: global_mvn\n  normalize_conf:\n    stats_file: x.npz\n"
                                      "  specaug_conf:\n    num_time_mask: 3\n    apply_time_mask: false\n",
                                      &cfg);
    cr_assert(t->model->specaug_conf->apply_time_warp && t->model->specaug_conf->apply_freq_mask);
    cr_assert(!t->model->specaug_conf->apply_time_mask);
    cr_assert(t->model->normalize_conf->norm_means && t->model->normalize_conf->norm_vars);
    config_free(cfg);
    t = must_load("model:\n  normalize: utterance_mvn\n  normalize_conf: {}\n", &cfg);
    cr_assert(t->model->normalize_conf->norm_means && !t->model->normalize_conf->norm_vars);
    config_free(cfg);
}
