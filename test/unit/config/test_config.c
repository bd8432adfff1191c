/* The config system, part one of suite `config`: the YAML tree (syntax errors, duplicate keys,
 * marks), composition (defaults lists, the conf/ template, command-line overrides) and
 * interpolation (references, resolvers, integer arithmetic, cycles and their errors). Typed values,
 * keys, allowed values, targets and the documentation's blocks are in test_config_typed.c; the
 * recipe configs, written configs, the inference and metrics kinds and regressions in
 * test_config_recipes.c; the helpers all three share in config_suite_util.{h,c}.
 * Every fixture is written into a fresh temporary folder; errors are read from the esp_err. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/config/config.h"
#include "core/config/config_limits.h"
#include "recipes/espeak_fortunes/keys.h"
#include "test/unit/config/config_suite_util.h"

/* The only declaration of suite `config`; test_config_typed.c and test_config_recipes.c add to it.
 * No .timeout: criterion 2.4.1 leaks in its runner when timeouts meet parallel jobs (fails `make asan`). */
TestSuite(config, .init = config_suite_setup, .fini = config_suite_teardown);

/* The suite's temporary folder (interp_config_path_is_relative_to_its_own_file names its parent). */
static const char *const tmp = config_tmp;

/* ---- YAML syntax --------------------------------------------------------------------------- */

Test(config, yaml_syntax_error_names_file_line_col)
{
    const char *msg = load_error("a: 1\nb: [x, y\nc: 3\n");
    assert_has(msg, "%s:", tpath("cfg.yaml"));
    assert_has(msg, "YAML syntax error");
    /* libyaml notices the unclosed flow list at the next key (line 3). */
    assert_has(msg, "%s:3:", tpath("cfg.yaml"));

    msg = load_error("trainer:\n  devices: 1\n   bad: 2\n");
    assert_has(msg, "%s:3:7: YAML syntax error", tpath("cfg.yaml"));
    assert_has(msg, "YAML syntax error");
}

Test(config, duplicate_key_is_an_error)
{
    const char *msg = load_error("seed: 1\nexp_tag: x\nseed: 2\n");
    assert_has(msg, "%s:3:1: duplicate key 'seed'", tpath("cfg.yaml"));
}

Test(config, empty_file_is_an_empty_mapping)
{
    esp_err err;
    ynode *t = yt_parse_string("", 0, "empty.yaml", &err);
    cr_assert_not_null(t, "%s", err.msg);
    cr_assert_eq(t->kind, YN_MAP);
    cr_assert_eq(t->n, 0);
    yt_free(t);

    t = yt_parse_string("# only a comment\n", 17, "c.yaml", &err);
    cr_assert_not_null(t);
    cr_assert_eq(t->kind, YN_MAP);
    yt_free(t);

    /* As a config file, though, an empty document is an error naming the file; `{}` is not. */
    assert_has(load_error(""), "%s: the config file is empty", tpath("cfg.yaml"));
    esp_config *cfg;
    const training_cfg *tc = must_load("{}\n", &cfg);
    cr_assert_null(tc->dataloader);
    cr_assert_eq(tc->trainer->max_epochs, 1000); /* Lightning's Trainer() defaults (config_values.c) */
    cr_assert_eq(tc->seed, 0);
    config_free(cfg);
}

Test(config, marks_point_at_values_and_keys)
{
    esp_err err;
    const char *text = "a:\n  b: [1, 2]\n  c: hello\n";
    ynode *t = yt_parse_string(text, strlen(text), "m.yaml", &err);
    cr_assert_not_null(t);
    ynode *c = yt_get_path(t, "a.c");
    cr_assert_eq(c->mark.line, 3);
    cr_assert_eq(c->mark.col, 6);
    cr_assert_str_eq(c->mark.file, "m.yaml");
    cr_assert_str_eq(sval(t, "a.b[1]"), "2");
    cr_assert_str_eq(sval(t, "a.b.0"), "1");
    ynode *a = yt_get_path(t, "a");
    cr_assert_eq(a->key_marks[1].line, 3);
    cr_assert_eq(a->key_marks[1].col, 3);
    yt_free(t);
}

