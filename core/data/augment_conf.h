/* The data augmentation keys of a loaded training config: data_aug_num and data_aug_prob from its
 * typed view, the effect list from its resolved YAML tree (the list mixes numbers, names, mappings
 * and nested lists, which a typed schema cannot hold):
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
 * numbers' ranges, the defaults of data_aug_num and data_aug_prob and the rules of data_aug_num and
 * speed_perturb_factors are core/config/config_values.c's, checked when the config loads (and
 * --show_config shows the defaults); the effect list's shape, names and the rules between arguments
 * are here. Keys of `preprocessor` other than data_aug_* (token_type, fs, ...) are left to the
 * dataset reader; speed_perturb_factors' copies are core/data/speed_perturb.h's. */
#ifndef ESPNET3_AUGMENT_CONF_H
#define ESPNET3_AUGMENT_CONF_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/config/config.h"
#include "core/config/config_values.h"
#include "core/config/yamltree.h"
#include "core/data/augment.h"

#define AUG_MAX_ENTRIES CFG_MAX_AUG_ENTRIES /* entries of data_aug_effects, members of a group */

/* One data_aug_effects item [weight, name, {args}] (args may be left out when empty) at `path`
 * (for messages, e.g. "dataset.preprocessor.data_aug_effects[2]"). */
int augment_effect_parse(const ynode *item, const char *path, double *weight, aug_effect *e, esp_err *err);

/* The entries of data_aug_effects (eff: its node, NULL or null when left out: out->n = 0). */
int augment_effects_parse(const ynode *eff, augment_conf *out, esp_err *err);

/* The data_aug_* keys of a loaded training config (no preprocessor, or no data_aug_effects:
 * out->n = 0, nothing to do). */
int augment_conf_read(const esp_config *training, augment_conf *out, esp_err *err);

/* What depends on the sample rate: filter frequencies below fs/2, int(factor * fs) > 0. */
int augment_conf_check_fs(const augment_conf *c, int fs, const char *fs_key, esp_err *err);

#endif
