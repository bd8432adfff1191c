/* The bridge to a recipe's own Python (its dataset/ package, src.* functions): runs the user's
 * interpreter on core/data/py_helper.py (linked into the binary) as a separate process and reads
 * its records from a pipe on the child's descriptor 3. Only data preparation uses it (stage 1, the
 * tokenizer's text, the export of a Python dataset); training, collect_stats and decoding never do. */
#ifndef ESPNET3_PY_BRIDGE_H
#define ESPNET3_PY_BRIDGE_H

#include <jansson.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/base/log.h"

/* Where the recipe's Python runs: the interpreter and the import path ESPnet3's run.py gives it. */
typedef struct py_env {
    const char *python;     /* NULL: $ESPNET3_PYTHON, else python3 */
    const char *recipe_dir; /* the recipe folder (sys.path gets it, and the parent of egs3/ above it) */
} py_env;

typedef struct py_bridge {
    pid_t pid;
    FILE *in;           /* the records */
    char *python;       /* the interpreter run */
    char *where;        /* "conf/x.yaml:12:5: dataset.train[0]": what named the Python, for messages */
    char *req_file;     /* a large request's temp file (removed by py_bridge_finish) */
} py_bridge;

/* The interpreter env names (python, else $ESPNET3_PYTHON, else python3); caller frees. */
char *py_interpreter(const py_env *env);

/* Starts the helper in mode (build | call | export) with request (a JSON object; sys_path is added
 * to it). `where` prefixes every message. A missing interpreter is one error naming it. */
int py_bridge_start(py_bridge *b, const py_env *env, const char *mode, json_t *request, const char *where,
                    esp_err *err);
/* The next record into *rec (caller json_decref): 1, or 0 after the helper's {"end": true}, or -1
 * with err set: the helper's exception (type, message, innermost frame), a broken stream. */
int py_bridge_next(py_bridge *b, json_t **rec, esp_err *err);
/* n bytes that follow the last record. */
int py_bridge_read(py_bridge *b, void *buf, size_t n, esp_err *err);
/* Waits for the helper; its exit status must be 0. After an error, ends it first. */
int py_bridge_finish(py_bridge *b, int failed, esp_err *err);

#endif
