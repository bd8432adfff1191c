/* The data augmentation keys of a loaded training config, from its typed view: the effect list
 * (parsed when the config loaded: core/config/config_aug.h), data_aug_num and data_aug_prob:
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
 * are core/config/config_aug.c's. Keys of `preprocessor` other than data_aug_* (token_type, fs, ...) are left to the
 * dataset reader; speed_perturb_factors' copies are core/data/speed_perturb.h's. */
#ifndef ESPNET3_AUGMENT_CONF_H
#define ESPNET3_AUGMENT_CONF_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/config/config.h"
#include "core/config/config_values.h"
#include "core/config/yamltree.h"
#include "core/data/augment.h"

/* The data_aug_* keys of a loaded training config, a copy of its own (no preprocessor, or no
 * data_aug_effects: out->n = 0, nothing to do). Their errors were the load's. */
void augment_conf_read(const esp_config *training, augment_conf *out);

/* What depends on the sample rate: filter frequencies below fs/2, int(factor * fs) > 0. */
int augment_conf_check_fs(const augment_conf *c, int fs, const char *fs_key, esp_err *err);

#endif
