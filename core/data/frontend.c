#include "core/data/frontend.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/fft_plan.h"

/* The filterbank is ~98% zeros: triangles over increasing edges overlap only with their
 * neighbours, so each bin feeds at most two consecutive bands. Stored bin-major as
 * (band, weight into band, weight into band + 1), the mel projection is one pass over the bins
 * (~2 multiply-adds per bin instead of n_mels per bin in ESPnet2's dense matmul). */
typedef struct mel_bin {
    int band;      /* slot of the first band it feeds: band + 1 (0 ... n_mels + 2; slot 0 and the
                    * last two only collect bins with zero weights) */
    float w0, w1;  /* weights into band and band + 1 */
} mel_bin;

struct frontend {
    frontend_opts o;
    int n_bins, win_left; /* window occupies [win_left, win_left + win_length) of the frame */
    float *window;        /* win_length values (the nonzero part) */
    float *frame;         /* n_fft, FFTW-aligned; zero outside the window */
    fftwf_complex *spec;  /* n_bins */
    float *mel;           /* n_mels + 3 accumulation slots (see mel_bin) */
    fftwf_plan plan;
    mel_bin *bins;        /* n_bins */
};

void frontend_opts_from_cfg(const frontend_conf_cfg *c, frontend_opts *o)
{
    memset(o, 0, sizeof *o);
    if (c) {
        o->fs = (int)c->fs;
        o->n_fft = (int)c->n_fft;
        o->win_length = (int)c->win_length;
        o->hop_length = (int)c->hop_length;
        o->n_mels = (int)c->n_mels;
        o->fmin = c->fmin;
        o->fmax = c->fmax;
        /* Values that do not fit an int become -1 so the check reports them. */
        if (c->fs != o->fs) o->fs = -1;
        if (c->n_fft != o->n_fft) o->n_fft = -1;
        if (c->win_length != o->win_length) o->win_length = -1;
        if (c->hop_length != o->hop_length) o->hop_length = -1;
        if (c->n_mels != o->n_mels) o->n_mels = -1;
    }
    if (!o->fs) o->fs = 16000;
    if (!o->n_fft) o->n_fft = 512;
    if (!o->win_length) o->win_length = o->n_fft;
    if (!o->hop_length) o->hop_length = 128;
    if (!o->n_mels) o->n_mels = 80;
    /* fmin 0 is ESPnet2's default anyway; fmax 0 (unset) means fs/2 as librosa's None. */
    if (o->fmax == 0) o->fmax = o->fs / 2.0;
}

int frontend_opts_check(const frontend_opts *o, esp_err *err)
{
    const char *k = "model.frontend_conf";
    if (o->fs <= 0) return esp_fail(err, "%s.fs: must be a positive sample rate in Hz, got %d", k, o->fs);
    /* Odd sizes would change the frame count formula (torch pads n_fft // 2 on both sides). */
    if (o->n_fft < 2 || o->n_fft > (1 << 16) || o->n_fft % 2)
        return esp_fail(err, "%s.n_fft: must be even and in [2, 65536], got %d", k, o->n_fft);
    if (o->win_length <= 0 || o->win_length > o->n_fft)
        return esp_fail(err, "%s.win_length: must be in [1, n_fft=%d], got %d", k, o->n_fft, o->win_length);
    if (o->hop_length <= 0) return esp_fail(err, "%s.hop_length: must be positive, got %d", k, o->hop_length);
    if (o->n_mels <= 0 || o->n_mels > 4096)
        return esp_fail(err, "%s.n_mels: must be in [1, 4096], got %d", k, o->n_mels);
    if (!(o->fmin >= 0)) return esp_fail(err, "%s.fmin: must be >= 0, got %g", k, o->fmin);
    if (!(o->fmax > o->fmin) || o->fmax > o->fs / 2.0)
        return esp_fail(err, "%s.fmax: must be in (fmin=%g, fs/2=%g], got %g", k, o->fmin, o->fs / 2.0, o->fmax);
    return 0;
}

/* ---- librosa.filters.mel (htk=False, norm="slaney") ------------------------------------ */

