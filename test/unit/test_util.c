/* Helpers the unit tests share; see test_util.h. No Test() here. */
#include "test/unit/test_util.h"
#include "stages/stages.h"

#include "core/formats/npz.h"
#include "core/formats/safetensors.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/log.h"

const char *test_env_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

const char *test_root_dir(void) { return test_env_or("ESPNET3_ROOT", "."); }

const char *test_bin_path(void)
{
    static char path[4096];
    const char *b = test_env_or("ESPNET3_BIN", "./espnet3");
    if (b[0] == '/') return b;
    char cwd[2048];
    cr_assert_not_null(getcwd(cwd, sizeof cwd), "cannot read the working directory");
    snprintf(path, sizeof path, "%s/%s", cwd, b);
    return path;
}

const char *test_path(const char *dir, const char *rel)
{
    static char ring[16][1024];
    static int next;
    char *b = ring[next++ % 16];
    int n = snprintf(b, sizeof ring[0], "%s/%s", dir, rel);
    cr_assert(n > 0 && (size_t)n < sizeof ring[0], "path too long: %s/%s", dir, rel);
    return b;
}

int test_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int test_same_file(const char *a, const char *b)
{
    esp_err err;
    size_t na = 0, nb = 0;
    char *x = read_file(a, READ_LIST, &na, &err), *y = read_file(b, READ_LIST, &nb, &err);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

char *test_slurp(const char *path)
{
    esp_err err;
    char *s = read_file(path, READ_LIST, NULL, &err);
    cr_assert_not_null(s, "cannot read %s: %s", path, err.msg);
    return s;
}

char *test_slurp_or_empty(const char *path)
{
    esp_err err;
    char *s = read_file(path, READ_LIST, NULL, &err);
    return s ? s : xstrdup("");
}

void test_write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp, "cannot write %s", path);
    fputs(text, fp);
    cr_assert_eq(fclose(fp), 0, "cannot write %s", path);
}

void test_write_text_mkdirs(const char *path, const char *text)
{
    esp_err err;
    char *dir = path_dirname(path);
    cr_assert_eq(mkdir_p(dir, &err), 0, "%s", err.msg);
    free(dir);
    test_write_text(path, text);
}

void test_tmpdir_make(char *dir, size_t cap, const char *tag)
{
    int n = snprintf(dir, cap, "/tmp/espnet3_%s_XXXXXX", tag);
    cr_assert(n > 0 && (size_t)n < cap, "temporary folder name too long for tag %s", tag);
    cr_assert_not_null(mkdtemp(dir), "cannot create %s", dir);
}

void test_tmpdir_remove(const char *dir)
{
    remove_tree(dir);
    cr_assert(!test_exists(dir), "could not remove %s", dir);
}

void test_vformat_command(char *cmd, size_t cap, const char *fmt, va_list ap)
{
    int n = vsnprintf(cmd, cap, fmt, ap);
    cr_assert(n > 0 && (size_t)n < cap, "command too long: %.200s...", cmd);
}

