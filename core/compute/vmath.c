/* exp, erfc and tanh over arrays (core/compute/vmath.h): libmvec's AVX2 entry points, picked at run
 * time, scalar libm otherwise. */
#include "core/compute/vmath.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* glibc's libmvec, vector ABI names: 'd' = AVX2, N8 = eight lanes, v = one vector argument. */
__m256 _ZGVdN8v_expf(__m256 x);
__m256 _ZGVdN8v_erfcf(__m256 x);
__m256 _ZGVdN8v_tanhf(__m256 x);

typedef __m256 (*vec8_fn)(__m256);
#define VEC8(f) f

/* The whole vectors, then the tail through a zero-padded vector: the same call for every element. */
__attribute__((target("avx2,fma"))) static void map8(vec8_fn f, float *y, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
    if (i < n) {
        float t[8] = {0};
        memcpy(t, x + i, (n - i) * sizeof *t);
        _mm256_storeu_ps(t, f(_mm256_loadu_ps(t)));
        memcpy(y + i, t, (n - i) * sizeof *t);
    }
}

/* 1 when AVX2 and FMA are there; asked once (a benign race: every thread computes the same). */
static int have_avx2(void)
{
    static int known = -1;
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
}

/* y = f(x) through the vector entry point; 0 when the CPU cannot run it. */
static int map_vec8(vec8_fn f, float *y, const float *x, size_t n)
{
    if (!have_avx2()) return 0;
    map8(f, y, x, n);
    return 1;
}
#else
typedef const void *vec8_fn; /* no vector entry points here: always the scalar loop */
#define VEC8(f) NULL

static int map_vec8(vec8_fn f, float *y, const float *x, size_t n)
{
    (void)f, (void)y, (void)x, (void)n;
    return 0;
}
#endif

static void map_scalar(float (*f)(float), float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = f(x[i]);
}

void vmath_expf(float *y, const float *x, size_t n)
{
    if (!map_vec8(VEC8(_ZGVdN8v_expf), y, x, n)) map_scalar(expf, y, x, n);
}

void vmath_erfcf(float *y, const float *x, size_t n)
{
    if (!map_vec8(VEC8(_ZGVdN8v_erfcf), y, x, n)) map_scalar(erfcf, y, x, n);
}

void vmath_tanhf(float *y, const float *x, size_t n)
{
    if (!map_vec8(VEC8(_ZGVdN8v_tanhf), y, x, n)) map_scalar(tanhf, y, x, n);
}

void vmath_exp(double *y, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = exp(x[i]);
}

void vmath_erfc(double *y, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = erfc(x[i]);
}

void vmath_tanh(double *y, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = tanh(x[i]);
}