/* ---- composition --------------------------------------------------------------------------- */

Test(config, defaults_name_loads_file_beside)
{
    fixture("base.yaml", "seed: 1\nexp_tag: from_base\n");
    esp_config *cfg;
    const training_cfg *t = must_load("defaults:\n  - base\n  - _self_\nseed: 2\n", &cfg);
    cr_assert_eq(t->seed, 2);
    cr_assert_str_eq(t->exp_tag, "from_base");
    cr_assert_null(yt_map_get(cfg->tree, "defaults"));
    config_free(cfg);
}

Test(config, defaults_self_position_decides_who_wins)
{
    fixture("base.yaml", "seed: 1\n");
    esp_config *cfg;
    /* _self_ first: the included file comes after and wins. */
    const training_cfg *t = must_load("defaults:\n  - _self_\n  - base\nseed: 2\n", &cfg);
    cr_assert_eq(t->seed, 1);
    config_free(cfg);
    /* _self_ last: the file's own keys win. */
    t = must_load("defaults:\n  - base\n  - _self_\nseed: 2\n", &cfg);
    cr_assert_eq(t->seed, 2);
    config_free(cfg);
    /* Not listed: Hydra appends _self_, so the file wins. */
    t = must_load("defaults:\n  - base\nseed: 3\n", &cfg);
    cr_assert_eq(t->seed, 3);
    config_free(cfg);
}

Test(config, defaults_group_goes_under_its_key)
{
    fixture("optimizer/adamw.yaml", "_target_: torch.optim.AdamW\nlr: 0.001\nweight_decay: 0.01\n");
    esp_config *cfg;
    const training_cfg *t = must_load("defaults:\n  - optimizer: adamw\n  - _self_\noptimizer:\n  lr: 0.005\n", &cfg);
    cr_assert_not_null(t->optimizer);
    cr_assert_str_eq(t->optimizer->target, "torch.optim.AdamW");
    cr_assert_float_eq(t->optimizer->lr, 0.005, 1e-12); /* _self_ after the group: file wins */
    cr_assert_float_eq(t->optimizer->weight_decay, 0.01, 1e-12);
    config_free(cfg);
}

Test(config, defaults_override_replaces_group_choice)
{
    fixture("optimizer/adam.yaml", "_target_: torch.optim.Adam\namsgrad: true\n");
    fixture("optimizer/adamw.yaml", "_target_: torch.optim.AdamW\nlr: 0.001\n");
    esp_config *cfg;
    const training_cfg *t =
        must_load("defaults:\n  - optimizer: adam\n  - override optimizer: adamw\n  - _self_\n", &cfg);
    cr_assert_str_eq(t->optimizer->target, "torch.optim.AdamW");
    cr_assert_eq(t->optimizer->amsgrad, 0, "adam.yaml must not be merged at all");
    config_free(cfg);
}

Test(config, defaults_missing_file_is_an_error)
{
    const char *msg = load_error("seed: 1\ndefaults:\n  - nothere\n");
    assert_has(msg, "%s:3:5: defaults entry 'nothere' names %s", tpath("cfg.yaml"), tpath("nothere.yaml"));
    assert_has(msg, "does not exist");
    msg = load_error("defaults:\n  - trainer: nothere\n");
    assert_has(msg, "defaults entry 'trainer/nothere'");
}

