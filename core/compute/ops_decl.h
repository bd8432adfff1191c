/* Prototypes of the encoder ops for one element type. Included by core/compute/ops.h once per type with
 * OPS_DECL_T (float | double) and OPS_DECL_FN(name) (ops_<name>_f32 | ops_<name>_f64) defined; no
 * include guard on purpose. Conventions (accumulating gradients, `acc`, scratch) are in core/compute/ops.h.
 */

/* ---- Linear: y[n][oc] = x[n][ic] w[oc][ic]^T + b[oc] (b may be NULL) ---- */
void OPS_DECL_FN(linear_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                 const OPS_DECL_T *b, int n, int ic, int oc);
/* dx (NULL: skip; acc 0 '=', 1 '+='), dw +=, db += (NULL when there is no bias). */
void OPS_DECL_FN(linear_backward)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                  const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                  int n, int ic, int oc, int acc);

/* ---- Conv2d, kernel 3, stride 2, no padding, channels last (one input channel: direct taps and
 * patches + GEMM; more: the Winograd form of core/compute/ops_winograd_impl.h) ----
 * x (nb, h, w, ic) -> y (nb, oh, ow, oc), oh = ops_conv_out_len(h), ow = ops_conv_out_len(w);
 * w in torch's layout (oc, ic, 3, 3); with ic = 1 the input is simply (nb, h, w). b may be NULL;
 * relu != 0 fuses ReLU on the output. scratch: ops_conv2d_forward_scratch(ic, oc, h, w). */
void OPS_DECL_FN(conv2d_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                 const OPS_DECL_T *b, int nb, int ic, int oc, int h, int wd,
                                 int relu, OPS_DECL_T *scratch);
/* dx: NULL to skip (the first conv's input needs no gradient); acc 0 '=', 1 '+='. dw +=, db +=.
 * y: the forward output when ReLU was fused (gradient passes where y > 0), NULL otherwise.
 * scratch: ops_conv2d_backward_scratch(ic, oc, h, w). */
void OPS_DECL_FN(conv2d_backward)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                  const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                  const OPS_DECL_T *y, int nb, int ic, int oc, int h, int wd,
                                  int acc, OPS_DECL_T *scratch);

/* ---- Conv2d with any kernel (kh, kw) and stride (sh, sw), no padding, channels last, as patch
 * matrix x weight GEMMs (core/compute/ops_convg_impl.h): x (nb, h, wd, ic) -> y (nb, oh, ow, oc),
 * oh = ops_conv_len(h, kh, sh), ow = ops_conv_len(wd, kw, sw); w in torch's layout (oc, ic, kh, kw)
 * (a Conv1d's (oc, ic, k) over (nb, t, ic) is kh = k, kw = 1, wd = 1). b may be NULL; relu fuses
 * ReLU. Backward as conv2d_backward (dx NULL or acc; dw +=, db +=; y the output when ReLU was
 * fused). scratch: ops_conv2d_gen_forward_scratch / ops_conv2d_gen_backward_scratch. */
void OPS_DECL_FN(conv2d_gen_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                     const OPS_DECL_T *b, int nb, int ic, int oc, int h, int wd, int kh,
                                     int kw, int sh, int sw, int relu, OPS_DECL_T *scratch);
void OPS_DECL_FN(conv2d_gen_backward)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                      const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                      const OPS_DECL_T *y, int nb, int ic, int oc, int h, int wd, int kh,
                                      int kw, int sh, int sw, int acc, OPS_DECL_T *scratch);

/* ---- Conv1d with kernel k, stride, dilation and groups, no padding, channels last, as patch
 * matrix x weight GEMMs per group (core/compute/ops_conv1d_gen_impl.h): x (nb, t, ic) ->
 * y (nb, ot, oc), ot = ops_conv1d_gen_len(t, k, stride, dil); w in torch's layout
 * (oc, ic / groups, k); groups divides ic and oc. b may be NULL. Backward: dx NULL or acc (else
 * zeroed first); dw +=, db +=. scratch: ops_conv1d_gen_forward_scratch / _backward_scratch. */
void OPS_DECL_FN(conv1d_gen_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                     const OPS_DECL_T *b, int nb, int t, int ic, int oc, int k, int stride,
                                     int dil, int groups, OPS_DECL_T *scratch);
void OPS_DECL_FN(conv1d_gen_backward)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                      const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w, int nb,
                                      int t, int ic, int oc, int k, int stride, int dil, int groups, int acc,
                                      OPS_DECL_T *scratch);

