/* The mini_an4 recipe's keys of create_dataset (its table is recipes/mini_an4/keys.c, registered
 * with core/config/config_recipe.h): what its builder (builder.c) reads. */
#ifndef ESPNET3_MINI_AN4_KEYS_H
#define ESPNET3_MINI_AN4_KEYS_H

#include <stdint.h>

#include "core/config/config_recipe.h"

typedef struct mini_an4_cfg {
    char *archive_path; /* the AN4 archive (left out: <recipe_dir>/downloads.tar.gz) */
    int64_t dev_size;   /* train utterances held out as valid (ESPnet3's dev_size) */
} mini_an4_cfg;

extern const config_recipe mini_an4_recipe;

#endif
