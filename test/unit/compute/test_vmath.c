/* core/compute/vmath: exp and erfc of arrays against libm's scalar functions (within libmvec's
 * documented 4 ulp), every length from 0 to past two vectors, in place, and each element's value
 * independent of where it lies in the array (the property that keeps a pass split over threads
 * bit-identical); on AVX-512 CPUs, the bits of the AVX2 entry points. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__m256 _ZGVdN8v_expf(__m256 x);
__m256 _ZGVdN8v_erfcf(__m256 x);
__m256 _ZGVdN8v_tanhf(__m256 x);

/* What an AVX2 machine computes: the eight-lane entry point over x, n a multiple of 8. */
__attribute__((target("avx2,fma"))) static void avx2_map(__m256 (*f)(__m256), float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
}

/* The AVX-512 entry points vmath takes for exp and erfc give the AVX2 ones' bits (checked once over
 * all 2^32 floats; here every 4099th bit pattern, NaNs, infinities and subnormals among them), so a
 * run's bits do not depend on which of the two machines it ran on. */
Test(vmath, the_same_bits_as_avx2)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) cr_skip_test("no AVX2 here");
    enum { M = 1 << 20 };
    static float x[M], want[M], got[M];
    for (uint32_t i = 0; i < M; i++) {
        uint32_t bits = i * 4099u;
        memcpy(&x[i], &bits, sizeof bits);
    }
    struct {
        void (*vf)(float *, const float *, size_t);
        __m256 (*f8)(__m256);
        const char *name;
    } fns[] = {{vmath_expf, _ZGVdN8v_expf, "expf"}, {vmath_erfcf, _ZGVdN8v_erfcf, "erfcf"},
               {vmath_tanhf, _ZGVdN8v_tanhf, "tanhf"}};
    for (size_t f = 0; f < sizeof fns / sizeof *fns; f++) {
        avx2_map(fns[f].f8, want, x, M);
        fns[f].vf(got, x, M);
        size_t i = 0;
        while (i < M && memcmp(&got[i], &want[i], sizeof *got) == 0) i++;
        cr_expect(i == M, "%s(%a): %a, the AVX2 entry point %a", fns[f].name, i < M ? x[i] : 0.0,
                  i < M ? got[i] : 0.0, i < M ? want[i] : 0.0);
    }
}
#endif
