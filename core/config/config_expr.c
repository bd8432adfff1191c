#include "core/config/config_expr.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_limits.h"

typedef struct expr {
    const expr_env *env;
    const char *src;
    const char *p;
    int depth; /* parentheses and signs open now */
    int failed;
} expr;

static int64_t expr_sum(expr *e);

/* The source for messages: long expressions are cut (the position in the file says the rest). */
#define SRC_SHOWN 60

static int64_t fail(expr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int64_t fail(expr *e, const char *fmt, ...)
{
    if (e->failed) return 0;
    e->failed = 1;
    char where[512], what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    esp_fail(e->env->err, "%s: %s", ymark_str(e->env->at, where, sizeof where), what);
    return 0;
}

static const char *ellipsis(const char *s) { return strlen(s) > SRC_SHOWN ? "..." : ""; }

static void skip_ws(expr *e)
{
    while (isspace((unsigned char)*e->p)) e->p++;
}

/* Results must fit in 64 bits (signed overflow would be undefined behaviour). */
static int64_t overflowed(expr *e)
{
    return fail(e, "integer overflow in ${%.*s%s} (results must fit in 64 bits)", SRC_SHOWN, e->src, ellipsis(e->src));
}

/* One more level of parentheses or signs: checked before the parser recurses. */
static int enter(expr *e)
{
    if (e->depth >= CFG_MAX_EXPR_DEPTH) {
        fail(e, "arithmetic in ${%.*s%s} nests deeper than %d parentheses or signs (split it into several keys)",
             SRC_SHOWN, e->src, ellipsis(e->src), CFG_MAX_EXPR_DEPTH);
        return -1;
    }
    if (*e->env->budget_used >= e->env->budget_max) {
        fail(e, "interpolation nests deeper than %d levels (references, ${...} and parentheses together; "
                "simplify the value)", e->env->budget_max);
        return -1;
    }
    e->depth++;
    ++*e->env->budget_used;
    return 0;
}

static void leave(expr *e)
{
    e->depth--;
    --*e->env->budget_used;
}

static int64_t expr_name(expr *e)
{
    const char *start = e->p;
    while (*e->p && (isalnum((unsigned char)*e->p) || strchr("_.[]", *e->p))) e->p++;
    char *name = xstrndup(start, (size_t)(e->p - start));
    int64_t out = 0;
    if (e->env->name(e->env->ctx, name, &out) != 0) e->failed = 1;
    free(name);
    return out;
}

static int64_t expr_atom(expr *e)
{
    skip_ws(e);
    if (e->failed) return 0;
    if (*e->p == '(' || *e->p == '-') {
        char c = *e->p++;
        if (enter(e) != 0) return 0;
        int64_t v = c == '(' ? expr_sum(e) : expr_atom(e);
        leave(e);
        if (e->failed) return 0;
        if (c == '-') return v == INT64_MIN ? overflowed(e) : -v;
        skip_ws(e);
        if (*e->p != ')') return fail(e, "missing ')' in ${%.*s%s}", SRC_SHOWN, e->src, ellipsis(e->src));
        e->p++;
        return v;
    }
    if (isdigit((unsigned char)*e->p)) {
        char *end;
        errno = 0;
        long long v = strtoll(e->p, &end, 10);
        e->p = end;
        if (errno == ERANGE) return overflowed(e);
        return v;
    }
    if (isalpha((unsigned char)*e->p) || *e->p == '_' || *e->p == '.') return expr_name(e);
    return fail(e, "cannot read '%.*s%s' in ${%.*s%s} (expected a number, a key or '(')", SRC_SHOWN, e->p,
                ellipsis(e->p), SRC_SHOWN, e->src, ellipsis(e->src));
}

/* Floor division and modulo, as Python computes them. */
static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t expr_product(expr *e)
{
    int64_t v = expr_atom(e);
    for (;;) {
        skip_ws(e);
        char op = *e->p;
        if (e->failed || (op != '*' && op != '/' && op != '%')) return v;
        e->p++;
        if (op == '/' && *e->p == '/') e->p++; /* "//" reads as integer division too */
        int64_t r = expr_atom(e);
        if (e->failed) return 0;
        if (op == '*') {
            if (__builtin_mul_overflow(v, r, &v)) return overflowed(e);
        } else if (r == 0) {
            return fail(e, "division by zero in ${%.*s%s}", SRC_SHOWN, e->src, ellipsis(e->src));
        } else if (r == -1) { /* INT64_MIN / -1 traps */
            if (op == '%') v = 0;
            else if (v == INT64_MIN) return overflowed(e);
            else v = -v;
        } else if (op == '/') v = floor_div(v, r);
        else {
            int64_t m = v % r; /* Python's modulo takes the divisor's sign */
            v = (m != 0 && ((m < 0) != (r < 0))) ? m + r : m;
        }
    }
}

static int64_t expr_sum(expr *e)
{
    int64_t v = expr_product(e);
    for (;;) {
        skip_ws(e);
        char op = *e->p;
        if (e->failed || (op != '+' && op != '-')) return v;
        e->p++;
        int64_t r = expr_product(e);
        if (e->failed) return 0;
        if (op == '+' ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v)) return overflowed(e);
    }
}

int expr_eval(const expr_env *env, const char *src, int64_t *out)
{
    expr e = {.env = env, .src = src, .p = src};
    int64_t v = expr_sum(&e);
    skip_ws(&e);
    if (!e.failed && *e.p)
        fail(&e, "cannot read '%.*s%s' in ${%.*s%s} (integer arithmetic takes + - * / %% and parentheses)", SRC_SHOWN,
             e.p, ellipsis(e.p), SRC_SHOWN, src, ellipsis(src));
    if (e.failed) return -1;
    *out = v;
    return 0;
}
