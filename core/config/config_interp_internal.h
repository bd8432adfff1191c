/* Shared by the two halves of interpolation: config_interp.c (walking the tree, references,
 * strings, limits) and config_resolvers.c (${name:args}). Not for use outside core/config. */
#ifndef ESPNET3_CONFIG_INTERP_INTERNAL_H
#define ESPNET3_CONFIG_INTERP_INTERNAL_H

#include <stddef.h>

#include "core/config/config_interp.h"

typedef struct interp {
    ynode *root;
    const interp_opts *opts;
    esp_err *err;
    char **stack;      /* keys being resolved, outermost first: cycle chains in error messages */
    size_t depth, cap; /* entries in stack (at most CFG_MAX_REF_CHAIN) */
    int nesting;       /* values being resolved inside others (at most CFG_MAX_REF_NESTING) */
    int eval;          /* evaluation levels in progress (at most CFG_MAX_EVAL_DEPTH) */
    size_t expanded;   /* bytes produced so far (at most CFG_MAX_EXPANDED_BYTES) */
    int loads;         /* ${load_yaml:...} files being resolved inside each other (CFG_MAX_LOAD_YAML_DEPTH) */
} interp;

/* "<file>:<line>:<col>: <what>" at the value `at`; returns -1. */
int interp_fail(interp *in, const ynode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "a -> b -> c" of the keys being resolved (plus last), into buf. */
void interp_chain_str(const interp *in, const char *last, char *buf, size_t n);
/* Counts bytes that interpolation produces; an error at `at` past CFG_MAX_EXPANDED_BYTES. */
int interp_spend(interp *in, const ynode *at, size_t bytes);

/* Absolute path of a reference written in the value at `here` (relative ones start with dots). */
char *interp_absolute_ref(const char *here, const char *ref);
/* The resolved value a reference names (NULL with the error set). */
ynode *interp_lookup(interp *in, ynode *at, const char *here, const char *ref);
/* A copy of the resolved value t for the value at `here`: counted against the expansion and
 * depth limits (NULL with the error set). */
ynode *interp_copy(interp *in, const ynode *at, const char *here, const ynode *t);
/* The value at `key` ("" for the whole tree) of another tree, `root` (a file ${load_yaml:...}
 * read), resolved against that tree's own keys, copied for the value at `here`. NULL with the
 * error set; a missing key is reported naming `what` (the resolver call as written). */
ynode *interp_select_in(interp *in, ynode *at, const char *here, ynode *root, const char *key, const char *what);
/* Evaluates a string that may hold ${...}; *whole is set when it was exactly one ${...}. */
ynode *interp_eval_string(interp *in, ynode *at, const char *here, const char *s, int *whole);

/* ${name:args}: self_name, config_path, load_line, load_yaml, oc.env, oc.select (config_resolvers.c). */
ynode *interp_call_resolver(interp *in, ynode *at, const char *here, const char *name, const char *argstr);

#endif
