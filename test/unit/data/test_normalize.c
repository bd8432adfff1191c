/* GlobalMVN and UtteranceMVN against hand-computed values. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/data/normalize.h"

Test(normalize, global_mvn_from_stats)
{
    /* dim 2, count 4: frames (1, 10), (3, 10), (5, 14), (7, 14). */
    const double sum[2] = {16, 48}, sq[2] = {1 + 9 + 25 + 49, 100 + 100 + 196 + 196};
    global_mvn g;
    esp_err err;
    cr_assert_eq(global_mvn_init(&g, sum, sq, 4, 2, 1, 1, 1e-20, &err), 0, "%s", err.msg);
    cr_assert_float_eq(g.mean[0], 4.0f, 0);
    cr_assert_float_eq(g.mean[1], 12.0f, 0);
    cr_assert_float_eq(g.std[0], (float)sqrt(5.0), 1e-6); /* 84/4 - 16 = 5 */
    cr_assert_float_eq(g.std[1], 2.0f, 1e-6);             /* 592/4 - 144 = 4 */
    float x[3 * 2] = {1, 10, 7, 14, 99, 99};              /* last frame is padding */
    global_mvn_apply(x, &g, 3, 2);
    cr_assert_float_eq(x[0], (float)(-3 / sqrt(5.0)), 1e-6);
    cr_assert_float_eq(x[1], -1.0f, 1e-6);
    cr_assert_float_eq(x[2], (float)(3 / sqrt(5.0)), 1e-6);
    cr_assert_float_eq(x[3], 1.0f, 1e-6);
    cr_assert_eq(x[4], 0.0f);
    cr_assert_eq(x[5], 0.0f);
    global_mvn_free(&g);
}

Test(normalize, global_mvn_flags_and_variance_floor)
{
    /* Constant dimension: var 0 -> std sqrt(1e-20) = 1e-10, as ESPnet2. */
    const double sum[1] = {6}, sq[1] = {12};
    global_mvn g;
    esp_err err;
    cr_assert_eq(global_mvn_init(&g, sum, sq, 3, 1, 1, 0, 1e-20, &err), 0, "%s", err.msg);
    cr_assert_float_eq(g.std[0], 1e-10f, 1e-16);
    float x[2] = {5, 1};
    global_mvn_apply(x, &g, 2, 2);
    cr_assert_float_eq(x[0], 3.0f, 0); /* means only */
    cr_assert_float_eq(x[1], -1.0f, 0);
    global_mvn_free(&g);

    const double s2[1] = {8}, q2[1] = {32}; /* count 4: mean 2, var 4, std 2 */
    cr_assert_eq(global_mvn_init(&g, s2, q2, 4, 1, 0, 1, 1e-20, &err), 0, "%s", err.msg);
    float y[1] = {6};
    global_mvn_apply(y, &g, 1, 1);
    cr_assert_float_eq(y[0], 3.0f, 0); /* vars only: 6 / 2 */
    global_mvn_free(&g);
}

Test(normalize, global_mvn_rejects_bad_stats)
{
    const double sum[1] = {1}, sq[1] = {1}, bad[1] = {NAN};
    global_mvn g;
    esp_err err;
    cr_assert_eq(global_mvn_init(&g, sum, sq, 0, 1, 1, 1, 1e-20, &err), -1);
    cr_assert(strstr(err.msg, "count is 0"), "%s", err.msg);
    cr_assert_eq(global_mvn_init(&g, bad, sq, 2, 1, 1, 1, 1e-20, &err), -1);
    cr_assert(strstr(err.msg, "non-finite"), "%s", err.msg);
    cr_assert_null(g.mean);
}

Test(normalize, utterance_mvn_defaults_means_only)
{
    /* 3 valid frames of dim 2 + 1 padding frame. */
    float x[4 * 2] = {1, 2, 2, 4, 6, 12, 50, 50};
    utterance_mvn_apply(x, 4, 3, 2, 1, 0, 1e-20);
    const float want[8] = {-2, -4, -1, -2, 3, 6, -3, -6}; /* ESPnet: padding holds -mean */
    for (int i = 0; i < 8; i++) cr_assert_float_eq(x[i], want[i], 1e-6, "i=%d: %g", i, x[i]);
}

Test(normalize, utterance_mvn_with_vars)
{
    float x[3 * 1] = {1, 2, 6}; /* mean 3, var (4 + 1 + 9) / 3 */
    float y[3 * 1] = {1, 2, 6};
    float s = (float)sqrt(14.0 / 3);
    utterance_mvn_apply(x, 3, 3, 1, 1, 1, 1e-20);
    cr_assert_float_eq(x[0], -2 / s, 1e-6);
    cr_assert_float_eq(x[2], 3 / s, 1e-6);
    /* norm_vars without norm_means divides by the same std, keeping the mean. */
    utterance_mvn_apply(y, 3, 3, 1, 0, 1, 1e-20);
    cr_assert_float_eq(y[0], 1 / s, 1e-6);
    cr_assert_float_eq(y[2], 6 / s, 1e-6);
    /* All padding: zeros, no division by zero. */
    float z[2] = {3, 4};
    utterance_mvn_apply(z, 2, 0, 1, 1, 1, 1e-20);
    cr_assert_eq(z[0], 0.0f);
    cr_assert_eq(z[1], 0.0f);
}
