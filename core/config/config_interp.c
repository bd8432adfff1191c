/* Interpolation over a composed tree. Every value is resolved once and the result is kept in
 * place (memoized), so the work is linear in the size of the config:
 * - the tree is walked with an explicit stack;
 * - a value that is exactly one reference (a: ${b}, b: ${c}, ...) is followed as a chain without
 *   recursion: the chain is collected, then resolved from its far end;
 * - anything else (a reference inside a string, an argument, arithmetic) recurses, bounded by the
 *   limits of config_limits.h, each checked before the recursion it guards. */
#include "core/config/config_interp.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_expr.h"
#include "core/config/config_interp_internal.h"
#include "core/config/config_limits.h"

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

/* ---- errors and limits ------------------------------------------------------------------- */

/* Long texts in messages are cut; the position in the file shows the rest. */
#define SHOWN 60

void interp_chain_str(const interp *in, const char *last, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < in->depth && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? " -> " : "", in->stack[i]);
    if (last && used < n) snprintf(buf + used, n - used, "%s%s", in->depth ? " -> " : "", last);
}

int interp_fail(interp *in, const ynode *at, const char *fmt, ...)
{
    char where[512], what[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return esp_fail(in->err, "%s: %s", ymark_str(at->mark, where, sizeof where), what);
}

/* The error helpers that print a chain keep its buffer off the stack frames of the recursion. */
__attribute__((noinline)) static int fail_with_chain(interp *in, const ynode *at, const char *last, const char *what,
                                                     const char *hint)
{
    char chain[1024];
    interp_chain_str(in, last, chain, sizeof chain);
    return interp_fail(in, at, "%s: %s (%s)", what, chain, hint);
}

__attribute__((noinline)) static void fail_missing(interp *in, const ynode *at, const char *abs, const char *ref)
{
    char chain[1024];
    interp_chain_str(in, NULL, chain, sizeof chain);
    interp_fail(in, at, "missing key '%.200s' in ${%.200s} (resolving %s; check the key exists)", abs, ref, chain);
}

int interp_spend(interp *in, const ynode *at, size_t bytes)
{
    if (bytes <= CFG_MAX_EXPANDED_BYTES - in->expanded) {
        in->expanded += bytes;
        return 0;
    }
    return interp_fail(in, at,
                       "interpolation expands the config beyond %u MiB (the limit of text and values references "
                       "produce; look for values that repeat references to each other)",
                       CFG_MAX_EXPANDED_BYTES >> 20);
}

/* One more key being resolved: its path goes on the stack (bounded by CFG_MAX_REF_CHAIN). */
static int push(interp *in, const ynode *at, const char *path)
{
    if (in->depth >= CFG_MAX_REF_CHAIN)
        return interp_fail(in, at, "reference chain longer than %d keys (resolve through fewer keys)", CFG_MAX_REF_CHAIN);
    if (in->depth == in->cap) {
        in->cap = in->cap ? in->cap * 2 : 64;
        in->stack = xrealloc(in->stack, in->cap * sizeof *in->stack);
    }
    in->stack[in->depth++] = xstrdup(path);
    return 0;
}

static void pop(interp *in) { free(in->stack[--in->depth]); }

/* ---- paths ------------------------------------------------------------------------------ */

static char *child_path(const char *parent, const ynode *container, size_t i)
{
    if (container->kind == YN_MAP)
        return *parent ? xasprintf("%s.%s", parent, container->keys[i]) : xstrdup(container->keys[i]);
    return xasprintf("%s[%zu]", parent, i);
}

char *interp_absolute_ref(const char *here, const char *ref)
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

/* Levels below the top of the value at path (0 for the top itself). */
static int path_levels(const char *path)
{
    if (!*path) return 0;
    int n = 1;
    for (const char *p = path; *p; p++) n += *p == '.' || *p == '[';
    return n;
}

static int is_ref_path(const char *s)
{
    if (!*s) return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.[]-", *p)) return 0;
    return 1;
}

/* The key of a value that is exactly one plain reference "${key}" (NULL for anything else). */
static char *plain_ref(const char *s)
{
    if (s[0] != '$' || s[1] != '{') return NULL;
    const char *close = strchr(s + 2, '}');
    if (!close || close[1] || strstr(s + 2, "${")) return NULL;
    const char *a = s + 2, *b = close;
    while (a < b && isspace((unsigned char)*a)) a++;
    while (b > a && isspace((unsigned char)b[-1])) b--;
    char *key = xstrndup(a, (size_t)(b - a));
    if (!is_ref_path(key)) {
        free(key);
        return NULL;
    }
    return key;
}

/* ---- resolution --------------------------------------------------------------------- */

static int resolve_scalar(interp *in, ynode *n, const char *path);
static int resolve_subtree(interp *in, ynode *n, const char *path);

typedef struct chain_link {
    ynode *node;
    char *path;
} chain_link;

/* Resolves t, the start of a possible chain of plain references: the chain is collected first
 * (each link on the stack, marked as in progress), then resolved from its far end, where every
 * link's target is already resolved, so no link recurses into the next. */
static int resolve_chain(interp *in, ynode *t, const char *path)
{
    chain_link *links = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    ynode *cur = t;
    char *cur_path = xstrdup(path);
    for (;;) {
        if (push(in, cur, cur_path) != 0) {
            free(cur_path);
            rc = -1;
            break;
        }
        if (n == cap) links = xrealloc(links, (cap = cap ? 2 * cap : 16) * sizeof *links);
        links[n++] = (chain_link){cur, cur_path};
        cur->resolving = 1;
        char *ref = plain_ref(cur->str);
        if (!ref) break;
        char *next_path = interp_absolute_ref(cur_path, ref);
        free(ref);
        ynode *next = yt_get_path(in->root, next_path);
        /* Missing keys, cycles and other values are left to resolve_scalar, which reports them. */
        if (!next || next->kind != YN_SCALAR || next->resolved || next->resolving) {
            free(next_path);
            break;
        }
        cur = next;
        cur_path = next_path;
    }
    size_t i = n;
    while (rc == 0 && i-- > 0) {
        links[i].node->resolving = 0;
        pop(in); /* resolve_scalar puts it back while it works on it */
        rc = resolve_scalar(in, links[i].node, links[i].path);
    }
    for (size_t k = 0; k < n; k++) {
        links[k].node->resolving = 0;
        free(links[k].path);
    }
    free(links);
    return rc;
}

/* Makes sure the value at path (a key a reference named) is resolved. */
static int resolve_node(interp *in, ynode *t, const char *path)
{
    if (t->kind != YN_SCALAR) return resolve_subtree(in, t, path);
    if (t->resolved) return 0;
    if (t->resolving) return fail_with_chain(in, t, path, "interpolation cycle", "break the loop");
    if (!strstr(t->str, "${")) {
        t->resolved = 1;
        return 0;
    }
    return resolve_chain(in, t, path);
}

ynode *interp_lookup(interp *in, ynode *at, const char *here, const char *ref)
{
    char *abs = interp_absolute_ref(here, ref);
    ynode *target = yt_get_path(in->root, abs);
    if (!target) fail_missing(in, at, abs, ref);
    else if (resolve_node(in, target, abs) != 0) target = NULL;
    free(abs);
    return target;
}

ynode *interp_copy(interp *in, const ynode *at, const char *here, const ynode *t)
{
    size_t bytes;
    int height;
    yt_measure(t, &bytes, &height);
    if (height && path_levels(here) + height > CFG_MAX_TREE_DEPTH) {
        interp_fail(in, at, "this reference puts a value %d levels deep (a config nests at most %d levels; "
                    "reference a smaller part)", path_levels(here) + height, CFG_MAX_TREE_DEPTH);
        return NULL;
    }
    /* Each ${...} written makes one value, so only what it holds can grow: its text and the values
     * inside a copied mapping or list. */
    if (interp_spend(in, at, bytes - YT_NODE_COST) != 0) return NULL;
    return yt_copy(t);
}

ynode *interp_select_in(interp *in, ynode *at, const char *here, ynode *root, const char *key, const char *what)
{
    ynode *t = *key ? yt_get_path(root, key) : root;
    if (!t) {
        interp_fail(in, at, "%s: %s has no key '%s' (name a key the file sets)", what, root->mark.file, key);
        return NULL;
    }
    /* References inside the file name its own keys, as OmegaConf.select resolves them in the
     * loaded file; the loaded tree is fresh, so its in-progress marks cannot meet ours. */
    ynode *saved = in->root;
    in->root = root;
    int rc = resolve_node(in, t, key);
    in->root = saved;
    if (rc != 0) return NULL;
    if (t->kind == YN_SCALAR && !t->quoted && yt_is_null(t)) { /* ESPnet3's load_yaml: a KeyError */
        char where[512];
        interp_fail(in, at, "%s: '%s' is null in %s (give it a value there)", what, key, ymark_str(t->mark, where, sizeof where));
        return NULL;
    }
    return interp_copy(in, at, here, t);
}

typedef struct name_ctx {
    interp *in;
    ynode *at;
    const char *here;
    const char *src;
} name_ctx;

/* Keys in arithmetic: their values must be integers. */
static int expr_name(void *ctx, const char *name, int64_t *out)
{
    name_ctx *c = ctx;
    ynode *v = interp_lookup(c->in, c->at, c->here, name);
    if (!v) return -1;
    if (yt_as_int(v, out)) return 0;
    char where[512];
    return interp_fail(c->in, c->at, "'%.200s' in ${%.*s%s} is %s ('%.200s' at %s), arithmetic needs integers", name,
                       SHOWN, c->src, strlen(c->src) > SHOWN ? "..." : "", yt_kind_name(v),
                       v->kind == YN_SCALAR ? v->str : "...", ymark_str(v->mark, where, sizeof where));
}

static ynode *eval_arithmetic(interp *in, ynode *at, const char *here, const char *src)
{
    name_ctx ctx = {in, at, here, src};
    expr_env env = {.name = expr_name, .ctx = &ctx, .at = at->mark, .budget_used = &in->eval,
                    .budget_max = CFG_MAX_EVAL_DEPTH, .err = in->err};
    int64_t v;
    if (expr_eval(&env, src, &v) != 0) return NULL;
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)v);
    return yt_scalar(num, 0, at->mark);
}

