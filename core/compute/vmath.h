/* exp, erfc and tanh over arrays, for the elementwise passes whose time was libm's scalar calls
 * (the Conformer's Swish and GLU, the E-Branchformer's GELU, attention's softmax, the LSTM cell).
 * The float versions go through glibc's vector math library (libmvec), eight lanes at a time where
 * the CPU has AVX2 and FMA, sixteen for exp and erfc where it has AVX-512F (its AVX-512 exp and erfc
 * give the AVX2 ones' bits for all 2^32 floats, its tanh does not and stays on AVX2: the bits do not
 * depend on which of the two machines), scalar libm elsewhere; the double versions are the scalar libm loops (the
 * reference instantiation). Each element's value depends only on that element, never on where it
 * lies in the array (a tail is padded to a whole vector), so a pass split over threads in any way
 * gives the same bits. libmvec's float exp, erfc and tanh are within 4 ulp (glibc's manual); y may
 * be x. */
#ifndef ESPNET3_VMATH_H
#define ESPNET3_VMATH_H

#include <stddef.h>

void vmath_expf(float *y, const float *x, size_t n);
void vmath_erfcf(float *y, const float *x, size_t n);
void vmath_tanhf(float *y, const float *x, size_t n);
void vmath_exp(double *y, const double *x, size_t n);
void vmath_erfc(double *y, const double *x, size_t n);
void vmath_tanh(double *y, const double *x, size_t n);

#endif
