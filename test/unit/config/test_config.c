/* The config system: YAML tree, composition, interpolation, validation and typed loading.
 * Every fixture is written into a fresh temporary folder; errors are read from the esp_err. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/config/config.h"
#include "core/config/config_compose.h"
#include "core/config/config_interp.h"
#include "core/config/config_schema.h"
#include "core/base/fsio.h"
#include "test/unit/test_util.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static char tmp[256];

static void setup(void)
{
    test_tmpdir_make(tmp, sizeof tmp, "config");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmp); }

/* No .timeout: criterion 2.4.1 leaks in its runner when timeouts meet parallel jobs (fails `make asan`). */
TestSuite(config, .init = setup, .fini = teardown);

/* A path under the temporary folder (ring of static buffers: no frees in the tests). */
static const char *tpath(const char *rel) { return test_path(tmp, rel); }

/* Writes tmp/rel (creating its folders) and returns its path. */
static const char *fixture(const char *rel, const char *text)
{
    const char *path = tpath(rel);
    test_write_text_mkdirs(path, text);
    return path;
}

/* Loads a training config from a file, no template. */
static int load_file(const char *path, const char **ov, int n_ov, esp_config **cfg, esp_err *err)
{
    config_load_opts o = {.overrides = ov, .n_overrides = n_ov};
    return config_load(CONFIG_TRAINING, path, &o, cfg, err);
}

/* Writes text to tmp/cfg.yaml and loads it as a training config. */
static int load_text(const char *text, esp_config **cfg, esp_err *err)
{
    return load_file(fixture("cfg.yaml", text), NULL, 0, cfg, err);
}

/* Loads and asserts success; returns the typed view. */
static const training_cfg *must_load(const char *text, esp_config **cfg)
{
    esp_err err;
    int rc = load_text(text, cfg, &err);
    cr_assert_eq(rc, 0, "load failed: %s", err.msg);
    return (*cfg)->typed;
}

/* Composes and interpolates (no validation) so arbitrary keys can be inspected. */
static ynode *resolve_file(const char *path, const char **ov, int n_ov, esp_err *err)
{
    ynode *t = config_compose(path, NULL, ov, n_ov, err);
    if (!t) return NULL;
    char *stem = path_stem(path);
    interp_opts io = {.self_name = stem};
    int rc = config_interpolate(t, &io, err);
    free(stem);
    if (rc != 0) {
        yt_free(t);
        return NULL;
    }
    return t;
}

static ynode *must_resolve(const char *text)
{
    esp_err err;
    ynode *t = resolve_file(fixture("cfg.yaml", text), NULL, 0, &err);
    cr_assert_not_null(t, "resolve failed: %s", err.msg);
    return t;
}

/* Resolves text and expects an error; returns the message (static). */
static const char *resolve_error(const char *text)
{
    static esp_err err;
    ynode *t = resolve_file(fixture("cfg.yaml", text), NULL, 0, &err);
    cr_assert_null(t, "expected an error for:\n%s", text);
    return err.msg;
}

/* Loads text as a training config and expects an error; returns the message (static). */
static const char *load_error(const char *text)
{
    static esp_err err;
    esp_config *cfg = NULL;
    int rc = load_text(text, &cfg, &err);
    if (rc == 0) config_free(cfg);
    cr_assert_neq(rc, 0, "expected an error for:\n%s", text);
    return err.msg;
}

/* Scalar text at path, or a marker when missing or not a scalar. */
static const char *sval(const ynode *root, const char *path)
{
    const ynode *n = yt_get_path(root, path);
    if (!n) return "<missing>";
    if (n->kind != YN_SCALAR) return "<not a scalar>";
    return n->str;
}

/* Asserts that msg contains the printf-formatted piece. */
#define assert_has(msg, ...)                                                                      \
    do {                                                                                          \
        char piece_[1024];                                                                        \
        snprintf(piece_, sizeof piece_, __VA_ARGS__);                                             \
        cr_assert(strstr((msg), piece_) != NULL, "message:\n  %s\nlacks:\n  %s", (msg), piece_); \
    } while (0)

