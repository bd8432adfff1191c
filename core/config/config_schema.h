/* libcyaml schemas of the configs, plus the rules libcyaml cannot express: allowed string values,
 * `_target_` registries, ESPnet3/Lightning keys we accept but do not implement (one warning each),
 * and "did you mean" suggestions for anything else. */
#ifndef ESPNET3_CONFIG_SCHEMA_H
#define ESPNET3_CONFIG_SCHEMA_H

#include <cyaml/cyaml.h>

#include "core/base/edit_distance.h"
#include "core/config/config.h"

const cyaml_schema_value_t *config_schema(config_kind kind);

/* Checks the resolved tree against the schema of `kind`, rewriting it into the exact shape the
 * schema loads (unset nulls dropped, unimplemented keys warned about and dropped, shorthand
 * forms expanded). Errors name file:line:col of the offending value. */
int config_validate(config_kind kind, ynode *root, esp_err *err);

/* The `_target_` registry: ESPnet3 class names we implement, per section. */
typedef struct target_entry {
    const char *section; /* optimizer, scheduler, logger, iter_factory, collate_fn, ... */
    const char *name;    /* e.g. torch.optim.Adam */
    const char *ours;    /* what it maps to here */
} target_entry;
extern const target_entry target_registry[];
const target_entry *target_lookup(const char *section, const char *name);

/* Matches a schema path pattern ('*' stands for one component, "[]" for a list item) against a
 * concrete schema path. */
int config_path_match(const char *pat, const char *path);
/* "<file>:<line>:<col>: <path>: <what>", plus the interpolation that brought the value when one
 * did; returns -1. */
int config_fail_node(esp_err *err, const ynode *n, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
