/* The effects of core/data/augment.h that go through a short-time Fourier transform, as ESPnet2
 * calls them: time_stretch (torch.stft -> torchaudio's phase_vocoder -> torch.istft), pitch_shift
 * (torchaudio.functional.pitch_shift: the same stretch, then resample back) and corrupt_phase
 * (Gaussian noise on the STFT phase). torch.stft/istft with center=True, reflect padding, onesided,
 * not normalized; the phase vocoder's arithmetic is done in float as torch does it (its cumulative
 * phase in double, stored in float), so the results stay within float rounding of torchaudio's. */
#include "core/data/augment.h"

#include <fftw3.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/data/fft_plan.h"

typedef struct stft_geom {
    int n_fft, win, hop, F;
    float *window; /* n_fft: the window centred in n_fft (zeros around), ones when none */
} stft_geom;

static void geom_init(stft_geom *g, const aug_effect *e, int fs)
{
    g->n_fft = (int)(fs * e->n_fft_s);
    g->hop = e->hop_s > 0 ? (int)(fs * e->hop_s) : g->n_fft / 4;
    g->win = e->win_samples > 0 ? (int)e->win_samples : g->n_fft;
    g->F = g->n_fft / 2 + 1;
    g->window = xcalloc((size_t)g->n_fft, sizeof *g->window);
    int off = (g->n_fft - g->win) / 2;
    /* window None: torch.stft's all-ones window, but torchaudio's pitch_shift makes a Hann one */
    int rect = e->window_none && e->kind != AUG_PITCH_SHIFT;
    for (int i = 0; i < g->win; i++)
        g->window[off + i] = rect ? 1.0f : (float)(0.5 - 0.5 * cos(2 * M_PI * i / g->win)); /* periodic Hann */
}

/* torch.stft(center=True, pad_mode="reflect"): frames of n_fft every hop over x padded by n_fft/2
 * reflected samples on each side; spec is T x F complex. n must exceed n_fft / 2. */
static fftwf_complex *stft(const float *x, size_t n, const stft_geom *g, size_t *T_out)
{
    size_t pad = (size_t)g->n_fft / 2, np = n + 2 * pad;
    float *xp = xmalloc(np * sizeof *xp);
    for (size_t i = 0; i < np; i++) {
        ptrdiff_t j = (ptrdiff_t)i - (ptrdiff_t)pad;
        if (j < 0) j = -j;
        if (j >= (ptrdiff_t)n) j = 2 * ((ptrdiff_t)n - 1) - j;
        xp[i] = x[j];
    }
    size_t T = 1 + (np - (size_t)g->n_fft) / (size_t)g->hop;
    fftwf_complex *spec = fftwf_malloc(T * (size_t)g->F * sizeof *spec);
    float *buf = fftwf_malloc((size_t)g->n_fft * sizeof *buf);
    fftwf_complex *out = fftwf_malloc((size_t)g->F * sizeof *out);
    fft_plan_lock();
    fftwf_plan p = fftwf_plan_dft_r2c_1d(g->n_fft, buf, out, FFTW_ESTIMATE);
    fft_plan_unlock();
    for (size_t t = 0; t < T; t++) {
        for (int i = 0; i < g->n_fft; i++) buf[i] = xp[t * (size_t)g->hop + (size_t)i] * g->window[i];
        fftwf_execute(p);
        memcpy(spec + t * (size_t)g->F, out, (size_t)g->F * sizeof *out);
    }
    fft_plan_lock();
    fftwf_destroy_plan(p);
    fft_plan_unlock();
    fftwf_free(buf);
    fftwf_free(out);
    free(xp);
    *T_out = T;
    return spec;
}

/* torch.istft(center=True, length=len): inverse FFTs (1/n_fft), windowed overlap-add, divided by
 * the summed squared window, the n_fft/2 padding dropped, zeros past the frames. */
static float *istft(const fftwf_complex *spec, size_t T, const stft_geom *g, size_t len)
{
    size_t total = (size_t)g->n_fft + (size_t)g->hop * (T ? T - 1 : 0);
    double *y = xcalloc(total, sizeof *y), *env = xcalloc(total, sizeof *env);
    float *buf = fftwf_malloc((size_t)g->n_fft * sizeof *buf);
    fftwf_complex *in = fftwf_malloc((size_t)g->F * sizeof *in);
    fft_plan_lock();
    fftwf_plan p = fftwf_plan_dft_c2r_1d(g->n_fft, in, buf, FFTW_ESTIMATE);
    fft_plan_unlock();
    for (size_t t = 0; t < T; t++) {
        memcpy(in, spec + t * (size_t)g->F, (size_t)g->F * sizeof *in);
        in[0][1] = 0; /* irfft ignores the imaginary parts of DC and Nyquist */
        if (g->n_fft % 2 == 0) in[g->F - 1][1] = 0;
        fftwf_execute(p);
        for (int i = 0; i < g->n_fft; i++) {
            double w = g->window[i];
            y[t * (size_t)g->hop + (size_t)i] += (double)(buf[i] / (float)g->n_fft * g->window[i]);
            env[t * (size_t)g->hop + (size_t)i] += w * w;
        }
    }
    fft_plan_lock();
    fftwf_destroy_plan(p);
    fft_plan_unlock();
    fftwf_free(buf);
    fftwf_free(in);
    float *out = xcalloc(len ? len : 1, sizeof *out);
    size_t start = (size_t)g->n_fft / 2;
    for (size_t i = 0; i < len && start + i < total; i++)
        out[i] = env[start + i] > 1e-11 ? (float)(y[start + i] / env[start + i]) : 0.0f;
    free(y);
    free(env);
    return out;
}

