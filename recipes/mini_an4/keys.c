/* The mini_an4 recipe's keys of create_dataset: types, defaults and ranges (recipes/mini_an4/keys.h
 * has the struct; core/config/config_recipe.h the hook). */
#include "recipes/mini_an4/keys.h"

#include <math.h>

#include "core/config/config_fields.h"

static const cyaml_schema_field_t fields[] = {
    STR("archive_path", mini_an4_cfg, archive_path),
    INT("dev_size", mini_an4_cfg, dev_size),
    CYAML_FIELD_END};
static const cyaml_schema_value_t schema = {CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, mini_an4_cfg, fields)};

static const config_default defaults[] = {
    {CONFIG_TRAINING, "create_dataset.dev_size", "1", 0, NULL}, /* ESPnet3's mini_an4 builder's */
};

static const config_range ranges[] = {
    {"create_dataset.dev_size", 1, HUGE_VAL, 0, ">= 1", "the first train utterances, sorted, become valid"},
};

const config_recipe mini_an4_recipe = {
    .name = "espnet3.recipes.mini_an4.create_dataset",
    .short_name = "mini_an4",
    .fields = fields,
    .schema = &schema,
    CONFIG_RECIPE_TABLE(defaults),
    CONFIG_RECIPE_TABLE(ranges),
};
