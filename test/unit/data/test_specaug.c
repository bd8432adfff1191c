/* SpecAugment: ESPnet2's parameters and draws, torch's interpolation, masks within ranges. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/specaug.h"

static float *ramp(size_t T, int F)
{
    float *x = xmalloc(T * (size_t)F * sizeof *x);
    for (size_t t = 0; t < T; t++)
        for (int f = 0; f < F; f++) x[t * F + f] = 1.0f + (float)t + 0.001f * (float)f;
    return x;
}

static int zero_row(const float *x, size_t t, int F)
{
    for (int f = 0; f < F; f++)
        if (x[t * F + f] != 0) return 0;
    return 1;
}

static int zero_col(const float *x, size_t T, int F, int f)
{
    for (size_t t = 0; t < T; t++)
        if (x[t * F + f] != 0) return 0;
    return 1;
}

Test(specaug, defaults_are_espnet2s)
{
    specaug_opts o;
    esp_err err;
    cr_assert_eq(specaug_opts_from_cfg(NULL, &o, &err), 0);
    cr_assert(o.apply_time_warp && o.apply_freq_mask && o.apply_time_mask);
    cr_assert_eq(o.time_warp_window, 5);
    cr_assert_eq(o.time_warp_mode, SPECAUG_WARP_BICUBIC);
    cr_assert_eq(o.freq_mask_width_range[0], 0);
    cr_assert_eq(o.freq_mask_width_range[1], 20);
    cr_assert_eq(o.num_freq_mask, 2);
    cr_assert_eq(o.time_mask_width_range[1], 100);
    cr_assert_eq(o.num_time_mask, 2);
    cr_assert_eq(o.use_time_mask_ratio, 0);
}

Test(specaug, cfg_keys_and_errors)
{
    specaug_opts o;
    esp_err err;
    int64_t fr[2] = {0, 27}, tr[2] = {0, 40};
    double rr[2] = {0.0, 0.05};
    specaug_conf_cfg c = {.apply_time_warp = 1, .time_warp_window = 3, .time_warp_mode = "bilinear",
                          .apply_freq_mask = 1, .freq_mask_width_range = fr, .n_freq_mask_width_range = 2,
                          .num_freq_mask = 4, .apply_time_mask = 1, .time_mask_width_ratio_range = rr,
                          .n_time_mask_width_ratio_range = 2, .num_time_mask = 10};
    cr_assert_eq(specaug_opts_from_cfg(&c, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(o.time_warp_window, 3);
    cr_assert_eq(o.time_warp_mode, SPECAUG_WARP_BILINEAR);
    cr_assert_eq(o.freq_mask_width_range[1], 27);
    cr_assert_eq(o.num_freq_mask, 4);
    cr_assert_eq(o.use_time_mask_ratio, 1);
    cr_assert_eq(o.num_time_mask, 10);

    c.time_mask_width_range = tr;
    c.n_time_mask_width_range = 2;
    cr_assert_eq(specaug_opts_from_cfg(&c, &o, &err), -1);
    cr_assert(strstr(err.msg, "time_mask_width_range and time_mask_width_ratio_range"), "%s", err.msg);
    c.n_time_mask_width_ratio_range = 0;
    cr_assert_eq(specaug_opts_from_cfg(&c, &o, &err), 0, "%s", err.msg);
    cr_assert_eq(o.time_mask_width_range[1], 40);

    fr[1] = 0;
    cr_assert_eq(specaug_opts_from_cfg(&c, &o, &err), -1);
    cr_assert(strstr(err.msg, "model.specaug_conf.freq_mask_width_range"), "%s", err.msg);
    fr[1] = 27;
    c.time_warp_mode = "linear";
    cr_assert_eq(specaug_opts_from_cfg(&c, &o, &err), -1);
    cr_assert(strstr(err.msg, "model.specaug_conf.time_warp_mode"), "%s", err.msg);
    c.time_warp_mode = NULL;
    c.apply_time_warp = c.apply_freq_mask = c.apply_time_mask = 0;
    cr_assert_eq(specaug_opts_from_cfg(&c, &o, &err), -1);
    cr_assert(strstr(err.msg, "all false"), "%s", err.msg);
}

Test(specaug, no_op_when_nothing_applies)
{
    specaug_opts o;
    specaug_opts_default(&o);
    o.apply_time_warp = o.apply_freq_mask = o.apply_time_mask = 0;
    float *x = ramp(300, 80), *y = ramp(300, 80);
    rng r;
    rng_init(&r, 7);
    uint64_t before = r.state;
    specaug_apply(x, 300, 80, &o, &r);
    cr_assert_eq(memcmp(x, y, 300 * 80 * sizeof *x), 0);
    cr_assert_eq(r.state, before);
    free(x);
    free(y);
}

Test(specaug, deterministic_for_a_seed)
{
    specaug_opts o;
    specaug_opts_default(&o);
    float *a = ramp(400, 80), *b = ramp(400, 80), *c = ramp(400, 80);
    rng r1, r2, r3;
    rng_init(&r1, 1234);
    rng_init(&r2, 1234);
    rng_init(&r3, 999);
    specaug_apply(a, 400, 80, &o, &r1);
    specaug_apply(b, 400, 80, &o, &r2);
    specaug_apply(c, 400, 80, &o, &r3);
    cr_assert_eq(memcmp(a, b, 400 * 80 * sizeof *a), 0);
    cr_assert_neq(memcmp(a, c, 400 * 80 * sizeof *a), 0);
    free(a);
    free(b);
    free(c);
}

Test(specaug, masks_land_within_ranges)
{
    const size_t T = 500;
    const int F = 80;
    for (uint64_t seed = 0; seed < 200; seed++) {
        float *x = ramp(T, F);
        rng r;
        rng_init(&r, seed);
        specaug_mask(x, T, F, 1, 0, 20, 2, &r);
        /* Masked columns form at most 2 runs, each narrower than 20. */
        int runs = 0, run = 0, total = 0;
        for (int f = 0; f <= F; f++) {
            int z = f < F && zero_col(x, T, F, f);
            if (z) run++, total++;
            if (!z && run) {
                cr_assert_lt(run, 2 * 20, "seed %llu", (unsigned long long)seed);
                runs++, run = 0;
            }
        }
        cr_assert_leq(runs, 2);
        cr_assert_leq(total, 2 * 19);
        /* Only whole columns are masked. */
        for (size_t t = 0; t < T; t++)
            for (int f = 0; f < F; f++)
                if (x[t * F + f] == 0) cr_assert(zero_col(x, T, F, f));
        free(x);

        x = ramp(T, F);
        specaug_mask(x, T, F, 0, 5, 30, 2, &r);
        size_t masked = 0;
        for (size_t t = 0; t < T; t++) masked += zero_row(x, t, F);
        cr_assert(masked >= 5 && masked <= 2 * 29, "seed %llu: %zu rows", (unsigned long long)seed, masked);
        free(x);
    }
}

