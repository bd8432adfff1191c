/* The float ops' GEMM (core/compute/ops_f32.c's GEMM): row-major cblas_sgemm split over the threads
 * of core/base/parallel.h, OpenBLAS on one thread in each part (or libxsmm's kernels, for the
 * shapes core/compute/ops_xsmm.h takes, decided on the whole product), with both inputs rounded to
 * the GEMM precision first under mixed precision (core/compute/ops_precision.h).
 *
 * Why not OpenBLAS' own threads: with as many threads as cores, its workers spin (sched_yield)
 * after each GEMM while the pool runs the elementwise passes that follow, and the two sets of
 * threads fight over the cores; with one pool for every pass the 2-thread training step got
 * 1.2x faster (docs/notes/2026-11-cpu-step-rounds.md).
 * The split is by blocks of C's rows (or columns, when C is wider than tall), never over k, and
 * only at the cuts that keep each element's sum in one order with the kernel this process runs
 * (probed once: OpenBLAS' Haswell/Zen kernel keeps it only at multiples of 24 rows), so a split
 * GEMM gives the bits of one whole cblas_sgemm, or of one whole libxsmm product, whatever the
 * thread count (test/unit/compute/test_ops_threads.c checks it over shapes on both sides of the
 * split threshold). */
#ifndef ESPNET3_COMPUTE_OPS_SGEMM_H
#define ESPNET3_COMPUTE_OPS_SGEMM_H

#include <cblas.h>

/* The threads every later ops_sgemm_mp splits over; process-wide, as the precision is (the CPU
 * backend sets both, and keeps OpenBLAS on one thread). */
void ops_set_gemm_threads(int threads);

/* cblas_sgemm (row-major only), split over the GEMM threads, with both inputs rounded to the GEMM
 * precision first (a plain split cblas_sgemm at AMP_FP32). */
void ops_sgemm_mp(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* The same on the calling thread alone: for a loop that is itself split over the threads, whose
 * parts run whole products (core/compute/ops_winograd_impl.h's). */
void ops_sgemm_mp_serial(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n,
                         int k, float alpha, const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);

/* Whether the attention's scores S = alpha Q K^T of m query rows (Q m x k, K n x k, row-major)
 * may run as cblas_sgemm(Trans, Trans) on Q^T (k x m, packed by the caller) with the same bits as
 * cblas_sgemm(NoTrans, Trans) on Q. Why: for a beam's few rows against many keys (the decoder's
 * source attention over the frames so far) OpenBLAS packs all of K in the (NoTrans, Trans) form
 * and not in the other, which ran 2.7x faster (docs/notes/2026-11-streaming-rtf.md). Taken for
 * 2 to 16 rows, k <= 128, float GEMMs, where libxsmm takes neither form, above OpenBLAS 0.3.21's
 * small-matrix bound (m n k <= 76800, where the two forms take different kernels) and where a
 * probe (once, on shapes of this kind) found both forms' bits equal with this process' kernel. */
int ops_sgemm_qt_takes(int m, int n, int k, float alpha);

#endif
