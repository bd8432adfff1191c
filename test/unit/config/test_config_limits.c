/* The limits of the config system (core/config/config_limits.h): inputs a hostile or careless
 * user wrote, each of which crashed, hung or exhausted memory before. Every one must fail fast
 * with one error line "<file>:<line>:<col>: <what> (<hint>)", or load in linear time. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config/config.h"
#include "core/config/config_compose.h"
#include "core/config/config_interp.h"
#include "core/config/config_limits.h"
#include "core/base/fsio.h"
#include "test/unit/config/config_test_util.h"
#include "test/unit/test_util.h"

static char tmp[256];

static void setup(void)
{
    test_tmpdir_make(tmp, sizeof tmp, "config_limits");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmp); }

TestSuite(config_limits, .init = setup, .fini = teardown);

static const char *tpath(const char *rel) { return test_path(tmp, rel); }

/* Time limits are this process' CPU seconds (cfg_cpu_now: a shared machine does not inflate
 * them), for the plain build; AddressSanitizer makes every allocation several times
 * slower (and these tests allocate per value). */
#if defined(__SANITIZE_ADDRESS__)
#define SLOWDOWN 4.0
#else
#define SLOWDOWN 1.0
#endif

#define assert_has(msg, ...)                                                                      \
    do {                                                                                          \
        char piece_[1024];                                                                        \
        snprintf(piece_, sizeof piece_, __VA_ARGS__);                                             \
        cr_assert(strstr((msg), piece_) != NULL, "message:\n  %s\nlacks:\n  %s", (msg), piece_); \
    } while (0)

/* A growing text: the large fixtures are generated. */
typedef struct text {
    char *s;
    size_t n;
    FILE *f;
} text;

static void text_open(text *t) { t->f = open_memstream(&t->s, &t->n); }
static void text_add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(t->f, fmt, ap);
    va_end(ap);
}
/* Writes the text to tmp/rel, frees it, returns the path. */
static const char *text_write(text *t, const char *rel)
{
    fclose(t->f);
    const char *path = tpath(rel);
    test_write_text_mkdirs(path, t->s);
    free(t->s);
    return path;
}

/* Loads path as a training config without the template and expects an error (static message). */
static const char *load_error_file(const char *path)
{
    static esp_err err;
    esp_config *cfg = NULL;
    int rc = cfg_load(CONFIG_TRAINING, path, 0, NULL, 0, &cfg, &err);
    if (rc == 0) config_free(cfg);
    cr_assert_neq(rc, 0, "expected an error for %s", path);
    return err.msg;
}

/* Runs the binary on a training config (with the repository's template) and expects one error
 * line naming the file; returns stderr. */
static const char *binary_error(const char *path)
{
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/conf", test_root_dir());
    const bin_run *r = CFG_RUN(tmp, "--config", path, "--template_dir", tdir, "--dry_run", "--quiet");
    cr_assert_eq(r->status, 1, "exit %d, stderr:\n%s", r->status, r->err);
    cr_assert_eq(cfg_count_lines(r->err), 1, "stderr:\n%s", r->err);
    assert_has(r->err, "espnet3: error: %s", path);
    return r->err;
}

/* ---- nesting: parentheses, signs, ${...} inside ${...} --------------------------------------- */

Test(config_limits, deep_parentheses_are_an_error_not_a_crash)
{
    int depths[] = {1000, 100000};
    for (int k = 0; k < 2; k++) {
        text t;
        text_open(&t);
        text_add(&t, "seed: ${");
        for (int i = 0; i < depths[k]; i++) text_add(&t, "(");
        text_add(&t, "1");
        for (int i = 0; i < depths[k]; i++) text_add(&t, ")");
        text_add(&t, "}\n");
        const char *path = text_write(&t, "parens.yaml");
        const char *msg = load_error_file(path);
        assert_has(msg, "%s:1:7: arithmetic in ${((((", path);
        assert_has(msg, "nests deeper than %d parentheses or signs (split it into several keys)", CFG_MAX_EXPR_DEPTH);
    }
    /* Through the binary: one error line and exit status 1, not a segmentation fault. */
    assert_has(binary_error(tpath("parens.yaml")), "nests deeper than %d parentheses", CFG_MAX_EXPR_DEPTH);
}