/* Evaluates the inside of one ${...}: a resolver, a reference or arithmetic. */
static ynode *eval_inner(interp *in, ynode *at, const char *here, const char *inner)
{
    const char *p = inner;
    while (isspace((unsigned char)*p)) p++;
    const char *q = p;
    while (isalnum((unsigned char)*q) || *q == '_' || *q == '.') q++;
    if (*q == ':' && q > p && p[0] != '.') {
        char *name = xstrndup(p, (size_t)(q - p));
        ynode *v = interp_call_resolver(in, at, here, name, q + 1);
        free(name);
        return v;
    }
    char *trimmed = xstrdup(p);
    for (size_t k = strlen(trimmed); k && isspace((unsigned char)trimmed[k - 1]);) trimmed[--k] = '\0';
    ynode *out = NULL;
    char *abs = interp_absolute_ref(here, trimmed);
    ynode *t = yt_get_path(in->root, abs);
    /* A key with '-' in its name is a reference when the key exists, else arithmetic (a-b). */
    if (is_ref_path(trimmed) && (t || !strpbrk(trimmed, "-") || trimmed[0] == '.')) {
        if (!t) fail_missing(in, at, abs, trimmed);
        else if (resolve_node(in, t, abs) == 0) out = interp_copy(in, at, here, t);
        if (out && !out->via.line) out->via = at->mark;
    } else {
        out = eval_arithmetic(in, at, here, trimmed);
    }
    free(abs);
    free(trimmed);
    return out;
}