/* ---- Swap dims 1 and 2: x (nb, d1, d2, d3) -> y (nb, d2, d1, d3); y must not alias x. Its
 * backward is the same op with d1, d2 swapped. The model uses it (d3 = 1, a transpose per row) to
 * reorder the columns of embed.out's weight from torch's (c, f) to the conv output's (f, c). */
void OPS_DECL_FN(swap12)(OPS_DECL_T *y, const OPS_DECL_T *x, int nb, int d1, int d2, int d3);

/* ---- ReLU (act_relu / act_relu_grad of core/compute/kernel_math.h): y = max(x, 0), in place allowed. Backward from the output: dx = dy * (y > 0), in place
 * allowed (dx == dy). A dropout applied in place on y afterwards does not break it: where dropout
 * zeroed y, dy is zero too. */
void OPS_DECL_FN(relu_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, size_t n);
void OPS_DECL_FN(relu_backward)(OPS_DECL_T *dx, const OPS_DECL_T *dy, const OPS_DECL_T *y,
                                size_t n);

/* ---- LayerNorm over the last dim c of x (n, c): y = (x - mean) * rstd * w + b;
 * saves mean[n] and rstd[n] = 1 / sqrt(var + eps) (biased variance) for the backward. */
void OPS_DECL_FN(layernorm_forward)(OPS_DECL_T *y, OPS_DECL_T *mean, OPS_DECL_T *rstd,
                                    const OPS_DECL_T *x, const OPS_DECL_T *w, const OPS_DECL_T *b,
                                    int n, int c, double eps);
/* dx (acc 0 '=', 1 '+='; must not alias dy), dw +=, db +=. */
void OPS_DECL_FN(layernorm_backward)(OPS_DECL_T *dx, OPS_DECL_T *dw, OPS_DECL_T *db,
                                     const OPS_DECL_T *dy, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                     const OPS_DECL_T *mean, const OPS_DECL_T *rstd, int n, int c,
                                     int acc);

/* ---- The asr_transducer task's other norms over the last dim c of x (n, c) (ESPnet2's
 * asr_transducer/normalization.py), kind ROWNORM_* (core/compute/rownorm.h): BasicNorm y = x * (mean(x^2) + exp(w[0]))^-0.5
 * (w[0] the learned log eps); RMSNorm y = w * x / (sqrt(sum_{i<p} x_i^2 / p) + eps) (p the partial
 * columns, c when not partial); ScaleNorm y = x * w[0] / max(||x||, eps). Saves a[n], the row's
 * factor (BasicNorm's and RMSNorm's; ScaleNorm's 1 / max(||x||, eps)) for the backward. */
void OPS_DECL_FN(rownorm_forward)(OPS_DECL_T *y, OPS_DECL_T *a, const OPS_DECL_T *x, const OPS_DECL_T *w,
                                  int n, int c, int kind, int p, double eps);
/* dx (acc 0 '=', 1 '+='; must not alias dy), dw += (c values for RMSNorm, 1 for the others). */
void OPS_DECL_FN(rownorm_backward)(OPS_DECL_T *dx, OPS_DECL_T *dw, const OPS_DECL_T *dy, const OPS_DECL_T *x,
                                   const OPS_DECL_T *w, const OPS_DECL_T *a, int n, int c, int kind, int p,
                                   double eps, int acc);

/* ---- Elementwise: y = a + b (residual add; y may alias a or b; its backward is the identity),
 * y = x * (type)s (y may alias x; its own backward with the same s). ---- */
void OPS_DECL_FN(add)(OPS_DECL_T *y, const OPS_DECL_T *a, const OPS_DECL_T *b, size_t n);
void OPS_DECL_FN(scale)(OPS_DECL_T *y, const OPS_DECL_T *x, double s, size_t n);

/* ---- Sinusoidal positional encoding: y (nb, t, d) = x * xscale + pe[t] (y may alias x), with
 * pe[t][2i] = sin(t * div_i), pe[t][2i+1] = cos(t * div_i), div_i = exp(-(2i) ln(10000) / d),
 * computed in the instantiated type as torch does in float32; d even. The backward is
 * scale(dx, dy, xscale). */
void OPS_DECL_FN(posenc_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, double xscale, int nb, int t,
                                 int d);

