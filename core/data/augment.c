/* The effects of core/data/augment.h and ESPnet's random choice among them. */
#include "core/data/augment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/hash.h"
#include "core/base/log.h"

/* ---- filters ----------------------------------------------------------------------------- */

void aug_biquad_design(const aug_effect *e, int fs, double b[3], double a[3])
{
    double w0 = 2 * M_PI * e->freq / fs, c = cos(w0), alpha = sin(w0) / 2 / e->Q;
    a[0] = 1 + alpha, a[1] = -2 * c, a[2] = 1 - alpha;
    switch (e->kind) {
    case AUG_LOWPASS: b[0] = (1 - c) / 2, b[1] = 1 - c, b[2] = b[0]; break;
    case AUG_HIGHPASS: b[0] = (1 + c) / 2, b[1] = -1 - c, b[2] = b[0]; break;
    case AUG_BANDPASS: {
        double t = e->const_skirt_gain ? sin(w0) / 2 : alpha;
        b[0] = t, b[1] = 0, b[2] = -t;
        break;
    }
    case AUG_BANDREJECT: b[0] = 1, b[1] = -2 * c, b[2] = 1; break;
    case AUG_EQUALIZATION: {
        double A = exp(e->gain / 40.0 * log(10.0));
        b[0] = 1 + alpha * A, b[1] = -2 * c, b[2] = 1 - alpha * A;
        a[0] = 1 + alpha / A, a[2] = 1 - alpha / A;
        break;
    }
    default: ESP_CHECK(!"not a biquad kind");
    }
}

void aug_lfilter2(float *y, const float *x, size_t n, const double b[3], const double a[3], int clamp)
{
    double b0 = b[0] / a[0], b1 = b[1] / a[0], b2 = b[2] / a[0], a1 = a[1] / a[0], a2 = a[2] / a[0];
    double x1 = 0, x2 = 0, y1 = 0, y2 = 0;
    for (size_t i = 0; i < n; i++) {
        double xi = x[i];
        double v = b0 * xi + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2;
        x2 = x1, x1 = xi, y2 = y1, y1 = v;
        y[i] = (float)(clamp ? fmin(1.0, fmax(-1.0, v)) : v);
    }
}

/* ---- resampling (torchaudio.functional.resample) ------------------------------------------- */

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

/* The kernel of torchaudio's _get_sinc_resample_kernel (sinc_interp_hann) at output phase k and
 * padded input tap m, rounded to float as torch stores it. */
typedef struct rs_kernel {
    int64_t orig, nf, width, klen;
    double base;
    int lw;
} rs_kernel;

static float kernel_tap(const rs_kernel *q, int64_t k, int64_t m)
{
    double t = (-(double)k / (double)q->nf + (double)(m - q->width) / (double)q->orig) * q->base;
    t = fmin((double)q->lw, fmax(-(double)q->lw, t));
    double w = cos(t * M_PI / q->lw / 2);
    w *= w;
    t *= M_PI;
    double s = t == 0 ? 1.0 : sin(t) / t;
    return (float)(s * w * (q->base / (double)q->orig));
}