/* torchaudio.functional.phase_vocoder(spec, rate, linspace(0, pi * hop, F)), in float as torch. */
static fftwf_complex *phase_vocoder(const fftwf_complex *spec, size_t T, const stft_geom *g, double rate, size_t *T_out)
{
    int F = g->F;
    size_t To = (size_t)ceil((double)T / rate);
    fftwf_complex *out = fftwf_malloc((To ? To : 1) * (size_t)F * sizeof *out);
    float *adv = xmalloc((size_t)F * sizeof *adv);
    float a_end = (float)(M_PI * g->hop), step = F > 1 ? a_end / (float)(F - 1) : 0;
    for (int f = 0; f < F; f++) /* torch.linspace: from both ends towards the middle */
        adv[f] = f < F / 2 ? step * (float)f : a_end - step * (float)(F - 1 - f);
    double *acc = xcalloc((size_t)F, sizeof *acc);
    const float two_pi_f = (float)(2 * M_PI);
    for (size_t i = 0; i < To; i++) {
        float ts = (float)((double)i * rate);
        float alpha = fmodf(ts, 1.0f);
        size_t i0 = (size_t)ts, i1 = (size_t)(ts + 1.0f);
        for (int f = 0; f < F; f++) {
            float r0 = i0 < T ? spec[i0 * (size_t)F + (size_t)f][0] : 0, m0 = i0 < T ? spec[i0 * (size_t)F + (size_t)f][1] : 0;
            float r1 = i1 < T ? spec[i1 * (size_t)F + (size_t)f][0] : 0, m1 = i1 < T ? spec[i1 * (size_t)F + (size_t)f][1] : 0;
            float n0 = hypotf(r0, m0), n1 = hypotf(r1, m1);
            float ph;
            if (i == 0) {
                ph = atan2f(spec[f][1], spec[f][0]);
            } else { /* the increment of step i - 1 */
                float ts_p = (float)((double)(i - 1) * rate);
                size_t j0 = (size_t)ts_p, j1 = (size_t)(ts_p + 1.0f);
                float a0 = j0 < T ? atan2f(spec[j0 * (size_t)F + (size_t)f][1], spec[j0 * (size_t)F + (size_t)f][0]) : 0;
                float a1 = j1 < T ? atan2f(spec[j1 * (size_t)F + (size_t)f][1], spec[j1 * (size_t)F + (size_t)f][0]) : 0;
                float d = a1 - a0 - adv[f];
                d = d - (float)(2 * M_PI) * nearbyintf(d / two_pi_f);
                ph = d + adv[f];
            }
            acc[f] += ph;
            float pa = (float)acc[f];
            float mag = alpha * n1 + (1.0f - alpha) * n0;
            out[i * (size_t)F + (size_t)f][0] = mag * cosf(pa);
            out[i * (size_t)F + (size_t)f][1] = mag * sinf(pa);
        }
    }
    free(adv);
    free(acc);
    *T_out = To;
    return out;
}

static float *copy_of(const float *x, size_t n, size_t *n_out)
{
    float *y = xmalloc((n ? n : 1) * sizeof *y);
    if (n) memcpy(y, x, n * sizeof *y);
    *n_out = n;
    return y;
}

/* STFT -> vocoder at rate -> iSTFT of round(n / rate) samples (ESPnet's time_stretch). */
static float *stretch(const float *x, size_t n, const stft_geom *g, double rate, size_t *n_out)
{
    size_t T, To;
    fftwf_complex *spec = stft(x, n, g, &T);
    fftwf_complex *v = rate == 1.0 ? spec : phase_vocoder(spec, T, g, rate, &To);
    if (rate == 1.0) To = T;
    size_t len = (size_t)nearbyint((double)n / rate); /* Python's round(): half to even */
    float *y = istft(v, To, g, len);
    if (v != spec) fftwf_free(v);
    fftwf_free(spec);
    *n_out = len;
    return y;
}

float *aug_stft_effect(const aug_effect *e, const float *x, size_t n, int fs, rng *r, size_t *n_out)
{
    stft_geom g;
    geom_init(&g, e, fs);
    float *y;
    if (n <= (size_t)g.n_fft / 2) { /* too short for torch.stft's reflect padding: left as it is */
        free(g.window);
        return copy_of(x, n, n_out);
    }
    if (e->kind == AUG_TIME_STRETCH) {
        y = stretch(x, n, &g, e->factor, n_out);
    } else if (e->kind == AUG_PITCH_SHIFT) {
        double rate = pow(2.0, -e->n_steps / e->bins_per_octave);
        size_t m;
        float *s = stretch(x, n, &g, rate, &m);
        size_t k;
        float *z = aug_resample(s, m, (int)(fs / rate), fs, &k);
        free(s);
        y = xcalloc(n ? n : 1, sizeof *y); /* cut or zero-padded to the input's length */
        memcpy(y, z, (k < n ? k : n) * sizeof *y);
        free(z);
        *n_out = n;
    } else {
        ESP_CHECK(e->kind == AUG_CORRUPT_PHASE && r);
        size_t T;
        fftwf_complex *spec = stft(x, n, &g, &T);
        for (size_t i = 0; i < T * (size_t)g.F; i++) {
            double u1 = aug_uniform(r), u2 = aug_uniform(r);
            double noise = sqrt(-2 * log(1 - u1)) * cos(2 * M_PI * u2); /* Box-Muller */
            float mag = hypotf(spec[i][0], spec[i][1]);
            float ph = atan2f(spec[i][1], spec[i][0]) + (float)(noise * e->scale);
            spec[i][0] = mag * cosf(ph), spec[i][1] = mag * sinf(ph);
        }
        y = istft(spec, T, &g, n);
        fftwf_free(spec);
        *n_out = n;
    }
    free(g.window);
    return y;
}
