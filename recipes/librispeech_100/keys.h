/* The librispeech_100 recipe's entry in the recipes' key tables (recipes/keys.h): its names; it has
 * no create_dataset keys of its own. */
#ifndef ESPNET3_LIBRISPEECH_100_KEYS_H
#define ESPNET3_LIBRISPEECH_100_KEYS_H

#include "core/config/config_recipe.h"

extern const config_recipe librispeech_100_recipe;

#endif
