/* The recipe hook (core/config/config_recipe.h): a recipe's own keys of create_dataset, declared by
 * the recipe (recipes/<name>/keys.c), are checked at their line, typed into the recipe's struct,
 * take their declared defaults (in --show_config, not in the resolved tree), and are unknown keys
 * under another recipe or under none. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/base/log.h"
#include "core/config/config.h"
#include "recipes/espeak_fortunes/keys.h"
#include "recipes/mini_an4/keys.h"
#include "test/unit/config/config_test_util.h"
#include "test/unit/test_util.h"

static char tmp[256];

static void setup(void)
{
    test_tmpdir_make(tmp, sizeof tmp, "config_recipe_keys");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmp); }

TestSuite(config_recipe_keys, .init = setup, .fini = teardown);

static esp_config *load(const char *text)
{
    const char *path = test_path(tmp, "cfg.yaml");
    test_write_text(path, text);
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    return cfg;
}

static void expect_error(const char *text, const char *want)
{
    const char *path = test_path(tmp, "cfg.yaml");
    test_write_text(path, text);
    esp_config *cfg;
    esp_err err;
    cr_assert_neq(cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err), 0, "%s: loaded", text);
    cr_assert(strstr(err.msg, want), "%s\nlacks: %s", err.msg, want);
}

Test(config_recipe_keys, typed_into_the_recipes_struct_with_its_defaults)
{
    esp_config *cfg = load("create_dataset:\n  func: mini_an4\n  dataset_dir: d\n");
    const create_dataset_cfg *cd = ((const training_cfg *)cfg->typed)->create_dataset;
    cr_assert_eq(cd->recipe, &mini_an4_recipe);
    const mini_an4_cfg *k = cd->keys;
    cr_assert_eq(k->dev_size, 1);
    cr_assert_null(k->archive_path);
    cr_assert_null(yt_get_path(cfg->tree, "create_dataset.dev_size"), "the resolved tree keeps what was written");
    config_free(cfg);

    cfg = load("create_dataset:\n  func: espnet3.recipes.espeak_fortunes.create_dataset\n  num_train: 7\n");
    cd = ((const training_cfg *)cfg->typed)->create_dataset;
    const espeak_fortunes_cfg *e = cd->keys;
    cr_assert_eq(e->num_train, 7);
    cr_assert_eq(e->num_valid, 100);
    cr_assert_eq(e->n_speed_range, 2);
    cr_assert_eq(e->speed_range[0], 130);
    cr_assert_eq(e->fs, 16000);
    config_free(cfg);

    /* By folder: recipe_dir's last component names the recipe. */
    cfg = load("recipe_dir: /somewhere/mini_an4\ncreate_dataset:\n  dev_size: 3\n");
    cd = ((const training_cfg *)cfg->typed)->create_dataset;
    cr_assert_eq(cd->recipe, &mini_an4_recipe);
    cr_assert_eq(((const mini_an4_cfg *)cd->keys)->dev_size, 3);
    config_free(cfg);
}

Test(config_recipe_keys, checked_at_their_line_and_unknown_elsewhere)
{
    expect_error("create_dataset:\n  func: mini_an4\n  dev_size: 0\n", "cfg.yaml:3:13: create_dataset.dev_size: must be >= 1");
    expect_error("create_dataset:\n  func: espeak_fortunes\n  synthesizer: say\n",
                 "cfg.yaml:3:16: create_dataset.synthesizer: 'say' is not supported (supported: espeak-ng, flite, "
                 "festival)");
    expect_error("create_dataset:\n  func: espeak_fortunes\n  archive_path: a.tar.gz\n",
                 "cfg.yaml:3:3: create_dataset.archive_path: unknown key");
    expect_error("create_dataset:\n  func: espeak_fortunes\n  num_trian: 3\n", "unknown key (did you mean num_train?)");
    expect_error("create_dataset:\n  dataset_dir: d\n  num_train: 3\n", "create_dataset.num_train: unknown key");
}

Test(config_recipe_keys, show_config_shows_their_defaults)
{
    const char *path = test_path(tmp, "cfg.yaml");
    test_write_text(path, "create_dataset:\n  func: mini_an4\n  dataset_dir: d\n");
    const bin_run *r = CFG_RUN(tmp, "--config", path, "--template_dir", "", "--show_config");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert(strstr(r->out, "  dev_size: 1\n"), "%s", r->out);
}
