/* The speed-perturbed copies of the training set (core/data/speed_perturb.h). */
#include "core/data/speed_perturb.h"
#include "core/data/dataset_src.h"

#include <math.h>
#include <samplerate.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/fsio.h"
#include "core/base/parallel.h"
#include "core/data/audio.h"

int speed_perturb_wave(const float *x, size_t n, double factor, float **y, size_t *ny, esp_err *err)
{
    double ratio = 1.0 / factor; /* output rate / input rate at an unchanged sample rate */
    size_t cap = (size_t)ceil((double)n * ratio) + 64;
    float *out = xmalloc(cap * sizeof *out);
    SRC_DATA d = {.data_in = x, .data_out = out, .input_frames = (long)n, .output_frames = (long)cap,
                  .src_ratio = ratio};
    int rc = n ? src_simple(&d, SRC_SINC_MEDIUM_QUALITY, 1) : 0;
    if (rc != 0) {
        free(out);
        return esp_fail(err, "speed perturbation %g: libsamplerate: %s", factor, src_strerror(rc));
    }
    *y = out;
    *ny = (size_t)d.output_frames_gen;
    return 0;
}

char *speed_perturb_utt(double factor, const char *utt) { return xasprintf("sp%g-%s", factor, utt); }

/* A copy is current when it exists and is not older than its source. */
static int is_current(const char *copy, const char *src)
{
    struct stat a, b;
    if (stat(copy, &a) != 0 || stat(src, &b) != 0) return 0;
    return a.st_mtim.tv_sec > b.st_mtim.tv_sec ||
           (a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec >= b.st_mtim.tv_nsec);
}

/* An utterance id as a file name: '/' would make folders. */
static char *file_name_of(const char *utt)
{
    char *s = xasprintf("%s.wav", utt);
    for (char *p = s; *p; p++)
        if (*p == '/') *p = '_';
    return s;
}

typedef struct sp_job {
    const manifest *in;
    const double *factors; /* the ones != 1.0 */
    size_t nf;
    char **dirs;           /* out_dir/sp<f> per factor */
    char **paths;          /* in->n x nf copy paths */
    int fs;
    int *made;             /* per copy: 1 written, 0 reused */
    int *failed;           /* per utterance */
    esp_err *errs;         /* per utterance */
} sp_job;

static void perturb_range(void *ctx, size_t lo, size_t hi)
{
    sp_job *j = ctx;
    for (size_t i = lo; i < hi; i++) {
        const manifest_entry *e = &j->in->items[i];
        float *x = NULL;
        size_t n = 0;
        for (size_t k = 0; k < j->nf && !j->failed[i]; k++) {
            const char *path = j->paths[i * j->nf + k];
            if (is_current(path, e->wav)) continue;
            if (!x && audio_read(e->wav, j->fs, "model.frontend_conf.fs", &x, &n, &j->errs[i]) != 0) {
                j->failed[i] = 1;
                break;
            }
            float *y;
            size_t m;
            if (speed_perturb_wave(x, n, j->factors[k], &y, &m, &j->errs[i]) != 0) {
                j->failed[i] = 1;
                break;
            }
            if (audio_write_wav16(path, y, m, j->fs, AUDIO_PCM16_EXACT, &j->errs[i]) != 0) j->failed[i] = 1;
            else j->made[i * j->nf + k] = 1;
            free(y);
        }
        free(x);
    }
}

