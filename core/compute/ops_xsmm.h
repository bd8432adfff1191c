/* Row-major float GEMMs through libxsmm's JIT kernels, for the shapes where they beat OpenBLAS on
 * CPUs with AVX-512 where OpenBLAS runs AVX2 kernels (see ops_xsmm_enabled): C = A B and C = A B^T
 * (the Winograd convolution's channel products, the attention projections, the feed-forward's
 * layers, the subsampling's and CTC's output layers) and C = A^T B at most 1024 columns wide (the
 * weight gradients but the subsampling output layer's), with alpha 1 and beta 0 or 1.
 *
 * Why: OpenBLAS packs both operands of every product into its own layout before its kernel runs;
 * when an operand comes fresh from memory (a Winograd chunk's transformed tiles, written once and
 * read once) the packing reads it at DRAM speed. libxsmm's kernels read A's rows and B's columns
 * where they lie, so C = A B and C = A^T B need no copy at all (C = A B^T one transpose of B,
 * usually the weights). One thread, 121 products of 400 x 256 x 256 with fresh operands: 100-103
 * GFLOP/s against OpenBLAS' 89-95; weight gradients (256 x 256 over k 400-10000 rows, fresh
 * operands) 98-99 against 89-91 (docs/notes/2026-11-cpu-step-rounds.md).
 *
 * Each element of C is one chain of fused multiply-adds over k in order, blocks of 256 of k
 * continuing the chain through C, so its bits depend neither on how C's rows are split over
 * threads nor on the CPU's share of rows per call; its columns split at the column blocks'
 * starts. Products wider than 512 columns copy B into panels of those columns first (its
 * rows 4 KB apart would evict each other from L1): the same sums, 1-6% faster than OpenBLAS in the
 * feed-forward's products at one thread, 2-14% at two (docs/notes/2026-11-cpu-step-rounds.md). */
#ifndef ESPNET3_COMPUTE_OPS_XSMM_H
#define ESPNET3_COMPUTE_OPS_XSMM_H

#include <cblas.h>

/* C's column blocks, one kernel call wide each: 64 columns, the last narrower, but none of 16 or
 * fewer (libxsmm's one-vector kernels split their sums over k, in another order: a remainder of
 * 1 to 16 columns runs as 48 + (16 + r)). A product split by columns gives the bits of the whole
 * when its parts start at block starts: block blk of n columns starts at ops_xsmm_col_start(n,
 * blk); ops_xsmm_col_blocks(n) blocks, the start of block ops_xsmm_col_blocks(n) being n. */
int ops_xsmm_col_blocks(int n);
int ops_xsmm_col_start(int n, int blk);

/* Whether libxsmm takes C = alpha op(A) op(B) + beta C of this shape on this CPU: decided on the
 * whole product, before it is split over threads, so every part runs the same code. */
int ops_xsmm_takes(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, float beta);

/* C = op(A) op(B) + beta C (row-major, as cblas_sgemm; a shape ops_xsmm_takes, or a part of one).
 * Returns 0 without touching C when libxsmm cannot generate a kernel (it then stays off, with one
 * warning, and the caller runs cblas_sgemm instead). */
int ops_xsmm_sgemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a, int lda,
                   const float *b, int ldb, float beta, float *c, int ldc);

/* Whether products may go through libxsmm at all: available where the CPU has AVX-512 and libxsmm
 * can generate code; on by default there unless OpenBLAS runs its own AVX-512 kernels
 * (core/compute/blas_core.h: SkylakeX and its successors beat these on Intel's two-FMA-unit cores;
 * on Zen 4, where OpenBLAS 0.3.21 runs AVX2 kernels, these win). Off: every product through
 * OpenBLAS. Tests and benchmarks compare the two; process-wide, set before any GEMM runs on other
 * threads. */
void ops_xsmm_enable(int on);
int ops_xsmm_enabled(void);
int ops_xsmm_available(void);

#endif
