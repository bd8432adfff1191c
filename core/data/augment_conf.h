/* The data augmentation keys of a training config, read from the resolved YAML tree (the effect
 * list mixes numbers, names, mappings and nested lists, which a typed schema cannot hold):
 *
 *   dataset:
 *     preprocessor:                 # ESPnet2's CommonPreprocessor arguments, as ESPnet3 writes them
 *       data_aug_effects:
 *         - [0.1, "contrast", {"enhancement_amount": 75.0}]
 *         - - 0.1                   # a group: one of its members is applied
 *           - - [0.3, "speed_perturb", {"factor": 0.9}]
 *             - [0.3, "speed_perturb", {"factor": 1.1}]
 *       data_aug_num: [1, 4]
 *       data_aug_prob: 1.0
 *   speed_perturb_factors: [0.9, 1.0, 1.1]   # ESPnet2 asr.sh's 3-way copies (core/data/speed_perturb.h)
 *
 * Every value has finite bounds; an error names file:line:col of the value and the key path. The
 * numbers' ranges and the defaults of data_aug_num and data_aug_prob are core/config/config_values.c's
 * (the config load checks data_aug_num and data_aug_prob too, and --show_config shows their defaults);
 * the effect list's shape, names and the rules between arguments are here. Keys of `preprocessor`
 * other than data_aug_* (token_type, fs, ...) are left to the dataset reader. */
#ifndef ESPNET3_AUGMENT_CONF_H
#define ESPNET3_AUGMENT_CONF_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/config/config_values.h"
#include "core/config/yamltree.h"
#include "core/data/augment.h"

/* Lengths of the lists. */
#define AUG_MAX_ENTRIES CFG_MAX_AUG_ENTRIES /* entries of data_aug_effects, members of a group */
#define AUG_MAX_SPEED_FACTORS 16

/* One data_aug_effects item [weight, name, {args}] (args may be left out when empty) at `path`
 * (for messages, e.g. "dataset.preprocessor.data_aug_effects[2]"). */
int augment_effect_parse(const ynode *item, const char *path, double *weight, aug_effect *e, esp_err *err);

/* The data_aug_* keys of the dataset.preprocessor mapping (pre NULL, or no data_aug_effects:
 * out->n = 0, nothing to do). */
int augment_conf_parse(const ynode *pre, augment_conf *out, esp_err *err);

/* The same from a whole training config tree: `dataset.preprocessor`. */
int augment_conf_from_tree(const ynode *root, augment_conf *out, esp_err *err);

/* What depends on the sample rate: filter frequencies below fs/2, int(factor * fs) > 0. */
int augment_conf_check_fs(const augment_conf *c, int fs, const char *fs_key, esp_err *err);

/* speed_perturb_factors at the top level of a training config: *n = 0 when absent. Factors in
 * their range (config_values.c), distinct, at most AUG_MAX_SPEED_FACTORS. */
int speed_perturb_factors_from_tree(const ynode *root, double *factors, size_t *n, esp_err *err);

/* The same checks, for the stages' config checks that only need to know the list is valid. */
int speed_perturb_factors_check(const ynode *root, esp_err *err);

#endif