Test(config, defaults_cycle_is_an_error)
{
    fixture("a.yaml", "defaults:\n  - b\n");
    fixture("b.yaml", "defaults:\n  - a\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_neq(load_file(tpath("a.yaml"), NULL, 0, &cfg, &err), 0);
    assert_has(err.msg, "defaults include themselves");
    assert_has(err.msg, "%s -> %s -> %s", tpath("a.yaml"), tpath("b.yaml"), tpath("a.yaml"));
}

Test(config, template_merged_under_recipe_config)
{
    fixture("tmpl/training.yaml", "seed: 1\nexp_tag: tmpl\ntrainer:\n  devices: 2\n  max_epochs: 5\n");
    const char *path = fixture("recipe.yaml", "seed: 7\ntrainer:\n  max_epochs: 9\n");
    config_load_opts o = {.template_dir = tpath("tmpl")};
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(config_load(CONFIG_TRAINING, path, &o, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_eq(t->seed, 7);
    cr_assert_str_eq(t->exp_tag, "tmpl");
    cr_assert_eq(t->trainer->devices, 2);
    cr_assert_eq(t->trainer->max_epochs, 9);
    config_free(cfg);
}

Test(config, cli_overrides_set_add_delete)
{
    const char *path = fixture("cfg.yaml", "seed: 1\nexp_tag: x\ntrainer:\n  max_epochs: 5\n");
    esp_config *cfg;
    esp_err err;
    const char *ov[] = {"trainer.max_epochs=3", "trainer.devices=2", "~exp_tag", "optimizer.lr=0.5"};
    cr_assert_eq(load_file(path, ov, 4, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_eq(t->trainer->max_epochs, 3);
    cr_assert_eq(t->trainer->devices, 2);
    cr_assert_null(t->exp_tag);
    cr_assert_float_eq(t->optimizer->lr, 0.5, 1e-12);
    cr_assert_eq(t->seed, 1);
    config_free(cfg);

    /* +key adds, and validation still reports a key nobody knows. */
    const char *ov2[] = {"+new.key=x"};
    cr_assert_neq(load_file(path, ov2, 1, &cfg, &err), 0);
    assert_has(err.msg, "new: unknown key");

    /* Deleting a key that is not there is an error. */
    const char *ov3[] = {"~nothere"};
    cr_assert_neq(load_file(path, ov3, 1, &cfg, &err), 0);
    assert_has(err.msg, "there is no key 'nothere' to delete");

    /* Not key=value. */
    const char *ov4[] = {"trainer.max_epochs"};
    cr_assert_neq(load_file(path, ov4, 1, &cfg, &err), 0);
    assert_has(err.msg, "expected key.path=value");
}

Test(config, cli_override_lists_and_quoted_strings)
{
    const char *path = fixture("cfg.yaml", "create_dataset:\n  func: espeak_fortunes\n  train_voices: [x]\n");
    esp_config *cfg;
    esp_err err;
    const char *ov[] = {"create_dataset.train_voices=[en-us, en-gb]", "create_dataset.speed_range=[1,2]",
                        "exp_tag='007'"};
    cr_assert_eq(load_file(path, ov, 3, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    const espeak_fortunes_cfg *k = t->create_dataset->keys;
    cr_assert_eq(k->n_train_voices, 2);
    cr_assert_str_eq(k->train_voices[1], "en-gb");
    cr_assert_eq(k->speed_range[1], 2);
    cr_assert_str_eq(t->exp_tag, "007");
    cr_assert(yt_get_path(cfg->tree, "exp_tag")->quoted);
    config_free(cfg);

    /* A quoted number stays a string, so an integer field rejects it. */
    const char *ov2[] = {"trainer.devices='3'"};
    cr_assert_neq(load_file(path, ov2, 1, &cfg, &err), 0);
    assert_has(err.msg, "trainer.devices: expected an integer, got a string '3'");
    assert_has(err.msg, "trainer.devices='3'"); /* the error points at the override */
}

/* ---- interpolation ------------------------------------------------------------------------- */

Test(config, interp_paths_and_indexes)
{
    ynode *t = must_resolve("a:\n  b: [x, y]\n  c: 3\nr1: ${a.c}\nr2: ${a.b[0]}\nr3: ${a.b.1}\nr4: ${a.b}\n");
    cr_assert_str_eq(sval(t, "r1"), "3");
    cr_assert_str_eq(sval(t, "r2"), "x");
    cr_assert_str_eq(sval(t, "r3"), "y");
    ynode *r4 = yt_get_path(t, "r4");
    cr_assert_eq(r4->kind, YN_SEQ);
    cr_assert_eq(r4->n, 2);
    cr_assert_str_eq(sval(t, "r4[1]"), "y");
    yt_free(t);
}

Test(config, interp_several_refs_in_one_string)
{
    ynode *t = must_resolve("exp_dir: ${root}/exp/${tag}\nroot: /r\ntag: t1\ntb: ${exp_dir}/tensorboard\n"
                            "n: 3\nname: run-${n}-of-${n}\n");
    cr_assert_str_eq(sval(t, "exp_dir"), "/r/exp/t1");
    cr_assert_str_eq(sval(t, "tb"), "/r/exp/t1/tensorboard");
    cr_assert_str_eq(sval(t, "name"), "run-3-of-3");
    yt_free(t);
}

Test(config, interp_relative_refs)
{
    ynode *t = must_resolve("top: 5\na:\n  x: 1\n  y: ${.x}\n  z: ${..top}\n  inner:\n    w: ${..x}\n");
    cr_assert_str_eq(sval(t, "a.y"), "1");
    cr_assert_str_eq(sval(t, "a.z"), "5");
    cr_assert_str_eq(sval(t, "a.inner.w"), "1");
    yt_free(t);
}

Test(config, interp_whole_ref_keeps_type)
{
    esp_config *cfg;
    const training_cfg *t = must_load("num_device: 4\ntrainer:\n  devices: ${num_device}\n", &cfg);
    cr_assert_eq(t->trainer->devices, 4);
    ynode *d = yt_get_path(cfg->tree, "trainer.devices");
    cr_assert_eq(d->kind, YN_SCALAR);
    cr_assert_eq(d->quoted, 0);
    cr_assert_str_eq(d->str, "4");
    config_free(cfg);

    /* A reference to a mapping copies the mapping. */
    ynode *tr = must_resolve("c:\n  k: v\nd: ${c}\n");
    cr_assert_eq(yt_get_path(tr, "d")->kind, YN_MAP);
    cr_assert_str_eq(sval(tr, "d.k"), "v");
    yt_free(tr);
}

Test(config, interp_self_name_is_config_stem)
{
    esp_config *cfg;
    esp_err err;
    const char *path = fixture("my_exp.yaml", "exp_tag: ${self_name:}\nexp_dir: exp/${self_name:}\n");
    cr_assert_eq(load_file(path, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_str_eq(t->exp_tag, "my_exp");
    cr_assert_str_eq(t->exp_dir, "exp/my_exp");
    config_free(cfg);
}

Test(config, interp_config_path_is_relative_to_its_own_file)
{
    fixture("sub/inc.yaml", "dataset_dir: ${config_path:dl}\n");
    const char *path = fixture("main.yaml", "defaults:\n  - sub/inc\n  - _self_\nrecipe_dir: ${config_path:..}\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(load_file(path, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    /* Paths come out lexically normalised: <tmp>/.. is tmp's parent. */
    char *parent = path_dirname(tmp);
    cr_assert_str_eq(t->recipe_dir, parent);
    free(parent);
    cr_assert_str_eq(t->dataset_dir, tpath("sub/dl"));
    config_free(cfg);
}

Test(config, interp_load_line_gives_a_list)
{
    fixture("sets.txt", "train\nvalid\n\ntest\r\n");
    char text[1024];
    snprintf(text, sizeof text, "a: ${load_line:%s}\nb: ${load_line:${config_path:sets.txt}}\n", tpath("sets.txt"));
    ynode *t = must_resolve(text);
    ynode *a = yt_get_path(t, "a");
    cr_assert_eq(a->kind, YN_SEQ);
    cr_assert_eq(a->n, 3);
    cr_assert_str_eq(sval(t, "a[0]"), "train");
    cr_assert_str_eq(sval(t, "a[2]"), "test");
    cr_assert_eq(yt_get_path(t, "b")->n, 3);
    yt_free(t);

    const char *msg = resolve_error("x:\n  y: ${load_line:/nonexistent/espnet3/file}\n");
    assert_has(msg, "%s:2:6: ", tpath("cfg.yaml"));
    assert_has(msg, "cannot read /nonexistent/espnet3/file");
}

/* ESPnet3's ${load_yaml:file,key}, as its egs3/mini_an4 inference and metrics configs use it. */
Test(config, interp_load_yaml_selects_a_key_of_another_file)
{
    fixture("train.yaml", "recipe_dir: .\nexp_tag: mini_an4_asr_debug\nexp_dir: ${recipe_dir}/exp/${exp_tag}\n"
                          "model:\n  encoder_conf: {output_size: 256, blocks: [4, 6]}\n"
                          "tag_again: ${load_yaml:train.yaml,exp_tag}\nmissing: ${nowhere}\n");
    cr_assert_eq(chdir(config_tmp), 0); /* the path is relative to the working directory, as OmegaConf.load's */
    ynode *t = must_resolve("exp_tag: mine\n"
                            "tag: ${load_yaml:train.yaml,exp_tag}\n"
                            "dir: ${load_yaml:train.yaml,exp_dir}/infer\n" /* the file's references, its own keys */
                            "enc: ${load_yaml:train.yaml,model.encoder_conf}\n"
                            "blocks: ${load_yaml:train.yaml,model.encoder_conf.blocks[1]}\n"
                            "nested: ${load_yaml:train.yaml,tag_again}\n"
                            "file: ${load_yaml:${config_path:train.yaml},exp_tag}\n");
    cr_assert_str_eq(sval(t, "tag"), "mini_an4_asr_debug");
    cr_assert_str_eq(sval(t, "dir"), "./exp/mini_an4_asr_debug/infer");
    cr_assert_eq(yt_get_path(t, "enc")->kind, YN_MAP);
    cr_assert_str_eq(sval(t, "enc.output_size"), "256");
    int64_t v;
    cr_assert(yt_as_int(yt_get_path(t, "blocks"), &v) && v == 6, "a whole reference keeps its type");
    cr_assert_str_eq(sval(t, "nested"), "mini_an4_asr_debug");
    cr_assert_str_eq(sval(t, "file"), "mini_an4_asr_debug");
    yt_free(t);

    /* Without a key: the whole file, resolved; here its broken reference is an error in that file. */
    const char *msg = resolve_error("all: ${load_yaml:train.yaml}\n");
    assert_has(msg, "%s:7:10: ", "train.yaml");
    assert_has(msg, "nowhere");
}

Test(config, interp_load_yaml_errors_name_the_call_and_the_file)
{
    fixture("train.yaml", "exp_tag: a\nnothing: null\nself: ${load_yaml:train.yaml,self}\n");
    fixture("bad.yaml", "a: [1, 2\nb: 3\n");
    cr_assert_eq(chdir(config_tmp), 0);
    static const struct {
        const char *text, *says;
    } cases[] = {
        {"y: ${load_yaml:train.yaml,nokey}\n", "${load_yaml:train.yaml,nokey}: train.yaml has no key 'nokey'"},
        {"y: ${load_yaml:train.yaml,nothing}\n", "${load_yaml:train.yaml,nothing}: 'nothing' is null in train.yaml:2:10"},
        {"y: ${load_yaml:no/such.yaml,a}\n", "${load_yaml:no/such.yaml,a}: cannot read no/such.yaml (resolving y; the "
                                               "path is relative to the working directory"},
        {"y: ${load_yaml:bad.yaml,a}\n", "${load_yaml:bad.yaml,a}: bad.yaml:2:2: YAML syntax error"},
        /* reported where the 17th load is written: in train.yaml */
        {"y: ${load_yaml:train.yaml,self}\n", "train.yaml:3:7: ${load_yaml:train.yaml,self}: files load each other "
                                                "more than 16 deep"},
        {"y: ${load_yaml:}\n", "${load_yaml:...} takes a file name and an optional key"},
        {"y: ${load_yaml:a,b,c}\n", "${load_yaml:...} takes a file name and an optional key"},
    };
    cr_assert_eq(CFG_MAX_LOAD_YAML_DEPTH, 16);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *msg = resolve_error(cases[i].text);
        if (!strstr(cases[i].says, "train.yaml:3:7")) assert_has(msg, "%s:1:4: ", tpath("cfg.yaml"));
        assert_has(msg, "%s", cases[i].says);
    }
}

Test(config, interp_oc_env)
{
    setenv("ESPNET3_TEST_SET", "hello", 1);
    unsetenv("ESPNET3_TEST_UNSET");
    ynode *t = must_resolve("a: ${oc.env:ESPNET3_TEST_SET}\nb: ${oc.env:ESPNET3_TEST_SET,dflt}\n"
                            "c: ${oc.env:ESPNET3_TEST_UNSET,dflt}\nd: pre_${oc.env:ESPNET3_TEST_UNSET,x}_post\n");
    cr_assert_str_eq(sval(t, "a"), "hello");
    cr_assert_str_eq(sval(t, "b"), "hello");
    cr_assert_str_eq(sval(t, "c"), "dflt");
    cr_assert_str_eq(sval(t, "d"), "pre_x_post");
    yt_free(t);

    const char *msg = resolve_error("k: 1\nv: ${oc.env:ESPNET3_TEST_UNSET}\n");
    assert_has(msg, "%s:2:4: environment variable ESPNET3_TEST_UNSET is not set", tpath("cfg.yaml"));
}

Test(config, interp_oc_select)
{
    ynode *t = must_resolve("a: 1\nb: ${oc.select:a,9}\nc: ${oc.select:nope,9}\n");
    cr_assert_str_eq(sval(t, "b"), "1");
    cr_assert_str_eq(sval(t, "c"), "9");
    yt_free(t);
}

Test(config, interp_integer_arithmetic)
{
    esp_config *cfg;
    const training_cfg *tc = must_load("num_nodes: 2\nnum_device: 4\ntrainer:\n  devices: ${num_nodes * num_device}\n"
                                       "  num_nodes: ${num_nodes}\n",
                                       &cfg);
    cr_assert_eq(tc->trainer->devices, 8);
    cr_assert_eq(tc->trainer->num_nodes, 2);
    config_free(cfg);

    ynode *t = must_resolve("a: 7\nb: 3\nn: -7\n"
                            "r1: ${(a + b) * 2 - a / 2 % 3}\n" /* 20 - (3 % 3) = 20 */
                            "r2: ${(n + b) * 2 - n / 2 % 3}\n" /* -8 - ((-4) % 3 = 2) = -10 */
                            "r3: ${-7 / 2}\nr4: ${-7 % 3}\nr5: ${7 % -3}\nr6: ${7 / -2}\nr7: ${7 // 2}\n"
                            "r8: ${2 + 3 * 4}\nr9: ${a-b}\n");
    cr_assert_str_eq(sval(t, "r1"), "20");
    cr_assert_str_eq(sval(t, "r2"), "-10");
    cr_assert_str_eq(sval(t, "r3"), "-4");
    cr_assert_str_eq(sval(t, "r4"), "2");
    cr_assert_str_eq(sval(t, "r5"), "-2");
    cr_assert_str_eq(sval(t, "r6"), "-4");
    cr_assert_str_eq(sval(t, "r7"), "3");
    cr_assert_str_eq(sval(t, "r8"), "14");
    cr_assert_str_eq(sval(t, "r9"), "4");
    yt_free(t);
}

Test(config, interp_arithmetic_errors)
{
    const char *msg = resolve_error("a: 4\nz: 0\nr: ${a / z}\n");
    assert_has(msg, "%s:3:4: division by zero in ${a / z}", tpath("cfg.yaml"));
    msg = resolve_error("a: 4\nr: ${a % 0}\n");
    assert_has(msg, "division by zero");
    msg = resolve_error("a: x\nr: ${a * 2}\n");
    assert_has(msg, "arithmetic needs integers");
    msg = resolve_error("a: 1\nr: ${(a + 2}\n");
    assert_has(msg, "missing ')'");
}

Test(config, interp_arithmetic_overflow_is_an_error)
{
    /* 64-bit limits: an error, never undefined behaviour or a SIGFPE. */
    const char *cases[] = {
        "a: 9223372036854775807\nr: ${a + 1}\n",
        "a: 4611686018427387904\nr: ${a * 2}\n",
        "r: ${-9223372036854775807 - 2}\n",
        "r: ${(-9223372036854775807 - 1) / -1}\n",
        "r: ${-(-9223372036854775807 - 1)}\n",
        "r: ${99999999999999999999 + 0}\n",
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) assert_has(resolve_error(cases[i]), "integer overflow in ${");
    ynode *t = must_resolve("r1: ${(-9223372036854775807 - 1) % -1}\nr2: ${(-9223372036854775807 - 1) % 3}\n"
                            "r3: ${(-9223372036854775807 - 1) / 2}\nr4: ${9223372036854775807 % -2}\n");
    cr_assert_str_eq(sval(t, "r1"), "0");
    cr_assert_str_eq(sval(t, "r2"), "1"); /* Python: -2**63 % 3 == 1 */
    cr_assert_str_eq(sval(t, "r3"), "-4611686018427387904");
    cr_assert_str_eq(sval(t, "r4"), "-1");
    yt_free(t);
}

Test(config, interp_cycle_prints_chain)
{
    const char *msg = resolve_error("a: ${b}\nb: ${a}\n");
    assert_has(msg, "%s:1:4: interpolation cycle: a -> b -> a", tpath("cfg.yaml"));
    msg = resolve_error("x:\n  p: ${x.q}\n  q: ${x.p}/z\n");
    assert_has(msg, "interpolation cycle: x.p -> x.q -> x.p");
}

Test(config, interp_missing_ref_names_key_and_chain)
{
    const char *msg = resolve_error("x:\n  y: ${nope.z}\n");
    assert_has(msg, "%s:2:6: missing key 'nope.z' in ${nope.z} (resolving x.y", tpath("cfg.yaml"));
    msg = resolve_error("a: ${b}\nb: ${c}\nc: ${d}\n");
    assert_has(msg, "%s:3:4: missing key 'd'", tpath("cfg.yaml"));
    assert_has(msg, "resolving a -> b -> c;");
}

Test(config, interp_escaped_dollar_stays_literal)
{
    ynode *t = must_resolve("n: 3\na: \\${x}\nb: pre-\\${x}-${n}\nc: ${a}\n");
    cr_assert_str_eq(sval(t, "a"), "${x}");
    cr_assert_str_eq(sval(t, "b"), "pre-${x}-3");
    cr_assert_str_eq(sval(t, "c"), "${x}");
    yt_free(t);
}

Test(config, interp_unclosed_brace_and_unknown_resolver)
{
    const char *msg = resolve_error("a: ${b\n");
    assert_has(msg, "unclosed '${'");
    msg = resolve_error("a: ${nosuch:x}\n");
    assert_has(msg, "unknown resolver 'nosuch'");
}
