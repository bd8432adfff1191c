/* What ESPnet3's publication stages share (pack_model with a publication config, upload_model,
 * pack_demo, upload_demo): paths with globs, copying with exclude patterns, README templates, and
 * the Hugging Face command-line upload. Semantics as espnet3/utils/publish.py. */
#ifndef ESPNET3_PUBLISH_FILES_H
#define ESPNET3_PUBLISH_FILES_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/config/config.h"

/* The paths a pack list names: a path without glob characters as it is (existing or not), a
 * pattern (* ? [ and ** for any depth) relative to root matched against the files and folders
 * there, in sorted order; a pattern that matches nothing is a warning. Duplicates dropped.
 * *out: caller frees each and the array. */
size_t pack_expand(const char *const *raw, size_t n, const char *root, char ***out);

/* Whether a pattern matches a relative path as ESPnet3's exclude test does (fnmatch on the path,
 * its base name and "**" + "/" + path, with a trailing / for folders; * crosses /). */
int pack_excluded(const char *rel, int is_dir, const char *const *patterns, size_t n);

/* Copies a file or a folder tree (files whose relative path an exclude pattern matches, and
 * folders likewise, left out) to dst, making folders as needed. */
int pack_copy(const char *src, const char *dst, const char *const *excludes, size_t n_ex, esp_err *err);

/* A template with ${key} (and $key, $$) placeholders filled from keys/values (n of them): a line
 * holding a ${key} whose value is missing or empty is dropped, as ESPnet3's _render_readme does;
 * other unknown placeholders stay as written. Caller frees. */
char *readme_render(const char *tmpl, const char *const *keys, const char *const *values, size_t n);

/* The string values of a free-form map in a config tree (readme_context), appended to keys/values
 * (later entries win when rendered: they replace earlier ones of the same key). */
void readme_context_add(const ynode *map, const char ***keys, const char ***values, size_t *n);

/* Puts the finished folder staging in place of out (an old out goes only once the new one is
 * there); on error out is as it was and staging is removed. */
int pack_swap_into_place(const char *staging, const char *out, esp_err *err);

/* upload_model / upload_demo: the folder a pack stage made (made_by names that stage) sent to the
 * repo its config's <section>.hf_repo names, as repo_type (model | space). */
int upload_stage(const esp_config *c, const char *section, const upload_cfg *up, const char *folder,
                 const char *repo_type, const char *made_by, esp_err *err);

/* Uploads folder to a Hugging Face repo of repo_type (model | space) with the Hugging Face CLI
 * (`hf`, else `huggingface-cli`, from PATH): one error naming the folder that is ready to upload
 * when no CLI is installed or the upload fails (the hub unreachable, no token). where names the
 * config key in messages. */
int hf_upload(const char *where, const char *repo, const char *folder, const char *repo_type, esp_err *err);

#endif
