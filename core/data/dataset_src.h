/* ESPnet3's `dataset:` block turned into manifests: a split is a list of sources read one after
 * the other (train/valid entries concatenate; a test entry is decoded under its name). A source is
 * the recipe's own dataset (data_src left out: ${data_dir}/manifest/<split>.tsv as create_dataset
 * wrote it), a manifest .tsv, a Kaldi data dir, a LibriSpeech tree or an AN4 tree. Without a
 * `dataset:` block the splits are ${data_dir}/manifest/<split>.tsv (our test_sets shorthand). */
#ifndef ESPNET3_DATASET_SRC_H
#define ESPNET3_DATASET_SRC_H

#include "core/base/log.h"
#include "core/config/config_types.h"
#include "core/formats/manifest.h"

/* Reads the n sources of refs in order into out; `what` names the list in messages
 * ("dataset.valid"). An utterance id that two sources share is an error naming both. */
int dataset_refs_load(const dataset_ref_cfg *refs, unsigned n, const char *data_dir, const char *what,
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
 * else ${data_dir}/manifest/<name>.tsv. */
int dataset_test_load(const inference_cfg *icfg, const char *name, manifest *out, char **desc, esp_err *err);

/* ESPnet2's preprocessor settings as espnet3 maps them: the training config's top-level token_type
 * / bpemodel, else dataset.preprocessor's (NULL: neither; the tokenizer block decides). */
const char *dataset_token_type(const training_cfg *cfg);
const char *dataset_bpemodel(const training_cfg *cfg);
/* dataset.preprocessor.fs must be the frontend's rate (model.frontend_conf.fs, default 16000):
 * espnet3 has one rate per model. file names the config in the error. */
int dataset_check_preprocessor(const training_cfg *cfg, const char *file, esp_err *err);

#endif