float *aug_resample(const float *x, size_t n, int orig_in, int new_in, size_t *n_out)
{
    ESP_CHECK(orig_in > 0 && new_in > 0);
    if (orig_in == new_in) {
        float *y = xmalloc((n ? n : 1) * sizeof *y);
        if (n) memcpy(y, x, n * sizeof *y);
        *n_out = n;
        return y;
    }
    int64_t g = gcd64(orig_in, new_in);
    rs_kernel q = {.orig = orig_in / g, .nf = new_in / g, .lw = 6};
    q.base = (double)(q.orig < q.nf ? q.orig : q.nf) * 0.99;
    q.width = (int64_t)ceil(q.lw * (double)q.orig / q.base);
    q.klen = 2 * q.width + q.orig;
    /* Small kernels (speed_perturb's 9 -> 10) are tabulated; large ones (pitch_shift's 17959 ->
     * 16000, which torch tabulates in full) are computed where the window is not zero. */
    float *kern = NULL;
    if (q.nf * q.klen <= (1 << 20)) {
        kern = xmalloc((size_t)(q.nf * q.klen) * sizeof *kern);
        for (int64_t k = 0; k < q.nf; k++)
            for (int64_t m = 0; m < q.klen; m++) kern[k * q.klen + m] = kernel_tap(&q, k, m);
    }
    /* Output frame f, phase k: sum_m kernel[k][m] * xpad[f * orig + m], xpad[p] = x[p - width]. */
    size_t target = (size_t)ceil((double)q.nf * (double)n / (double)q.orig);
    size_t total = (n / (size_t)q.orig + 1) * (size_t)q.nf;
    if (target > total) target = total;
    float *y = xmalloc((target ? target : 1) * sizeof *y);
    for (size_t o = 0; o < target; o++) {
        int64_t f = (int64_t)(o / (size_t)q.nf), k = (int64_t)(o % (size_t)q.nf);
        int64_t p0 = f * q.orig - q.width; /* x index of tap 0 */
        int64_t m_lo = p0 < 0 ? -p0 : 0, m_hi = q.klen;
        if (p0 + m_hi > (int64_t)n) m_hi = (int64_t)n - p0;
        if (!kern) { /* |t| < lw only: (m - width) / orig within k / nf +- lw / base */
            double c = (double)q.width + (double)q.orig * (double)k / (double)q.nf, h = (double)q.orig * q.lw / q.base;
            int64_t a = (int64_t)floor(c - h) - 1, b = (int64_t)ceil(c + h) + 2;
            if (a > m_lo) m_lo = a;
            if (b < m_hi) m_hi = b;
        }
        double acc = 0;
        for (int64_t m = m_lo; m < m_hi; m++)
            acc += (double)(kern ? kern[k * q.klen + m] : kernel_tap(&q, k, m)) * x[p0 + m];
        y[o] = (float)acc;
    }
    free(kern);
    *n_out = target;
    return y;
}

/* ---- clipping ---------------------------------------------------------------------------- */

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

double aug_quantile(const float *x, size_t n, double q)
{
    ESP_CHECK(n > 0);
    float *s = xmalloc(n * sizeof *s);
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_float);
    /* torch computes the rank in the tensor's type (float32): q * (n - 1), its floor and the rest */
    float pos = (float)q * (float)(n - 1);
    size_t lo = (size_t)pos, hi = lo + 1 < n ? lo + 1 : lo;
    double w = (double)(pos - (float)lo), a = s[lo], b = s[hi];
    free(s);
    /* torch.lerp's two forms, as at::lerp computes them */
    return w < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w);
}

/* ---- one effect -------------------------------------------------------------------------- */

int aug_speed_rates(double factor, int fs, int *orig, int *new_freq)
{
    int64_t src = (int64_t)(factor * fs); /* Python's int(): toward zero */
    if (src <= 0 || fs <= 0) return -1;
    int64_t g = gcd64(src, fs);
    if (orig) *orig = (int)(src / g);
    if (new_freq) *new_freq = (int)(fs / g);
    return 0;
}

float *aug_effect_apply(const aug_effect *e, const float *x, size_t n, int fs, rng *r, size_t *n_out)
{
    if (e->kind >= AUG_TIME_STRETCH) return aug_stft_effect(e, x, n, fs, r, n_out);
    if (e->kind == AUG_SPEED_PERTURB) {
        int src, dst;
        ESP_CHECK(aug_speed_rates(e->factor, fs, &src, &dst) == 0); /* augment_conf_check_fs */
        return aug_resample(x, n, src, dst, n_out);
    }
    float *y = xmalloc((n ? n : 1) * sizeof *y);
    *n_out = n;
    switch (e->kind) {
    case AUG_LOWPASS:
    case AUG_HIGHPASS:
    case AUG_BANDPASS:
    case AUG_BANDREJECT:
    case AUG_EQUALIZATION: {
        double b[3], a[3];
        aug_biquad_design(e, fs, b, a);
        aug_lfilter2(y, x, n, b, a, 1);
        break;
    }
    case AUG_CONTRAST: {
        double c = e->amount / 750.0;
        for (size_t i = 0; i < n; i++) {
            double t1 = x[i] * (M_PI / 2);
            y[i] = (float)sin(t1 + c * sin(t1 * 4));
        }
        break;
    }
    case AUG_PREEMPHASIS:
        for (size_t i = n; i-- > 1;) y[i] = (float)((double)x[i] - e->coeff * x[i - 1]);
        if (n) y[0] = x[0];
        break;
    case AUG_DEEMPHASIS: {
        double b[3] = {1, 0, 0}, a[3] = {1, -e->coeff, 0};
        aug_lfilter2(y, x, n, b, a, 1);
        break;
    }
    case AUG_CLIPPING: {
        if (!n) break;
        double lo = aug_quantile(x, n, e->qmin), hi = aug_quantile(x, n, e->qmax);
        for (size_t i = 0; i < n; i++) y[i] = (float)fmin(hi, fmax(lo, (double)x[i])); /* torch.clamp: max wins */
        break;
    }
    case AUG_POLARITY_INVERSE:
        for (size_t i = 0; i < n; i++) y[i] = -x[i];
        break;
    case AUG_REVERSE:
        for (size_t i = 0; i < n; i++) y[i] = x[n - 1 - i];
        break;
    default: ESP_CHECK(!"unknown effect");
    }
    return y;
}