/* ---- Multi-head attention core (between the q/k/v projections and the output projection),
 * queries and keys of different lengths, e.g. the decoder's source attention over the encoder
 * output. q: rows (nb, tq) at row stride ldq; k, v: rows (nb, tk) at row stride ldkv (h*hd for
 * separate buffers, 3*h*hd for one fused (nb, t, 3d) qkv buffer); head j owns columns
 * [j*hd, (j+1)*hd). lens[nb] (host ints, 0 <= lens[b] <= tk): keys j >= lens[b] are masked
 * (weight 0, as torch's masked_fill -> softmax -> masked_fill(0)); causal != 0 also masks the keys
 * after the query's position (key j > query i; ESPnet's subsequent_mask & target mask, tq == tk).
 * Every query row, padded ones included, is computed as in torch. An utterance with lens[b] == 0
 * gets all-zero weights and outputs.
 * y (nb, tq, h*hd) contiguous, heads concatenated (= y.transpose(1, 2).reshape(B, T, d)).
 * att (nb, h, tq, tk): softmax(q k^T / sqrt(hd)) before dropout, zeros at masked keys; keep it for
 * the backward. p > 0 drops attention weights (inverted scaling) with the mask of
 * dropout_forward over att's element index in (seed, stream); the backward regenerates it.
 * scratch: ops_mha_forward_scratch(tq, tk, p) / ops_mha_backward_scratch(tq, tk). */
void OPS_DECL_FN(mha_forward)(OPS_DECL_T *y, OPS_DECL_T *att, const OPS_DECL_T *q, int ldq,
                              const OPS_DECL_T *k, const OPS_DECL_T *v, int ldkv, const int *lens,
                              int nb, int tq, int tk, int causal, int h, int hd, float p,
                              uint64_t seed, uint64_t stream, OPS_DECL_T *scratch);
/* dq (stride ldq), dk, dv (stride ldkv) overwritten; masked key rows get 0. The causal mask needs
 * no flag here: it is in att. */
void OPS_DECL_FN(mha_backward)(OPS_DECL_T *dq, OPS_DECL_T *dk, OPS_DECL_T *dv,
                               const OPS_DECL_T *dy, const OPS_DECL_T *att, const OPS_DECL_T *q,
                               int ldq, const OPS_DECL_T *k, const OPS_DECL_T *v, int ldkv,
                               const int *lens, int nb, int tq, int tk, int h, int hd, float p,
                               uint64_t seed, uint64_t stream, OPS_DECL_T *scratch);

/* ---- The encoder's self-attention: mha with tq = tk = t, ldq = ldkv = ld, no causal mask.
 * scratch: ops_attention_forward_scratch(t, p) / ops_attention_backward_scratch(t). */
void OPS_DECL_FN(attention_forward)(OPS_DECL_T *y, OPS_DECL_T *att, const OPS_DECL_T *q,
                                    const OPS_DECL_T *k, const OPS_DECL_T *v, int ld,
                                    const int *lens, int nb, int t, int h, int hd, float p,
                                    uint64_t seed, uint64_t stream, OPS_DECL_T *scratch);
void OPS_DECL_FN(attention_backward)(OPS_DECL_T *dq, OPS_DECL_T *dk, OPS_DECL_T *dv,
                                     const OPS_DECL_T *dy, const OPS_DECL_T *att,
                                     const OPS_DECL_T *q, const OPS_DECL_T *k, const OPS_DECL_T *v,
                                     int ld, const int *lens, int nb, int t, int h, int hd, float p,
                                     uint64_t seed, uint64_t stream, OPS_DECL_T *scratch);

/* ---- log_softmax over the last dim v of x (n, v), in place allowed (y == x). Backward
 * dx = dy - exp(y) * sum(dy), in place
 * allowed (dx == dy). ---- */
void OPS_DECL_FN(log_softmax_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, int n, int v);
void OPS_DECL_FN(log_softmax_backward)(OPS_DECL_T *dx, const OPS_DECL_T *dy, const OPS_DECL_T *y,
                                       int n, int v);

/* ---- softmax over the last dim v of x (n, v) (ESPnet's CTC.softmax, which self-conditioned
 * intermediate CTC feeds back), in place allowed. Backward dx = y * (dy - sum(dy * y)), in place
 * allowed (dx == dy). ---- */
void OPS_DECL_FN(softmax_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, int n, int v);
void OPS_DECL_FN(softmax_backward)(OPS_DECL_T *dx, const OPS_DECL_T *dy, const OPS_DECL_T *y, int n,
                                   int v);

