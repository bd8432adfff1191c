/* A recipe's Python, run once for data: ESPnet3's create_dataset (the DatasetBuilder lifecycle or
 * create_dataset.func), functions that return text (tokenizer.text_builder.func), and the export of
 * a Python Dataset's items into our manifest and audio, cached by a hash of the code and arguments
 * so that a second run exports nothing and an edited (or touched) .py file exports again. */
#ifndef ESPNET3_PY_EXPORT_H
#define ESPNET3_PY_EXPORT_H

#include <jansson.h>
#include <stddef.h>

#include "core/base/log.h"
#include "core/data/py_bridge.h"

/* One dataset entry whose data are Python (core/config: config_data_src_is_python). */
typedef struct py_source {
    const char *data_src;  /* NULL: the recipe's dataset/; <recipe>/<task>; a module or class path */
    const char *args_json; /* data_src_args as a JSON object (NULL: {}) */
    const char *transform_json; /* the entry's transform ({_target_, ...} or a dotted path; NULL: none) */
    const char *where;     /* "conf/x.yaml:12:5: dataset.train[0]" */
    const char *name;      /* items without an id of their own become <name>-<index> */
} py_source;

typedef struct py_export_opts {
    py_env env;
    const char *data_dir;  /* exports go to ${data_dir}/py_export/<hash>/ */
    long fs;               /* the frontend's rate: an item at another rate is an error unless resample */
    int resample;
    int need_text;         /* training data: an item without text is an error */
} py_export_opts;

/* The manifest (utt, audio, text) of src's items, exported now unless an export of the same code
 * and arguments is there. *manifest_path: caller frees. Nothing half written stays behind. */
int py_export(const py_source *src, const py_export_opts *o, char **manifest_path, esp_err *err);

/* ESPnet3's create_dataset for Python sources: for each data_src (NULL: the recipe's dataset/),
 * <module>.DatasetBuilder(): prepare_source unless is_source_prepared, build unless is_built,
 * each called with kwargs (the create_dataset block, a JSON object). */
int py_run_builders(const py_env *env, const char *const *data_srcs, size_t n, const char *kwargs_json,
                    const char *where, esp_err *err);

/* Calls the function at a dotted path with kwargs (a JSON object). With texts set, it must return
 * strings, or a path to a text file whose lines they are: *texts (n_texts of them; caller frees
 * each and the array). */
int py_call(const py_env *env, const char *func, const char *kwargs_json, const char *where, char ***texts,
            size_t *n_texts, esp_err *err);

/* ESPnet3's inference output_fn (a dotted path) for each decoded utterance: output_fn(data,
 * model_output, idx) with data {"utt_id", "text"} (the reference) and model_output Speech2Text's
 * n-best list [(hyp, [], [], None)]. outs[i] gets utterance i's dict of fields (str, int, float or
 * bool; caller json_decref's each and frees the array). */
int py_outputs(const py_env *env, const char *func, const char *const *utt_ids, const char *const *refs,
               const char *const *hyps, size_t n, const char *where, json_t ***outs, esp_err *err);

/* The hash an export is kept under: the helper, data_src, its arguments, and the recipe's Python:
 * every .py under <recipe_dir>/dataset and /src, at its top, and below the folder above egs3/ for
 * the module data_src names (path, size, modification time and bytes of each). */
unsigned long long py_export_key(const char *recipe_dir, const char *data_src, const char *args_json,
                                 const char *transform_json);

#endif
