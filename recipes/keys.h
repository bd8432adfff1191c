/* Every recipe's names and create_dataset keys (core/config/config_recipe.h), without their dataset
 * builders: what a program that loads a recipe's config hands to config_recipes_set, the CLI
 * (stages_register_recipes) and the library (a model's training config names its recipe's keys)
 * alike. The builders are recipes/registry.h's. */
#ifndef ESPNET3_RECIPES_KEYS_H
#define ESPNET3_RECIPES_KEYS_H

#include "core/config/config_recipe.h"

/* Every recipe, NULL-terminated (the list is static). */
const config_recipe *const *recipes_all(void);

#endif
