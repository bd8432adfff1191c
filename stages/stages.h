/* The stage table: number, name, alias, which config a stage needs, and its function.
 * Numbers follow DESIGN.md (`--stage 5 --stop_stage 5` is train); names follow ESPnet3's run.py. */
#ifndef ESPNET3_STAGES_H
#define ESPNET3_STAGES_H

#include "core/compute/backend.h"
#include "core/config/config.h"
#include "core/base/log.h"

/* Which of the loaded configs a stage reads: one kind (the config_kind's value), or NEEDS_PACK. */
typedef enum stage_config_kind {
    NEEDS_TRAINING = CONFIG_TRAINING,
    NEEDS_INFERENCE = CONFIG_INFERENCE,
    NEEDS_METRICS = CONFIG_METRICS,
    NEEDS_PUBLICATION = CONFIG_PUBLICATION,
    NEEDS_DEMO = CONFIG_DEMO,
    NEEDS_PACK, /* pack_model: the publication config (ESPnet3's folder), else the inference config (ours) */
} stage_config_kind;

/* The config a stage runs with (NULL: not given), and the option that gives it. */
struct stage_def;
const esp_config *stage_config(const struct stage_def *s, const esp_configs *c);
const char *stage_config_option(const struct stage_def *s);

typedef struct stage_ctx {
    const esp_configs *configs; /* loaded, resolved, validated configs (some may be absent) */
    const char *log_dir;        /* the stage's output folder, where <stage>.log is written */
    backend_kind backend;       /* what a STAGE_NEEDS_BACKEND stage computes on (stage_backend), resolved
                                 * once by the CLI before any stage runs */
} stage_ctx;

/* 0: done; -1: failed, err says why; STAGE_STOPPED: stopped early on request with its state saved
 * (stage 5: a signal or trainer.max_time), the same command resumes it. */
typedef int (*stage_fn)(const stage_ctx *ctx, esp_err *err);
enum { STAGE_STOPPED = 1 };

/* Properties of a stage that the CLI acts on. */
enum stage_flags {
    STAGE_SPAWNS_RANKS = 1 << 0,  /* runs as trainer.devices x trainer.num_nodes ranks: the CLI launches
                                   * the local ones (cli/launch.c), rank 0 owns the stage log */
    STAGE_NEEDS_BACKEND = 1 << 1, /* computes on a backend: the accelerator it names is checked before
                                   * any stage runs (stage_backend) */
};

typedef struct stage_def {
    int number;
    const char *name;
    const char *alias;          /* decode for infer, score for measure; NULL if none */
    stage_config_kind needs;
    unsigned flags;             /* enum stage_flags */
    const char *summary;        /* one line for --help and --dry_run */
    stage_fn run;               /* NULL: reserved number, never selected */
    /* Output folder of the stage (its <stage>.log goes there); caller frees. */
    char *(*output_dir)(const esp_configs *configs);
    /* What the stage reads from its config tree beyond the schema, checked before any stage runs
     * (a bad key fails at once, not after the stages before it); NULL: nothing. */
    int (*check)(const esp_configs *configs, esp_err *err);
} stage_def;

extern const stage_def stage_table[];
extern const int stage_count;

const stage_def *stage_by_name(const char *name); /* name or alias */
const stage_def *stage_by_number(int number);

/* The backend a stage computes on: for a STAGE_NEEDS_BACKEND stage the one its config's accelerator
 * names (trainer.accelerator for training, the inference model's `device`; auto when unset:
 * backend_kind_for), else BACKEND_CPU. -1 with err at the key's line when this build or machine
 * cannot open it. */
int stage_backend(const stage_def *s, const esp_configs *c, backend_kind *out, esp_err *err);

/* Stage functions, one file each. */
/* Hands the recipes' own keys (recipes/registry.h) to the config layer: called once, before any
 * config is loaded (core/config/config_recipe.h). */
void stages_register_recipes(void);
int stage_create_dataset(const stage_ctx *ctx, esp_err *err);
/* ESPnet3's publication stages (stages/publish.c, stages/pack_demo.c). */
int stage_upload_model(const stage_ctx *ctx, esp_err *err);
int stage_pack_demo(const stage_ctx *ctx, esp_err *err);
int stage_upload_demo(const stage_ctx *ctx, esp_err *err);
/* pack_model with a publication config: ESPnet3's Hugging Face model folder (stages/publish.c). */
int stage_pack_model_publication(const stage_ctx *ctx, esp_err *err);
int stage_train_tokenizer(const stage_ctx *ctx, esp_err *err);
/* The config checks of train (the data_aug_* keys and what they need of the sample rate; the
 * rules of speed_perturb_factors and data_aug_num are the config load's). */
int stage_train_check(const esp_configs *configs, esp_err *err);
int stage_collect_stats(const stage_ctx *ctx, esp_err *err);
int stage_train(const stage_ctx *ctx, esp_err *err);
int stage_infer(const stage_ctx *ctx, esp_err *err);
int stage_pack_model(const stage_ctx *ctx, esp_err *err);
int stage_measure(const stage_ctx *ctx, esp_err *err);

#endif