/* Runs fn with stderr going to a file; returns what it wrote (static). */
static const char *capture_stderr_begin_path(void) { return tpath("stderr.txt"); }
static int saved_stderr = -1;
static void capture_begin(void)
{
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(capture_stderr_begin_path(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    dup2(fd, 2);
    close(fd);
}
static const char *capture_end(void)
{
    static char buf[1 << 16];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    esp_err err;
    size_t len;
    char *text = read_file(capture_stderr_begin_path(), &len, &err);
    cr_assert_not_null(text);
    snprintf(buf, sizeof buf, "%s", text);
    free(text);
    return buf;
}

static int count_lines_with(const char *text, const char *piece)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *l = strndup(line, len);
        n += strstr(l, piece) != NULL;
        free(l);
        line = nl ? nl + 1 : NULL;
    }
    return n;
}

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

    esp_config *cfg;
    const training_cfg *tc = must_load("", &cfg);
    cr_assert_null(tc->trainer);
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
    const char *path = fixture("cfg.yaml", "create_dataset:\n  train_voices: [x]\n");
    esp_config *cfg;
    esp_err err;
    const char *ov[] = {"create_dataset.train_voices=[en-us, en-gb]", "create_dataset.speed_range=[1,2]",
                        "exp_tag='007'"};
    cr_assert_eq(load_file(path, ov, 3, &cfg, &err), 0, "%s", err.msg);
    const training_cfg *t = cfg->typed;
    cr_assert_eq(t->create_dataset->n_train_voices, 2);
    cr_assert_str_eq(t->create_dataset->train_voices[1], "en-gb");
    cr_assert_eq(t->create_dataset->speed_range[1], 2);
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

/* ---- typed values --------------------------------------------------------------------------- */

Test(config, type_error_names_position)
{
    const char *msg = load_error("seed: 1\ntrainer:\n  devices: abc\n");
    assert_has(msg, "%s:3:12: trainer.devices: expected an integer, got a string 'abc'", tpath("cfg.yaml"));
    msg = load_error("optimizer:\n  lr: fast\n");
    assert_has(msg, "%s:2:7: optimizer.lr: expected a number", tpath("cfg.yaml"));
    msg = load_error("trainer: 3\n");
    assert_has(msg, "%s:1:10: trainer: expected a mapping", tpath("cfg.yaml"));
    msg = load_error("create_dataset:\n  train_voices: en-us\n");
    assert_has(msg, "create_dataset.train_voices: expected a list");
    msg = load_error("create_dataset:\n  train_voices: [a, [b]]\n");
    assert_has(msg, "create_dataset.train_voices[1]: expected a string");
}

Test(config, type_error_through_interpolation_names_source_and_site)
{
    const char *msg = load_error("exp_tag: abc\ntrainer:\n  devices: ${exp_tag}\n");
    assert_has(msg, "%s:1:10: trainer.devices: expected an integer, got a string 'abc'", tpath("cfg.yaml"));
    assert_has(msg, "(via the interpolation at %s:3:12)", tpath("cfg.yaml"));
}

Test(config, bools_normalized)
{
    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  deterministic: True\n  enable_progress_bar: off\n"
                                      "dataloader:\n  train:\n    multiple_iterator: yes\n"
                                      "    iter_factory:\n      shuffle: YES\n  valid:\n    multiple_iterator: No\n",
                                      &cfg);
    cr_assert_eq(t->trainer->deterministic, 1);
    cr_assert_eq(t->trainer->enable_progress_bar, 0);
    cr_assert_eq(t->dataloader->train->multiple_iterator, 1);
    cr_assert_eq(t->dataloader->train->iter_factory->shuffle, 1);
    cr_assert_eq(t->dataloader->valid->multiple_iterator, 0);
    config_free(cfg);

    const char *msg = load_error("trainer:\n  deterministic: maybe\n");
    assert_has(msg, "trainer.deterministic: expected true or false");
}

