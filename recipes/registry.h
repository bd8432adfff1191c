/* Registry of dataset builders that stage 1 (create_dataset) selects with `create_dataset.func`.
 * Names are the Python module paths ESPnet3 configs use, plus a short alias. */
#ifndef ESPNET3_DATASET_BUILDERS_H
#define ESPNET3_DATASET_BUILDERS_H

#include "core/config/config_types.h"
#include "core/base/log.h"

/* Builds the dataset described by cfg: audio under cfg->dataset_dir, manifests under data_dir. */
typedef int (*dataset_builder_fn)(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err);

typedef struct dataset_builder {
    const char *name;       /* espnet3.recipes.<recipe>.create_dataset */
    const char *short_name; /* <recipe> */
    dataset_builder_fn build;
} dataset_builder;

/* Looks a builder up by full or short name; NULL when unknown. */
const dataset_builder *dataset_builder_find(const char *name);
/* "a (alias a1), b (alias b1)" for error messages; caller frees. */
char *dataset_builder_names(void);

/* The builders, one per recipe (recipes/<name>/builder.c). */
int espeak_fortunes_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err);
int mini_an4_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err);
int librispeech_100_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err);

#endif