Test(specaug, mask_wider_than_axis_starts_at_zero)
{
    /* D - max width <= 0: torch.randint(0, max(1, ...)) gives start 0 and the mask clips at D. */
    float *x = ramp(10, 4);
    rng r;
    rng_init(&r, 3);
    specaug_mask(x, 10, 4, 0, 50, 51, 1, &r);
    for (size_t t = 0; t < 10; t++) cr_assert(zero_row(x, t, 4));
    free(x);
}

Test(specaug, ratio_range_width)
{
    int range[2];
    const double r[2] = {0.0, 0.05};
    cr_assert_eq(specaug_ratio_range(1000, r, range), 1);
    cr_assert_eq(range[0], 0);
    cr_assert_eq(range[1], 50);
    cr_assert_eq(specaug_ratio_range(19, r, range), 0); /* floor(0.95) = 0: no mask */
    const double r2[2] = {0.1, 0.25};
    cr_assert_eq(specaug_ratio_range(101, r2, range), 1);
    cr_assert_eq(range[0], 10);
    cr_assert_eq(range[1], 25);
    /* specaug_apply with a ratio range masks at most num_time_mask * (max - 1) frames. */
    specaug_opts o;
    specaug_opts_default(&o);
    o.apply_time_warp = o.apply_freq_mask = 0;
    o.use_time_mask_ratio = 1;
    o.time_mask_width_ratio_range[0] = 0.1;
    o.time_mask_width_ratio_range[1] = 0.2;
    float *x = ramp(100, 8);
    rng g;
    rng_init(&g, 5);
    specaug_apply(x, 100, 8, &o, &g);
    size_t masked = 0;
    for (size_t t = 0; t < 100; t++) masked += zero_row(x, t, 8);
    cr_assert(masked >= 10 && masked <= 2 * 19, "%zu", masked);
    free(x);
}