/* The end of the ${...} that starts at p (just past its '}'), or NULL when it is not closed.
 * *nest gets how deep ${...} nest inside it. */
static const char *match_brace(const char *p, int *nest)
{
    int depth = 1, max = 1;
    const char *q = p + 2;
    for (; *q && depth; q++) {
        if (q[0] == '$' && q[1] == '{') {
            if (++depth > max) max = depth;
            q++;
        } else if (*q == '}') depth--;
    }
    *nest = max;
    return depth ? NULL : q;
}

static ynode *eval_string_body(interp *in, ynode *at, const char *here, const char *s, int *whole)
{
    sbuf out = {0};
    int pieces = 0;
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
        int nest;
        const char *q = match_brace(p, &nest);
        if (!q) {
            interp_fail(in, at, "unclosed '${' in '%.*s%s' (add the closing '}')", SHOWN, s, strlen(s) > SHOWN ? "..." : "");
            goto fail;
        }
        if (nest > CFG_MAX_INTERP_NESTING) {
            interp_fail(in, at, "${...} nests deeper than %d levels in '%.*s...' (move inner values to keys of their own)",
                        CFG_MAX_INTERP_NESTING, SHOWN, p);
            goto fail;
        }
        char *inner = xstrndup(p + 2, (size_t)(q - 1 - (p + 2)));
        ynode *v = eval_inner(in, at, here, inner);
        free(inner);
        if (!v) goto fail;
        if (p == s && !*q && pieces == 0) { /* exactly one ${...}: the value keeps its type */
            free(out.s);
            *whole = 1;
            return v;
        }
        if (v->kind != YN_SCALAR) {
            interp_fail(in, at, "'%.*s%s' puts %s into a string (reference a single value instead)", SHOWN, s,
                        strlen(s) > SHOWN ? "..." : "", yt_kind_name(v));
            yt_free(v);
            goto fail;
        }
        size_t len = strlen(v->str);
        int ok = interp_spend(in, at, len) == 0;
        if (ok) sb_putn(&out, v->str, len);
        yt_free(v);
        if (!ok) goto fail;
        pieces++;
        p = q;
    }
    ynode *r = yt_scalar(out.s ? out.s : "", 0, at->mark);
    free(out.s);
    return r;
