/* core/compute/vmath: exp and erfc of arrays against libm's scalar functions (within libmvec's
 * documented 4 ulp), every length from 0 to past two vectors, in place, and each element's value
 * independent of where it lies in the array (the property that keeps a pass split over threads
 * bit-identical). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "core/compute/vmath.h"

enum { N = 4099 };

/* Distance in float steps between a and b (both finite, same sign or zero). */
static double ulps(float a, float b)
{
    if (a == b) return 0;
    return fabs((double)a - (double)b) / (double)(nextafterf(fabsf(b), INFINITY) - fabsf(b));
}

static void inputs(float *x, float lo, float hi)
{
    for (int i = 0; i < N; i++) x[i] = lo + (hi - lo) * (float)((i * 2654435761u) % N) / (float)(N - 1);
}

static void check_fn(void (*vf)(float *, const float *, size_t), float (*sf)(float), float lo, float hi,
                     const char *name)
{
    static float x[N], y[N], z[N];
    inputs(x, lo, hi);
    vf(y, x, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        float want = sf(x[i]);
        cr_assert(isfinite(y[i]) == isfinite(want), "%s(%g): %g vs %g", name, x[i], y[i], want);
        if (want == 0 || !isfinite(want)) continue;
        double u = ulps(y[i], want);
        worst = u > worst ? u : worst;
    }
    cr_assert(worst <= 4, "%s: %.1f ulp from libm", name, worst);
    /* each length and offset gives the same bits per element (tails are padded, not scalar) */
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n <= 19; n++) {
            memset(z, 0, sizeof z);
            vf(z, x + off, n);
            cr_assert(memcmp(z, y + off, n * sizeof *z) == 0, "%s: n %zu at %zu differs", name, n, off);
        }
    /* in place */
    memcpy(z, x, sizeof z);
    vf(z, z, N);
    cr_assert(memcmp(z, y, sizeof z) == 0, "%s in place differs", name);
}

Test(vmath, expf_erfcf_match_libm_and_do_not_depend_on_position)
{
    check_fn(vmath_expf, expf, -87.f, 88.f, "expf");
    check_fn(vmath_expf, expf, -2.f, 2.f, "expf");
    check_fn(vmath_erfcf, erfcf, -4.f, 9.f, "erfcf");
}

Test(vmath, saturation_and_nan)
{
    float x[4] = {-1000.f, 1000.f, NAN, 0.f}, y[4];
    vmath_expf(y, x, 4);
    cr_assert(y[0] == 0 && isinf(y[1]) && isnan(y[2]) && y[3] == 1);
    vmath_erfcf(y, x, 4);
    cr_assert(y[0] == 2 && y[1] == 0 && isnan(y[2]) && y[3] == 1);
}

Test(vmath, double_versions_are_libm)
{
    double x[5] = {-3, -0.5, 0, 0.25, 7}, y[5];
    vmath_exp(y, x, 5);
    for (int i = 0; i < 5; i++) cr_assert(y[i] == exp(x[i]));
    vmath_erfc(y, x, 5);
    for (int i = 0; i < 5; i++) cr_assert(y[i] == erfc(x[i]));
}
