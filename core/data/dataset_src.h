/* ESPnet3's `dataset:` block turned into manifests: a split is a list of sources read one after
 * the other (train/valid entries concatenate; a test entry is decoded under its name). A source is
 * the recipe's own Python dataset (its dataset/ package, a tag or a module/class path: exported
 * once by core/data/py_export.c), the manifests of a built-in recipe's builder (data_src left out:
 * ${data_dir}/manifest/<split>.tsv), a manifest .tsv, a Kaldi data dir, a LibriSpeech tree or an AN4
 * tree. Without a `dataset:` block the splits are ${data_dir}/manifest/<split>.tsv. */
#ifndef ESPNET3_DATASET_SRC_H
#define ESPNET3_DATASET_SRC_H

#include "core/base/log.h"
#include "core/config/config_types.h"
#include "core/formats/manifest.h"

/* What reading a source needs beyond its entry: where the recipe's manifests are and, for a
 * Python source (the recipe's dataset/ package, a module or class path), how its Python runs and
 * what its items must be (core/data/py_export.h: exported once, then read as a manifest). */
typedef struct dataset_read_ctx {
    const char *data_dir;
    const char *recipe_dir; /* the folder the recipe's Python runs in (NULL: ".") */
    const char *python;     /* NULL: $ESPNET3_PYTHON, else python3 */
    long fs;                /* the frontend's rate (0: not checked at export; the audio reader checks it) */
    int resample;           /* dataset.resample */
    int need_text;          /* training data: every item has its transcript */
} dataset_read_ctx;

/* The rate a training config's frontend reads (model.frontend_conf.fs, default 16000). */
long dataset_frontend_fs(const training_cfg *cfg);

/* The context of a training config's splits (need_text set) and of an inference config's test sets
 * decoded by a model whose frontend reads fs Hz. */
dataset_read_ctx dataset_read_ctx_training(const training_cfg *cfg);
dataset_read_ctx dataset_read_ctx_inference(const inference_cfg *icfg, long fs);

/* Reads the n sources of refs in order into out; `what` names the list in messages
 * ("dataset.valid"). An utterance id that two sources share is an error naming both. */
int dataset_refs_load(const dataset_ref_cfg *refs, unsigned n, const dataset_read_ctx *ctx, const char *what,
                      manifest *out, esp_err *err);

/* The training config's split "train" or "valid" as the data prep made it: dataset.<split> when the
 * block lists it, else ${data_dir}/manifest/<split>.tsv. *desc (may be NULL; caller frees) names
 * where it came from. The tokenizer and the speed perturbation read this. */
int dataset_split_load_original(const training_cfg *cfg, const char *split, manifest *out, char **desc,
                                esp_err *err);
/* The split as training and collect_stats read it: the original, except "train" with
 * speed_perturb_factors, which is the perturbed list stage 3 wrote (train_sp.tsv). */
int dataset_split_load(const training_cfg *cfg, const char *split, manifest *out, char **desc, esp_err *err);

/* Test sets of an inference or metrics config: dataset.test names when given, else test_sets.
 * Returns the count; names are borrowed from the config. */
unsigned dataset_test_names(const dataset_cfg *ds, char **test_sets, unsigned n_test_sets, const char **names,
                            unsigned cap);

/* The test set `name` of an inference config: its dataset.test entry when the block lists it,
 * else ${data_dir}/manifest/<name>.tsv. fs: the model's frontend rate (a Python entry's items
 * must have it). */
int dataset_test_load(const inference_cfg *icfg, const char *name, long fs, manifest *out, char **desc,
                      esp_err *err);

/* ESPnet2's preprocessor settings as espnet3 maps them: the training config's top-level token_type
 * / bpemodel, else dataset.preprocessor's (NULL: neither; the tokenizer block decides). */
const char *dataset_token_type(const training_cfg *cfg);
const char *dataset_bpemodel(const training_cfg *cfg);
/* dataset.preprocessor.fs must be the frontend's rate (model.frontend_conf.fs, default 16000):
 * espnet3 has one rate per model. file names the config in the error. */
int dataset_check_preprocessor(const training_cfg *cfg, const char *file, esp_err *err);

#endif