/* ---- the random choice ------------------------------------------------------------------- */

void augment_conf_free(augment_conf *c)
{
    aug_entries_free(c->entries, c->n);
    memset(c, 0, sizeof *c);
}

void augment_conf_copy(augment_conf *dst, const augment_conf *src)
{
    *dst = *src;
    dst->entries = xcalloc(src->n ? src->n : 1, sizeof *dst->entries);
    for (size_t i = 0; i < src->n; i++) {
        const aug_entry *s = &src->entries[i];
        aug_entry *d = &dst->entries[i];
        *d = *s;
        d->weights = xmalloc((s->n ? s->n : 1) * sizeof *d->weights);
        d->effects = xmalloc((s->n ? s->n : 1) * sizeof *d->effects);
        memcpy(d->weights, s->weights, s->n * sizeof *d->weights);
        memcpy(d->effects, s->effects, s->n * sizeof *d->effects);
    }
}

/* A stream id of its own ("data_aug"), apart from SpecAugment's and dropout's. */
#define AUG_STREAM 0xDA7A0A06ULL

uint64_t augment_utt_seed(uint64_t seed, int64_t epoch, const char *utt)
{
    return rng_derive(rng_derive(seed, AUG_STREAM, (uint64_t)epoch), AUG_STREAM, fnv1a64_str(utt));
}

double aug_uniform(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

void aug_weighted_sample(rng *r, const double *weights, size_t n, size_t k, size_t *out)
{
    ESP_CHECK(k <= n);
    double *v = xmalloc((n ? n : 1) * sizeof *v);
    size_t *order = xmalloc((n ? n : 1) * sizeof *order);
    for (size_t i = 0; i < n; i++) v[i] = pow(aug_uniform(r), 1.0 / weights[i]), order[i] = i;
    /* Stable insertion sort by key, ascending (Python's sorted). */
    for (size_t i = 1; i < n; i++) {
        size_t o = order[i], j = i;
        while (j > 0 && v[order[j - 1]] > v[o]) order[j] = order[j - 1], j--;
        order[j] = o;
    }
    for (size_t i = 0; i < k; i++) out[i] = order[n - k + i];
    free(v);
    free(order);
}

float *augment_apply(const augment_conf *c, const float *x, size_t n, int fs, rng *r, size_t *n_out)
{
    if (!c || !c->n || !(c->prob > 0) || !(c->prob >= aug_uniform(r))) return NULL;
    int64_t k = c->num[1] > c->num[0] ? rng_uniform_int(r, c->num[0], c->num[1]) : c->num[0];
    if (k <= 0) return NULL;
    double *w = xmalloc(c->n * sizeof *w);
    size_t *pick = xmalloc((size_t)k * sizeof *pick);
    for (size_t i = 0; i < c->n; i++) w[i] = c->entries[i].weight;
    aug_weighted_sample(r, w, c->n, (size_t)k, pick);
    float *cur = xmalloc((n ? n : 1) * sizeof *cur);
    if (n) memcpy(cur, x, n * sizeof *cur);
    size_t len = n;
    for (int64_t i = 0; i < k; i++) {
        const aug_entry *en = &c->entries[pick[i]];
        size_t which = 0;
        if (en->group) aug_weighted_sample(r, en->weights, en->n, 1, &which);
        size_t m;
        float *next = aug_effect_apply(&en->effects[which], cur, len, fs, r, &m);
        free(cur);
        cur = next, len = m;
    }
    free(w);
    free(pick);
    *n_out = len;
    return cur;
}