Test(config, floats_accept_ints)
{
    esp_config *cfg;
    const training_cfg *t =
        must_load("trainer:\n  gradient_clip_val: 5\noptimizer:\n  lr: 1\n  betas: [0, 1]\n  eps: 1e-8\n", &cfg);
    cr_assert_float_eq(t->trainer->gradient_clip_val, 5.0, 1e-12);
    cr_assert_float_eq(t->optimizer->lr, 1.0, 1e-12);
    cr_assert_eq(t->optimizer->n_betas, 2);
    cr_assert_float_eq(t->optimizer->betas[1], 1.0, 1e-12);
    cr_assert_float_eq(t->optimizer->eps, 1e-8, 1e-20);
    config_free(cfg);
}

Test(config, best_model_criterion_triples)
{
    esp_config *cfg;
    const training_cfg *t = must_load("best_model_criterion:\n  - - valid/loss\n    - 3\n    - min\n"
                                      "  - [valid/acc, 1, max]\n",
                                      &cfg);
    cr_assert_eq(t->n_best_model_criterion, 2);
    cr_assert_str_eq(t->best_model_criterion[0].monitor, "valid/loss");
    cr_assert_eq(t->best_model_criterion[0].nbest, 3);
    cr_assert_str_eq(t->best_model_criterion[0].mode, "min");
    cr_assert_str_eq(t->best_model_criterion[1].monitor, "valid/acc");
    cr_assert_str_eq(t->best_model_criterion[1].mode, "max");
    config_free(cfg);

    t = must_load("best_model_criterion: [[valid/loss, 3, min]]\n", &cfg);
    cr_assert_eq(t->n_best_model_criterion, 1);
    config_free(cfg);

    const char *msg = load_error("best_model_criterion: [[valid/loss, 3]]\n");
    assert_has(msg, "%s:1:24: best_model_criterion[0]: expected [monitor, nbest, mode]", tpath("cfg.yaml"));
    assert_has(msg, "got 2 items");
    msg = load_error("best_model_criterion: [[valid/loss, 3, sideways]]\n");
    assert_has(msg, "best_model_criterion[0].mode: 'sideways' is not supported (supported: min");
    msg = load_error("best_model_criterion: [[valid/loss, three, min]]\n");
    assert_has(msg, "best_model_criterion[0].nbest: expected an integer");
}

Test(config, single_logger_mapping_is_a_list_of_one)
{
    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  logger:\n    _target_: lightning.pytorch.loggers.TensorBoardLogger\n"
                                      "    save_dir: tb\n    name: tb_logger\n",
                                      &cfg);
    cr_assert_eq(t->trainer->n_logger, 1);
    cr_assert_str_eq(t->trainer->logger[0].target, "lightning.pytorch.loggers.TensorBoardLogger");
    cr_assert_str_eq(t->trainer->logger[0].save_dir, "tb");
    cr_assert_str_eq(t->trainer->logger[0].name, "tb_logger");
    cr_assert_eq(yt_get_path(cfg->tree, "trainer.logger")->kind, YN_SEQ);
    config_free(cfg);
}

Test(config, null_values_leave_fields_unset)
{
    esp_config *cfg;
    const training_cfg *t = must_load("exp_tag: ~\ntrainer:\n  max_epochs: null\n  devices: 2\n", &cfg);
    cr_assert_null(t->exp_tag);
    cr_assert_eq(t->trainer->max_epochs, 0);
    cr_assert_eq(t->trainer->devices, 2);
    config_free(cfg);
}

/* ---- implemented / unimplemented / unknown keys --------------------------------------------- */

Test(config, implemented_key_loads)
{
    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  max_epochs: 3\n  accumulate_grad_batches: 2\n", &cfg);
    cr_assert_eq(t->trainer->max_epochs, 3);
    cr_assert_eq(t->trainer->accumulate_grad_batches, 2);
    config_free(cfg);
}