Test(config_limits, deep_unary_minus_is_an_error_not_a_crash)
{
    text t;
    text_open(&t);
    text_add(&t, "seed: ${");
    for (int i = 0; i < 200001; i++) text_add(&t, "-");
    text_add(&t, "1}\n");
    const char *path = text_write(&t, "minus.yaml");
    assert_has(load_error_file(path), "%s:1:7: arithmetic in ${-----", path);
}

Test(config_limits, parentheses_within_the_limit_still_work)
{
    text t;
    text_open(&t);
    text_add(&t, "a: 3\nseed: ${");
    for (int i = 0; i < CFG_MAX_EXPR_DEPTH - 1; i++) text_add(&t, "(");
    text_add(&t, "a * 2");
    for (int i = 0; i < CFG_MAX_EXPR_DEPTH - 1; i++) text_add(&t, ")");
    text_add(&t, " - -1}\n");
    const char *path = text_write(&t, "ok.yaml");
    esp_err err;
    ynode *tree = config_compose(path, NULL, NULL, 0, &err);
    cr_assert_not_null(tree, "%s", err.msg);
    interp_opts io = {.self_name = "ok"};
    cr_assert_eq(config_interpolate(tree, &io, &err), 0, "%s", err.msg);
    cr_assert_str_eq(yt_get_path(tree, "seed")->str, "7");
    yt_free(tree);
}

static const char *nested_select(int depth, const char *rel)
{
    text t;
    text_open(&t);
    /* a publication config: pack_model.readme_context takes any keys */
    text_add(&t, "pack_model:\n  readme_context:\n    a: 5\nexp_tag: ");
    for (int i = 0; i < depth; i++) text_add(&t, "${oc.select:nope%d,", i);
    text_add(&t, "${pack_model.readme_context.a}");
    for (int i = 0; i < depth; i++) text_add(&t, "}");
    text_add(&t, "\n");
    return text_write(&t, rel);
}

