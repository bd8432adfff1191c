/* The resolvers of ${name:args}: self_name, config_path, load_line, load_yaml, oc.env, oc.select. Arguments
 * are split on top-level commas and interpolated themselves (so they nest; the nesting and the
 * text they produce count against the limits of config_limits.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/fsio.h"
#include "core/config/config_interp_internal.h"
#include "core/config/config_limits.h"

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
    ynode *v = interp_eval_string(in, at, here, arg, &whole);
    if (!v) return NULL;
    if (v->kind != YN_SCALAR) {
        interp_fail(in, at, "resolver argument '%s' is %s, expected a string", arg, yt_kind_name(v));
        yt_free(v);
        return NULL;
    }
    char *s = xstrdup(v->str);
    yt_free(v);
    return s;
}

static ynode *config_path(interp *in, ynode *at, int n, const char *a0)
{
    if (n != 1) {
        interp_fail(in, at, "${config_path:...} takes one path relative to the config file");
        return NULL;
    }
    char *dir = path_dirname(at->mark.file ? at->mark.file : ".");
    char *joined = path_join(dir, a0);
    char *p = path_normalize(joined);
    ynode *out = yt_scalar(p, 0, at->mark);
    free(p);
    free(joined);
    free(dir);
    return out;
}

/* A file a resolver call (`what`, as written) is about to read: a regular file, its size counted
 * against the expansion limit. 0 when it may be read, 1 when it is not there (the caller says so
 * in its own words), -1 with the error set. */
static int resolver_file(interp *in, ynode *at, const char *what, const char *path, const char *kind)
{
    struct stat st;
    if (stat(path, &st) != 0) return 1;
    if (!S_ISREG(st.st_mode)) return interp_fail(in, at, "%s: %s is not a regular file (name a %s)", what, path, kind);
    return interp_spend(in, at, (size_t)st.st_size);
}

/* A file's non-empty lines as a list of strings (taken as written: never interpolated again). */
static ynode *load_line(interp *in, ynode *at, int n, const char *arg, const char *a0)
{
    if (n != 1) {
        interp_fail(in, at, "${load_line:...} takes one file name");
        return NULL;
    }
    char what[256];
    snprintf(what, sizeof what, "${load_line:%.200s}", arg);
    if (resolver_file(in, at, what, a0, "text file") < 0) return NULL; /* missing: read_file says so below */
    esp_err ferr;
    char *text = read_file(a0, READ_SMALL, NULL, &ferr);
    if (!text) {
        char chain[1024];
        interp_chain_str(in, NULL, chain, sizeof chain);
        interp_fail(in, at, "${load_line:%s}: cannot read %s (resolving %s; create it first or fix the path)", arg, a0,
                    chain);
        return NULL;
    }
    if (!utf8_valid(text)) {
        interp_fail(in, at, "${load_line:%s}: %s is not UTF-8 text", arg, a0);
        free(text);
        return NULL;
    }
    ynode *out = yt_seq(at->mark);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') line[--len] = '\0';
        if (!len) continue;
        ynode *item = yt_scalar(line, 1, at->mark);
        item->resolved = 1;
        yt_seq_push(out, item);
    }
    free(text);
    if (interp_spend(in, at, out->n * YT_NODE_COST) != 0) {
        yt_free(out);
        return NULL;
    }
    return out;
}

/* ESPnet3's ${load_yaml:file,key}: the value at `key` (a dotted path; the whole file without one)
 * of a YAML file read as written (no `defaults:` composition, no template), relative to the
 * working directory as OmegaConf.load opens it. The file's own references resolve against its
 * own keys; a missing or null key is an error, as ESPnet3's resolver raises KeyError. */
