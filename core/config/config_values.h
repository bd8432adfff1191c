/* The value rules of the configs, checked when a config is loaded (before any stage runs), with
 * errors "<file>:<line>:<col>: <key>: <what> (<hint>)":
 * - ranges of numbers (trainer.devices >= 1, dropout rates in [0, 1), ...). The typed structs read
 *   a key that was left out as 0 and the stages then use their default, so a value WRITTEN as 0
 *   where 0 means nothing is an error here (it would silently mean "default"), while a key left
 *   out (or null) keeps its default;
 * - rules between keys (the batch type and batch_size / batch_bins, win_length <= n_fft, ...;
 *   core/config/config_rules.c);
 * - Lightning's meanings of trainer.max_epochs, written into the tree and logged:
 *   absent or null -> 1000 (Lightning's default) when trainer.max_steps is unset, -1 otherwise;
 *   -1 stays -1: no epoch limit, training runs until max_steps or until it is stopped;
 * - ESPnet2's defaults that are not 0 / false (switches that default to true, the decoder's dropout
 *   rates, model_conf.ctc_weight 0.5 with a decoder), written into blocks that leave them out. */
#ifndef ESPNET3_CONFIG_VALUES_H
#define ESPNET3_CONFIG_VALUES_H

#include <stddef.h>

#include "core/config/config.h"

/* parallel.n_workers: worker processes or SLURM jobs of one stage (its range rule; the runner
 * checks the same bound when called with a number that came from elsewhere). */
#define CFG_MAX_WORKERS 4096
/* dataset.preprocessor.data_aug_effects: entries, members of a group, and data_aug_num's bound */
#define CFG_MAX_AUG_ENTRIES 64
/* speed_perturb_factors: how many copies of the training set */
#define CFG_MAX_SPEED_FACTORS 16

/* The transducer search's defaults, ESPnet's: asr_inference's Speech2Text reads model.transducer_conf
 * (TS_DEF_*), asr_transducer_inference's model.beam_search_config (TS_DEF_AT_* where they differ).
 * The range rows' hints (config_values.c) and core/decode/transducer_search.h's ts_opts are made
 * from these. */
#define TS_DEF_MAX_SYM_EXP 2
#define TS_DEF_AT_MAX_SYM_EXP 3
#define TS_DEF_U_MAX 50
#define TS_DEF_NSTEP 1
#define TS_DEF_AT_NSTEP 2
#define TS_DEF_PREFIX_ALPHA 1
#define TS_DEF_EXPANSION_GAMMA 2.3
#define TS_DEF_EXPANSION_BETA 2
#define TS_DEF_SCORE_NORM 1
#define TS_DEF_AT_SCORE_NORM 0
#define TS_DEF_NBEST 1

/* A range rule of a number (core/config/config_values.c's num_rules; a recipe's own in its table,
 * core/config/config_recipe.h). */
enum {
    LO_OPEN = 1,   /* lo itself is not allowed */
    HI_OPEN = 2,   /* hi itself is not allowed */
    MINUS_ONE = 4, /* -1 is allowed too (Lightning's "no limit") */
    EVEN = 8,      /* an even number */
    /* Lightning's int-or-float keys: a float in (0, 1] is a fraction, an integer >= 2 a count of
     * batches. The typed field is a double, where 1 and 1.0 read the same: the integer 1 (one batch
     * in Lightning) is refused rather than read as all batches. */
    COUNT_OR_FRACTION = 16,
    INT_ONE_OK = 32, /* with COUNT_OR_FRACTION: the integer 1 is one batch (the value stays typed as written) */
    INTEGER = 64,    /* a whole number (for lists read from the tree, where no int field types it) */
};

typedef struct config_range {
    const char *path; /* schema path: '*' one component, "[]" a list item */
    double lo, hi;
    unsigned flags;
    const char *need; /* what the value must be, as printed */
    const char *hint;
} config_range;

/* A key's default (core/config/config_values.c's table): the value a key left out takes. */
typedef struct config_default {
    config_kind kind;
    const char *path;  /* schema path, no list items */
    const char *value; /* as YAML writes it; "[a, b]" is a list */
    unsigned flags;    /* CONFIG_MAKE_BLOCK: write the blocks above it too */
    const char *when;  /* NULL, or the other key it depends on (a path from the root): "k" when k is
                        * set, "!k" when it is not, "k!=v" when k is not v (left out counts as not v) */
} config_default;
enum { CONFIG_MAKE_BLOCK = 1 };

const config_default *config_defaults(size_t *n);
/* The default of the key at schema_path in any config kind, or NULL. */
const char *config_default_value(const char *schema_path);
/* Writes the default of every key of `kind` that root leaves out (the typed view's tree): the
 * aliases' values into their keys, then key_defaults, then ESPnet2's switches of blocks made. */
void config_fill_left_out(config_kind kind, ynode *root);
/* The same for a table of defaults declared elsewhere (a recipe's keys). */
void config_fill_declared(const config_default *table, size_t n, config_kind kind, ynode *root);

/* The range rule of the number n (already typed as v) at schema_path, if there is one. */
int config_check_number(const ynode *n, const char *schema_path, const char *path, double v, esp_err *err);
/* The same against a table of rules declared elsewhere (a recipe's). */
int config_check_range(const config_range *rules, size_t n_rules, const ynode *n, const char *schema_path,
                       const char *path, double v, esp_err *err);
/* A number read from the tree where no typed field holds it (the entries of data_aug_effects,
 * core/config/config_aug.c): an unquoted finite number, in its range rule at schema_path. */
int config_read_number(const ynode *n, const char *schema_path, const char *path, double *out, esp_err *err);
/* dataset.preprocessor.noise_db_range, ESPnet's "low_high" SNR in dB ("5" is [5, 5]). */
int config_db_range(const ynode *n, const char *path, double *lo, double *hi, esp_err *err);
/* The same from the typed string, which the load has checked: 1 when it is a range. */
int config_db_range_of(const char *s, double *lo, double *hi);
/* ESPnet2's true-by-default switches (model.specaug_conf.apply_time_warp, ...). */
void config_fill_defaults(config_kind kind, ynode *root);
/* Rules between keys and Lightning's max_epochs, on the validated tree. */
int config_check_values(config_kind kind, ynode *root, esp_err *err);

#endif
