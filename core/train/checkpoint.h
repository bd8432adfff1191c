/* Checkpoints of a training run, in ${exp_dir}:
 *
 *   checkpoints/epoch=<E>-step=<S>/model.safetensors          weights, ESPnet2 parameter names
 *   checkpoints/epoch=<E>-step=<S>/trainer_state.safetensors  optimizer moments and other tensors
 *   checkpoints/epoch=<E>-step=<S>/trainer_state.json         epoch, step, metrics, RNG state,
 *                                                             counters (data position), config hash,
 *                                                             the best-k tables
 *   last -> checkpoints/epoch=<E>-step=<S>                    the newest complete checkpoint
 *   <monitor>.ave_<n>best.safetensors                         mean of the n best models ('/' -> '.',
 *   <monitor>.ave.safetensors -> <monitor>.ave_<n>best...      so valid/loss gives valid.loss.ave_3best,
 *                                                             ESPnet2's average_nbest_models names)
 *   last.ckpt, epoch<E>_step<S>_<monitor>.ckpt,               ESPnet3's names of the same models, for
 *   <monitor>.ave_<n>best.pth                                 torch.load (core/train/checkpoint_espnet3.c)
 *
 * A checkpoint is written into a hidden temporary directory, each file fsynced, and only then renamed
 * to its epoch=...-step=... name; `last` is swapped atomically (symlink to a temp name + rename)
 * afterwards, and checkpoints that fell out of every top-k are deleted only after that. So a crash
 * at any point leaves `last` pointing at a complete checkpoint, and every epoch=... directory is
 * complete. One process (rank 0) manages an exp_dir. */
#ifndef ESPNET3_CHECKPOINT_H
#define ESPNET3_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "core/config/config_types.h"
#include "core/base/log.h"
#include "core/formats/metrics_csv.h"
#include "core/formats/safetensors.h"

/* A named integer the trainer wants back on resume (data position, NaN streak, ...). */
typedef struct ckpt_counter {
    const char *name;
    int64_t value;
} ckpt_counter;

/* What the trainer saves beside the tensors. */
typedef struct ckpt_info {
    int64_t epoch;                 /* epochs completed */
    int64_t step;                  /* optimizer steps done */
    const metric *metrics;         /* this checkpoint's values, e.g. valid/loss; they rank it */
    size_t n_metrics;
    const uint64_t *rng;           /* generator states, stored exactly */
    size_t n_rng;
    const ckpt_counter *counters;
    size_t n_counters;
    const char *config_hash;       /* of the resolved config; NULL for none */
    int in_epoch;                  /* saved inside epoch `epoch` (0-based: epochs completed), not at an end */
} ckpt_info;

/* One ranked checkpoint of a best-k table. */
typedef struct ckpt_entry {
    char *dir;                     /* name under checkpoints/ */
    int64_t epoch, step;
    double value;
    int in_epoch;                  /* saved inside epoch `epoch` (after a validation there) */
} ckpt_entry;

/* best_model_criterion item [monitor, k, min|max]: its k best checkpoints, best first. */
typedef struct ckpt_table {
    char *monitor;
    int64_t k;
    int maximize;
    ckpt_entry *entries;
    size_t n;
} ckpt_table;

typedef struct ckpt_manager {
    char *exp_dir;
    char *ckpt_dir;                /* <exp_dir>/checkpoints */
    ckpt_table *tables;
    size_t n_tables;
    char *last;                    /* name under checkpoints/ of the newest complete one, or NULL */
} ckpt_manager;

/* A loaded checkpoint; names and arrays are owned, tensors map the files. */
typedef struct ckpt_loaded {
    char *dir;                     /* full path */
    int64_t epoch, step;
    char *config_hash;             /* NULL when none was saved */
    metric *metrics;
    size_t n_metrics;
    uint64_t *rng;
    size_t n_rng;
    ckpt_counter *counters;
    size_t n_counters;
    st_file model, state;
} ckpt_loaded;

/* Opens <exp_dir> (created if needed) with the run's best_model_criterion. Finds the newest complete
 * checkpoint (`last`, or when that link is missing or broken the newest complete epoch=... directory),
 * restores the best-k tables it recorded (k and mode from `crit`), and removes leftovers of a crash:
 * temporary directories and checkpoints no table or `last` refers to. */
int ckpt_open(ckpt_manager *m, const char *exp_dir, const criterion_cfg *crit, size_t n_crit, esp_err *err);

/* Writes a checkpoint for `info` (see the file comment for the order of operations), ranks it in each
 * table whose monitor is among info->metrics, points `last` at it and deletes checkpoints that are
 * neither `last` nor in a table. On error `last` and every kept checkpoint are untouched. */
int ckpt_save(ckpt_manager *m, const ckpt_info *info, const st_tensor *model, size_t n_model,
              const st_tensor *state, size_t n_state, esp_err *err);

/* Loads the checkpoint `last` names. Returns 0 when loaded, 1 when there is none, -1 on error. */
int ckpt_load_last(const ckpt_manager *m, ckpt_loaded *out, esp_err *err);
/* Loads the checkpoint directory `dir` (one of checkpoints/epoch=E-step=S, of any exp_dir). */
int ckpt_load_dir(const char *dir, ckpt_loaded *out, esp_err *err);
void ckpt_loaded_free(ckpt_loaded *c);
/* A counter of a loaded checkpoint, or `dflt` when it was not saved. */
int64_t ckpt_counter_get(const ckpt_loaded *c, const char *name, int64_t dflt);

/* For each table with entries: averages their models into <monitor>.ave_<n>best.safetensors and
 * points <monitor>.ave.safetensors at it; then writes ESPnet3's names (ckpt_write_espnet3_names). */
int ckpt_average(const ckpt_manager *m, esp_err *err);

/* ESPnet3's checkpoint files of the run, from ours: last.ckpt, epoch<E>_step<S>_<monitor>.ckpt for
 * every best-k entry (others removed), <monitor>.ave_<n>best.pth (core/train/checkpoint_espnet3.c). */
int ckpt_write_espnet3_names(const ckpt_manager *m, esp_err *err);

/* Element-wise mean of the float tensors (F32, F64; summed in double) of n model files with the same
 * names, dtypes and shapes; integer and bool tensors are copied from inputs[newest], whose names the
 * output has (an older file may use espnet3's older names). Atomic write. */
int ckpt_average_files(const char *out_path, const char *const *inputs, size_t n, size_t newest, esp_err *err);

/* "valid/loss" -> "valid.loss", the file-name form of a monitor; caller frees. */
char *ckpt_monitor_file_name(const char *monitor);

void ckpt_close(ckpt_manager *m);

/* Tests only: when set, called at each step of ckpt_save ("model", "state", "json", "renamed",
 * "linked", "pruned") so a test can kill the process there. */
extern void (*ckpt_crash_hook)(const char *point);

#endif
