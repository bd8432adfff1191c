#include "core/data/specaug.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void specaug_opts_default(specaug_opts *o)
{
    *o = (specaug_opts){
        .apply_time_warp = 1,
        .time_warp_window = 5,
        .time_warp_mode = SPECAUG_WARP_BICUBIC,
        .apply_freq_mask = 1,
        .freq_mask_width_range = {0, 20},
        .num_freq_mask = 2,
        .apply_time_mask = 1,
        .time_mask_width_range = {0, 100},
        .num_time_mask = 2,
    };
}

static int check_int_range(const int64_t *v, const char *key, int out[2], esp_err *err)
{
    if (v[0] < 0 || v[1] <= v[0] || v[1] > 1000000)
        return esp_fail(err, "model.specaug_conf.%s: [%lld, %lld] is not a width range [lo, hi) with "
                             "0 <= lo < hi (widths are drawn in [lo, hi))", key, (long long)v[0], (long long)v[1]);
    out[0] = (int)v[0];
    out[1] = (int)v[1];
    return 0;
}

int specaug_opts_from_cfg(const specaug_conf_cfg *c, specaug_opts *o, esp_err *err)
{
    specaug_opts_default(o);
    if (!c) return 0;
    o->apply_time_warp = c->apply_time_warp;
    o->apply_freq_mask = c->apply_freq_mask;
    o->apply_time_mask = c->apply_time_mask;
    if (!o->apply_time_warp && !o->apply_freq_mask && !o->apply_time_mask)
        return esp_fail(err, "model.specaug_conf: apply_time_warp, apply_freq_mask and apply_time_mask "
                             "are all false (set one true, or drop model.specaug to disable SpecAugment)");
    if (c->time_warp_window < 0 || c->time_warp_window > 100000)
        return esp_fail(err, "model.specaug_conf.time_warp_window: must be positive, got %lld",
                        (long long)c->time_warp_window);
    if (c->time_warp_window) o->time_warp_window = (int)c->time_warp_window;
    if (c->time_warp_mode) {
        if (!strcmp(c->time_warp_mode, "bicubic")) o->time_warp_mode = SPECAUG_WARP_BICUBIC;
        else if (!strcmp(c->time_warp_mode, "bilinear")) o->time_warp_mode = SPECAUG_WARP_BILINEAR;
        else
            return esp_fail(err, "model.specaug_conf.time_warp_mode: '%s' is not supported (ESPnet2 warps "
                                 "a (batch, 1, time, freq) tensor: use bicubic or bilinear)", c->time_warp_mode);
    }
    if (c->n_freq_mask_width_range &&
        check_int_range(c->freq_mask_width_range, "freq_mask_width_range", o->freq_mask_width_range, err))
        return -1;
    if (c->num_freq_mask < 0 || c->num_time_mask < 0 || c->num_freq_mask > 1000 || c->num_time_mask > 1000)
        return esp_fail(err, "model.specaug_conf.%s: must be in [1, 1000], got %lld",
                        c->num_freq_mask < 0 || c->num_freq_mask > 1000 ? "num_freq_mask" : "num_time_mask",
                        (long long)(c->num_freq_mask < 0 || c->num_freq_mask > 1000 ? c->num_freq_mask
                                                                                     : c->num_time_mask));
    if (c->num_freq_mask) o->num_freq_mask = (int)c->num_freq_mask;
    if (c->num_time_mask) o->num_time_mask = (int)c->num_time_mask;
    if (c->n_time_mask_width_range && c->n_time_mask_width_ratio_range && o->apply_time_mask)
        return esp_fail(err, "model.specaug_conf: time_mask_width_range and time_mask_width_ratio_range "
                             "are both set (keep one)");
    if (c->n_time_mask_width_range &&
        check_int_range(c->time_mask_width_range, "time_mask_width_range", o->time_mask_width_range, err))
        return -1;
    if (c->n_time_mask_width_ratio_range) {
        const double *r = c->time_mask_width_ratio_range;
        if (!(r[0] >= 0 && r[1] > r[0] && r[1] <= 1))
            return esp_fail(err, "model.specaug_conf.time_mask_width_ratio_range: [%g, %g] is not a range of "
                                 "fractions of the length with 0 <= lo < hi <= 1", r[0], r[1]);
        o->use_time_mask_ratio = 1;
        o->time_mask_width_ratio_range[0] = r[0];
        o->time_mask_width_ratio_range[1] = r[1];
    }
    return 0;
}

/* ---- time warp ------------------------------------------------------------------------- */

/* torch's cubic convolution coefficients (A = -0.75) for fractional offset t in [0, 1):
 *   c0 = W2(t + 1), c1 = W1(t), c2 = W1(1 - t), c3 = W2(2 - t), with
 *   W1(x) = ((A + 2) x - (A + 3)) x^2 + 1          for |x| <= 1
 *   W2(x) = ((A x - 5A) x + 8A) x - 4A             for 1 < |x| < 2
 * (ATen's get_cubic_upsample_coefficients). */
