/* Reverberation and additive noise (core/data/noise_rir.c) against ESPnet2's CommonPreprocessor
 * on fixtures (scripts/make_noise_rir_fixtures.py: its _convolve_rir, _add_noise and
 * detect_non_silence with fixed draws), the config keys, and draws keyed by the utterance only. */
#include <criterion/criterion.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/noise_rir.h"
#include "test/unit/test_util.h"

static void quiet(void) { log_set_quiet(1); }

TestSuite(noise_rir, .init = quiet);

static double *read_fixture(const char *name, size_t *n)
{
    char *dir = path_join(test_root_dir(), "test/fixtures/noise_rir");
    char *file = xasprintf("%s.f32", name);
    size_t len;
    esp_err err;
    char *b = read_file(test_path(dir, file), READ_LIST, &len, &err);
    cr_assert_not_null(b, "%s", err.msg);
    *n = len / sizeof(float);
    double *x = xmalloc((*n ? *n : 1) * sizeof *x);
    for (size_t i = 0; i < *n; i++) {
        float f;
        memcpy(&f, b + i * sizeof f, sizeof f);
        x[i] = f;
    }
    free(b);
    free(file);
    free(dir);
    return x;
}

static void read_params(double p[8])
{
    char *dir = path_join(test_root_dir(), "test/fixtures/noise_rir");
    char *text = test_slurp(test_path(dir, "params.txt"));
    cr_assert_eq(sscanf(text, "%lf %lf %lf %lf %lf %lf %lf %lf", &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6],
                        &p[7]), 8);
    free(text);
    free(dir);
}

