/* See config_suite_util.h. No Test() here. */
#include "test/unit/config/config_suite_util.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/config/config_compose.h"
#include "core/config/config_interp.h"
#include "test/unit/test_util.h"

char config_tmp[256];

void config_suite_setup(void)
{
    test_tmpdir_make(config_tmp, sizeof config_tmp, "config");
    log_set_quiet(1);
}

void config_suite_teardown(void) { test_tmpdir_remove(config_tmp); }

const char *tpath(const char *rel) { return test_path(config_tmp, rel); }

const char *fixture(const char *rel, const char *text)
{
    const char *path = tpath(rel);
    test_write_text_mkdirs(path, text);
    return path;
}

int load_file(const char *path, const char **ov, int n_ov, esp_config **cfg, esp_err *err)
{
    config_load_opts o = {.overrides = ov, .n_overrides = n_ov};
    return config_load(CONFIG_TRAINING, path, &o, cfg, err);
}

int load_text(const char *text, esp_config **cfg, esp_err *err)
{
    return load_file(fixture("cfg.yaml", text), NULL, 0, cfg, err);
}

const training_cfg *must_load(const char *text, esp_config **cfg)
{
    esp_err err;
    int rc = load_text(text, cfg, &err);
    cr_assert_eq(rc, 0, "load failed: %s", err.msg);
    return (*cfg)->typed;
}

ynode *resolve_file(const char *path, const char **ov, int n_ov, esp_err *err)
{
    ynode *t = config_compose(path, NULL, ov, n_ov, err);
    if (!t) return NULL;
    char *stem = path_stem(path);
    interp_opts io = {.self_name = stem};
    int rc = config_interpolate(t, &io, err);
    free(stem);
    if (rc != 0) {
        yt_free(t);
        return NULL;
    }
    return t;
}

ynode *must_resolve(const char *text)
{
    esp_err err;
    ynode *t = resolve_file(fixture("cfg.yaml", text), NULL, 0, &err);
    cr_assert_not_null(t, "resolve failed: %s", err.msg);
    return t;
}

const char *resolve_error(const char *text)
{
    static esp_err err;
    ynode *t = resolve_file(fixture("cfg.yaml", text), NULL, 0, &err);
    cr_assert_null(t, "expected an error for:\n%s", text);
    return err.msg;
}

const char *load_error(const char *text)
{
    static esp_err err;
    esp_config *cfg = NULL;
    int rc = load_text(text, &cfg, &err);
    if (rc == 0) config_free(cfg);
    cr_assert_neq(rc, 0, "expected an error for:\n%s", text);
    return err.msg;
}

const char *sval(const ynode *root, const char *path)
{
    const ynode *n = yt_get_path(root, path);
    if (!n) return "<missing>";
    if (n->kind != YN_SCALAR) return "<not a scalar>";
    return n->str;
}

static const char *capture_stderr_begin_path(void) { return tpath("stderr.txt"); }
static int saved_stderr = -1;
void capture_begin(void)
{
    fflush(stderr);
    saved_stderr = dup(2);
    int fd = open(capture_stderr_begin_path(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    dup2(fd, 2);
    close(fd);
}
const char *capture_end(void)
{
    static char buf[1 << 16];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    esp_err err;
    size_t len;
    char *text = read_file(capture_stderr_begin_path(), READ_LIST, &len, &err);
    cr_assert_not_null(text);
    snprintf(buf, sizeof buf, "%s", text);
    free(text);
    return buf;
}

int count_lines_with(const char *text, const char *piece)
{
    int n = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *l = strndup(line, len);
        n += strstr(l, piece) != NULL;
        free(l);
        line = nl ? nl + 1 : NULL;
    }
    return n;
}