/* ---- Dropout with a counter-based mask (core/compute/kernel_math.h): element i is kept iff its
 * 16 random bits (bits 16 * (i % 4) .. +15 of splitmix64 output i / 4 from the key
 * rng_derive(seed, stream, 0)) are >= round(p * 2^16); kept values scale by 1 / (1 - p). The same (seed, stream) gives the same
 * mask on any thread count and after a resume; p <= 0 is the identity, p >= 1 gives zeros. The
 * backward regenerates the mask; both allow in place. ---- */
void OPS_DECL_FN(dropout_forward)(OPS_DECL_T *y, const OPS_DECL_T *x, size_t n, float p,
                                  uint64_t seed, uint64_t stream);
void OPS_DECL_FN(dropout_backward)(OPS_DECL_T *dx, const OPS_DECL_T *dy, size_t n, float p,
                                   uint64_t seed, uint64_t stream);

/* ---- Reductions (accumulated in double, in index order) and gradient clipping. The CPU backend
 * uses sum (_f32); its sum_squares and clip_grad_norm are the blocked, threaded ones of
 * core/compute/ops_step.h with torch's float clipping factor (clip_grad_coef), so these two serve
 * the float64 reference backend (_f64) and the tests. ---- */
double OPS_DECL_FN(sum)(const OPS_DECL_T *x, size_t n);
double OPS_DECL_FN(sum_squares)(const OPS_DECL_T *x, size_t n);
/* torch.nn.utils.clip_grad_norm_(norm_type 2) in the instantiated type: returns the global L2
 * norm of g and, when it is finite and max_norm / (norm + 1e-6) < 1 (computed in double), scales
 * g by that factor. A non-finite norm leaves g as is (the caller skips the step). */
double OPS_DECL_FN(clip_grad_norm)(OPS_DECL_T *g, size_t n, double max_norm);

/* ---- Embedding (torch.nn.Embedding, no padding_idx): y[r] = w[ids[r]] for r < n, w (v, d);
 * ids on the host, each in [0, v). The backward adds dy[r] into dw[ids[r]] (rows in order). */
void OPS_DECL_FN(embedding_forward)(OPS_DECL_T *y, const OPS_DECL_T *w, const int *ids, int n,
                                    int v, int d);
void OPS_DECL_FN(embedding_backward)(OPS_DECL_T *dw, const OPS_DECL_T *dy, const int *ids, int n,
                                     int v, int d);

/* ---- ESPnet's LabelSmoothingLoss on log-probabilities logp (n, v) (= log_softmax of the logits):
 * the KL divergence sum_c t_c (log t_c - logp_c) from the smoothed target distribution t (1 -
 * smoothing at the label, smoothing / (v - 1) elsewhere), summed over the rows whose target (host,
 * n ints) is >= 0; rows with a negative target (ignore_id -1) count nothing. The caller divides by
 * the batch size or the token count (normalize_length). correct (may be NULL): how many counted
 * rows have their label as the first maximum of logp (th_accuracy's numerator). */
double OPS_DECL_FN(label_smoothing_forward)(const OPS_DECL_T *logp, const int *target, int n, int v,
                                            double smoothing, int64_t *correct);
/* The gradient of scale * (the forward's sum) with respect to the logits (the log_softmax
 * backward folded in): scale * (exp(logp) - t) on counted rows, 0 on the others; overwrites. */
void OPS_DECL_FN(label_smoothing_backward)(OPS_DECL_T *dlogits, const OPS_DECL_T *logp,
                                           const int *target, int n, int v, double smoothing,
                                           double scale);

/* ---- The RNN-T loss' passes over the joint's logits (core/compute/rnnt.h; the recursions between
 * them are rnnt_lattice_forward's). rnnt_logprobs fills frames [t0, t0 + tc) of the lattice `lat`
 * (rnnt_lattice_size doubles) from that chunk of the logits, (B, tc, U1, V); rnnt_grad writes the
 * chunk's logits gradient from the lattice after rnnt_lattice_forward, scale = dloss / B, fastemit
 * FastEmit's lambda (0 none), clamp <= 0 none; dlogits may be logits. Rows split over `threads`,
 * the same bits for any count. */
void OPS_DECL_FN(rnnt_logprobs)(double *lat, const OPS_DECL_T *logits, const int *hlens,
                                const ctc_labels *y, int B, int T, int U1, int V, int blank, int t0,
                                int tc, int threads);
void OPS_DECL_FN(rnnt_grad)(OPS_DECL_T *dlogits, const OPS_DECL_T *logits, const double *lat,
                            const int *hlens, const ctc_labels *y, int B, int T, int U1, int V,
                            int blank, int t0, int tc, double fastemit, double clamp, double scale,
                            int threads);

