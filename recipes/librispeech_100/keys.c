/* The librispeech_100 recipe's names (recipes/librispeech_100/keys.h); no keys of its own. */
#include "recipes/librispeech_100/keys.h"

const config_recipe librispeech_100_recipe = {
    .name = "espnet3.recipes.librispeech_100.create_dataset",
    .short_name = "librispeech_100",
};
