/* Damaged or hostile trainer state (trainer_state.json; test/fuzz/fuzz_trainer_state.c, issue 16):
 * values the trainer would take on resume are checked and refused with the file named, and best-k
 * entries can only name checkpoints under checkpoints/. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/train/checkpoint.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "ckpt_state");
    log_set_quiet(1);
}
static void teardown(void) { test_tmpdir_remove(dir); }
TestSuite(trainer_state_hostile, .init = setup, .fini = teardown);

static const criterion_cfg crit[] = {{"valid/loss", 2, "min"}};

/* <dir>/<exp>: epoch=0-step=5 and epoch=1-step=10 (last), both in the valid/loss table. */
static void save_two(const char *exp)
{
    float w[2] = {1, 2}, m1[2] = {0}, m2[2] = {0};
    st_tensor model[] = {{.name = "w", .dtype = ST_F32, .ndim = 1, .shape = {2}, .data = w}};
    st_tensor state[] = {{.name = "optimizer.exp_avg", .dtype = ST_F32, .ndim = 1, .shape = {2}, .data = m1},
                         {.name = "optimizer.exp_avg_sq", .dtype = ST_F32, .ndim = 1, .shape = {2}, .data = m2}};
    uint64_t rng[1] = {7};
    ckpt_counter counters[] = {{"optimizer.step", 10}};
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, test_path(dir, exp), crit, 1, &err), 0, "%s", err.msg);
    for (int e = 0; e < 2; e++) {
        metric v[] = {{"valid/loss", 3.0 - e, 0}};
        ckpt_info info = {.epoch = e, .step = 5 * (e + 1), .metrics = v, .n_metrics = 1, .rng = rng, .n_rng = 1,
                          .counters = counters, .n_counters = 1};
        cr_assert_eq(ckpt_save(&m, &info, model, 1, state, 2, &err), 0, "%s", err.msg);
    }
    ckpt_close(&m);
}

/* Sets `key` of the newest checkpoint's trainer_state.json to the JSON text `value`. */
static const char *edit_state(const char *exp, const char *key, const char *value)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s/checkpoints/epoch=1-step=10/trainer_state.json", dir, exp);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    cr_assert_not_null(root, "%s", jerr.text);
    json_t *v = json_loads(value, JSON_DECODE_ANY, &jerr);
    cr_assert_not_null(v, "%s: %s", value, jerr.text);
    json_object_set_new(root, key, v);
    cr_assert_eq(json_dump_file(root, path, JSON_INDENT(2)), 0);
    json_decref(root);
    return path;
}

static void expect_load_error(const char *exp, const char *path, const char *want)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, test_path(dir, exp), crit, 1, &err), 0, "%s", err.msg);
    cr_assert_str_eq(m.last, "epoch=1-step=10");
    ckpt_loaded c;
    cr_assert_eq(ckpt_load_last(&m, &c, &err), -1, "loaded %s", path);
    cr_assert(strstr(err.msg, path), "the error names the file: %s", err.msg);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    ckpt_close(&m);
}

/* A counter that is not an integer was skipped: the resumed run took optimizer.step = 0 and
 * restarted Adam's bias correction without a word. */
Test(trainer_state_hostile, counter_that_is_not_an_integer_is_an_error)
{
    save_two("exp");
    const char *p = edit_state("exp", "counters", "{\"optimizer.step\": \"10\"}");
    expect_load_error("exp", p, "counters.optimizer.step is not an integer");
}

/* strtoull took "-1" (as 2^64 - 1), "  7" and 20 digits (clamped) as generator states. */
Test(trainer_state_hostile, rng_must_be_hex_digits)
{
    save_two("exp");
    const char *bad[] = {"[\"-1\"]", "[\"  7\"]", "[\"0x12345678901234567\"]", "[\"0x\"]", "[7]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *p = edit_state("exp", "rng", bad[i]);
        expect_load_error("exp", p, "rng[0] is not a hex string of at most 16 digits");
    }
    edit_state("exp", "rng", "[\"0xfedcba9876543210\", \"2a\"]");
    ckpt_manager m;
    ckpt_loaded c;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, test_path(dir, "exp"), crit, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(ckpt_load_last(&m, &c, &err), 0, "%s", err.msg);
    cr_assert(c.n_rng == 2 && c.rng[0] == 0xfedcba9876543210u && c.rng[1] == 42);
    ckpt_loaded_free(&c);
    ckpt_close(&m);
}

Test(trainer_state_hostile, metric_that_is_not_a_number_is_an_error)
{
    save_two("exp");
    const char *p = edit_state("exp", "metrics", "{\"valid/loss\": [1]}");
    expect_load_error("exp", p, "metrics.valid/loss is not a number");
}

/* A negative step was resumed from; now that checkpoint is not complete and the older one is. */
Test(trainer_state_hostile, negative_step_makes_the_checkpoint_unusable)
{
    save_two("exp");
    edit_state("exp", "step", "-10");
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, test_path(dir, "exp"), crit, 1, &err), 0, "%s", err.msg);
    cr_assert_str_eq(m.last, "epoch=0-step=5");
    ckpt_close(&m);
}

/* A best-k entry naming a directory outside checkpoints/ (an absolute path, "..") was ranked, and
 * ckpt_average then read that directory's model. */
Test(trainer_state_hostile, best_k_entries_must_name_checkpoints)
{
    save_two("exp");
    save_two("other"); /* a complete checkpoint outside exp/checkpoints */
    char entries[1024];
    snprintf(entries, sizeof entries,
             "[{\"monitor\": \"valid/loss\", \"k\": 2, \"mode\": \"min\", \"entries\": ["
             "{\"dir\": \"%s/other/checkpoints/epoch=1-step=10\", \"epoch\": 1, \"step\": 10, \"value\": 0.5},"
             "{\"dir\": \"../../other/checkpoints/epoch=1-step=10\", \"epoch\": 1, \"step\": 10, \"value\": 0.6},"
             "{\"dir\": \"epoch=1-step=10\", \"epoch\": 1, \"step\": 10, \"value\": 2.0}]}]",
             dir);
    edit_state("exp", "best_k", entries);
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, test_path(dir, "exp"), crit, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(m.tables[0].n, 1);
    cr_assert_str_eq(m.tables[0].entries[0].dir, "epoch=1-step=10");
    ckpt_close(&m);
}