int speed_perturb_manifest(const manifest *in, const double *factors, size_t n_factors, const char *out_dir, int fs,
                           int threads, manifest *out, sp_stats *st, esp_err *err)
{
    memset(out, 0, sizeof *out);
    memset(st, 0, sizeof *st);
    sp_job j = {.in = in, .fs = fs};
    double *fl = xmalloc((n_factors ? n_factors : 1) * sizeof *fl);
    int keep_orig = 0;
    for (size_t k = 0; k < n_factors; k++) {
        if (factors[k] == 1.0) keep_orig = 1;
        else fl[j.nf++] = factors[k];
    }
    j.factors = fl;
    j.dirs = xcalloc(j.nf ? j.nf : 1, sizeof *j.dirs);
    size_t ncopies = in->n * j.nf;
    j.paths = xcalloc(ncopies ? ncopies : 1, sizeof *j.paths);
    j.made = xcalloc(ncopies ? ncopies : 1, sizeof *j.made);
    j.failed = xcalloc(in->n ? in->n : 1, sizeof *j.failed);
    j.errs = xcalloc(in->n ? in->n : 1, sizeof *j.errs);
    int rc = 0;
    for (size_t k = 0; k < j.nf && rc == 0; k++) {
        char *sub = xasprintf("sp%g", j.factors[k]);
        j.dirs[k] = path_join(out_dir, sub);
        free(sub);
        rc = mkdir_p(j.dirs[k], err);
    }
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        char *name = file_name_of(in->items[i].utt);
        for (size_t k = 0; k < j.nf; k++) j.paths[i * j.nf + k] = path_join(j.dirs[k], name);
        free(name);
    }
    if (rc == 0) parallel_ranges(in->n, 1, threads, perturb_range, &j);
    for (size_t i = 0; i < in->n && rc == 0; i++)
        if (j.failed[i]) rc = esp_fail(err, "speed_perturb_factors: %s: %s", in->items[i].utt, j.errs[i].msg);
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const manifest_entry *e = &in->items[i];
        if (keep_orig) manifest_add(out, e->utt, e->wav, e->text, e->spk);
        for (size_t k = 0; k < j.nf; k++) {
            char *utt = speed_perturb_utt(j.factors[k], e->utt);
            char *spk = e->spk ? speed_perturb_utt(j.factors[k], e->spk) : NULL;
            manifest_add(out, utt, j.paths[i * j.nf + k], e->text, spk);
            free(utt), free(spk);
            if (j.made[i * j.nf + k]) st->made++;
            else st->reused++;
        }
    }
    if (rc == 0) manifest_sort(out);
    else manifest_free(out);
    for (size_t k = 0; k < j.nf; k++) free(j.dirs[k]);
    for (size_t c = 0; c < ncopies; c++) free(j.paths[c]);
    free(j.dirs), free(j.paths), free(j.made), free(j.failed), free(j.errs), free(fl);
    return rc;
}

char *split_manifest_path(const training_cfg *cfg, const char *split)
{
    int sp = !strcmp(split, "train") && cfg->n_speed_perturb_factors > 0;
    return xasprintf("%s/manifest/%s.tsv", cfg->data_dir, sp ? "train_sp" : split);
}

/* The copies are whole files: a Kaldi segment would need cutting first, which is not done. */
static int no_segments(const manifest *m, const char *what, esp_err *err)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->items[i].end > 0)
            return esp_fail(err, "%s: utterance %s is a segment of %s; speed_perturb_factors needs whole-file "
                                 "utterances (drop speed_perturb_factors or give the segments as files)",
                            what, m->items[i].utt, m->items[i].wav);
    return 0;
}

int speed_perturb_prepare(const training_cfg *cfg, int fs, int threads, esp_err *err)
{
    if (!cfg->n_speed_perturb_factors) return 0;
    char *src = NULL;
    char *dst = split_manifest_path(cfg, "train");
    char *dir = xasprintf("%s/speed_perturb", cfg->data_dir);
    manifest in = {0}, out = {0};
    sp_stats st;
    int rc = -1;
    if (dataset_split_load_original(cfg, "train", &in, &src, err) == 0 && no_segments(&in, src, err) == 0 &&
        speed_perturb_manifest(&in, cfg->speed_perturb_factors, cfg->n_speed_perturb_factors, dir, fs, threads,
                               &out, &st, err) == 0 &&
        manifest_write_tsv(dst, &out, err) == 0) {
        log_info("speed perturbation: %zu training utterances -> %zu in %s (%zu copies made, %zu reused)", in.n, out.n,
                 dst, st.made, st.reused);
        rc = 0;
    }
    manifest_free(&in);
    manifest_free(&out);
    free(src), free(dst), free(dir);
    return rc;
}