Test(config, unimplemented_key_warns_once_and_is_dropped)
{
    esp_config *cfg;
    esp_err err;
    const char *path = fixture("cfg.yaml", "trainer:\n  sync_batchnorm: true\n  max_epochs: 2\n"
                                           "model:\n  preencoder: linear\n  preencoder_conf:\n    output_size: 2\n");
    capture_begin();
    int rc = load_file(path, NULL, 0, &cfg, &err);
    const char *out = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(count_lines_with(out, "WARNING"), 3, "stderr:\n%s", out);
    cr_assert_eq(count_lines_with(out, "trainer.sync_batchnorm"), 1, "stderr:\n%s", out);
    cr_assert_eq(count_lines_with(out, "model.preencoder:"), 1, "stderr:\n%s", out);
    cr_assert_eq(count_lines_with(out, "model.preencoder_conf"), 1, "stderr:\n%s", out);
    assert_has(out, "%s:2:3: trainer.sync_batchnorm: ", tpath("cfg.yaml"));
    assert_has(out, "not implemented");
    cr_assert_null(yt_get_path(cfg->tree, "trainer.sync_batchnorm"));
    cr_assert_null(yt_get_path(cfg->tree, "model.preencoder"));
    cr_assert_eq(((const training_cfg *)cfg->typed)->trainer->max_epochs, 2);
    config_free(cfg);
}

Test(config, unknown_key_suggests_closest)
{
    const char *msg = load_error("trainer:\n  max_epoch: 3\n");
    assert_has(msg, "%s:2:3: trainer.max_epoch: unknown key (did you mean max_epochs?)", tpath("cfg.yaml"));
    msg = load_error("optimiser:\n  lr: 1\n");
    assert_has(msg, "optimiser: unknown key (did you mean optimizer?)");
    msg = load_error("completely_unrelated_key: 1\n");
    assert_has(msg, "completely_unrelated_key: unknown key");
    cr_assert_null(strstr(msg, "did you mean"), "%s", msg);
}

/* ---- allowed values and _target_ ------------------------------------------------------------ */

Test(config, allowed_values)
{
    const char *msg = load_error("parallel:\n  env: dask\n");
    assert_has(msg, "%s:2:8: parallel.env: 'dask' is not supported", tpath("cfg.yaml"));
    assert_has(msg, "local");
    assert_has(msg, "local_gpu");
    assert_has(msg, "slurm");
    msg = load_error("trainer:\n  strategy: deepspeed\n");
    assert_has(msg, "trainer.strategy: 'deepspeed' is not supported");
    assert_has(msg, "ddp_find_unused_parameters_true");
    assert_has(msg, "fsdp");
    msg = load_error("trainer:\n  precision: 16\n");
    assert_has(msg, "trainer.precision: '16' is not supported");
    assert_has(msg, "16-mixed");
    assert_has(msg, "bf16-mixed");

    esp_config *cfg;
    const training_cfg *t = must_load("trainer:\n  precision: 32\n  strategy: fsdp\nparallel:\n  env: local_gpu\n", &cfg);
    cr_assert_str_eq(t->trainer->precision, "32");
    cr_assert_str_eq(t->trainer->strategy, "fsdp");
    cr_assert_str_eq(t->parallel->env, "local_gpu");
    config_free(cfg);
}

