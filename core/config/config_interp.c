#include "core/config/config_interp.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

#define MAX_DEPTH 64

typedef struct interp {
    ynode *root;
    const interp_opts *opts;
    esp_err *err;
    char *stack[MAX_DEPTH]; /* paths being resolved, for cycle detection and error chains */
    int depth;
} interp;

/* ---- small string builder ----------------------------------------------------------- */

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        while (b->n + n + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 64;
        b->s = xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}
static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

/* "a -> b -> c" of the stack, for error messages. */
static void chain_str(const interp *in, const char *last, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < in->depth && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? " -> " : "", in->stack[i]);
    if (last && used < n) snprintf(buf + used, n - used, "%s%s", in->depth ? " -> " : "", last);
}

static int fail_at(interp *in, const ynode *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_at(interp *in, const ynode *at, const char *fmt, ...)
{
    char where[512], what[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return esp_fail(in->err, "%s: %s", ymark_str(at->mark, where, sizeof where), what);
}

/* ---- paths ------------------------------------------------------------------------------ */

static char *child_path(const char *parent, const ynode *container, size_t i)
{
    if (container->kind == YN_MAP)
        return *parent ? xasprintf("%s.%s", parent, container->keys[i]) : xstrdup(container->keys[i]);
    return xasprintf("%s[%zu]", parent, i);
}

/* Absolute path for a reference written in the value at `here` (relative refs start with dots). */
static char *absolute_ref(const char *here, const char *ref)
{
    if (ref[0] != '.') return xstrdup(ref);
    /* One dot is the container of `here`; each further dot goes one level up. */
    char *base = xstrdup(here);
    const char *p = ref;
    while (*p == '.') {
        char *cut = NULL;
        for (char *q = base + strlen(base); q > base; q--) {
            if (q[-1] == '.' || q[-1] == '[') {
                cut = q - 1;
                break;
            }
        }
        if (cut) *cut = '\0';
        else base[0] = '\0';
        p++;
    }
    char *out = *base ? (*p ? xasprintf("%s.%s", base, p) : xstrdup(base)) : xstrdup(p);
    free(base);
    return out;
}

/* ---- resolution --------------------------------------------------------------------- */

static int resolve_subtree(interp *in, ynode *n, const char *path);
static ynode *eval_string(interp *in, ynode *at, const char *path, const char *s, int *whole);

/* Finds the node a reference names and makes sure it is resolved. */
static ynode *lookup(interp *in, ynode *at, const char *here, const char *ref)
{
    char *abs = absolute_ref(here, ref);
    ynode *target = yt_get_path(in->root, abs);
    if (!target) {
        char chain[1024];
        chain_str(in, NULL, chain, sizeof chain);
        fail_at(in, at, "missing key '%s' in ${%s} (resolving %s; check the key exists)", abs, ref, chain);
        free(abs);
        return NULL;
    }
    if (resolve_subtree(in, target, abs) != 0) target = NULL;
    free(abs);
    return target;
}

/* Integer arithmetic: + - * / % with parentheses; names are config paths holding integers. */
typedef struct expr {
    interp *in;
    ynode *at;
    const char *here;
    const char *src;
    const char *p;
    int failed;
} expr;

static int64_t expr_sum(expr *e);

static void skip_ws(expr *e)
{
    while (isspace((unsigned char)*e->p)) e->p++;
}

/* Results must fit in 64 bits (signed overflow would be undefined behaviour). */
static int64_t overflowed(expr *e)
{
    if (!e->failed) fail_at(e->in, e->at, "integer overflow in ${%s} (results must fit in 64 bits)", e->src);
    e->failed = 1;
    return 0;
}

static int64_t expr_atom(expr *e)
{
    skip_ws(e);
    if (e->failed) return 0;
    if (*e->p == '(') {
        e->p++;
        int64_t v = expr_sum(e);
        skip_ws(e);
        if (*e->p != ')') {
            if (!e->failed) fail_at(e->in, e->at, "missing ')' in ${%s}", e->src);
            e->failed = 1;
            return 0;
        }
        e->p++;
        return v;
    }
    if (*e->p == '-') {
        e->p++;
        int64_t v = expr_atom(e);
        if (v == INT64_MIN) return overflowed(e);
        return -v;
    }
    if (isdigit((unsigned char)*e->p)) {
        char *end;
        errno = 0;
        long long v = strtoll(e->p, &end, 10);
        e->p = end;
        if (errno == ERANGE) return overflowed(e);
        return v;
    }
    if (isalpha((unsigned char)*e->p) || *e->p == '_' || *e->p == '.') {
        const char *start = e->p;
        while (*e->p && (isalnum((unsigned char)*e->p) || strchr("_.[]", *e->p))) e->p++;
        char *name = xstrndup(start, (size_t)(e->p - start));
        ynode *v = lookup(e->in, e->at, e->here, name);
        int64_t out = 0;
        if (!v) e->failed = 1;
        else if (!yt_as_int(v, &out)) {
            char where[512];
            fail_at(e->in, e->at, "'%s' in ${%s} is %s ('%s' at %s), arithmetic needs integers", name, e->src,
                    yt_kind_name(v), v->kind == YN_SCALAR ? v->str : "...", ymark_str(v->mark, where, sizeof where));
            e->failed = 1;
        }
        free(name);
        return out;
    }
    fail_at(e->in, e->at, "cannot read '%s' in ${%s} (expected a number, a key or '(')", e->p, e->src);
    e->failed = 1;
    return 0;
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
            fail_at(e->in, e->at, "division by zero in ${%s}", e->src);
            e->failed = 1;
            return 0;
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

static int is_ref_path(const char *s)
{
    if (!*s) return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.[]-", *p)) return 0;
    return 1;
}

/* Splits resolver arguments on top-level commas (not inside ${...} or quotes). */
static int split_args(const char *s, char ***out)
{
    int n = 0, depth = 0;
    char quote = 0;
    char **args = NULL;
    const char *start = s;
    for (const char *p = s;; p++) {
        if (quote) {
            if (*p == quote) quote = 0;
            else if (!*p) quote = 0;
        } else if (*p == '\'' || *p == '"') quote = *p;
        else if (p[0] == '$' && p[1] == '{') depth++;
        else if (*p == '}' && depth) depth--;
        if (!*p || (*p == ',' && !depth && !quote)) {
            const char *a = start, *b = p;
            while (a < b && isspace((unsigned char)*a)) a++;
            while (b > a && isspace((unsigned char)b[-1])) b--;
            if (b - a >= 2 && (*a == '\'' || *a == '"') && b[-1] == *a) a++, b--;
            args = xrealloc(args, (size_t)(n + 1) * sizeof *args);
            args[n++] = xstrndup(a, (size_t)(b - a));
            start = p + 1;
            if (!*p) break;
        }
    }
    *out = args;
    return n;
}

static void free_args(char **args, int n)
{
    for (int i = 0; i < n; i++) free(args[i]);
    free(args);
}

/* Interpolates an argument text (arguments may hold references themselves). */
static char *arg_text(interp *in, ynode *at, const char *here, const char *arg)
{
    int whole = 0;
    ynode *v = eval_string(in, at, here, arg, &whole);
    if (!v) return NULL;
    if (v->kind != YN_SCALAR) {
        fail_at(in, at, "resolver argument '%s' is %s, expected a string", arg, yt_kind_name(v));
        yt_free(v);
        return NULL;
    }
    char *s = xstrdup(v->str);
    yt_free(v);
    return s;
}

static ynode *call_resolver(interp *in, ynode *at, const char *here, const char *name, const char *argstr)
{
    char **args;
    int n = *argstr ? split_args(argstr, &args) : (args = NULL, 0);
    ynode *out = NULL;
    char *a0 = n > 0 ? arg_text(in, at, here, args[0]) : NULL;
    if (n > 0 && !a0) goto done;
    if (!strcmp(name, "self_name")) {
        out = yt_scalar(in->opts->self_name ? in->opts->self_name : "", 0, at->mark);
    } else if (!strcmp(name, "config_path")) {
        if (n != 1) {
            fail_at(in, at, "${config_path:...} takes one path relative to the config file");
            goto done;
        }
        char *dir = path_dirname(at->mark.file ? at->mark.file : ".");
        char *joined = path_join(dir, a0);
        char *p = path_normalize(joined);
        out = yt_scalar(p, 0, at->mark);
        free(p);
        free(joined);
        free(dir);
    } else if (!strcmp(name, "load_line")) {
        if (n != 1) {
            fail_at(in, at, "${load_line:...} takes one file name");
            goto done;
        }
        esp_err ferr;
        char *text = read_file(a0, NULL, &ferr);
        if (!text) {
            char chain[1024];
            chain_str(in, NULL, chain, sizeof chain);
            fail_at(in, at, "${load_line:%s}: cannot read %s (resolving %s; create it first or fix the path)", args[0],
                    a0, chain);
            goto done;
        }
        if (!utf8_valid(text)) {
            fail_at(in, at, "${load_line:%s}: %s is not UTF-8 text", args[0], a0);
            free(text);
            goto done;
        }
        out = yt_seq(at->mark);
        char *save = NULL;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            size_t len = strlen(line);
            if (len && line[len - 1] == '\r') line[--len] = '\0';
            if (len) yt_seq_push(out, yt_scalar(line, 1, at->mark));
        }
        free(text);
    } else if (!strcmp(name, "oc.env")) {
        if (n < 1 || n > 2) {
            fail_at(in, at, "${oc.env:NAME,default} takes a variable name and an optional default");
            goto done;
        }
        const char *val = getenv(a0);
        if (val && !utf8_valid(val)) fail_at(in, at, "environment variable %s is not UTF-8 text", a0);
        else if (val) out = yt_scalar(val, 0, at->mark);
        else if (n == 2) {
            char *def = arg_text(in, at, here, args[1]);
            if (!def) goto done;
            out = yt_scalar(def, 0, at->mark);
            free(def);
        } else {
            fail_at(in, at, "environment variable %s is not set (set it, or give a default: ${oc.env:%s,default})", a0,
                    a0);
        }
    } else if (!strcmp(name, "oc.select")) {
        if (n < 1 || n > 2) {
            fail_at(in, at, "${oc.select:key,default} takes a key and an optional default");
            goto done;
        }
        char *abs = absolute_ref(here, a0);
        ynode *t = yt_get_path(in->root, abs);
        free(abs);
        if (t) {
            ynode *r = lookup(in, at, here, a0);
            if (r) out = yt_copy(r);
        } else if (n == 2) {
            int whole;
            out = eval_string(in, at, here, args[1], &whole);
        } else {
            out = yt_scalar("", 0, at->mark);
        }
    } else {
        fail_at(in, at, "unknown resolver '%s' (known: self_name, config_path, load_line, oc.env, oc.select)", name);
    }
done:
    free(a0);
    free_args(args, n);
    return out;
}

/* Evaluates the inside of one ${...}. */
static ynode *eval_inner(interp *in, ynode *at, const char *here, const char *inner)
{
    const char *p = inner;
    while (isspace((unsigned char)*p)) p++;
    const char *q = p;
    while (isalnum((unsigned char)*q) || *q == '_' || *q == '.') q++;
    if (*q == ':' && q > p && p[0] != '.') {
        char *name = xstrndup(p, (size_t)(q - p));
        ynode *v = call_resolver(in, at, here, name, q + 1);
        free(name);
        return v;
    }
    char *trimmed = xstrdup(p);
    for (size_t k = strlen(trimmed); k && isspace((unsigned char)trimmed[k - 1]);) trimmed[--k] = '\0';
    ynode *out = NULL;
    char *abs = absolute_ref(here, trimmed);
    int has_key = yt_get_path(in->root, abs) != NULL;
    free(abs);
    if (is_ref_path(trimmed) && (has_key || !strpbrk(trimmed, "-") || trimmed[0] == '.')) {
        ynode *t = lookup(in, at, here, trimmed);
        if (t) {
            out = yt_copy(t);
            if (!out->via.line) out->via = at->mark;
        }
    } else {
        expr e = {.in = in, .at = at, .here = here, .src = trimmed, .p = trimmed};
        int64_t v = expr_sum(&e);
        skip_ws(&e);
        if (!e.failed && *e.p) {
            fail_at(in, at, "cannot read '%s' in ${%s} (integer arithmetic takes + - * / %% and parentheses)", e.p,
                    trimmed);
            e.failed = 1;
        }
        if (!e.failed) {
            char num[32];
            snprintf(num, sizeof num, "%lld", (long long)v);
            out = yt_scalar(num, 0, at->mark);
        }
    }
    free(trimmed);
    return out;
}

/* Evaluates a string that may hold ${...}; *whole is set when it was exactly one reference. */
static ynode *eval_string(interp *in, ynode *at, const char *here, const char *s, int *whole)
{
    sbuf out = {0};
    int pieces = 0;
    ynode *single = NULL;
    *whole = 0;
    for (const char *p = s; *p;) {
        if (p[0] == '\\' && p[1] == '$' && p[2] == '{') {
            sb_puts(&out, "${");
            p += 3;
            pieces++;
            continue;
        }
        if (p[0] != '$' || p[1] != '{') {
            sb_putn(&out, p, 1);
            p++;
            pieces++;
            continue;
        }
        /* Find the matching close brace, allowing nested ${...}. */
        int depth = 1;
        const char *q = p + 2;
        for (; *q && depth; q++) {
            if (q[0] == '$' && q[1] == '{') depth++, q++;
            else if (*q == '}') depth--;
        }
        if (depth) {
            fail_at(in, at, "unclosed '${' in '%s' (add the closing '}')", s);
            free(out.s);
            yt_free(single);
            return NULL;
        }
        char *inner = xstrndup(p + 2, (size_t)(q - 1 - (p + 2)));
        ynode *v = eval_inner(in, at, here, inner);
        free(inner);
        if (!v) {
            free(out.s);
            yt_free(single);
            return NULL;
        }
        int is_whole = p == s && !*q && pieces == 0;
        if (is_whole) {
            single = v;
        } else {
            if (v->kind != YN_SCALAR) {
                fail_at(in, at, "'%s' puts %s into a string (reference a single value instead)", s, yt_kind_name(v));
                yt_free(v);
                free(out.s);
                return NULL;
            }
            sb_puts(&out, v->str);
            yt_free(v);
        }
        pieces++;
        p = q;
    }
    if (single) {
        *whole = 1;
        free(out.s);
        return single;
    }
    ynode *r = yt_scalar(out.s ? out.s : "", 0, at->mark);
    free(out.s);
    return r;
}

static int push(interp *in, ynode *at, const char *path)
{
    for (int i = 0; i < in->depth; i++) {
        if (strcmp(in->stack[i], path) == 0) {
            char chain[1024];
            chain_str(in, path, chain, sizeof chain);
            return fail_at(in, at, "interpolation cycle: %s (break the loop)", chain);
        }
    }
    if (in->depth == MAX_DEPTH) return fail_at(in, at, "interpolation nests deeper than %d references", MAX_DEPTH);
    in->stack[in->depth++] = xstrdup(path);
    return 0;
}

static void pop(interp *in) { free(in->stack[--in->depth]); }

/* Resolves one scalar in place. */
static int resolve_scalar(interp *in, ynode *n, const char *path)
{
    if (n->resolved) return 0;
    if (!strstr(n->str, "${")) {
        n->resolved = 1;
        return 0;
    }
    if (push(in, n, path) != 0) return -1;
    int whole;
    ynode *v = eval_string(in, n, path, n->str, &whole);
    pop(in);
    if (!v) return -1;
    /* Replace n's contents with v's, keeping the node (parents hold the pointer). */
    ymark via = whole ? (v->via.line ? v->via : n->mark) : (ymark){0};
    free(n->str);
    n->kind = v->kind;
    n->str = v->str;
    n->quoted = whole ? v->quoted : 0;
    n->n = v->n;
    n->cap = v->cap;
    n->keys = v->keys;
    n->key_marks = v->key_marks;
    n->items = v->items;
    if (whole) {
        n->mark = v->mark;
        n->via = via;
    }
    free(v);
    n->resolved = 1;
    if (n->kind != YN_SCALAR) return resolve_subtree(in, n, path);
    return 0;
}

static int resolve_subtree(interp *in, ynode *n, const char *path)
{
    if (n->kind == YN_SCALAR) return resolve_scalar(in, n, path);
    for (size_t i = 0; i < n->n; i++) {
        char *cp = child_path(path, n, i);
        int rc = resolve_subtree(in, n->items[i], cp);
        free(cp);
        if (rc != 0) return -1;
    }
    return 0;
}

int config_interpolate(ynode *root, const interp_opts *opts, esp_err *err)
{
    interp in = {.root = root, .opts = opts, .err = err};
    int rc = resolve_subtree(&in, root, "");
    while (in.depth) pop(&in);
    return rc;
}
