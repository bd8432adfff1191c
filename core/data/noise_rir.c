/* Reverberation and additive noise (core/data/noise_rir.h). */
#include "core/data/noise_rir.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/augment.h"
#include "core/data/fft_plan.h"

#define NS_FRAME 1024
#define NS_SHIFT 512
#define NS_THRESHOLD 0.01

void nr_detect_non_silence(const double *x, size_t n, unsigned char *mask)
{
    if (n < NS_FRAME) {
        memset(mask, 1, n);
        return;
    }
    /* framing(padded=True): zeros up to frame_length + k * shift. */
    size_t nadd = (NS_SHIFT - (n - NS_FRAME) % NS_SHIFT) % NS_SHIFT;
    size_t T = (n + nadd - NS_FRAME) / NS_SHIFT + 1;
    double *power = xmalloc(T * sizeof *power);
    double mean = 0;
    for (size_t t = 0; t < T; t++) {
        double s = 0;
        for (size_t k = 0; k < NS_FRAME; k++) {
            size_t i = t * NS_SHIFT + k;
            if (i < n) s += x[i] * x[i];
        }
        power[t] = s / NS_FRAME;
        mean += power[t];
    }
    mean /= (double)T;
    if (mean == 0) {
        memset(mask, 1, n);
        free(power);
        return;
    }
    /* Each frame marks its first `shift` samples; the tail repeats the last frame's mark. */
    for (size_t i = 0; i < n; i++) {
        size_t t = i / NS_SHIFT;
        if (t >= T) t = T - 1;
        mask[i] = power[t] / mean > NS_THRESHOLD;
    }
    free(power);
}

double nr_power(const double *x, size_t n)
{
    unsigned char *mask = xmalloc(n ? n : 1);
    nr_detect_non_silence(x, n, mask);
    double s = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (mask[i]) s += x[i] * x[i], k++;
    free(mask);
    return k ? s / (double)k : NAN; /* numpy's mean of nothing */
}

void nr_convolve_rir(double *x, size_t n, const double *rir, size_t m, double power)
{
    if (n == 0) return;
    size_t L = n + (m ? m : 1) - 1, N = 1;
    while (N < L) N *= 2;
    size_t F = N / 2 + 1;
    double *a = fftw_malloc(N * sizeof *a), *b = fftw_malloc(N * sizeof *b);
    fftw_complex *A = fftw_malloc(F * sizeof *A), *B = fftw_malloc(F * sizeof *B);
    fft_plan_lock();
    fftw_plan pa = fftw_plan_dft_r2c_1d((int)N, a, A, FFTW_ESTIMATE);
    fftw_plan pb = fftw_plan_dft_r2c_1d((int)N, b, B, FFTW_ESTIMATE);
    fftw_plan pi = fftw_plan_dft_c2r_1d((int)N, A, a, FFTW_ESTIMATE);
    fft_plan_unlock();
    memset(a, 0, N * sizeof *a);
    memset(b, 0, N * sizeof *b);
    memcpy(a, x, n * sizeof *a);
    if (m) memcpy(b, rir, m * sizeof *b);
    fftw_execute(pa);
    fftw_execute(pb);
    for (size_t k = 0; k < F; k++) {
        double re = A[k][0] * B[k][0] - A[k][1] * B[k][1];
        double im = A[k][0] * B[k][1] + A[k][1] * B[k][0];
        A[k][0] = re, A[k][1] = im;
    }
    fftw_execute(pi);
    for (size_t i = 0; i < n; i++) x[i] = a[i] / (double)N;
    fft_plan_lock();
    fftw_destroy_plan(pa);
    fftw_destroy_plan(pb);
    fftw_destroy_plan(pi);
    fft_plan_unlock();
    fftw_free(a), fftw_free(b), fftw_free(A), fftw_free(B);
    double power2 = nr_power(x, n);
    double g = sqrt(power / fmax(power2, 1e-10));
    for (size_t i = 0; i < n; i++) x[i] *= g;
}

void nr_noise_segment(const double *noise, size_t nn, size_t n, size_t offset, double *out)
{
    if (nn >= n) {
        memcpy(out, noise + (nn > n ? offset : 0), n * sizeof *out);
        return;
    }
    /* np.pad(noise, (offset, n - nn - offset), mode="wrap"): periodic around the copy at offset. */
    for (size_t j = 0; j < n; j++) out[j] = noise[((j + nn) - offset % nn) % nn];
}

void nr_add_noise(double *x, size_t n, const double *noise, double power, double noise_db)
{
    double np = 0;
    for (size_t i = 0; i < n; i++) np += noise[i] * noise[i];
    np = n ? np / (double)n : NAN;
    double scale = pow(10.0, -noise_db / 20.0) * sqrt(power) / sqrt(fmax(np, 1e-10));
    for (size_t i = 0; i < n; i++) x[i] += scale * noise[i];
}

/* numpy's randint(0, hi) (hi > 0) and choice(k) stand-ins from the utterance's generator. */
static size_t draw_index(rng *r, size_t hi) { return (size_t)rng_uniform_int(r, 0, (int64_t)hi - 1); }

float *noise_rir_apply(const noise_rir_conf *c, const float *x, size_t n, rng *r)
{
    if (!noise_rir_conf_active(c) || n == 0) return NULL;
    double *y = xmalloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    double power = nr_power(y, n);
    int changed = 0;
    if (c->n_rirs && c->rir_prob >= aug_uniform(r)) {
        const nr_signal *h = &c->rirs[draw_index(r, c->n_rirs)];
        nr_convolve_rir(y, n, h->x, h->n, power);
        changed = 1;
    }
    if (c->n_noises && c->noise_prob >= aug_uniform(r)) {
        const nr_signal *z = &c->noises[draw_index(r, c->n_noises)];
        double db = c->db_lo + (c->db_hi - c->db_lo) * aug_uniform(r);
        size_t offset = z->n < n ? draw_index(r, n - z->n) : z->n > n ? draw_index(r, z->n - n) : 0;
        double *seg = xmalloc(n * sizeof *seg);
        nr_noise_segment(z->x, z->n, n, offset, seg);
        nr_add_noise(y, n, seg, power, db);
        free(seg);
        changed = 1;
    }
    if (!changed) {
        free(y);
        return NULL;
    }
    double peak = 0;
    for (size_t i = 0; i < n; i++) peak = fmax(peak, fabs(y[i]));
    float *out = xmalloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++) out[i] = (float)(peak > 1.0 ? y[i] / peak : y[i]);
    free(y);
    return out;
}