Test(config_limits, deep_oc_select_is_an_error_not_a_crash)
{
    const char *path = nested_select(2600, "select.yaml");
    const char *msg = load_error_file(path);
    assert_has(msg, "%s:4:10: ${...} nests deeper than %d levels in '${oc.select:nope0,", path, CFG_MAX_INTERP_NESTING);
    assert_has(msg, "(move inner values to keys of their own)");
    assert_has(binary_error(path), "nests deeper than %d levels", CFG_MAX_INTERP_NESTING);

    /* Within the limit the defaults chain resolves. */
    path = nested_select(CFG_MAX_INTERP_NESTING - 1, "select_ok.yaml");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(cfg_load(CONFIG_PUBLICATION, path, 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    cr_assert_str_eq(((const publication_cfg *)cfg->typed)->exp_tag, "5");
    config_free(cfg);
}

/* ---- expansion: "billion laughs" through ${...} ----------------------------------------------- */

/* a0 is 90 characters; every next key repeats the previous one 10 times (a11 would be 9 GB). */
static const char *string_bomb(void)
{
    text t;
    text_open(&t);
    text_add(&t, "a0: \"%s\"\n", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    for (int i = 1; i < 12; i++) {
        text_add(&t, "a%d: \"", i);
        for (int k = 0; k < 10; k++) text_add(&t, "${a%d}", i - 1);
        text_add(&t, "\"\n");
    }
    return text_write(&t, "bomb.yaml");
}

Test(config_limits, string_expansion_bomb_fails_fast_in_bounded_memory)
{
    const char *path = string_bomb();
    double t0 = cfg_cpu_now();
    const char *msg = load_error_file(path);
    double took = cfg_cpu_now() - t0;
    assert_has(msg, "%s:", path);
    assert_has(msg, "interpolation expands the config beyond %u MiB", CFG_MAX_EXPANDED_BYTES >> 20);
    cr_assert_lt(took, 2.0 * SLOWDOWN, "took %.2f s", took);

    const char *err = binary_error(path);
    assert_has(err, "expands the config beyond");
    const bin_run *r = CFG_RUN(tmp, "--config", path, "--dry_run", "--quiet");
    /* 22 GB before; now the limit (16 MiB) times a small factor, plus what the binary needs. */
    cr_assert_lt(r->maxrss_kb, 1024 * 1024, "peak memory %ld kB", r->maxrss_kb);
    cr_assert_lt(r->seconds, 5.0 * SLOWDOWN, "took %.2f s", r->seconds);
}

Test(config_limits, list_expansion_bomb_fails_fast)
{
    /* Whole references copy values: each list holds ten copies of the previous one (quoted: in
     * YAML's flow style '{' and '}' are syntax). */
    text t;
    text_open(&t);
    text_add(&t, "fit:\n  m0: [x, x, x, x, x, x, x, x, x, x]\n");
    for (int i = 1; i < 10; i++) {
        text_add(&t, "  m%d: [", i);
        for (int k = 0; k < 10; k++) text_add(&t, "%s\"${fit.m%d}\"", k ? ", " : "", i - 1);
        text_add(&t, "]\n");
    }
    const char *path = text_write(&t, "lists.yaml");
    double t0 = cfg_cpu_now();
    assert_has(load_error_file(path), "interpolation expands the config beyond %u MiB", CFG_MAX_EXPANDED_BYTES >> 20);
    cr_assert_lt(cfg_cpu_now() - t0, 2.0 * SLOWDOWN);
}

Test(config_limits, alias_text_expansion_is_bounded)
{
    /* Few values but long text: one 200 kB string aliased 100 times is 20 MB. */
    text t;
    text_open(&t);
    text_add(&t, "a: &big \"");
    for (int i = 0; i < 200000; i++) text_add(&t, "y");
    text_add(&t, "\"\nb: [");
    for (int i = 0; i < 100; i++) text_add(&t, "%s*big", i ? ", " : "");
    text_add(&t, "]\n");
    const char *path = text_write(&t, "alias.yaml");
    assert_has(load_error_file(path), "aliases expand to more than %u MiB of text", CFG_MAX_ALIAS_BYTES >> 20);
}

/* ---- long reference chains: linear time ------------------------------------------------------- */

/* A publication config (pack_model.readme_context takes any keys): c.k0: ${c.k1}, ..., c.k<n>: 7
 * and exp_tag: ${c.k0}. Forward: exp_tag comes first and pulls the whole chain (followed without
 * recursion); backward: each key finds the next one already resolved. */
static const char *chain(int n, int backward, const char *rel)
{
    text t;
    text_open(&t);
    if (!backward) text_add(&t, "exp_tag: ${pack_model.readme_context.k0}\n");
    text_add(&t, "pack_model:\n  readme_context:\n");
    for (int j = 0; j <= n; j++) {
        int i = backward ? n - j : j;
        if (i == n) text_add(&t, "    k%d: 7\n", i);
        else text_add(&t, "    k%d: ${pack_model.readme_context.k%d}\n", i, i + 1);
    }
    if (backward) text_add(&t, "exp_tag: ${pack_model.readme_context.k0}\n");
    return text_write(&t, rel);
}

Test(config_limits, chain_of_100000_references_resolves_in_linear_time)
{
    for (int backward = 0; backward < 2; backward++) {
        const char *path = chain(100000, backward, backward ? "chain_back.yaml" : "chain.yaml");
        esp_config *cfg;
        esp_err err;
        double t0 = cfg_cpu_now();
        int rc = cfg_load(CONFIG_PUBLICATION, path, 0, NULL, 0, &cfg, &err);
        double took = cfg_cpu_now() - t0;
        cr_assert_eq(rc, 0, "%s", err.msg);
        cr_assert_str_eq(((const publication_cfg *)cfg->typed)->exp_tag, "7");
        cr_assert_str_eq(yt_get_path(cfg->tree, "pack_model.readme_context.k99999")->str, "7");
        config_free(cfg);
        cr_assert_lt(took, 2.0 * SLOWDOWN, "%s chain: %.2f s", backward ? "backward" : "forward", took);
    }
}

Test(config_limits, cycle_through_a_long_chain_is_reported)
{
    text t;
    text_open(&t);
    text_add(&t, "fit:\n");
    for (int i = 0; i < 50000; i++) text_add(&t, "  k%d: ${fit.k%d}\n", i, (i + 1) % 50000);
    const char *path = text_write(&t, "loop.yaml");
    double t0 = cfg_cpu_now();
    const char *msg = load_error_file(path);
    assert_has(msg, "%s:2:7: interpolation cycle: fit.k0 -> fit.k1 -> ", path);
    cr_assert_lt(cfg_cpu_now() - t0, 2.0 * SLOWDOWN);
}

Test(config_limits, nested_references_are_bounded)
{
    /* Values built from values ("x${b}") recurse: more than the limit is an error naming the chain. */
    text t;
    text_open(&t);
    text_add(&t, "fit:\n");
    for (int i = 0; i < 1000; i++) text_add(&t, "  k%d: x${fit.k%d}\n", i, i + 1);
    text_add(&t, "  k1000: end\n");
    const char *path = text_write(&t, "nested.yaml");
    const char *msg = load_error_file(path);
    assert_has(msg, "references nest deeper than %d values: fit.k0 -> fit.k1 -> ", CFG_MAX_REF_NESTING);
    assert_has(msg, "(write one of the values out instead of building it from others)");

    /* Mappings that reference each other nest the same way. */
    text_open(&t);
    text_add(&t, "fit:\n");
    for (int i = 0; i < 1000; i++) text_add(&t, "  m%d: {x: \"${fit.m%d}\"}\n", i, i + 1);
    text_add(&t, "  m1000: {x: 1}\n");
    path = text_write(&t, "maps.yaml");
    assert_has(load_error_file(path), "references nest deeper than %d values", CFG_MAX_REF_NESTING);
}

Test(config_limits, references_cannot_nest_the_tree_past_its_depth)
{
    /* A 200-level mapping copied 200 levels deep would be 400 levels. */
    text t;
    text_open(&t);
    text_add(&t, "fit:\n  deep: ");
    for (int i = 0; i < 200; i++) text_add(&t, "{a: ");
    text_add(&t, "1");
    for (int i = 0; i < 200; i++) text_add(&t, "}");
    text_add(&t, "\n  site: ");
    for (int i = 0; i < 200; i++) text_add(&t, "{b: ");
    text_add(&t, "\"${fit.deep}\"");
    for (int i = 0; i < 200; i++) text_add(&t, "}");
    text_add(&t, "\n");
    const char *path = text_write(&t, "deep.yaml");
    assert_has(load_error_file(path), "levels deep (a config nests at most %d levels; reference a smaller part)",
               CFG_MAX_TREE_DEPTH);
}

/* ---- composition --------------------------------------------------------------------------- */

Test(config_limits, defaults_depth_is_bounded)
{
    for (int i = 0; i < 30; i++) {
        char rel[32], body[64];
        snprintf(rel, sizeof rel, "inc/f%d.yaml", i);
        snprintf(body, sizeof body, "defaults:\n  - f%d\nseed: %d\n", i + 1, i);
        test_write_text_mkdirs(tpath(rel), body);
    }
    test_write_text_mkdirs(tpath("inc/f30.yaml"), "seed: 1\n");
    const char *msg = load_error_file(tpath("inc/f0.yaml"));
    assert_has(msg, "%s:2:5: defaults nest deeper than %d levels: %s -> ", tpath("inc/f16.yaml"), CFG_MAX_DEFAULTS_DEPTH,
               tpath("inc/f0.yaml"));
    assert_has(msg, "(include the inner files from fewer levels)");
}

Test(config_limits, defaults_diamonds_are_bounded)
{
    /* Each file includes the next one twice: 2^14 loads unless the total is bounded. */
    for (int i = 0; i < 14; i++) {
        char rel[32], body[96];
        snprintf(rel, sizeof rel, "dia/d%d.yaml", i);
        snprintf(body, sizeof body, "defaults:\n  - d%d\n  - d%d\n  - _self_\nseed: %d\n", i + 1, i + 1, i);
        test_write_text_mkdirs(tpath(rel), body);
    }
    test_write_text_mkdirs(tpath("dia/d14.yaml"), "seed: 1\n");
    double t0 = cfg_cpu_now();
    assert_has(load_error_file(tpath("dia/d0.yaml")), "defaults load more than %d files for one config",
               CFG_MAX_DEFAULTS_FILES);
    cr_assert_lt(cfg_cpu_now() - t0, 2.0 * SLOWDOWN);
}

Test(config_limits, defaults_lists_are_bounded)
{
    /* _self_ merges the file's keys each time it is listed: once, as Hydra requires. */
    test_write_text(tpath("selfs.yaml"), "defaults:\n  - _self_\n  - _self_\nseed: 1\n");
    assert_has(load_error_file(tpath("selfs.yaml")), "%s:3:5: _self_ is listed twice in defaults",
               tpath("selfs.yaml"));
    /* A list longer than the files a config may load is refused before anything is read. */
    text t;
    text_open(&t);
    text_add(&t, "defaults:\n");
    for (int i = 0; i < 100000; i++) text_add(&t, "  - override g%d: x\n", i);
    const char *path = text_write(&t, "long.yaml");
    double t0 = cfg_cpu_now();
    assert_has(load_error_file(path), "%s:2:3: the defaults list has 100000 entries (at most %d files", path,
               CFG_MAX_DEFAULTS_FILES);
    cr_assert_lt(cfg_cpu_now() - t0, 2.0 * SLOWDOWN);
}

Test(config_limits, override_key_depth_is_bounded)
{
    text t;
    text_open(&t);
    text_add(&t, "fit");
    for (int i = 0; i < 10000; i++) text_add(&t, ".a");
    text_add(&t, "=1");
    fclose(t.f);
    const char *path = tpath("cfg.yaml");
    test_write_text(path, "seed: 1\n");
    const char *ov[] = {t.s};
    esp_config *cfg;
    esp_err err;
    cr_assert_neq(cfg_load(CONFIG_TRAINING, path, 0, ov, 1, &cfg, &err), 0);
    free(t.s);
    assert_has(err.msg, "the key has 10001 levels (a config nests at most %d)", CFG_MAX_TREE_DEPTH);
}

Test(config_limits, yaml_nesting_is_bounded)
{
    text t;
    text_open(&t);
    text_add(&t, "fit: ");
    for (int i = 0; i < 100000; i++) text_add(&t, "[");
    for (int i = 0; i < 100000; i++) text_add(&t, "]");
    text_add(&t, "\n");
    assert_has(load_error_file(text_write(&t, "nest.yaml")), "YAML nests deeper than %d levels", CFG_MAX_TREE_DEPTH);
}

Test(config_limits, load_line_and_load_yaml_need_a_regular_file)
{
    const char *calls[] = {"load_line:%s", "load_yaml:%s,a"};
    for (size_t i = 0; i < 2; i++) {
        char call[512], text_[600];
        snprintf(call, sizeof call, calls[i], tmp);
        snprintf(text_, sizeof text_, "fit:\n  v: ${%s}\n", call);
        test_write_text(tpath("cfg.yaml"), text_);
        assert_has(load_error_file(tpath("cfg.yaml")), "%s:2:6: ${%s}: %s is not a regular file", tpath("cfg.yaml"), call,
                   tmp);
    }
}

/* ---- empty configs --------------------------------------------------------------------------- */

Test(config_limits, empty_config_is_an_error_naming_the_file)
{
    const char *texts[] = {"", "# only a comment\n\n", "~\n", "null\n", "---\n...\n"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        const char *path = tpath("empty.yaml");
        test_write_text(path, texts[i]);
        assert_has(load_error_file(path), "%s: the config file is empty", path);
        assert_has(binary_error(path), "espnet3: error: %s: the config file is empty (", path);
    }
    /* `{}` says "the template as it is" on purpose. */
    test_write_text(tpath("braces.yaml"), "{}\n");
    esp_config *cfg;
    esp_err err;
    cr_assert_eq(cfg_load(CONFIG_TRAINING, tpath("braces.yaml"), 1, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    config_free(cfg);
    /* An included file may be empty (Hydra's empty group options). */
    test_write_text(tpath("none.yaml"), "# nothing\n");
    test_write_text(tpath("top.yaml"), "defaults:\n  - none\n  - _self_\nseed: 3\n");
    cr_assert_eq(cfg_load(CONFIG_TRAINING, tpath("top.yaml"), 0, NULL, 0, &cfg, &err), 0, "%s", err.msg);
    cr_assert_eq(((const training_cfg *)cfg->typed)->seed, 3);
    config_free(cfg);
}