Test(config, targets)
{
    esp_config *cfg;
    const training_cfg *t = must_load("optimizer:\n  _target_: torch.optim.AdamW\n  lr: 0.001\n"
                                      "scheduler:\n  _target_: espnet2.schedulers.warmup_lr.WarmupLR\n"
                                      "  warmup_steps: 10\n",
                                      &cfg);
    cr_assert_str_eq(t->optimizer->target, "torch.optim.AdamW");
    cr_assert_str_eq(t->scheduler->target, "espnet2.schedulers.warmup_lr.WarmupLR");
    config_free(cfg);

    const char *msg = load_error("optimizer:\n  _target_: torch.optim.SGD\n");
    assert_has(msg, "%s:2:13: optimizer._target_: unknown _target_ 'torch.optim.SGD'", tpath("cfg.yaml"));
    assert_has(msg, "torch.optim.Adam");
    assert_has(msg, "torch.optim.AdamW");
    msg = load_error("trainer:\n  logger:\n    - _target_: lightning.pytorch.loggers.WandbLogger\n");
    assert_has(msg, "trainer.logger[0]._target_: unknown _target_");
    assert_has(msg, "TensorBoardLogger");

    cr_assert_not_null(target_lookup("optimizer", "torch.optim.Adam"));
    cr_assert_null(target_lookup("optimizer", "torch.optim.SGD"));
    cr_assert_not_null(
        target_lookup("dataloader.train.iter_factory", "espnet2.iterators.sequence_iter_factory.SequenceIterFactory"));
}

/* ---- the ESPnet3 documentation's YAML blocks ------------------------------------------------ */

Test(config, docs_trainer_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("exp_dir: exp/run\n"
                                      "trainer:\n"
                                      "  accelerator: gpu\n"
                                      "  devices: 4\n"
                                      "  num_nodes: 2\n"
                                      "  strategy: ddp\n"
                                      "  precision: 16-mixed\n"
                                      "  gradient_clip_val: 1.0\n"
                                      "  log_every_n_steps: 200\n"
                                      "  logger:\n"
                                      "    - _target_: lightning.pytorch.loggers.TensorBoardLogger\n"
                                      "      save_dir: ${exp_dir}/tensorboard\n"
                                      "      name: tb_logger\n",
                                      &cfg);
    const trainer_cfg *tr = t->trainer;
    cr_assert_str_eq(tr->accelerator, "gpu");
    cr_assert_eq(tr->devices, 4);
    cr_assert_eq(tr->num_nodes, 2);
    cr_assert_str_eq(tr->strategy, "ddp");
    cr_assert_str_eq(tr->precision, "16-mixed");
    cr_assert_float_eq(tr->gradient_clip_val, 1.0, 1e-12);
    cr_assert_eq(tr->log_every_n_steps, 200);
    cr_assert_eq(tr->n_logger, 1);
    cr_assert_str_eq(tr->logger[0].save_dir, "exp/run/tensorboard");
    cr_assert_str_eq(tr->logger[0].name, "tb_logger");
    config_free(cfg);
}

Test(config, docs_parallel_slurm_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("parallel:\n"
                                      "  env: slurm\n"
                                      "  n_workers: 40\n"
                                      "  options:\n"
                                      "    account: x\n"
                                      "    queue: cpu\n"
                                      "    cores: 1\n"
                                      "    processes: 4\n"
                                      "    memory: 40GB\n"
                                      "    death_timeout: 240\n"
                                      "    walltime: \"30:00\"\n"
                                      "    job_extra_directives:\n"
                                      "      - \"--time 24:00:00\"\n"
                                      "      - \"--ntasks-per-node=1\"\n"
                                      "      - \"--cpus-per-task=8\"\n"
                                      "      - \"--output=parallel_log/%j-%x.log\"\n",
                                      &cfg);
    const parallel_cfg *p = t->parallel;
    cr_assert_str_eq(p->env, "slurm");
    cr_assert_eq(p->n_workers, 40);
    cr_assert_str_eq(p->options->account, "x");
    cr_assert_str_eq(p->options->queue, "cpu");
    cr_assert_eq(p->options->cores, 1);
    cr_assert_eq(p->options->processes, 4);
    cr_assert_str_eq(p->options->memory, "40GB");
    cr_assert_eq(p->options->death_timeout, 240);
    cr_assert_str_eq(p->options->walltime, "30:00");
    cr_assert_eq(p->options->n_job_extra_directives, 4);
    cr_assert_str_eq(p->options->job_extra_directives[0], "--time 24:00:00");
    cr_assert_str_eq(p->options->job_extra_directives[3], "--output=parallel_log/%j-%x.log");
    config_free(cfg);
}

