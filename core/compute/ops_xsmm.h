/* Row-major float GEMMs through libxsmm's JIT kernels, for the shapes where they beat OpenBLAS on
 * CPUs with AVX-512: products whose C is at most 512 columns wide (the Winograd convolution's
 * channel products and their weight gradients, the attention projections and theirs, the
 * feed-forward's second layer, CTC's output layer), C = A B, C = A B^T or C = A^T B with alpha 1
 * and beta 0 or 1.
 *
 * Why: OpenBLAS packs both operands of every product into its own layout before its kernel runs;
 * when an operand comes fresh from memory (a Winograd chunk's transformed tiles, written once and
 * read once) the packing reads it at DRAM speed. libxsmm's kernels read A's rows and B's columns
 * where they lie, so C = A B and C = A^T B need no copy at all (C = A B^T one transpose of B,
 * usually the weights). One thread, 121 products of 400 x 256 x 256 with fresh operands: 100-103
 * GFLOP/s against OpenBLAS' 89-95; weight gradients (256 x 256 over k 400-10000 rows, fresh
 * operands) 98-99 against 89-91 (README, Benchmarks).
 *
 * Each element of C is one chain of fused multiply-adds over k in order, blocks of 256 of k
 * continuing the chain through C, so its bits depend neither on how C is split over threads nor
 * on the CPU's share of rows per call. */
#ifndef ESPNET3_COMPUTE_OPS_XSMM_H
#define ESPNET3_COMPUTE_OPS_XSMM_H

#include <cblas.h>

/* Whether libxsmm takes C = alpha op(A) op(B) + beta C of this shape on this CPU: decided on the
 * whole product, before it is split over threads, so every part runs the same code. */
int ops_xsmm_takes(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, float beta);

/* C = op(A) op(B) + beta C (row-major, as cblas_sgemm; a shape ops_xsmm_takes, or a part of one).
 * Returns 0 without touching C when libxsmm cannot generate a kernel (it then stays off, with one
 * warning, and the caller runs cblas_sgemm instead). */
int ops_xsmm_sgemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a, int lda,
                   const float *b, int ldb, float beta, float *c, int ldc);

/* Whether products may go through libxsmm at all (on by default where the CPU has AVX-512 and
 * libxsmm can generate code). Off: every product through OpenBLAS. Tests and benchmarks compare
 * the two; process-wide, set before any GEMM runs on other threads. */
void ops_xsmm_enable(int on);
int ops_xsmm_enabled(void);

#endif