static ynode *load_yaml(interp *in, ynode *at, const char *here, int n, char **args, const char *a0)
{
    if (n < 1 || n > 2) {
        interp_fail(in, at, "${load_yaml:...} takes a file name and an optional key (${load_yaml:conf/training.yaml,exp_tag})");
        return NULL;
    }
    char what[256]; /* the call as written, for every message */
    snprintf(what, sizeof what, "${load_yaml:%.100s%s%.100s}", args[0], n == 2 ? "," : "", n == 2 ? args[1] : "");
    if (in->loads >= CFG_MAX_LOAD_YAML_DEPTH) {
        interp_fail(in, at, "%s: files load each other more than %d deep (does a file load itself?)", what,
                    CFG_MAX_LOAD_YAML_DEPTH);
        return NULL;
    }
    int found = resolver_file(in, at, what, a0, "YAML file");
    if (found < 0) return NULL;
    if (found == 1) {
        char chain[1024];
        interp_chain_str(in, NULL, chain, sizeof chain);
        interp_fail(in, at, "%s: cannot read %s (resolving %s; the path is relative to the working directory, as in "
                    "ESPnet3)", what, a0, chain);
        return NULL;
    }
    char *key = n == 2 ? arg_text(in, at, here, args[1]) : xstrdup("");
    if (!key) return NULL;
    esp_err perr;
    ynode *root = yt_parse_file(a0, &perr);
    ynode *out = NULL;
    if (!root) {
        interp_fail(in, at, "%s: %s", what, perr.msg);
    } else {
        in->loads++;
        out = interp_select_in(in, at, here, root, key, what);
        in->loads--;
        yt_free(root);
    }
    free(key);
    return out;
}

static ynode *oc_env(interp *in, ynode *at, const char *here, int n, char **args, const char *a0)
{
    if (n < 1 || n > 2) {
        interp_fail(in, at, "${oc.env:NAME,default} takes a variable name and an optional default");
        return NULL;
    }
    const char *val = getenv(a0);
    if (val && !utf8_valid(val)) {
        interp_fail(in, at, "environment variable %s is not UTF-8 text", a0);
        return NULL;
    }
    if (val) return interp_spend(in, at, strlen(val)) == 0 ? yt_scalar(val, 0, at->mark) : NULL;
    if (n == 2) {
        char *def = arg_text(in, at, here, args[1]);
        if (!def) return NULL;
        ynode *out = yt_scalar(def, 0, at->mark);
        free(def);
        return out;
    }
    interp_fail(in, at, "environment variable %s is not set (set it, or give a default: ${oc.env:%s,default})", a0, a0);
    return NULL;
}

static ynode *oc_select(interp *in, ynode *at, const char *here, int n, char **args, const char *a0)
{
    if (n < 1 || n > 2) {
        interp_fail(in, at, "${oc.select:key,default} takes a key and an optional default");
        return NULL;
    }
    char *abs = interp_absolute_ref(here, a0);
    ynode *t = yt_get_path(in->root, abs);
    free(abs);
    if (t) {
        ynode *r = interp_lookup(in, at, here, a0);
        return r ? interp_copy(in, at, here, r) : NULL;
    }
    if (n == 2) {
        int whole;
        return interp_eval_string(in, at, here, args[1], &whole);
    }
    return yt_scalar("", 0, at->mark);
}

ynode *interp_call_resolver(interp *in, ynode *at, const char *here, const char *name, const char *argstr)
{
    char **args;
    int n = *argstr ? split_args(argstr, &args) : (args = NULL, 0);
    ynode *out = NULL;
    char *a0 = NULL;
    if (in->opts->foreign && (!strcmp(name, "load_line") || !strcmp(name, "load_yaml") || !strcmp(name, "oc.env"))) {
        interp_fail(in, at, "${%s:...} reads this machine and is off in a config from elsewhere (an ESPnet2 config or "
                    "a packed model's; write the value itself)", name);
        goto done;
    }
    a0 = n > 0 ? arg_text(in, at, here, args[0]) : NULL;
    if (n > 0 && !a0) goto done;
    if (!strcmp(name, "self_name")) out = yt_scalar(in->opts->self_name ? in->opts->self_name : "", 0, at->mark);
    else if (!strcmp(name, "config_path")) out = config_path(in, at, n, a0);
    else if (!strcmp(name, "load_line")) out = load_line(in, at, n, n > 0 ? args[0] : "", a0);
    else if (!strcmp(name, "load_yaml")) out = load_yaml(in, at, here, n, args, a0);
    else if (!strcmp(name, "oc.env")) out = oc_env(in, at, here, n, args, a0);
    else if (!strcmp(name, "oc.select")) out = oc_select(in, at, here, n, args, a0);
    else interp_fail(in, at, "unknown resolver '%s' (known: self_name, config_path, load_line, load_yaml, oc.env, oc.select)", name);
done:
    free(a0);
    free_args(args, n);
    return out;
}