Test(config, docs_parallel_local_gpu_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("parallel:\n  env: local_gpu\n  n_workers: 4\n", &cfg);
    cr_assert_str_eq(t->parallel->env, "local_gpu");
    cr_assert_eq(t->parallel->n_workers, 4);
    cr_assert_null(t->parallel->options);
    config_free(cfg);
}

Test(config, docs_dataloader_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("stats_dir: exp/stats\n"
                                      "dataloader:\n"
                                      "  collate_fn:\n"
                                      "    _target_: espnet2.train.collate_fn.CommonCollateFn\n"
                                      "    int_pad_value: -1\n"
                                      "  train:\n"
                                      "    total_shards: 8\n"
                                      "    dist_world_size: 4\n"
                                      "    multiple_iterator: true\n"
                                      "    num_shards: 2\n"
                                      "    iter_factory:\n"
                                      "      _target_: espnet2.iterators.sequence_iter_factory.SequenceIterFactory\n"
                                      "      shuffle: true\n"
                                      "      collate_fn: ${dataloader.collate_fn}\n"
                                      "      batches:\n"
                                      "        type: numel\n"
                                      "        shape_files:\n"
                                      "          - ${stats_dir}/train/feats_shape\n"
                                      "        batch_size: 16\n"
                                      "        batch_bins: 4000000\n"
                                      "  valid:\n"
                                      "    multiple_iterator: false\n"
                                      "    num_shards: 1\n"
                                      "    iter_factory:\n"
                                      "      _target_: espnet2.iterators.sequence_iter_factory.SequenceIterFactory\n"
                                      "      shuffle: false\n"
                                      "      collate_fn: ${dataloader.collate_fn}\n"
                                      "      batches:\n"
                                      "        type: numel\n"
                                      "        shape_files:\n"
                                      "          - ${stats_dir}/valid/feats_shape\n"
                                      "        batch_size: ${dataloader.train.iter_factory.batches.batch_size}\n"
                                      "        batch_bins: 4000000\n",
                                      &cfg);
    const loader_split_cfg *tr = t->dataloader->train;
    cr_assert_eq(tr->total_shards, 8);
    cr_assert_eq(tr->dist_world_size, 4);
    cr_assert_eq(tr->multiple_iterator, 1);
    cr_assert_eq(tr->num_shards, 2);
    cr_assert_str_eq(tr->iter_factory->target, "espnet2.iterators.sequence_iter_factory.SequenceIterFactory");
    cr_assert_eq(tr->iter_factory->shuffle, 1);
    cr_assert_str_eq(tr->iter_factory->collate_fn->target, "espnet2.train.collate_fn.CommonCollateFn");
    cr_assert_eq(tr->iter_factory->collate_fn->int_pad_value, -1);
    cr_assert_str_eq(tr->iter_factory->batches->type, "numel");
    cr_assert_eq(tr->iter_factory->batches->n_shape_files, 1);
    cr_assert_str_eq(tr->iter_factory->batches->shape_files[0], "exp/stats/train/feats_shape");
    cr_assert_eq(tr->iter_factory->batches->batch_size, 16);
    cr_assert_eq(tr->iter_factory->batches->batch_bins, 4000000);
    const loader_split_cfg *va = t->dataloader->valid;
    cr_assert_eq(va->multiple_iterator, 0);
    cr_assert_eq(va->iter_factory->shuffle, 0);
    cr_assert_eq(va->iter_factory->batches->batch_size, 16);
    cr_assert_str_eq(va->iter_factory->batches->shape_files[0], "exp/stats/valid/feats_shape");
    config_free(cfg);
}