static const double F_SP = 200.0 / 3, MIN_LOG_HZ = 1000.0, MIN_LOG_MEL = 1000.0 / (200.0 / 3);

static double hz_to_mel(double f)
{
    double logstep = log(6.4) / 27.0;
    return f >= MIN_LOG_HZ ? MIN_LOG_MEL + log(f / MIN_LOG_HZ) / logstep : f / F_SP;
}

static double mel_to_hz(double m)
{
    double logstep = log(6.4) / 27.0;
    return m >= MIN_LOG_MEL ? MIN_LOG_HZ * exp(logstep * (m - MIN_LOG_MEL)) : F_SP * m;
}

float *frontend_mel_matrix(const frontend_opts *o)
{
    int n_bins = o->n_fft / 2 + 1, M = o->n_mels;
    float *w = xcalloc((size_t)M * n_bins, sizeof *w);
    double *mel_f = xmalloc((size_t)(M + 2) * sizeof *mel_f);
    /* np.linspace(min_mel, max_mel, M + 2), then back to Hz. */
    double lo = hz_to_mel(o->fmin), hi = hz_to_mel(o->fmax), step = (hi - lo) / (M + 1);
    for (int i = 0; i < M + 2; i++) mel_f[i] = mel_to_hz(i == M + 1 ? hi : lo + i * step);
    for (int i = 0; i < M; i++) {
        double fd0 = mel_f[i + 1] - mel_f[i], fd1 = mel_f[i + 2] - mel_f[i + 1];
        double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        for (int k = 0; k < n_bins; k++) {
            double fk = k * ((double)o->fs / o->n_fft);
            double lower = -(mel_f[i] - fk) / fd0, upper = (mel_f[i + 2] - fk) / fd1;
            double tri = fmax(0.0, fmin(lower, upper));
            /* librosa stores the triangle in a float32 array, then scales it in place. */
            w[(size_t)i * n_bins + k] = (float)((double)(float)tri * enorm);
        }
    }
    free(mel_f);
    return w;
}

float *frontend_window(const frontend_opts *o)
{
    float *w = xcalloc((size_t)o->n_fft, sizeof *w);
    int left = (o->n_fft - o->win_length) / 2; /* torch.stft centres a shorter window */
    for (int k = 0; k < o->win_length; k++)
        w[left + k] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * k / o->win_length));
    return w;
}

/* ---- object ---------------------------------------------------------------------------- */

frontend *frontend_new(const frontend_opts *o)
{
    esp_err err;
    ESP_CHECK(frontend_opts_check(o, &err) == 0);
    frontend *f = xcalloc(1, sizeof *f);
    f->o = *o;
    f->n_bins = o->n_fft / 2 + 1;
    f->win_left = (o->n_fft - o->win_length) / 2;
    float *full = frontend_window(o);
    f->window = xmalloc((size_t)o->win_length * sizeof *f->window);
    memcpy(f->window, full + f->win_left, (size_t)o->win_length * sizeof *f->window);
    free(full);

    f->frame = fftwf_alloc_real((size_t)o->n_fft);
    f->spec = fftwf_alloc_complex((size_t)f->n_bins);
    f->mel = xmalloc((size_t)(o->n_mels + 3) * sizeof *f->mel);
    ESP_CHECK(f->frame && f->spec);
    fft_plan_lock();
    /* ESTIMATE picks the same algorithm on every run, so features are bit-identical across
     * processes and runs (collect_stats, training and decoding agree). */
    f->plan = fftwf_plan_dft_r2c_1d(o->n_fft, f->frame, f->spec, FFTW_ESTIMATE);
    fft_plan_unlock();
    ESP_CHECK(f->plan);
    memset(f->frame, 0, (size_t)o->n_fft * sizeof *f->frame);

    float *dense = frontend_mel_matrix(o);
    f->bins = xmalloc((size_t)f->n_bins * sizeof *f->bins);
    for (int k = 0; k < f->n_bins; k++) {
        int first = -1;
        for (int m = 0; m < o->n_mels; m++) {
            float w = dense[(size_t)m * f->n_bins + k];
            if (w == 0) continue;
            if (first < 0) first = m;
            ESP_CHECK(m <= first + 1); /* invariant of the triangular filterbank, see mel_bin */
        }
        mel_bin *b = &f->bins[k];
        if (first < 0) { /* feeds no band: into slots past the bands, so inf/NaN stays out */
            *b = (mel_bin){o->n_mels + 1, 0, 0};
            continue;
        }
        b->band = first + 1;
        b->w0 = dense[(size_t)first * f->n_bins + k];
        b->w1 = first + 1 < o->n_mels ? dense[(size_t)(first + 1) * f->n_bins + k] : 0;
    }
    free(dense);
    return f;
}

