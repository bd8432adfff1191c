/* exp, erfc and tanh over arrays (core/compute/vmath.h): libmvec's AVX2 entry points, picked at run
 * time (exp and erfc through the AVX-512 ones where the CPU has AVX-512F: the same bits for every
 * float, checked over all 2^32 of them; tanh's differ, so it stays on AVX2), scalar libm otherwise. */
#include "core/compute/vmath.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* glibc's libmvec, vector ABI names: 'd' = AVX2, N8 = eight lanes, 'e' = AVX-512, N16 = sixteen,
 * v = one vector argument. */
__m256 _ZGVdN8v_expf(__m256 x);
__m256 _ZGVdN8v_erfcf(__m256 x);
__m256 _ZGVdN8v_tanhf(__m256 x);
__m512 _ZGVeN16v_expf(__m512 x);
__m512 _ZGVeN16v_erfcf(__m512 x);

typedef __m256 (*vec8_fn)(__m256);
typedef __m512 (*vec16_fn)(__m512);
#define VEC8(f) f
#define VEC16(f) f

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

/* The same sixteen lanes at a time. */
__attribute__((target("avx512f"))) static void map16(vec16_fn f, float *y, const float *x, size_t n)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
    if (i < n) {
        float t[16] = {0};
        memcpy(t, x + i, (n - i) * sizeof *t);
        _mm512_storeu_ps(t, f(_mm512_loadu_ps(t)));
        memcpy(y + i, t, (n - i) * sizeof *t);
    }
}

enum { CPU_AVX2 = 1, CPU_AVX512 = 2 };

/* CPU_AVX2 when AVX2 and FMA are there, | CPU_AVX512 with AVX-512F too; asked once (a benign race:
 * every thread computes the same). */
static int cpu_vectors(void)
{
    static int known = -1;
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (k < 0) {
        __builtin_cpu_init();
        k = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? CPU_AVX2 : 0;
        if (k && __builtin_cpu_supports("avx512f")) k |= CPU_AVX512;
        __atomic_store_n(&known, k, __ATOMIC_RELAXED);
    }
    return k;
}

/* y = f(x) through the widest vector entry point given (f16 may be NULL); 0 when the CPU cannot
 * run either. */
static int map_vec(vec8_fn f8, vec16_fn f16, float *y, const float *x, size_t n)
{
    int k = cpu_vectors();
    if (f16 && (k & CPU_AVX512))
        map16(f16, y, x, n);
    else if (k & CPU_AVX2)
        map8(f8, y, x, n);
    else
        return 0;
    return 1;
}
#else
typedef const void *vec8_fn; /* no vector entry points here: always the scalar loop */
typedef const void *vec16_fn;
#define VEC8(f) NULL
#define VEC16(f) NULL

static int map_vec(vec8_fn f8, vec16_fn f16, float *y, const float *x, size_t n)
{
    (void)f8, (void)f16, (void)y, (void)x, (void)n;
    return 0;
}
#endif

static void map_scalar(float (*f)(float), float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = f(x[i]);
}

void vmath_expf(float *y, const float *x, size_t n)
{
    if (!map_vec(VEC8(_ZGVdN8v_expf), VEC16(_ZGVeN16v_expf), y, x, n)) map_scalar(expf, y, x, n);
}

void vmath_erfcf(float *y, const float *x, size_t n)
{
    if (!map_vec(VEC8(_ZGVdN8v_erfcf), VEC16(_ZGVeN16v_erfcf), y, x, n)) map_scalar(erfcf, y, x, n);
}

void vmath_tanhf(float *y, const float *x, size_t n)
{
    if (!map_vec(VEC8(_ZGVdN8v_tanhf), NULL, y, x, n)) map_scalar(tanhf, y, x, n);
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
