/* Files on disk: atomic writes (temp file + fsync + rename), mkdir -p, whole-file reads. */
#ifndef ESPNET3_FSIO_H
#define ESPNET3_FSIO_H

#include <stdio.h>
#include "core/base/log.h"

/* An open atomic write: data goes to "<path>.tmp.<pid>" and appears at <path> only on commit. */
typedef struct atomic_file {
    FILE *fp;
    char *path;
    char *tmp_path;
} atomic_file;

int atomic_open(atomic_file *af, const char *path, esp_err *err);
/* fflush + fsync + rename + fsync of the directory; on failure the temp file is removed. */
int atomic_commit(atomic_file *af, esp_err *err);
/* Drops the temp file; safe to call after a failed or successful commit. */
void atomic_abort(atomic_file *af);
/* Writes a whole buffer atomically. */
int atomic_write_file(const char *path, const void *data, size_t len, esp_err *err);

/* mkdir -p; errors name the path and the reason. */
int mkdir_p(const char *path, esp_err *err);
/* What a whole-file read may be: a file over its kind's size is an error before a byte is read
 * (the limits: core/base/fsio.c). SMALL: configs, templates, scripts, state files; LIST: scp,
 * manifests, token lists, text corpora, audio; MODEL: model and array files. */
typedef enum read_kind { READ_SMALL, READ_LIST, READ_MODEL } read_kind;
/* Reads a whole regular file of `kind` into a NUL-terminated buffer (caller frees); a device, FIFO
 * or folder is an error ("not a regular file"), never read, and so is a file over the kind's size. */
char *read_file(const char *path, read_kind kind, size_t *len_out, esp_err *err);
/* Splits buf (NUL-terminated, changed in place) into lines and calls fn with each, its '\n' and a
 * trailing '\r' removed, and its 1-based number; empty lines too (the caller decides what they
 * mean). Stops at the first fn that returns non-zero and returns that value. */
typedef int (*line_fn)(void *ctx, char *line, size_t lineno, esp_err *err);
int for_each_line(char *buf, line_fn fn, void *ctx, esp_err *err);
int path_exists(const char *path);
int is_dir(const char *path);
/* Directory part of a path ("." when none); caller frees. */
char *path_dirname(const char *path);
/* File name without directory and without the last extension; caller frees. */
char *path_stem(const char *path);
/* a/b joined; b returned as is when absolute. Caller frees. */
char *path_join(const char *a, const char *b);
/* Lexically normalized path ("a/b/../c" -> "a/c"); caller frees. */
char *path_normalize(const char *path);
/* Absolute, normalized form of a path relative to the working directory; caller frees. */
char *path_absolute(const char *path);
/* rm -rf without following symlinks; missing paths are fine. */
void remove_tree(const char *path);
/* Finds an executable on PATH; returns 1 when found. */
int which(const char *prog);

#endif