static double peak(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

/* max |a - b| below 1e-4 of b's peak */
static void assert_close(const double *a, const double *b, size_t n, const char *what)
{
    double tol = 1e-4 * peak(b, n), worst = test_err_abs_dd(a, b, n, NULL);
    cr_assert(worst <= tol, "%s: max error %g above %g", what, worst, tol);
}

Test(noise_rir, detect_non_silence_and_power_match_espnet)
{
    size_t n, nm;
    double *x = read_fixture("speech", &n), *m = read_fixture("mask", &nm);
    cr_assert_eq(n, nm);
    unsigned char *mask = xmalloc(n);
    nr_detect_non_silence(x, n, mask);
    size_t off = 0, zeros = 0;
    for (size_t i = 0; i < n; i++) off += mask[i] != (m[i] != 0), zeros += m[i] == 0;
    cr_assert_eq(off, 0, "%zu samples differ", off);
    cr_assert(zeros > 1000, "the fixture has a silent stretch (%zu samples)", zeros);
    double p[8];
    read_params(p);
    cr_assert(fabs(nr_power(x, n) - p[0]) < 1e-9 * p[0], "power %.12g vs %.12g", nr_power(x, n), p[0]);
    /* shorter than a frame: every sample counts */
    nr_detect_non_silence(x, 100, mask);
    for (size_t i = 0; i < 100; i++) cr_assert_eq(mask[i], 1);
    free(mask), free(x), free(m);
}

Test(noise_rir, rir_and_noise_match_espnet_preprocessor)
{
    size_t n, nr, ns, nl, k;
    double p[8];
    read_params(p);
    double *x = read_fixture("speech", &n), *rir = read_fixture("rir", &nr);
    double *ns_x = read_fixture("noise_short", &ns), *nl_x = read_fixture("noise_long", &nl);
    cr_assert(ns < n && nl > n);
    double power = nr_power(x, n);

    double *y = xmalloc(n * sizeof *y), *seg = xmalloc(n * sizeof *seg);
    memcpy(y, x, n * sizeof *y);
    nr_convolve_rir(y, n, rir, nr, power);
    double *want = read_fixture("out_rir", &k);
    cr_assert_eq(k, n);
    assert_close(y, want, n, "rir");
    free(want);

    /* shorter noise: wrapped around offset 1234; longer: the window at 2345 */
    memcpy(y, x, n * sizeof *y);
    nr_noise_segment(ns_x, ns, n, (size_t)p[2], seg);
    nr_add_noise(y, n, seg, power, p[1]);
    want = read_fixture("out_noise_short", &k);
    assert_close(y, want, n, "short noise");
    free(want);
    memcpy(y, x, n * sizeof *y);
    nr_noise_segment(nl_x, nl, n, (size_t)p[4], seg);
    nr_add_noise(y, n, seg, power, p[3]);
    want = read_fixture("out_noise_long", &k);
    assert_close(y, want, n, "long noise");
    free(want);

    /* both, with the original speech's power for the noise, then ESPnet's peak normalization */
    memcpy(y, x, n * sizeof *y);
    nr_convolve_rir(y, n, rir, nr, power);
    nr_noise_segment(nl_x, nl, n, (size_t)p[6], seg);
    nr_add_noise(y, n, seg, power, p[5]);
    double pk = peak(y, n);
    cr_assert(fabs(pk - p[7]) < 1e-4 * p[7], "peak %g vs %g", pk, p[7]);
    for (size_t i = 0; i < n; i++) y[i] /= pk;
    want = read_fixture("out_both", &k);
    assert_close(y, want, n, "rir + noise");
    free(want);
    free(y), free(seg), free(x), free(rir), free(ns_x), free(nl_x);
}

static void write_wav(const char *path, const double *x, size_t n, int fs)
{
    SF_INFO info = {.samplerate = fs, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_FLOAT};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    cr_assert_not_null(sf, "%s", sf_strerror(NULL));
    cr_assert_eq(sf_writef_double(sf, x, (sf_count_t)n), (sf_count_t)n);
    sf_close(sf);
}

/* yaml (a `preprocessor:` block) under `dataset:` of a training config, loaded (its rules checked),
 * then its noise and reverberation read. */
static int parse_pre(const char *yaml, noise_rir_conf *c, esp_err *err)
{
    size_t cap = 16 + 3 * strlen(yaml), k = 0;
    char *text = xmalloc(cap);
    k += (size_t)snprintf(text, cap, "dataset:\n  ");
    for (const char *p = yaml; *p; p++) {
        text[k++] = *p;
        if (*p == '\n' && p[1]) text[k++] = ' ', text[k++] = ' ';
    }
    text[k] = '\0';
    ynode *root = yt_parse_string(text, k, "pre.yaml", err);
    free(text);
    cr_assert_not_null(root, "%s", err->msg);
    esp_config *cfg;
    if (config_load_tree(CONFIG_TRAINING, root, "pre.yaml", 0, &cfg, err) != 0) return -1;
    int rc = noise_rir_conf_read(cfg, c, err);
    config_free(cfg);
    return rc;
}

Test(noise_rir, config_reads_scp_files_and_draws_by_utterance)
{
    char dir[256];
    test_tmpdir_make(dir, sizeof dir, "noise_rir");
    size_t n, nr, nl;
    double *x = read_fixture("speech", &n), *rir = read_fixture("rir", &nr), *nl_x = read_fixture("noise_long", &nl);
    char *rp = path_join(dir, "rir1.wav"), *np = path_join(dir, "n1.wav"), *n8 = path_join(dir, "n8k.wav");
    write_wav(rp, rir, nr, 16000);
    write_wav(np, nl_x, nl, 16000);
    write_wav(n8, nl_x, 800, 8000);
    char *rscp = path_join(dir, "rirs.scp"), *nscp = path_join(dir, "noises.scp"), *bad = path_join(dir, "bad.scp");
    char *t = xasprintf("r1 %s\n\n", rp);
    test_write_text(rscp, t);
    free(t);
    t = xasprintf("%s\n", np);
    test_write_text(nscp, t);
    free(t);
    t = xasprintf("x %s\n", n8);
    test_write_text(bad, t);
    free(t);

    noise_rir_conf c;
    esp_err err;
    char *y = xasprintf("preprocessor:\n  rir_scp: %s\n  rir_apply_prob: 0.5\n  noise_scp: [%s]\n"
                        "  noise_apply_prob: 1.0\n  noise_db_range: \"-3_4\"\n  short_noise_thres: 0.5\n", rscp, nscp);
    cr_assert_eq(parse_pre(y, &c, &err), 0, "%s", err.msg);
    free(y);
    cr_assert_eq(c.n_rirs, 1);
    cr_assert_eq(c.n_noises, 1);
    cr_assert_eq(c.rirs[0].n, nr);
    cr_assert_float_eq(c.rir_prob, 0.5, 1e-12);
    cr_assert_float_eq(c.db_lo, -3, 1e-12);
    cr_assert_float_eq(c.db_hi, 4, 1e-12);
    cr_assert_eq(noise_rir_conf_check_fs(&c, 16000, "fs", &err), 0, "%s", err.msg);
    cr_assert_neq(noise_rir_conf_check_fs(&c, 8000, "fs", &err), 0);

    /* the same generator state gives the same result; another gives another; length kept, peak <= 1 */
    float *xf = xmalloc(n * sizeof *xf);
    for (size_t i = 0; i < n; i++) xf[i] = (float)x[i];
    rng r1, r2, r3;
    rng_init(&r1, 42), rng_init(&r2, 42), rng_init(&r3, 43);
    float *a = noise_rir_apply(&c, xf, n, &r1), *b = noise_rir_apply(&c, xf, n, &r2), *d = noise_rir_apply(&c, xf, n, &r3);
    cr_assert(a && b && d);
    cr_assert_eq(memcmp(a, b, n * sizeof *a), 0);
    cr_assert_neq(memcmp(a, d, n * sizeof *a), 0);
    for (size_t i = 0; i < n; i++) cr_assert(fabsf(a[i]) <= 1.0f);
    free(a), free(b), free(d), free(xf);
    noise_rir_conf_free(&c);

    /* errors name the key and the file */
    cr_assert_neq(parse_pre("preprocessor:\n  noise_scp: /nonexistent/n.scp\n", &c, &err), 0);
    cr_assert(strstr(err.msg, "noise_scp") && strstr(err.msg, "/nonexistent/n.scp"), "%s", err.msg);
    y = xasprintf("preprocessor:\n  noise_scp: %s\n  noise_db_range: \"10_3\"\n", nscp);
    cr_assert_neq(parse_pre(y, &c, &err), 0);
    cr_assert(strstr(err.msg, "noise_db_range"), "%s", err.msg);
    free(y);
    y = xasprintf("preprocessor:\n  noise_scp: %s\n  noise_apply_prob: 1.5\n", nscp);
    cr_assert_neq(parse_pre(y, &c, &err), 0);
    cr_assert(strstr(err.msg, "noise_apply_prob"), "%s", err.msg);
    free(y);
    y = xasprintf("preprocessor:\n  rir_scp: %s\n", bad);
    cr_assert_eq(parse_pre(y, &c, &err), 0, "%s", err.msg);
    cr_assert_neq(noise_rir_conf_check_fs(&c, 16000, "model.frontend_conf.fs", &err), 0);
    cr_assert(strstr(err.msg, "n8k.wav") && strstr(err.msg, "8000"), "%s", err.msg);
    noise_rir_conf_free(&c);
    free(y);
    char *empty = path_join(dir, "empty.scp");
    test_write_text(empty, "\n  \n");
    y = xasprintf("preprocessor:\n  rir_scp: %s\n", empty);
    cr_assert_neq(parse_pre(y, &c, &err), 0);
    cr_assert(strstr(err.msg, "empty.scp: lists no audio files") && strstr(err.msg, "rir_scp"), "%s", err.msg);
    free(y), free(empty);
    char **paths;
    size_t n_paths;
    cr_assert_eq(nr_scp_read(rscp, &paths, &n_paths, &err), 0, "%s", err.msg);
    cr_assert_eq(n_paths, 1);
    cr_assert_str_eq(paths[0], rp); /* "<id> <path>": the path */
    nr_scp_free(paths, n_paths);
    cr_assert_eq(parse_pre("preprocessor:\n  fs: 16000\n", &c, &err), 0);
    cr_assert_eq(noise_rir_conf_active(&c), 0);
    noise_rir_conf_free(&c);

    free(rp), free(np), free(n8), free(rscp), free(nscp), free(bad), free(x), free(rir), free(nl_x);
    test_tmpdir_remove(dir);
}
