/* The config system: YAML files -> composition (defaults lists, template, CLI overrides) ->
 * interpolation -> validation against the libcyaml schemas -> typed structs. */
#ifndef ESPNET3_CONFIG_H
#define ESPNET3_CONFIG_H

#include "core/config/config_types.h"
#include "core/base/log.h"
#include "core/config/yamltree.h"

typedef enum config_kind {
    CONFIG_TRAINING,
    CONFIG_INFERENCE,
    CONFIG_METRICS,
    CONFIG_PUBLICATION, /* ESPnet3's publication.yaml: pack_model, upload_model */
    CONFIG_DEMO,        /* ESPnet3's demo.yaml: pack_demo, upload_demo */
    CONFIG_KIND_COUNT
} config_kind;

/* One loaded config: its resolved tree and its typed view. */
typedef struct esp_config {
    config_kind kind;
    char *path;          /* the file given on the command line */
    ynode *tree;         /* composed and resolved: what config.yaml and --dry_run show */
    ynode *full;         /* tree with every left-out key's default (config_values.c): what the typed
                          * view is loaded from and --show_config shows */
    void *typed;         /* training_cfg* etc., owned by libcyaml */
} esp_config;

/* Everything the command line loaded; entries are NULL when that option was not given. */
typedef struct esp_configs {
    esp_config *training;
    esp_config *inference;
    esp_config *metrics;
    esp_config *publication;
    esp_config *demo;
} esp_configs;

/* The loaded config of a kind, NULL when its option was not given. */
static inline esp_config *configs_get(const esp_configs *c, config_kind kind)
{
    esp_config *const all[CONFIG_KIND_COUNT] = {c->training, c->inference, c->metrics, c->publication, c->demo};
    return all[kind];
}

static inline const training_cfg *training_of(const esp_configs *c)
{
    return c->training ? (const training_cfg *)c->training->typed : NULL;
}

/* Loading options (everything the CLI hands over). */
typedef struct config_load_opts {
    const char *template_dir;    /* conf/ with training.yaml, inference.yaml, metrics.yaml templates */
    const char **overrides;      /* key.path=value strings from the command line */
    int n_overrides;
    int foreign;                 /* a config from elsewhere: see interp_opts.foreign */
} config_load_opts;

int config_load(config_kind kind, const char *path, const config_load_opts *opts, esp_config **out,
                esp_err *err);
/* The same interpolation and checks on a tree built in memory, with no template under it (an
 * ESPnet2 config rewritten into espnet3's form): messages point at its nodes' marks, so at the
 * file the tree was read from; `path` is the config's name (its stem for ${self_name:}). Takes
 * ownership of `tree` (freed on failure). `foreign`: see interp_opts.foreign. */
int config_load_tree(config_kind kind, ynode *tree, const char *path, int foreign, esp_config **out, esp_err *err);
/* How many leading parts of key_path (a.b.c) the file composed over its template has (no
 * overrides, no interpolation): the command line routes an override to the configs that know
 * most of its key. */
/* ESPnet3's older names of inference_dir (decode_dir, infer_dir): a config or command line that sets
 * one and not inference_dir means that folder (config_load). */
extern const char *const config_older_inference_dir_names[2];

int config_key_depth(config_kind kind, const char *path, const config_load_opts *opts, const char *key_path,
                     int *depth, esp_err *err);
void config_free(esp_config *cfg);
/* "<file>:<line>:<col>: <key>" where a key of cfg's tree was written ("<file>: <key>" when it was
 * not), for messages about it; caller frees. */
char *config_where(const esp_config *cfg, const char *key);
/* Writes the resolved config as YAML (atomically). */
int config_write_resolved(const esp_config *cfg, const char *path, esp_err *err);
const char *config_kind_name(config_kind kind);
const char *config_kind_option(config_kind kind); /* --training_config etc. */

#endif
