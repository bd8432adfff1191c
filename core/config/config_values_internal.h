/* What core/config/config_values.c (ranges, declared defaults) shares with core/config/config_rules.c
 * (the rules between keys). Not for use outside these two. */
#ifndef ESPNET3_CONFIG_VALUES_INTERNAL_H
#define ESPNET3_CONFIG_VALUES_INTERNAL_H

#include "core/config/config_values.h"

/* ESPnet2's plateau scheduler: its defaults, and the classes that divide by warmup_steps. */
#define ESPNET2_PLATEAU "espnet2.schedulers.warmup_reducelronplateau.WarmupReduceLROnPlateau"

/* The value of a key given by its path from the root (NULL when left out or null). */
const ynode *config_set_at(const ynode *root, const char *path);
/* A key and its alias (config_values.c's key_aliases) both written: one error at the alias unless
 * they say the same. */
int config_check_aliases(config_kind kind, const ynode *root, esp_err *err);

#endif
