/* Prototypes of the Conformer's ops for one element type, included by core/compute/ops.h once per
 * type with OPS_DECL_T and OPS_DECL_FN defined (as core/compute/ops_decl.h; no include guard on
 * purpose). Conventions are core/compute/ops.h's; activations are rows (n, c), channels last. */

/* ---- Swish: y = x * sigmoid(x) (y may alias x). The backward needs the input:
 * dx = dy * swish'(x) (dx may alias dy, not x). */
void OPS_DECL_FN(swish_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, size_t n);
void OPS_DECL_FN(swish_backward)(OPS_DECL_T *dx, const OPS_DECL_T *dy, const OPS_DECL_T *x,
                                 size_t n);

/* ---- GLU over the channels (torch.nn.functional.glu(x, dim=channels)): x (n, 2c) -> y (n, c),
 * y = x[:, :c] * sigmoid(x[:, c:]). The backward overwrites dx (n, 2c). */
void OPS_DECL_FN(glu_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, int n, int c);
void OPS_DECL_FN(glu_backward)(OPS_DECL_T *dx, const OPS_DECL_T *dy, const OPS_DECL_T *x, int n,
                               int c);

/* ---- Depthwise Conv1d over time (torch Conv1d(c, c, k, padding=(k - 1) / 2, groups=c)), channels
 * last: x (nb, t, c) -> y (nb, t, c), y[b][i][ch] = bias[ch] + sum_j w[ch][j] x[b][i + j - pad][ch],
 * zeros outside [0, t); w in torch's layout (c, 1, k), k odd; b may be NULL. The backward: dx
 * overwritten, dw +=, db += (NULL: no bias). */
void OPS_DECL_FN(dwconv1d_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                   const OPS_DECL_T *b, int nb, int t, int c, int k);
void OPS_DECL_FN(dwconv1d_backward)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                    const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                    int nb, int t, int c, int k);

/* ---- BatchNorm1d over the channels of x (n, c): statistics over all n rows (torch's batch x time,
 * padded frames included, as ESPnet's ConvolutionModule computes it).
 * train != 0: batch mean and biased variance; saves mean[c] and rstd[c] = 1 / sqrt(var + eps) for
 * the backward; when run_mean is not NULL, updates the running statistics as torch does with
 * `momentum` (run_var with the unbiased variance; left as is when n < 2) and adds 1 to *run_count
 * (num_batches_tracked, kept as a float).
 * train == 0: normalizes with run_mean / run_var (mean and rstd may be NULL, nothing is updated).
 * y = (x - mean) * rstd * w + b; y may not alias x. */
void OPS_DECL_FN(batchnorm_forward)(OPS_DECL_T *y, OPS_DECL_T *mean, OPS_DECL_T *rstd,
                                    const OPS_DECL_T *x, const OPS_DECL_T *w, const OPS_DECL_T *b,
                                    OPS_DECL_T *run_mean, OPS_DECL_T *run_var,
                                    OPS_DECL_T *run_count, int n, int c, double eps,
                                    double momentum, int train);
/* The training-mode backward (batch statistics): dx overwritten (must not alias dy), dw +=, db +=. */
void OPS_DECL_FN(batchnorm_backward)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                     const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                     const OPS_DECL_T *mean, const OPS_DECL_T *rstd, int n, int c);

/* ---- BatchNorm synchronised across ranks (trainer.sync_batchnorm, as torch's SyncBatchNorm): the
 * per-channel sums each rank contributes, summed in double over the rows in order and rounded:
 *   dy NULL, mean NULL   out[0, c) = sum x
 *   dy NULL, mean        out[0, c) = sum (x - mean)^2
 *   dy, mean             out[0, c) = sum dy, out[c, 2c) = sum (x - mean) dy
 * The caller sums them over the ranks; the forward then normalizes with batchnorm_forward in
 * evaluation mode on the global statistics. */
void OPS_DECL_FN(batchnorm_stats)(OPS_DECL_T *out, const OPS_DECL_T *x, const OPS_DECL_T *dy,
                                  const OPS_DECL_T *mean, int n, int c);
/* The backward with global sums g (2c: sum dy, sum (x - mean) dy over every rank's rows, count
 * rows in all): dx = (dy - g0 / count - (x - mean) g1 rstd^2 / count) rstd w (dx must not alias
 * dy); dw += l1 * rstd, db += l0 with this rank's own sums l (2c), as torch's SyncBatchNorm
 * leaves the parameter gradients to the data-parallel average. */