void frontend_free(frontend *f)
{
    if (!f) return;
    fft_plan_lock();
    fftwf_destroy_plan(f->plan);
    fft_plan_unlock();
    fftwf_free(f->frame);
    fftwf_free(f->spec);
    free(f->mel);
    free(f->window);
    free(f->bins);
    free(f);
}

size_t frontend_num_frames(const frontend *f, size_t n_samples)
{
    return n_samples / (size_t)f->o.hop_length + 1;
}

size_t frontend_min_samples(const frontend *f)
{
    return (size_t)f->o.n_fft / 2 + 1;
}

/* ---- compute --------------------------------------------------------------------------- */

/* Index into x of position i of the reflect-padded signal (numpy/torch "reflect": the edge
 * sample is not repeated). Valid for -n < i < 2n - 1. */
static inline ptrdiff_t reflect(ptrdiff_t i, ptrdiff_t n)
{
    if (i < 0) return -i;
    if (i >= n) return 2 * (n - 1) - i;
    return i;
}

void frontend_logmel(float *out, frontend *f, const float *x, size_t n_samples)
{
    ESP_CHECK(n_samples >= frontend_min_samples(f));
    const int n_fft = f->o.n_fft, hop = f->o.hop_length, win = f->o.win_length, M = f->o.n_mels;
    const ptrdiff_t n = (ptrdiff_t)n_samples, pad = n_fft / 2;
    const size_t T = frontend_num_frames(f, n_samples);
    float *restrict frame = f->frame + f->win_left;
    const float *restrict w = f->window;
    for (size_t t = 0; t < T; t++) {
        /* First sample under the window, in unpadded coordinates. */
        ptrdiff_t s = (ptrdiff_t)t * hop - pad + f->win_left;
        if (s >= 0 && s + win <= n) {
            const float *restrict xs = x + s;
            for (int k = 0; k < win; k++) frame[k] = xs[k] * w[k];
        } else {
            for (int k = 0; k < win; k++) frame[k] = x[reflect(s + k, n)] * w[k];
        }
        fftwf_execute(f->plan);
        const float *restrict sp = (const float *)f->spec;
        const mel_bin *restrict mb = f->bins;
        float *restrict mel = f->mel;
        memset(mel, 0, (size_t)(M + 3) * sizeof *mel);
        for (int k = 0; k < f->n_bins; k++) {
            float p = sp[2 * k] * sp[2 * k] + sp[2 * k + 1] * sp[2 * k + 1];
            mel[mb[k].band] += mb[k].w0 * p;
            mel[mb[k].band + 1] += mb[k].w1 * p;
        }
        float *restrict o = out + t * (size_t)M;
        for (int m = 0; m < M; m++) o[m] = logf(mel[m + 1] > 1e-10f ? mel[m + 1] : 1e-10f);
    }
}

void frontend_logmel_batch(float *out, size_t *out_lens, frontend *f, const float *const *x,
                           const size_t *n, int B)
{
    const size_t M = (size_t)f->o.n_mels;
    size_t T_max = 0;
    for (int b = 0; b < B; b++) {
        size_t T = frontend_num_frames(f, n[b]);
        if (T > T_max) T_max = T;
    }
    for (int b = 0; b < B; b++) {
        float *ob = out + (size_t)b * T_max * M;
        out_lens[b] = frontend_num_frames(f, n[b]);
        frontend_logmel(ob, f, x[b], n[b]);
        memset(ob + out_lens[b] * M, 0, (T_max - out_lens[b]) * M * sizeof *ob);
    }
}
