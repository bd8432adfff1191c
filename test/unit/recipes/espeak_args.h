/* The espeak_fortunes builder called as stage 1 calls it, for the tests that build tiny datasets
 * (test_dataset.c, test_lm_text.c). */
#ifndef ESPNET3_TEST_ESPEAK_ARGS_H
#define ESPNET3_TEST_ESPEAK_ARGS_H

#include "recipes/espeak_fortunes/keys.h"
#include "recipes/registry.h"

/* The builder's arguments as the config load gives them: the block's common keys and the recipe's
 * own (espeak_fortunes_cfg, recipes/espeak_fortunes/keys.h). */
typedef struct tiny_args {
    create_dataset_cfg cd;
    espeak_fortunes_cfg k;
} tiny_args;

static inline int build_tiny(tiny_args *a, const char *data_dir, esp_err *err)
{
    a->cd.keys = &a->k;
    return espeak_fortunes_create_dataset(&a->cd, data_dir, err);
}

#endif
