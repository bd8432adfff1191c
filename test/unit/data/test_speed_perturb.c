/* Speed perturbation of the training set (speed_perturb_factors): lengths and pitch of the
 * copies, ESPnet2's sp<f>- ids, the manifest, reuse on a rerun, and errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <utime.h>

#include "core/base/fsio.h"
#include "core/data/audio.h"
#include "core/data/speed_perturb.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void)
{
    log_set_quiet(1);
    test_tmpdir_make(dir, sizeof dir, "sp");
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(speed_perturb, .init = setup, .fini = teardown);

static void write_tone(const char *name, int n, double hz)
{
    SF_INFO info = {.samplerate = 16000, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(test_path(dir, name), SFM_WRITE, &info);
    cr_assert_not_null(sf);
    short *s = calloc((size_t)n, sizeof *s);
    for (int i = 0; i < n; i++) s[i] = (short)(10000 * sin(2 * M_PI * hz * i / 16000.0));
    sf_write_short(sf, s, n);
    sf_close(sf);
    free(s);
}

/* Upward zero crossings in [lo, hi). */
static int crossings(const float *x, size_t lo, size_t hi)
{
    int c = 0;
    for (size_t i = lo + 1; i < hi; i++) c += x[i - 1] < 0 && x[i] >= 0;
    return c;
}

Test(speed_perturb, lengths_and_pitch_follow_the_factor)
{
    size_t n = 16000;
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(0.5 * sin(2 * M_PI * 200 * (double)i / 16000));
    const double f[] = {0.9, 1.1, 1.3};
    for (int k = 0; k < 3; k++) {
        float *y;
        size_t m;
        esp_err err;
        cr_assert_eq(speed_perturb_wave(x, n, f[k], &y, &m, &err), 0, "%s", err.msg);
        cr_assert(fabs((double)m - n / f[k]) <= 2, "factor %g: %zu samples for %zu", f[k], m, n);
        /* 200 Hz played f times as fast is 200 f Hz: crossings over the middle 0.5 s. */
        int c = crossings(y, m / 4, m / 4 + 8000);
        cr_assert(abs(c - (int)lround(100 * f[k])) <= 1, "factor %g: %d crossings in 0.5 s", f[k], c);
        free(y);
    }
    free(x);
    char *id = speed_perturb_utt(0.9, "spk1-utt7");
    cr_assert_str_eq(id, "sp0.9-spk1-utt7");
    free(id);
}

static manifest two_utts(void)
{
    write_tone("a.wav", 8000, 300);
    write_tone("b.wav", 4000, 500);
    manifest m = {0};
    manifest_add(&m, "b", test_path(dir, "b.wav"), "BEE", NULL);
    manifest_add(&m, "a", test_path(dir, "a.wav"), "AY", "spkA");
    return m;
}

static long mtime_ns(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s", path);
    return (long)(st.st_mtim.tv_sec % 100000) * 1000000000L + st.st_mtim.tv_nsec;
}

Test(speed_perturb, manifest_copies_ids_and_reuse)
{
    manifest in = two_utts(), out;
    const double f[] = {0.9, 1.0, 1.1};
    sp_stats st;
    esp_err err;
    const char *sp = test_path(dir, "sp");
    cr_assert_eq(speed_perturb_manifest(&in, f, 3, sp, 16000, 2, &out, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(out.n, 6u);
    cr_assert_eq(st.made, 4u);
    cr_assert_eq(st.reused, 0u);
    /* Sorted by id as Kaldi's LC_ALL=C sort: a, b, sp0.9-a, sp0.9-b, sp1.1-a, sp1.1-b. */
    const char *want[] = {"a", "b", "sp0.9-a", "sp0.9-b", "sp1.1-a", "sp1.1-b"};
    for (int i = 0; i < 6; i++) cr_assert_str_eq(out.items[i].utt, want[i]);
    cr_assert_str_eq(out.items[2].text, "AY");
    cr_assert_str_eq(out.items[2].spk, "sp0.9-spkA");
    cr_assert_null(out.items[3].spk);
    cr_assert_str_eq(out.items[4].wav, test_path(sp, "sp1.1/a.wav"));
    float *y;
    size_t n;
    cr_assert_eq(audio_read(out.items[2].wav, 16000, "fs", &y, &n, &err), 0, "%s", err.msg);
    cr_assert(fabs((double)n - 8000 / 0.9) <= 2, "%zu samples", n);
    free(y);
    long t = mtime_ns(out.items[5].wav);
    manifest_free(&out);

    /* A rerun reuses every copy (nothing rewritten). */
    cr_assert_eq(speed_perturb_manifest(&in, f, 3, sp, 16000, 1, &out, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(st.made, 0u);
    cr_assert_eq(st.reused, 4u);
    cr_assert_eq(mtime_ns(out.items[5].wav), t);
    manifest_free(&out);

    /* A source newer than its copies: they are made again. */
    struct utimbuf later = {.actime = time(NULL) + 100, .modtime = time(NULL) + 100};
    cr_assert_eq(utime(test_path(dir, "b.wav"), &later), 0);
    cr_assert_eq(speed_perturb_manifest(&in, f, 3, sp, 16000, 1, &out, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(st.made, 2u);
    cr_assert_eq(st.reused, 2u);
    manifest_free(&out);

    /* Without 1.0 the originals are not in the list. */
    const double only[] = {0.9};
    cr_assert_eq(speed_perturb_manifest(&in, only, 1, sp, 16000, 1, &out, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(out.n, 2u);
    cr_assert_str_eq(out.items[0].utt, "sp0.9-a");
    manifest_free(&out);
    manifest_free(&in);
}

Test(speed_perturb, unreadable_or_wrong_rate_audio_names_the_utterance)
{
    manifest in = two_utts(), out;
    manifest_add(&in, "c", test_path(dir, "missing.wav"), "SEE", NULL);
    const double f[] = {0.9, 1.0, 1.1};
    sp_stats st;
    esp_err err;
    cr_assert_eq(speed_perturb_manifest(&in, f, 3, test_path(dir, "sp"), 16000, 2, &out, &st, &err), -1);
    cr_assert(strstr(err.msg, "speed_perturb_factors: c: ") && strstr(err.msg, "missing.wav"), "%s", err.msg);
    manifest_free(&in);
    in = two_utts();
    cr_assert_eq(speed_perturb_manifest(&in, f, 3, test_path(dir, "sp8k"), 8000, 1, &out, &st, &err), -1);
    cr_assert(strstr(err.msg, "16000") && strstr(err.msg, "8000"), "%s", err.msg);
    manifest_free(&in);
}

Test(speed_perturb, split_manifest_path_uses_train_sp_only_for_train_with_factors)
{
    double f[] = {0.9, 1.0, 1.1};
    training_cfg c = {.data_dir = "/d"};
    char *p = split_manifest_path(&c, "train");
    cr_assert_str_eq(p, "/d/manifest/train.tsv");
    free(p);
    c.speed_perturb_factors = f, c.n_speed_perturb_factors = 3;
    p = split_manifest_path(&c, "train");
    cr_assert_str_eq(p, "/d/manifest/train_sp.tsv");
    free(p);
    p = split_manifest_path(&c, "valid");
    cr_assert_str_eq(p, "/d/manifest/valid.tsv");
    free(p);
}
