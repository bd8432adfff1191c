/* libFuzzer target for the config loader: YAML bytes -> tree -> interpolation, then validation as a
 * training, an inference and a metrics config (each on its own copy) -> YAML text again; a tree
 * that validates as a training config also goes through the
 * effect list's parser (dataset.preprocessor.data_aug_effects, core/config/config_aug.c), and an effect
 * list it accepts is applied to a short signal. Must never crash, hang or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config.h"
#include "core/config/config_interp.h"
#include "core/config/config_schema.h"
#include "core/config/yamltree.h"
#include "core/data/augment_conf.h"
#include "recipes/keys.h"

#ifdef FUZZ_CYAML_LOAD
/* Also check config_load's invariant: libcyaml accepts every tree the validator accepts.
 * Off by default until float values such as .inf load (see the test_config known bugs). */
static const cyaml_config_t cyaml_cfg = {.log_level = CYAML_LOG_ERROR, .mem_fn = cyaml_mem, .flags = CYAML_CFG_DEFAULT};
static void check_cyaml_loads(const ynode *tree)
{
    size_t len;
    char *yaml = yt_emit(tree, &len);
    void *typed = NULL;
    cyaml_err_t rc = cyaml_load_data((const uint8_t *)yaml, len, &cyaml_cfg, config_schema(CONFIG_TRAINING),
                                     (cyaml_data_t **)&typed, NULL);
    free(yaml);
    if (rc != CYAML_OK) abort();
    cyaml_free(&cyaml_cfg, config_schema(CONFIG_TRAINING), typed, 0);
}
#endif

static void fuzz_augment(const ynode *tree)
{
    esp_err err;
    aug_effects_cfg eff;
    if (config_aug_effects_parse(yt_get_path(tree, "dataset.preprocessor.data_aug_effects"), &eff, &err) != 0) return;
    augment_conf c = {.n = eff.n, .entries = eff.entries};
    /* data_aug_num as written (the validation checked it against the entries), else its default [1, 1] */
    const ynode *num = yt_get_path(tree, "dataset.preprocessor.data_aug_num");
    int64_t lo = 1, hi = 1;
    if (num && num->kind == YN_SEQ && num->n == 2) yt_as_int(num->items[0], &lo), yt_as_int(num->items[1], &hi);
    c.num[0] = (int)lo, c.num[1] = (int)hi;
    if (augment_conf_check_fs(&c, 16000, "fs", &err) == 0) {
        float x[400];
        for (int i = 0; i < 400; i++) x[i] = (float)((i * 37 % 101) - 50) / 64.0f;
        rng r;
        rng_init(&r, 1);
        size_t n;
        c.prob = 1;
        free(augment_apply(&c, x, 400, 16000, &r, &n));
    }
    augment_conf_free(&c);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    log_set_quiet(1); /* warnings still go to stderr: fuzz.mk runs with -close_fd_mask=2 */
    /* the recipes' own keys, as the program registers them (the recipe configs are seeds) */
    config_recipes_set(recipes_all());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* ${load_line:...} and ${load_yaml:...} read files: keep them away from endless or special ones. */
    if (memmem(data, size, "/dev", 4) || memmem(data, size, "/proc", 5) || memmem(data, size, "/sys", 4)) return 0;
    esp_err err;
    ynode *root = yt_parse_string((const char *)data, size, "fuzz.yaml", &err);
    if (!root) return 0;
    ynode *copy = yt_copy(root);
    interp_opts io = {.self_name = "fuzz"};
    if (config_interpolate(copy, &io, &err) == 0) {
        for (int k = CONFIG_INFERENCE; k < CONFIG_KIND_COUNT; k++) { /* their own keys: metrics entries, ... */
            ynode *other = yt_copy(copy);
            (void)config_validate((config_kind)k, other, &err);
            yt_free(other);
        }
        if (config_validate(CONFIG_TRAINING, copy, &err) == 0) {
#ifdef FUZZ_CYAML_LOAD
            check_cyaml_loads(copy);
#endif
            fuzz_augment(copy);
        }
    }
    char *a = yt_emit(root, NULL);
    char *b = yt_emit(copy, NULL);
    free(a);
    free(b);
    yt_free(copy);
    yt_free(root);
    return 0;
}