/* ---- The transducer's joint activation (ESPnet2's JointNetwork with joint_activation_type tanh;
 * core/compute/ops_joint_impl.h): for the frames [t0, t0 + tc) of enc (B, T, J) (lin_enc's output)
 * and every prefix of dec (B, U1, J) (lin_dec's), z (B, tc, U1, J) = tanh(enc[b, t0 + t] + dec[b, u]).
 * The backward from dz and the forward's z (B, tc, U1, J): with g = dz (1 - z^2), denc[b, t0 + t] +=
 * sum_u g and ddec[b, u] += sum_t g (both accumulate: a caller running the frames in chunks sums
 * ddec over them). Rows split over `threads`, the same bits for any count. */
void OPS_DECL_FN(joint_tanh_forward)(OPS_DECL_T *z, const OPS_DECL_T *enc, const OPS_DECL_T *dec, int B, int T,
                                     int t0, int tc, int U1, int J, int threads);
void OPS_DECL_FN(joint_tanh_backward)(OPS_DECL_T *denc, OPS_DECL_T *ddec, const OPS_DECL_T *dz,
                                      const OPS_DECL_T *z, int B, int T, int t0, int tc, int U1, int J,
                                      int threads);

/* ---- The LSTM cell (torch.nn.LSTM's, gate order i, f, g, o; core/compute/ops_lstm_impl.h), per
 * unit kernel_math_lstm.h's lstm_cell / lstm_cell_grad: n rows of H units. gates (n, 4H): the
 * pre-activations, each row [i | f | g | o] (H each), both biases added. The forward writes h,
 * c (n, H) and act (n, 4H): sigmoid(i), sigmoid(f), tanh(g), sigmoid(o), kept for the backward;
 * c = sf * c_prev + si * tg, h = so * tanh(c); c_prev (n, H) NULL: zeros (the first step).
 * The backward: dh (n, H) the gradient of h, dc (n, H) that of c from the next step (NULL:
 * zeros); act, c_prev (NULL: zeros) and c the forward's. It overwrites dgates (n, 4H, the
 * gradient of the pre-activations) and dc_prev (n, H; NULL: not wanted). No output may alias an
 * input. */
void OPS_DECL_FN(lstm_cell_forward)(OPS_DECL_T *h, OPS_DECL_T *c, OPS_DECL_T *act, const OPS_DECL_T *gates,
                                    const OPS_DECL_T *c_prev, int n, int H);
void OPS_DECL_FN(lstm_cell_backward)(OPS_DECL_T *dgates, OPS_DECL_T *dc_prev, const OPS_DECL_T *dh,
                                     const OPS_DECL_T *dc, const OPS_DECL_T *act, const OPS_DECL_T *c_prev,
                                     const OPS_DECL_T *c, int n, int H);

/* ---- The GRU cell (torch.nn.GRU's, gate order r, z, n; core/compute/ops_gru_impl.h), per unit
 * kernel_math_gru.h's gru_cell / gru_cell_grad: n rows of H units. gi (n, 3H): W_ih x + b_ih, each
 * row [r | z | n] (H each); gh (n, 3H): W_hh h_prev + b_hh, the same layout (b_hn stays inside
 * r * (W_hn h + b_hn), so the two sides cannot be summed first). The forward writes h (n, H) =
 * n + z (h_prev - n) and act (n, 4H): r, z, n (after tanh) and gh's n part, kept for the backward;
 * h_prev (n, H) NULL: zeros. The backward from dh (n, H), the gradient of h, with act and h_prev
 * (NULL: zeros) the forward's: it overwrites dgi (n, 3H) and dgh (n, 3H), the gradients of the
 * input and the hidden pre-activations (their r and z parts equal), and dh_prev (n, H; NULL: not
 * wanted) with dh z, the part of h_prev's gradient that skips W_hh (dgh W_hh is the rest). No
 * output may alias an input. */
void OPS_DECL_FN(gru_cell_forward)(OPS_DECL_T *h, OPS_DECL_T *act, const OPS_DECL_T *gi, const OPS_DECL_T *gh,
                                   const OPS_DECL_T *h_prev, int n, int H);
void OPS_DECL_FN(gru_cell_backward)(OPS_DECL_T *dgi, OPS_DECL_T *dgh, OPS_DECL_T *dh_prev, const OPS_DECL_T *dh,
                                    const OPS_DECL_T *act, const OPS_DECL_T *h_prev, int n, int H);
