/* Linear layers over a few rows (a beam search step's hypotheses: the decoder's projections and
 * feed-forward for the beam's 10 rows) without OpenBLAS' packing, on CPUs with AVX-512.
 *
 * Why: OpenBLAS packs both operands of every product before its kernel runs; for y = x W^T with
 * 10 rows of x the operand it packs is the weight W, all of it, every call, and the packing cost
 * more than the product (perf on the streaming bench, docs/benchmarks.md "## Streaming": sgemm's
 * copy of W 26% of the pushes, its kernel 16%). Here each output o is a dot product of W's row o,
 * read where it lies, with every row of x: W is read once per call, x (at most 16 rows) stays in
 * L1/L2.
 *
 * Each y[r][o] is b[o] + a sum over k computed the same way whatever the rows, the row count and
 * the threads (sixteen lanes of fused multiply-adds over k in order, then the lanes added in one
 * fixed tree), so a row's bits do not depend on which other hypotheses share the call. */
#ifndef ESPNET3_COMPUTE_OPS_ROWS_H
#define ESPNET3_COMPUTE_OPS_ROWS_H

/* Whether ops_rows_linear takes y = x W^T + b of n rows of ic inputs: 1 to 16 rows, ic a
 * multiple of 16, a CPU with AVX-512F, float GEMMs (not under mixed precision). */
int ops_rows_linear_takes(int n, int ic);
/* y[r][o] = b[o] + sum_i x[r][i] w[o][i] (b NULL: 0), r < n, o < oc, split by outputs over up to
 * `threads` threads (core/base/parallel.h). Only where ops_rows_linear_takes. */
void ops_rows_linear(float *y, const float *x, const float *w, const float *b, int n, int ic, int oc, int threads);

#endif