int test_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    test_vformat_command(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int test_run_python(const char *dir, const char *code) { return test_run_python_with("/usr/bin/python3", dir, code); }

int test_run_python_with(const char *python, const char *dir, const char *code)
{
    test_write_text(test_path(dir, "check.py"), code);
    return test_sh("cd '%s' && '%s' check.py", dir, python);
}

int test_sanitized(void) { return !strcmp(test_env_or("ESPNET3_SANITIZED", ""), "1"); }

void test_skip_under_sanitizer(const char *why)
{
    if (test_sanitized()) cr_skip_test("make asan: %s", why);
}

const char *test_venv_tool(const char *tool)
{
    static char path[4096];
    if (!strcmp(test_env_or("ESPNET3_NO_TEST_VENV", ""), "1"))
        cr_skip_test("%s", test_sanitized()
                         ? "make asan: the checks by PyTorch, torchrun and safetensors run in make check's plain build"
                         : "ESPNET3_NO_TEST_VENV=1: no venv with PyTorch and safetensors (scripts/install_test_venv.sh)");
    const char *venv = getenv("ESPNET3_TEST_VENV");
    char dflt[3000];
    if (!venv || !*venv) {
        const char *cache = getenv("XDG_CACHE_HOME"), *home = test_env_or("HOME", "/root");
        if (cache && *cache) snprintf(dflt, sizeof dflt, "%s/espnet3/test-venv", cache);
        else snprintf(dflt, sizeof dflt, "%s/.cache/espnet3/test-venv", home);
        venv = dflt;
    }
    snprintf(path, sizeof path, "%s/bin/%s", venv, tool);
    if (access(path, X_OK) != 0)
        cr_skip_test("%s is not there: the venv of the real-world checks is not installed (make check installs it: "
                     "scripts/install_test_venv.sh)", path);
    return path;
}

int test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0, "cannot open a socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Whether port is free on the loopback now (a bind to it succeeds). */
static int port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0, "cannot open a socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int test_free_port_pair(void)
{
    for (int tries = 0; tries < 100; tries++) {
        int port = test_free_port();
        if (port < 65535 && port_free(port + 1)) return port;
    }
    cr_assert_fail("no two free neighbouring ports in 100 tries");
    return 0;
}

double test_st_max_diff(const char *path_a, const char *path_b, const char *only, const char *skip)
{
    st_file a, b;
    esp_err err;
    cr_assert_eq(st_read(path_a, &a, &err), 0, "%s", err.msg);
    cr_assert_eq(st_read(path_b, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(a.n, b.n);
    double worst = 0;
    for (size_t i = 0; i < a.n; i++) {
        const st_tensor *ta = &a.tensors[i], *tb = st_get(&b, ta->name);
        if ((only && !strstr(ta->name, only)) || (skip && strstr(ta->name, skip))) continue;
        cr_assert_not_null(tb, "%s missing in %s", ta->name, path_b);
        cr_assert_eq(st_numel(ta), st_numel(tb));
        const float *x = ta->data, *y = tb->data;
        for (int64_t k = 0; k < st_numel(ta); k++) {
            double d = fabs((double)x[k] - y[k]) / (1 + fabs((double)y[k]));
            if (isnan(d)) d = INFINITY; /* NaN counts as worst, and stays so: no later value is larger */
            if (d > worst) worst = d;
        }
    }
    st_close(&a);
    st_close(&b);
    return worst;
}

int test_count_lines(const char *s)
{
    int n = 0;
    for (; s && *s; s++) n += *s == '\n';
    return n;
}

/* One comparison (test_err_*): a and b as float or double arrays (a_f64, b_f64), b scaled by s. */
static double err_run(const void *a, int a_f64, const void *b, int b_f64, size_t n, double s, int relative,
                      long *bad)
{
    double num = 0, den = 0;
    long first_bad = -1;
    for (size_t i = 0; i < n && first_bad < 0; i++) {
        double x = a_f64 ? ((const double *)a)[i] : ((const float *)a)[i];
        double y = s * (b_f64 ? ((const double *)b)[i] : ((const float *)b)[i]);
        if (isnan(x) || isnan(y) || ((isinf(x) || isinf(y)) && x != y)) first_bad = (long)i;
        else if (!isinf(x)) num = fmax(num, fabs(x - y)), den = fmax(den, fabs(y)); /* equal infinities: 0 */
    }
    if (bad) *bad = first_bad;
    if (first_bad >= 0) return INFINITY;
    return relative && den > 0 ? num / den : num;
}

double test_err_ff(const float *a, const float *b, size_t n, double scale_b, long *bad)
{
    return err_run(a, 0, b, 0, n, scale_b, 1, bad);
}

double test_err_fd(const float *a, const double *b, size_t n, long *bad) { return err_run(a, 0, b, 1, n, 1, 1, bad); }

double test_err_dd(const double *a, const double *b, size_t n, long *bad) { return err_run(a, 1, b, 1, n, 1, 1, bad); }

double test_err_abs_ff(const float *a, const float *b, size_t n, long *bad) { return err_run(a, 0, b, 0, n, 1, 0, bad); }

double test_err_abs_fd(const float *a, const double *b, size_t n, long *bad) { return err_run(a, 0, b, 1, n, 1, 0, bad); }

double test_err_abs_dd(const double *a, const double *b, size_t n, long *bad)
{
    return err_run(a, 1, b, 1, n, 1, 0, bad);
}

double test_max_abs(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) return INFINITY;
        m = fmax(m, fabs((double)x[i]));
    }
    return m;
}

/* Skipped tests are counted and named after Criterion's summary (which counts them nowhere): a
 * test that cannot run here (no GPU, no torchrun) is reported as skipped, never as passed. Tests
 * a --filter left out are not named. */
static char skipped_names[8192];
static size_t skipped_len, skipped_n;

ReportHook(POST_TEST)(struct criterion_test_stats *stats)
{
    if (stats->test_status != CR_STATUS_SKIPPED || (stats->test->data && stats->test->data->disabled)) return;
    skipped_n++;
    if (skipped_len < sizeof skipped_names - 256)
        skipped_len += (size_t)snprintf(skipped_names + skipped_len, sizeof skipped_names - skipped_len,
                                        "\n  %s::%s: %s", stats->test->category, stats->test->name,
                                        stats->message ? stats->message : "");
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    fprintf(stderr, "[====] Skipped here: %zu%s\n", skipped_n, skipped_names);
}

double *test_npz_doubles(const npz_file *f, const char *path, const char *name, size_t want)
{
    esp_err err;
    double *x;
    size_t n;
    cr_assert_eq(npz_get_doubles(f, path, name, &x, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, want, "%s: %s has %zu values, want %zu", path, name, n, want);
    return x;
}

int *test_npz_ints(const npz_file *f, const char *path, const char *name, size_t want)
{
    double *x = test_npz_doubles(f, path, name, want);
    int *v = xmalloc(want * sizeof *v);
    for (size_t i = 0; i < want; i++) v[i] = (int)x[i];
    free(x);
    return v;
}

double test_npz_one(const npz_file *f, const char *path, const char *name)
{
    double *x = test_npz_doubles(f, path, name, 1), v = x[0];
    free(x);
    return v;
}

/* The program registers the recipes' own keys before it loads a config (cli/main.c); the tests load
 * configs as it does. */
__attribute__((constructor)) static void register_recipes(void) { stages_register_recipes(); }