void OPS_DECL_FN(batchnorm_backward_global)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                            const OPS_DECL_T *dy, const OPS_DECL_T *x,
                                            const OPS_DECL_T *w, const OPS_DECL_T *mean,
                                            const OPS_DECL_T *rstd, const OPS_DECL_T *l,
                                            const OPS_DECL_T *g, double count, int n, int c);

/* ---- Relative positional encoding (ESPnet's RelPositionalEncoding, rel_pos_type latest): pe
 * (2t - 1, d), row r for the relative position t - 1 - r (t - 1 down to 1 - t):
 * pe[r][2i] = sin(pos div_i), pe[r][2i + 1] = cos(pos div_i), div_i as posenc_forward's; d even. */
void OPS_DECL_FN(relpos_encoding)(OPS_DECL_T *pe, int t, int d);

/* ---- Multi-head self-attention with relative positions (ESPnet's RelPositionMultiHeadedAttention,
 * zero_triu false), between the projections and linear_out. Per head, with Q, K, V the head's
 * slices and P the head's columns of p ((2t - 1) rows of h*hd at row stride h*hd: linear_pos of
 * the relative encoding, shared by the batch), u / vb that head's row of pos_bias_u / pos_bias_v
 * (h, hd):
 *   S[i][j] = ((Q_i + u) . K_j + (Q_i + vb) . P[relpos_shift_col(i, j, t)]) / sqrt(hd)
 * then masking, softmax, dropout, y, att and the scratch rules as attention_forward. chunk > 0
 * also masks the keys outside query i's chunk and the `left` chunks before it (attn_chunk_keys of
 * core/compute/kernel_math.h: the asr_transducer Encoder's make_chunk_mask); a row left no key is
 * zero. The backward reads the mask from att's zeros. u and vb NULL: the asr_transducer's
 * simplified_att_score, p then (2t - 1) rows of h (one scalar per head, linear_pos to h) and
 *   S[i][j] = (Q_i . K_j + p[relpos_shift_col(i, j, t)][head]) / sqrt(hd)
 * scratch: ops_relattn_forward_scratch(t, hd, p) / ops_relattn_backward_scratch(t, hd). */
void OPS_DECL_FN(relattn_forward)(OPS_DECL_T *y, OPS_DECL_T *att, const OPS_DECL_T *q,
                                  const OPS_DECL_T *k, const OPS_DECL_T *v, int ld,
                                  const OPS_DECL_T *p, const OPS_DECL_T *u, const OPS_DECL_T *vb,
                                  const int *lens, int nb, int t, int h, int hd, int chunk, int left, float pdrop,
                                  uint64_t seed, uint64_t stream, OPS_DECL_T *scratch);
/* dq, dk, dv overwritten as attention_backward's; dp ((2t - 1, h*hd), or (2t - 1, h) without
 * u / vb, summed over the batch) overwritten; du, dvb += (the pos_bias gradients; unused, may be
 * NULL, without u / vb). */
void OPS_DECL_FN(relattn_backward)(OPS_DECL_T *dq, OPS_DECL_T *dk, OPS_DECL_T *dv, OPS_DECL_T *dp,
                                   OPS_DECL_T *du, OPS_DECL_T *dvb, const OPS_DECL_T *dy,
                                   const OPS_DECL_T *att, const OPS_DECL_T *q, const OPS_DECL_T *k,
                                   const OPS_DECL_T *v, int ld, const OPS_DECL_T *p,
                                   const OPS_DECL_T *u, const OPS_DECL_T *vb, const int *lens,
                                   int nb, int t, int h, int hd, int chunk, int left, float pdrop, uint64_t seed,
                                   uint64_t stream, OPS_DECL_T *scratch);

/* ---- The E-Branchformer's cgMLP (espnet2/asr/layers/cgmlp.py).
 * GELU (torch.nn.GELU, exact erf form): y = x * Phi(x) (y may alias x); the backward reads the
 * input: dx = dy * (Phi(x) + x * phi(x)) (dx may alias dy, not x). */
void OPS_DECL_FN(gelu_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, size_t n);
void OPS_DECL_FN(gelu_backward)(OPS_DECL_T *dx, const OPS_DECL_T *dy, const OPS_DECL_T *x,
                                size_t n);
/* Elementwise product (the spatial gating unit's x_r * x_g): y = a * b (y may alias a or b). The
 * backward overwrites da = dy * b and db = dy * a (either may alias dy; not a or b). */
void OPS_DECL_FN(mul_forward)(OPS_DECL_T *y, const OPS_DECL_T *a, const OPS_DECL_T *b, size_t n);
void OPS_DECL_FN(mul_backward)(OPS_DECL_T *da, OPS_DECL_T *db, const OPS_DECL_T *dy,
                               const OPS_DECL_T *a, const OPS_DECL_T *b, size_t n);
