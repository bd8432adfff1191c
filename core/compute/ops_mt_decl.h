/* Multi-threaded variants of ops of core/compute/ops_decl.h for one element type (included by
 * core/compute/ops.h like ops_decl.h; no include guard on purpose). Each takes `threads` (>= 1) and
 * splits its loops over the pool of core/base/parallel.h so that every output element is computed
 * by the same arithmetic as the plain op's: results are bit-identical for any `threads`. Their
 * GEMMs use OpenBLAS' own thread count; inside a split loop the caller sets it to 1
 * (core/compute/backend_cpu.c). The plain ops are these with threads = 1. Scratch is per thread:
 * the plain op's size times `threads` (conv2d: ops_conv2d_*_scratch_mt). */

void OPS_DECL_FN(linear_forward_mt)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                    const OPS_DECL_T *b, int n, int ic, int oc, int threads);
void OPS_DECL_FN(linear_backward_mt)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                     const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                     int n, int ic, int oc, int acc, int threads);
/* saved (NULL: none): ops_conv2d_saved_floats(nb, ic, h, wd) floats that the forward fills and
 * the backward of the same x reads instead of computing them again. */
void OPS_DECL_FN(conv2d_forward_mt)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                    const OPS_DECL_T *b, int nb, int ic, int oc, int h, int wd,
                                    int relu, OPS_DECL_T *saved, OPS_DECL_T *scratch, int threads);
/* The Winograd form's transformed kernels of w (ic > 1) for inputs of h x wd (they depend on w and
 * the tile sizes the output's size picks): ops_conv2d_kernels_floats(ic, oc, h, wd) floats into u;
 * scratch as conv2d_forward_mt's. conv2d_forward_u_mt is conv2d_forward_mt with them given (u made
 * from this w for this h x wd; NULL: made there), the same bits: a caller that keeps them (the CPU
 * backend, for an unchanged w) skips the transform on every call. */
void OPS_DECL_FN(conv2d_kernels_mt)(OPS_DECL_T *u, const OPS_DECL_T *w, int ic, int oc, int h, int wd,
                                    OPS_DECL_T *scratch, int threads);
void OPS_DECL_FN(conv2d_forward_u_mt)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                      const OPS_DECL_T *u, const OPS_DECL_T *b, int nb, int ic, int oc, int h,
                                      int wd, int relu, OPS_DECL_T *saved, OPS_DECL_T *scratch, int threads);
void OPS_DECL_FN(conv2d_backward_mt)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                     const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                     const OPS_DECL_T *y, int nb, int ic, int oc, int h, int wd,
                                     int acc, const OPS_DECL_T *saved, OPS_DECL_T *scratch, int threads);
void OPS_DECL_FN(layernorm_backward_mt)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                        const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                        const OPS_DECL_T *mean, const OPS_DECL_T *rstd, int n, int c,
                                        int acc, int threads);
/* Scratch: threads x ops_mha_forward_scratch(tq, tk, p) / ops_mha_backward_scratch(tq, tk); the
 * (utterance, head) pairs are split over the threads. */
void OPS_DECL_FN(mha_forward_mt)(OPS_DECL_T *y, OPS_DECL_T *att, const OPS_DECL_T *q, int ldq,
                                 const OPS_DECL_T *k, const OPS_DECL_T *v, int ldkv, const int *lens,
                                 int nb, int tq, int tk, int causal, int h, int hd, float p,
                                 uint64_t seed, uint64_t stream, OPS_DECL_T *scratch, int threads);
void OPS_DECL_FN(mha_backward_mt)(OPS_DECL_T *dq, OPS_DECL_T *dk, OPS_DECL_T *dv,
                                  const OPS_DECL_T *dy, const OPS_DECL_T *att, const OPS_DECL_T *q,
                                  int ldq, const OPS_DECL_T *k, const OPS_DECL_T *v, int ldkv,
                                  const int *lens, int nb, int tq, int tk, int h, int hd, float p,
                                  uint64_t seed, uint64_t stream, OPS_DECL_T *scratch, int threads);
/* dropout_forward of elements base .. base + n - 1 of a tensor (the mask of element base + i on
 * y[i] = x[i]): a range of a split elementwise loop. */
void OPS_DECL_FN(dropout_forward_at)(OPS_DECL_T *y, const OPS_DECL_T *x, size_t n, size_t base, float p,
                                     uint64_t seed, uint64_t stream);

/* ---- the Conformer's (core/compute/ops_conformer_decl.h) */
void OPS_DECL_FN(dwconv1d_forward_mt)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                      const OPS_DECL_T *b, int nb, int t, int c, int k, int threads);
void OPS_DECL_FN(dwconv1d_backward_mt)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                       const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                       int nb, int t, int c, int k, int threads);
void OPS_DECL_FN(batchnorm_forward_mt)(OPS_DECL_T *y, OPS_DECL_T *mean, OPS_DECL_T *rstd,
                                       const OPS_DECL_T *x, const OPS_DECL_T *w, const OPS_DECL_T *b,
                                       OPS_DECL_T *run_mean, OPS_DECL_T *run_var, OPS_DECL_T *run_count,
                                       int n, int c, double eps, double momentum, int train, int threads);
void OPS_DECL_FN(batchnorm_backward_mt)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                        const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                        const OPS_DECL_T *mean, const OPS_DECL_T *rstd, int n, int c,
                                        int threads);
/* Scratch: threads x ops_relattn_forward_scratch / ops_relattn_backward_scratch. The forward splits
 * the (utterance, head) pairs, the backward the heads (dp, du, dvb of a head sum over utterances). */
void OPS_DECL_FN(relattn_forward_mt)(OPS_DECL_T *y, OPS_DECL_T *att, const OPS_DECL_T *q, const OPS_DECL_T *k,
                                     const OPS_DECL_T *v, int ld, const OPS_DECL_T *p, const OPS_DECL_T *u,
                                     const OPS_DECL_T *vb, const int *lens, int nb, int t, int h, int hd, int chunk, int left,
                                     float pdrop, uint64_t seed, uint64_t stream, OPS_DECL_T *scratch, int threads);
void OPS_DECL_FN(relattn_backward_mt)(OPS_DECL_T *dq, OPS_DECL_T *dk, OPS_DECL_T *dv, OPS_DECL_T *dp,
                                      OPS_DECL_T *du, OPS_DECL_T *dvb, const OPS_DECL_T *dy, const OPS_DECL_T *att,
                                      const OPS_DECL_T *q, const OPS_DECL_T *k, const OPS_DECL_T *v, int ld,
                                      const OPS_DECL_T *p, const OPS_DECL_T *u, const OPS_DECL_T *vb,
                                      const int *lens, int nb, int t, int h, int hd, int chunk, int left, float pdrop, uint64_t seed,
                                      uint64_t stream, OPS_DECL_T *scratch, int threads);