Test(specaug, time_warp_identity_and_shape)
{
    float *x = ramp(60, 5), *y = ramp(60, 5);
    specaug_time_warp_at(x, 60, 5, 30, 30, SPECAUG_WARP_BICUBIC);
    cr_assert_eq(memcmp(x, y, 60 * 5 * sizeof *x), 0);
    /* Too short for the window: untouched, no draws. */
    rng r;
    rng_init(&r, 1);
    uint64_t s = r.state;
    specaug_time_warp(x, 10, 5, 5, SPECAUG_WARP_BICUBIC, &r);
    cr_assert_eq(r.state, s);
    cr_assert_eq(memcmp(x, y, 60 * 5 * sizeof *x), 0);
    /* A real warp keeps frame 0's neighbourhood and the last frame in place (same T). */
    specaug_time_warp(x, 60, 5, 5, SPECAUG_WARP_BICUBIC, &r);
    for (size_t i = 0; i < 60 * 5; i++) cr_assert(isfinite(x[i]));
    free(x);
    free(y);
}

/* Values from torch.nn.functional.interpolate(..., align_corners=False) in float64 on
 * x = t^2, t = 0..7, split at center 5 and warped to 3 (ESPnet2's time_warp). */
Test(specaug, time_warp_matches_torch_interpolate)
{
    const double bicubic[8] = {0.14814814814814725, 4.0, 14.074074074074076, 23.943999999999985,
                               28.33199999999997, 36.0, 44.747999999999976, 50.24800000000001};
    const double bilinear[8] = {0.33333333333333337, 4.0, 13.666666666666668, 25.0, 29.400000000000002,
                                36.0, 43.8, 49.0};
    for (int mode = 0; mode < 2; mode++) {
        float x[8 * 3];
        for (int t = 0; t < 8; t++)
            for (int f = 0; f < 3; f++) x[t * 3 + f] = (float)(t * t);
        specaug_time_warp_at(x, 8, 3, 5, 3, mode == 0 ? SPECAUG_WARP_BICUBIC : SPECAUG_WARP_BILINEAR);
        const double *want = mode == 0 ? bicubic : bilinear;
        for (int t = 0; t < 8; t++)
            for (int f = 0; f < 3; f++)
                cr_assert_float_eq(x[t * 3 + f], want[t], 1e-5, "mode %d t %d: %g vs %g", mode, t, x[t * 3 + f], want[t]);
    }
}

Test(specaug, time_warp_draws_follow_espnet2)
{
    /* center in [w, T - w), warped - center in [-w + 1, w]: check via a ramp, whose warped
     * image is piecewise linear with a kink at (warped, center). */
    for (uint64_t seed = 0; seed < 100; seed++) {
        rng r, r2;
        rng_init(&r, seed);
        r2 = r;
        int64_t center = rng_uniform_int(&r2, 5, 50 - 5 - 1);
        int64_t warped = rng_uniform_int(&r2, center - 5, center + 5 - 1) + 1;
        cr_assert(center >= 5 && center < 45 && warped >= center - 4 && warped <= center + 5);
        float *a = ramp(50, 2), *b = ramp(50, 2);
        specaug_time_warp(a, 50, 2, 5, SPECAUG_WARP_BICUBIC, &r);
        specaug_time_warp_at(b, 50, 2, (size_t)center, (size_t)warped, SPECAUG_WARP_BICUBIC);
        cr_assert_eq(memcmp(a, b, 50 * 2 * sizeof *a), 0);
        free(a);
        free(b);
    }
}