Test(config, docs_num_device_block)
{
    esp_config *cfg;
    const training_cfg *t = must_load("num_device: 4\nnum_nodes: 1\n"
                                      "trainer:\n  devices: ${num_device}\n  num_nodes: ${num_nodes}\n  strategy: ddp\n",
                                      &cfg);
    cr_assert_eq(t->num_device, 4);
    cr_assert_eq(t->num_nodes, 1);
    cr_assert_eq(t->trainer->devices, 4);
    cr_assert_eq(t->trainer->num_nodes, 1);
    cr_assert_str_eq(t->trainer->strategy, "ddp");
    config_free(cfg);
}

/* ---- the recipe configs with the conf/ template --------------------------------------------- */

/* create_dataset fields by name, to compare the typed struct with the YAML text. */
typedef enum { F_STR, F_INT, F_STRS, F_INTS } ftype;
static const struct {
    const char *key;
    ftype type;
    size_t off, count_off;
} cd_fields[] = {
#define CD(k, t) {#k, t, offsetof(create_dataset_cfg, k), 0}
#define CDL(k, t) {#k, t, offsetof(create_dataset_cfg, k), offsetof(create_dataset_cfg, n_##k)}
    CD(func, F_STR), CD(dataset_dir, F_STR), CD(recipe_dir, F_STR), CD(synthesizer, F_STR), CD(text_source, F_STR),
    CD(seed, F_INT), CD(num_train, F_INT), CD(num_valid, F_INT), CD(num_test, F_INT),
    CDL(train_voices, F_STRS), CDL(test_voices, F_STRS), CDL(train_variants, F_STRS), CDL(test_variants, F_STRS),
    CDL(speed_range, F_INTS), CDL(pitch_range, F_INTS), CD(min_words, F_INT), CD(max_words, F_INT), CD(fs, F_INT),
    CD(nj, F_INT),
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
        const char *base = (const char *)cd;
        switch (cd_fields[f].type) {
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
    cr_assert_not_null(t->trainer, "the template's trainer section is missing");
    cr_assert_eq(t->trainer->devices, t->num_device);
    ynode *emitted_check = cfg->tree;
    char *yaml = yt_emit(emitted_check, NULL);
    cr_assert_null(strstr(yaml, "${"), "unresolved interpolation in:\n%s", yaml);
    free(yaml);
    yt_free(raw);
    config_free(cfg);
}

Test(config, recipe_training_tiny_yaml_loads_as_written)
{
    esp_config *cfg = load_recipe("training_tiny.yaml");
    const training_cfg *t = cfg->typed;
    char path[1024];
    esp_err err;
    /* What the tiny config means: training.yaml with training_tiny.yaml's keys on top. */
    snprintf(path, sizeof path, "%s/recipes/espeak_fortunes/conf/training.yaml", test_root_dir());
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
    cr_assert_eq(t1->create_dataset->num_train, t2->create_dataset->num_train);
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

/* Decoding keys: the template's defaults (weights stage 5 writes, CTC only), ESPnet's `penalty`,
 * Speech2Text keys this build does not use warn, a typo is an error with a suggestion. */
Test(config, inference_model_keys)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    config_load_opts o = {.template_dir = tdir};
    esp_config *cfg;
    esp_err err;
    const char *inf = fixture("decode.yaml", "model:\n  beam_size: 5\n  penalty: 0.5\n  maxlenratio: 0.0\n");
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
    assert_has(warned, "model.maxlenratio");
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

/* Free-form ESPnet3 blocks are kept but announced as unused; an empty `fit: {}` says nothing. */
Test(config, free_form_blocks_warn_when_not_empty)
{
    esp_config *cfg;
    esp_err err;
    const char *path = fixture("cfg.yaml", "fit: {}\ndataset:\n  _target_: x.DataOrganizer\n  train: []\n");
    capture_begin();
    int rc = load_file(path, NULL, 0, &cfg, &err);
    const char *out = capture_end();
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(count_lines_with(out, "WARNING"), 1, "stderr:\n%s", out);
    assert_has(out, "%s:2:1: dataset: kept in the resolved config but not used", tpath("cfg.yaml"));
    cr_assert_not_null(yt_get_path(cfg->tree, "dataset.train"));
    config_free(cfg);
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
