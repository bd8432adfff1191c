/* A generic YAML document tree read with libyaml. Every node remembers where it was written
 * (file:line:column) so that errors found after composition and interpolation still point at
 * the user's text. */
#ifndef ESPNET3_YAMLTREE_H
#define ESPNET3_YAMLTREE_H

#include <stddef.h>
#include <stdint.h>
#include "core/base/log.h"

typedef enum ynode_kind { YN_SCALAR, YN_MAP, YN_SEQ } ynode_kind;

typedef struct ymark {
    const char *file; /* interned: lives as long as the process */
    int line, col;    /* 1-based; line 0 means unknown */
} ymark;

typedef struct ynode {
    ynode_kind kind;
    char *str;            /* scalar text */
    int quoted;           /* written quoted or as a block scalar: always a string */
    int resolved;         /* interpolation already applied (its text may hold a literal "${") */
    int resolving;        /* interpolation in progress (cycle detection; never copied) */
    size_t n, cap;        /* children */
    char **keys;          /* map keys (n of them) */
    ymark *key_marks;     /* where each map key was written */
    struct ynode **items; /* map values or sequence items */
    struct yindex *index; /* hash index of the keys of a large mapping (NULL: scan the keys) */
    ymark mark;           /* where this value was written */
    ymark via;            /* where an interpolation brought it in from (line 0: none) */
} ynode;

/* Returns a string kept for the rest of the process (file names in marks). */
const char *intern(const char *s);

ynode *yt_parse_file(const char *path, esp_err *err);
/* The same, and *empty tells whether the file held no document or a null one (an empty file,
 * only comments, `~`): both parse as an empty mapping. */
ynode *yt_parse_file_doc(const char *path, int *empty, esp_err *err);
ynode *yt_parse_string(const char *text, size_t len, const char *name, esp_err *err);

ynode *yt_scalar(const char *s, int quoted, ymark mark);
ynode *yt_map(ymark mark);
ynode *yt_seq(ymark mark);
void yt_free(ynode *n);
ynode *yt_copy(const ynode *n);
/* Moves src's value (kind, text, children) into dst, whose own value is freed; dst keeps its
 * marks and flags, src's shell is freed. Parents of dst keep their pointer. */
void yt_take(ynode *dst, ynode *src);
/* What copying n costs: bytes of text (scalars and keys) plus YT_NODE_COST per value (about what
 * a node takes in memory), and how many levels of mappings and lists it has (0 for a scalar). */
#define YT_NODE_COST 128
void yt_measure(const ynode *n, size_t *bytes, int *height);

ynode *yt_map_get(const ynode *map, const char *key);
ptrdiff_t yt_map_index(const ynode *map, const char *key);
/* Stores value under key (replacing and freeing an existing value); takes ownership. */
void yt_map_set(ynode *map, const char *key, ymark key_mark, ynode *value);
/* Removes and frees key; returns 1 if it was there. */
int yt_map_remove(ynode *map, const char *key);
void yt_seq_push(ynode *seq, ynode *item);

/* Deep merge: maps merge key by key, anything else in src replaces dst. src is left intact. */
void yt_merge(ynode *dst, const ynode *src);

/* Path lookup: "a.b", "a.b[0].c", "a.b.0" (a number indexes a sequence). */
ynode *yt_get_path(const ynode *root, const char *path);

/* Scalar classification, YAML 1.1 core as OmegaConf reads it. */
int yt_is_null(const ynode *n);
int yt_as_int(const ynode *n, int64_t *out);
int yt_as_float(const ynode *n, double *out);
int yt_as_bool(const ynode *n, int *out);
const char *yt_kind_name(const ynode *n); /* "mapping", "list", "null", "integer", "string"... */

/* YAML text of a tree (caller frees). */
char *yt_emit(const ynode *root, size_t *len_out);
/* The same, but a resolved literal "${" is written as "\${" so the text re-loads to the same values. */
char *yt_emit_config(const ynode *root, size_t *len_out);
/* 1 when s is valid UTF-8 (libyaml can only emit such text). */
int utf8_valid(const char *s);

/* "file:line:col" of a mark, into buf. */
const char *ymark_str(ymark m, char *buf, size_t n);

#endif
