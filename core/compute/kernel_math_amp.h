/* Mixed precision's per-element math (included by core/compute/kernel_math.h), shared by the CPU's
 * emulation (core/compute/ops_precision.c), the step op unscale_grads and the CUDA kernels
 * (cuda/ops_precision.cu):
 *   amp_f32_to_bf16, amp_bf16_to_f32   float <-> bfloat16 bits, round to nearest even (torch's
 *                                      c10::BFloat16: NaN becomes 0x7fc0, overflow rounds to inf)
 *   amp_f32_to_f16, amp_f16_to_f32     float <-> IEEE half bits, round to nearest even with
 *                                      subnormals, |x| >= 65520 to inf (torch's / numpy's float16)
 *   amp_round                          x rounded to one of them and back (the value a GEMM reads)
 *   amp_unscale_one                    torch's _amp_foreach_non_finite_check_and_unscale_ on one
 *                                      gradient element */
#ifndef ESPNET3_COMPUTE_KERNEL_MATH_AMP_H
#define ESPNET3_COMPUTE_KERNEL_MATH_AMP_H

#include <stdint.h>

/* The GEMM input precision of a backend (be->set_gemm_precision). */
typedef enum amp_precision { AMP_FP32 = 0, AMP_BF16 = 1, AMP_FP16 = 2 } amp_precision;

typedef union amp_f32_bits {
    float f;
    uint32_t u;
} amp_f32_bits;

static inline KM_HD uint16_t amp_f32_to_bf16(float x)
{
    amp_f32_bits b;
    b.f = x;
    if ((b.u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0; /* NaN */
    b.u += 0x7fffu + ((b.u >> 16) & 1u);
    return (uint16_t)(b.u >> 16);
}

static inline KM_HD float amp_bf16_to_f32(uint16_t h)
{
    amp_f32_bits b;
    b.u = (uint32_t)h << 16;
    return b.f;
}

static inline KM_HD uint16_t amp_f32_to_f16(float x)
{
    amp_f32_bits b;
    b.f = x;
    uint32_t sign = (b.u >> 16) & 0x8000u, ax = b.u & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520: inf (ties to even) */
    if (ax >= 0x38800000u) {                                   /* normal: >= 2^-14 */
        uint32_t r = ax - (112u << 23);                        /* exponent bias 127 -> 15 */
        r += 0xfffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (ax <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25: rounds to zero */
    /* subnormal: the mantissa with its implicit bit, shifted to units of 2^-24, rounded to even */
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, s = 126u - e;
    uint32_t h = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

static inline KM_HD float amp_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    amp_f32_bits b;
    if (e == 0x1f) {
        b.u = sign | 0x7f800000u | (m << 13);
    } else if (e) {
        b.u = sign | ((e + 112u) << 23) | (m << 13);
    } else if (!m) {
        b.u = sign;
    } else { /* subnormal: normalize */
        e = 113;
        while (!(m & 0x400u)) m <<= 1, e--;
        b.u = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    return b.f;
}

static inline KM_HD float amp_round(float x, int precision)
{
    if (precision == AMP_BF16) return amp_bf16_to_f32(amp_f32_to_bf16(x));
    if (precision == AMP_FP16) return amp_f16_to_f32(amp_f32_to_f16(x));
    return x;
}

/* One gradient element of torch.amp.GradScaler.unscale_: the finite check reads the element as it
 * is (scaled), the result is g * inv_scale in float (inf and NaN stay non-finite). *found is set
 * to 1 for a non-finite element and never cleared. */
static inline KM_HD float amp_unscale_one(float g, float inv_scale, int *found)
{
    if (!isfinite(g)) *found = 1;
    return g * inv_scale;
}

#endif