static void cubic_coeffs(double t, double c[4])
{
    const double A = -0.75;
    double x1 = t + 1.0, x2 = 1.0 - t, x3 = x2 + 1.0;
    c[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;
    c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

/* Resizes n_in rows of src to n_out rows of dst along time (rows of F values), as
 * torch.nn.functional.interpolate(size=(n_out, F), align_corners=False) on a (1, 1, n_in, F)
 * tensor. The freq axis keeps its size, so its weights are exactly (0, 1, 0, 0): a 1-D resize.
 * Source position of output row j: s = (n_in / n_out) * (j + 0.5) - 0.5.
 *   bicubic:  i = floor(s), t = s - i; rows i-1..i+2 (clamped to [0, n_in - 1]) weighted c0..c3
 *   bilinear: s clamped at 0, i = (int)s, l = s - i; (1 - l) row i + l row min(i + 1, n_in - 1)
 * Positions, weights and sums are in double: torch's float32 kernel rounds s to float, which
 * moves values by up to ~1e-5 of their local slope; in double we match torch's float64 kernel
 * to ~1e-13 and its float32 kernel to that rounding. */
static void resize_rows(float *dst, size_t n_out, const float *src, size_t n_in, int F, specaug_warp_mode mode)
{
    const double scale = (double)n_in / (double)n_out;
    const ptrdiff_t last = (ptrdiff_t)n_in - 1;
    for (size_t j = 0; j < n_out; j++) {
        double s = scale * ((double)j + 0.5) - 0.5;
        float *o = dst + j * (size_t)F;
        if (mode == SPECAUG_WARP_BICUBIC) {
            double fi = floor(s), c[4];
            cubic_coeffs(s - fi, c);
            const float *row[4];
            for (int k = 0; k < 4; k++) {
                ptrdiff_t i = (ptrdiff_t)fi - 1 + k;
                i = i < 0 ? 0 : i > last ? last : i;
                row[k] = src + (size_t)i * F;
            }
            for (int f = 0; f < F; f++)
                o[f] = (float)(row[0][f] * c[0] + row[1][f] * c[1] + row[2][f] * c[2] + row[3][f] * c[3]);
        } else {
            if (s < 0) s = 0;
            ptrdiff_t i0 = (ptrdiff_t)s, i1 = i0 < last ? i0 + 1 : i0;
            double l1 = s - (double)i0, l0 = 1.0 - l1;
            const float *a = src + (size_t)i0 * F, *b = src + (size_t)i1 * F;
            for (int f = 0; f < F; f++) o[f] = (float)(l0 * a[f] + l1 * b[f]);
        }
    }
}

void specaug_time_warp_at(float *x, size_t T, int F, size_t center, size_t warped, specaug_warp_mode mode)
{
    ESP_CHECK(center > 0 && center < T && warped > 0 && warped < T);
    if (center == warped) return; /* both halves keep their size: torch copies them */
    float *y = xmalloc(T * (size_t)F * sizeof *y);
    resize_rows(y, warped, x, center, F, mode);
    resize_rows(y + warped * (size_t)F, T - warped, x + center * (size_t)F, T - center, F, mode);
    memcpy(x, y, T * (size_t)F * sizeof *x);
    free(y);
}

void specaug_time_warp(float *x, size_t T, int F, int window, specaug_warp_mode mode, rng *r)
{
    const int64_t t = (int64_t)T, w = window;
    if (t - w <= w) return;
    /* torch.randint(lo, hi) draws from [lo, hi); rng_uniform_int is inclusive. */
    int64_t center = rng_uniform_int(r, w, t - w - 1);
    int64_t warped = rng_uniform_int(r, center - w, center + w - 1) + 1;
    specaug_time_warp_at(x, T, F, (size_t)center, (size_t)warped, mode);
}

/* ---- masks ----------------------------------------------------------------------------- */

void specaug_mask(float *x, size_t T, int F, int axis, int lo, int hi, int num_mask, rng *r)
{
    ESP_CHECK(lo >= 0 && hi > lo && num_mask >= 0);
    const int64_t D = axis == 0 ? (int64_t)T : F;
    int64_t *width = xmalloc((size_t)(num_mask > 0 ? num_mask : 1) * sizeof *width), max_w = 0;
    /* ESPnet2 draws every width first, then every start against the widest one. */
    for (int m = 0; m < num_mask; m++) {
        width[m] = rng_uniform_int(r, lo, hi - 1);
        if (width[m] > max_w) max_w = width[m];
    }
    int64_t pos_hi = D - max_w > 1 ? D - max_w : 1;
    for (int m = 0; m < num_mask; m++) {
        int64_t a = rng_uniform_int(r, 0, pos_hi - 1), b = a + width[m];
        if (b > D) b = D;
        if (axis == 0) {
            if (a < b) memset(x + (size_t)a * F, 0, (size_t)(b - a) * F * sizeof *x);
        } else {
            for (size_t t = 0; t < T; t++)
                for (int64_t f = a; f < b; f++) x[t * (size_t)F + (size_t)f] = 0;
        }
    }
    free(width);
}

int specaug_ratio_range(size_t T, const double ratio[2], int range[2])
{
    double lo = floor((double)T * ratio[0]), hi = floor((double)T * ratio[1]);
    if (lo < 0) lo = 0;
    if (hi > (double)T) hi = (double)T;
    range[0] = (int)lo;
    range[1] = (int)hi;
    return hi > lo;
}

void specaug_apply(float *x, size_t T, int F, const specaug_opts *o, rng *r)
{
    if (T == 0) return;
    if (o->apply_time_warp) specaug_time_warp(x, T, F, o->time_warp_window, o->time_warp_mode, r);
    if (o->apply_freq_mask)
        specaug_mask(x, T, F, 1, o->freq_mask_width_range[0], o->freq_mask_width_range[1], o->num_freq_mask, r);
    if (o->apply_time_mask) {
        int range[2] = {o->time_mask_width_range[0], o->time_mask_width_range[1]};
        if (o->use_time_mask_ratio && !specaug_ratio_range(T, o->time_mask_width_ratio_range, range)) return;
        specaug_mask(x, T, F, 0, range[0], range[1], o->num_time_mask, r);
    }
}
