/* Composition of a config before interpolation:
 *   1. Hydra-style `defaults:` lists (`- name` -> name.yaml beside the file, `- group: name` ->
 *      group/name.yaml placed under key `group`, `_self_` marks where the file's own keys go,
 *      `override group: name` replaces an earlier choice, `# @package _global_` puts a group file
 *      at the top level);
 *   2. the template config from conf/ merged under the recipe config (a recipe's scheduler: block
 *      naming another class than the template's replaces the template's);
 *   3. command-line overrides `key.path=value`, `+key=value`, `~key`. */
#ifndef ESPNET3_CONFIG_COMPOSE_H
#define ESPNET3_CONFIG_COMPOSE_H

#include "core/base/log.h"
#include "core/config/yamltree.h"

/* Reads path and everything its defaults list names. */
ynode *config_load_file(const char *path, esp_err *err);
/* Applies one override string to the tree. */
int config_apply_override(ynode *root, const char *override, esp_err *err);
/* template (may be NULL) <- user file <- overrides. */
ynode *config_compose(const char *path, const char *template_path, const char **overrides, int n_overrides,
                      esp_err *err);

#endif
