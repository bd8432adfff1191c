/* The espeak_fortunes recipe's keys of create_dataset: their types, defaults, ranges and allowed
 * values (recipes/espeak_fortunes/keys.h has the struct; core/config/config_recipe.h the hook). */
#include "recipes/espeak_fortunes/keys.h"

#include <math.h>
#include <stdio.h>

#include "core/config/config_fields.h"
#include "core/config/config_schema.h"

#define T espeak_fortunes_cfg
#define PATH "create_dataset."

static const cyaml_schema_field_t engine_fields[] = {
    STR("name", synth_engine_cfg, name),
    SEQ("voices", synth_engine_cfg, voices, &config_string_entry),
    SEQ("variants", synth_engine_cfg, variants, &config_string_entry),
    SEQ("test_voices", synth_engine_cfg, test_voices, &config_string_entry),
    SEQ("test_variants", synth_engine_cfg, test_variants, &config_string_entry),
    CYAML_FIELD_END};
static const cyaml_schema_value_t engine_entry = {CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, synth_engine_cfg, engine_fields)};

static const cyaml_schema_field_t fields[] = {
    STR("synthesizer", T, synthesizer),
    STR("text_source", T, text_source),
    INT("seed", T, seed),
    INT("num_train", T, num_train),
    INT("num_valid", T, num_valid),
    INT("num_test", T, num_test),
    SEQ("train_voices", T, train_voices, &config_string_entry),
    SEQ("test_voices", T, test_voices, &config_string_entry),
    SEQ("train_variants", T, train_variants, &config_string_entry),
    SEQ("test_variants", T, test_variants, &config_string_entry),
    PAIR("speed_range", T, speed_range, &config_int_entry),
    PAIR("pitch_range", T, pitch_range, &config_int_entry),
    INT("min_words", T, min_words),
    INT("max_words", T, max_words),
    INT("fs", T, fs),
    INT("nj", T, nj),
    SEQ("engines", T, engines, &engine_entry),
    MAP("test_engine", T, test_engine, engine_fields),
    INT("num_test_engine", T, num_test_engine),
    INT("num_rirs", T, num_rirs),
    INT("num_noises", T, num_noises),
    CYAML_FIELD_END};
static const cyaml_schema_value_t schema = {CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, T, fields)};

/* The values a left-out key takes (--show_config shows them). synthesizer, the voices and
 * text_source keep theirs in builder.c: they depend on engines. */
static const config_default defaults[] = {
    {CONFIG_TRAINING, PATH "num_train", "1000", 0, NULL},
    {CONFIG_TRAINING, PATH "num_valid", "100", 0, NULL},
    {CONFIG_TRAINING, PATH "num_test", "100", 0, NULL},
    {CONFIG_TRAINING, PATH "speed_range", "[130, 200]", 0, NULL}, /* espeak-ng's normal rate is 175 */
    {CONFIG_TRAINING, PATH "pitch_range", "[30, 70]", 0, NULL},   /* 50 is normal */
    {CONFIG_TRAINING, PATH "min_words", "3", 0, NULL},
    {CONFIG_TRAINING, PATH "max_words", "15", 0, NULL},
    {CONFIG_TRAINING, PATH "fs", "16000", 0, NULL},
};

static const config_range ranges[] = {
    {PATH "num_train", 1, HUGE_VAL, 0, ">= 1", "utterances to make"},
    {PATH "num_valid", 1, HUGE_VAL, 0, ">= 1", "utterances to make"},
    {PATH "num_test", 1, HUGE_VAL, 0, ">= 1", "utterances to make"},
    {PATH "num_test_engine", 1, HUGE_VAL, 0, ">= 1", "utterances to make; leave it out for num_test"},
    {PATH "num_rirs", 1, 1000, 0, "in [1, 1000]", "generated room impulse responses; leave it out for none"},
    {PATH "num_noises", 1, 1000, 0, "in [1, 1000]", "generated noises; leave it out for none"},
    {PATH "min_words", 1, HUGE_VAL, 0, ">= 1", NULL},
    {PATH "max_words", 1, HUGE_VAL, 0, ">= 1", NULL},
    {PATH "fs", 1000, 192000, 0, "a sample rate in [1000, 192000] Hz", NULL},
    {PATH "nj", 1, 1024, 0, "in [1, 1024]", "parallel processes; leave it out for one per CPU"},
    {PATH "speed_range[]", 1, HUGE_VAL, 0, ">= 1", "words per minute"},
    {PATH "pitch_range[]", 0, 99, 0, "in [0, 99]", "espeak-ng's pitch scale"},
};

static const config_allowed allowed[] = {
    {PATH "synthesizer", "espeak-ng|flite|festival"},
    {PATH "engines[].name", "espeak-ng|flite|festival"},
    {PATH "test_engine.name", "espeak-ng|flite|festival"},
};

/* The rules between its keys: min_words <= max_words, and [low, high] ranges. */
static int check(const ynode *cd, esp_err *err)
{
    const ynode *lo_n = yt_map_get(cd, "min_words"), *hi_n = yt_map_get(cd, "max_words");
    double lo, hi;
    if (lo_n && hi_n && yt_as_float(lo_n, &lo) && yt_as_float(hi_n, &hi) && lo > hi)
        return config_fail_node(err, lo_n, PATH "min_words", "%g is above max_words = %g (lower min_words or raise "
                                "max_words)", lo, hi);
    static const char *const ranges[] = {"speed_range", "pitch_range"};
    for (int i = 0; i < 2; i++) {
        const ynode *r = yt_map_get(cd, ranges[i]);
        char path[64];
        snprintf(path, sizeof path, PATH "%s", ranges[i]);
        if (r && r->n == 2 && yt_as_float(r->items[0], &lo) && yt_as_float(r->items[1], &hi) && lo > hi)
            return config_fail_node(err, r, path, "low %g is above high %g (write it as [low, high])", lo, hi);
    }
    return 0;
}

const config_recipe espeak_fortunes_recipe = {
    .name = "espnet3.recipes.espeak_fortunes.create_dataset",
    .short_name = "espeak_fortunes",
    .fields = fields,
    .schema = &schema,
    CONFIG_RECIPE_TABLE(defaults),
    CONFIG_RECIPE_TABLE(ranges),
    CONFIG_RECIPE_TABLE(allowed),
    .check = check,
};
