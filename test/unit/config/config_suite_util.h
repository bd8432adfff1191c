/* Helpers of suite `config` (test_config.c, test_config_typed.c, test_config_recipes.c): the
 * suite's temporary folder, fixtures written into it, loading and resolving configs with their
 * errors, and stderr capture. The suite is declared once, in test_config.c. Criterion assertions
 * report failures. */
#ifndef ESPNET3_CONFIG_SUITE_UTIL_H
#define ESPNET3_CONFIG_SUITE_UTIL_H

#include <stdio.h>
#include <string.h>

#include "core/config/config.h"
#include "core/config/yamltree.h"

/* The test's temporary folder, made by config_suite_setup and removed by config_suite_teardown. */
extern char config_tmp[256];
void config_suite_setup(void);
void config_suite_teardown(void);

/* A path under the temporary folder (ring of static buffers: no frees in the tests). */
const char *tpath(const char *rel);
/* Writes tmp/rel (creating its folders) and returns its path. */
const char *fixture(const char *rel, const char *text);

/* Loads a training config from a file, no template. */
int load_file(const char *path, const char **ov, int n_ov, esp_config **cfg, esp_err *err);
/* Writes text to tmp/cfg.yaml and loads it as a training config. */
int load_text(const char *text, esp_config **cfg, esp_err *err);
/* Loads and asserts success; returns the typed view. */
const training_cfg *must_load(const char *text, esp_config **cfg);
/* Loads text as a training config and expects an error; returns the message (static). */
const char *load_error(const char *text);

/* Composes and interpolates (no validation) so arbitrary keys can be inspected. */
ynode *resolve_file(const char *path, const char **ov, int n_ov, esp_err *err);
ynode *must_resolve(const char *text);
/* Resolves text and expects an error; returns the message (static). */
const char *resolve_error(const char *text);

/* Scalar text at path, or a marker when missing or not a scalar. */
const char *sval(const ynode *root, const char *path);

/* Sends stderr to tmp/stderr.txt until capture_end, which returns what was written (static). */
void capture_begin(void);
const char *capture_end(void);
/* Lines of text that contain piece. */
int count_lines_with(const char *text, const char *piece);

/* Asserts that msg contains the printf-formatted piece. */
#define assert_has(msg, ...)                                                                      \
    do {                                                                                          \
        char piece_[1024];                                                                        \
        snprintf(piece_, sizeof piece_, __VA_ARGS__);                                             \
        cr_assert(strstr((msg), piece_) != NULL, "message:\n  %s\nlacks:\n  %s", (msg), piece_); \
    } while (0)

#endif