fail:
    free(out.s);
    return NULL;
}

ynode *interp_eval_string(interp *in, ynode *at, const char *here, const char *s, int *whole)
{
    if (in->eval >= CFG_MAX_EVAL_DEPTH) {
        interp_fail(in, at, "interpolation nests deeper than %d levels (references, ${...} and parentheses together; "
                    "simplify the value)", CFG_MAX_EVAL_DEPTH);
        return NULL;
    }
    in->eval++;
    ynode *v = eval_string_body(in, at, here, s, whole);
    in->eval--;
    return v;
}

/* Resolves one scalar in place (its node stays: parents hold the pointer). */
static int resolve_scalar(interp *in, ynode *n, const char *path)
{
    if (n->resolved) return 0;
    if (!strstr(n->str, "${")) {
        n->resolved = 1;
        return 0;
    }
    if (n->resolving) return fail_with_chain(in, n, path, "interpolation cycle", "break the loop");
    if (in->nesting >= CFG_MAX_REF_NESTING) {
        char what[96];
        snprintf(what, sizeof what, "references nest deeper than %d values", CFG_MAX_REF_NESTING);
        return fail_with_chain(in, n, path, what, "write one of the values out instead of building it from others");
    }
    if (push(in, n, path) != 0) return -1;
    n->resolving = 1;
    in->nesting++;
    int whole;
    ynode *v = interp_eval_string(in, n, path, n->str, &whole);
    in->nesting--;
    n->resolving = 0;
    pop(in);
    if (!v) return -1;
    ymark mark = v->mark, via = whole ? (v->via.line ? v->via : n->mark) : (ymark){0};
    int quoted = whole ? v->quoted : 0;
    yt_take(n, v);
    n->quoted = quoted;
    if (whole) {
        n->mark = mark;
        n->via = via;
    }
    n->resolved = 1; /* a mapping or list came resolved: copies of resolved values, load_line's lines or
                      * what load_yaml selected */
    return 0;
}

typedef struct walk_item {
    ynode *node;
    char *path;
    size_t next; /* next child to visit */
} walk_item;

/* Resolves every scalar under n, walking with an explicit stack (depth never recurses). */
static int resolve_subtree(interp *in, ynode *n, const char *path)
{
    if (n->kind == YN_SCALAR) return resolve_scalar(in, n, path);
    walk_item *w = xmalloc(16 * sizeof *w);
    size_t sp = 0, cap = 16;
    w[sp++] = (walk_item){n, xstrdup(path), 0};
    int rc = 0;
    while (sp && rc == 0) {
        walk_item *top = &w[sp - 1];
        if (top->next >= top->node->n) {
            free(top->path);
            sp--;
            continue;
        }
        size_t i = top->next++;
        ynode *c = top->node->items[i];
        char *cp = child_path(top->path, top->node, i);
        if (c->kind == YN_SCALAR) {
            rc = resolve_scalar(in, c, cp);
            free(cp);
            continue;
        }
        if (sp == cap) w = xrealloc(w, (cap *= 2) * sizeof *w);
        w[sp++] = (walk_item){c, cp, 0};
    }
    while (sp) free(w[--sp].path);
    free(w);
    return rc;
}

int config_interpolate(ynode *root, const interp_opts *opts, esp_err *err)
{
    interp in = {.root = root, .opts = opts, .err = err};
    int rc = resolve_subtree(&in, root, "");
    while (in.depth) pop(&in);
    free(in.stack);
    return rc;
}
