/* The integer arithmetic of ${...}: `${num_nodes * num_device}`, `${(a + b) // 2 - 1}`.
 * + - * / % with Python's floor division and modulo ("//" reads as "/"), unary minus and
 * parentheses; names are config keys, read through a callback. Every result must fit in 64 bits.
 * The parser is recursive descent with an explicit depth bound: parentheses and signs nest at most
 * CFG_MAX_EXPR_DEPTH levels, and each level also counts against a shared evaluation budget. */
#ifndef ESPNET3_CONFIG_EXPR_H
#define ESPNET3_CONFIG_EXPR_H

#include <stdint.h>

#include "core/base/log.h"
#include "core/config/yamltree.h"

/* Reads the integer a key holds; 0, or -1 with err filled. */
typedef int (*expr_name_fn)(void *ctx, const char *name, int64_t *out);

typedef struct expr_env {
    expr_name_fn name; /* looks keys up */
    void *ctx;
    ymark at;          /* where the ${...} was written, for errors */
    int *budget_used;  /* evaluation levels in progress in the caller (shared budget) */
    int budget_max;
    esp_err *err;
} expr_env;

/* Evaluates src (the inside of ${...}); 0 with *out, or -1 with env->err filled. */
int expr_eval(const expr_env *env, const char *src, int64_t *out);

#endif
