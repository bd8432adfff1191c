/* The FLOPs and bytes of each backend op call (core/compute/op_cost.h): the op's own shapes from
 * its arguments, as the ops' declarations in core/compute/ops_decl.h and ops_conformer_decl.h
 * define them. Transcendental functions count one operation each. */
#include "core/compute/op_cost.h"

#include "core/compute/ops.h"

#define F 4.0 /* bytes of a float */

static op_cost cost(double flops, double floats)
{
    return (op_cost){.flops = flops, .bytes = F * floats};
}

/* An elementwise op over n elements: `ops` operations, `ios` arrays of n read or written. */
static op_cost elementwise(size_t n, double ops, double ios)
{
    return cost(ops * (double)n, ios * (double)n);
}

op_cost op_cost_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
    (void)be, (void)ta, (void)tb, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
    double M = m, N = n, K = k;
    return cost(2 * M * N * K, M * K + K * N + M * N * (beta != 0 ? 2 : 1));
}

op_cost op_cost_linear_forward(backend *be, float *y, const float *x, const float *w, const float *b, int n, int ic,
                               int oc)
{
    (void)be, (void)y, (void)x, (void)w;
    double N = n, I = ic, O = oc;
    return cost(2 * N * I * O + (b ? N * O : 0), N * I + I * O + N * O + (b ? O : 0));
}

op_cost op_cost_linear_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                const float *w, int n, int ic, int oc, int acc)
{
    (void)be, (void)dw, (void)dy, (void)x, (void)w;
    double N = n, I = ic, O = oc;
    double flops = 2 * N * I * O + (dx ? 2 * N * I * O : 0) + (db ? N * O : 0);
    double floats = N * O + N * I + 2 * I * O + (dx ? I * O + N * I * (acc ? 2 : 1) : 0) + (db ? 2 * O : 0);
    return cost(flops, floats);
}

/* A convolution of nb images h x wd x ic into oh x ow x oc with a kh x kw kernel. */
static op_cost conv(int nb, int ic, int oc, int h, int wd, int oh, int ow, int kh, int kw, int backward, int dx,
                    int acc)
{
    double in = (double)nb * h * wd * ic, out = (double)nb * oh * ow * oc, wts = (double)oc * ic * kh * kw;
    double macs = (double)nb * oh * ow * oc * ic * kh * kw;
    if (!backward) return cost(2 * macs + out, in + wts + out);
    return cost(2 * macs * (dx ? 2 : 1) + out, out + in + 2 * wts + (dx ? in * (acc ? 2 : 1) : 0));
}

op_cost op_cost_conv2d_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int ic,
                               int oc, int h, int wd, int relu, float *saved)
{
    (void)be, (void)y, (void)x, (void)w, (void)b, (void)relu, (void)saved;
    return conv(nb, ic, oc, h, wd, ops_conv_out_len(h), ops_conv_out_len(wd), 3, 3, 0, 0, 0);
}

op_cost op_cost_conv2d_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                const float *w, const float *y, int nb, int ic, int oc, int h, int wd, int acc,
                                const float *saved)
{
    (void)be, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)y, (void)saved;
    return conv(nb, ic, oc, h, wd, ops_conv_out_len(h), ops_conv_out_len(wd), 3, 3, 1, dx != NULL, acc);
}

op_cost op_cost_conv2d_gen_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb,
                                   int ic, int oc, int h, int wd, int kh, int kw, int sh, int sw, int relu)
{
    (void)be, (void)y, (void)x, (void)w, (void)b, (void)relu;
    return conv(nb, ic, oc, h, wd, ops_conv_len(h, kh, sh), ops_conv_len(wd, kw, sw), kh, kw, 0, 0, 0);
}

op_cost op_cost_conv2d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                    const float *w, const float *y, int nb, int ic, int oc, int h, int wd, int kh,
                                    int kw, int sh, int sw, int acc)
{
    (void)be, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)y;
    return conv(nb, ic, oc, h, wd, ops_conv_len(h, kh, sh), ops_conv_len(wd, kw, sw), kh, kw, 1, dx != NULL, acc);
}

/* A grouped Conv1d: each output reads k taps of its group's ic / groups channels. */
static op_cost conv1d_gen(int nb, int t, int ic, int oc, int k, int stride, int dil, int groups, int backward, int dx,
                          int acc)
{
    double in = (double)nb * t * ic, out = (double)nb * ops_conv1d_gen_len(t, k, stride, dil) * oc;
    double wts = (double)oc * (ic / groups) * k, macs = out * (ic / groups) * k;
    if (!backward) return cost(2 * macs + out, in + wts + out);
    return cost(2 * macs * (dx ? 2 : 1) + out, out + in + 2 * wts + (dx ? in * (acc ? 2 : 1) : 0));
}

op_cost op_cost_conv1d_gen_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb,
                                   int t, int ic, int oc, int k, int stride, int dil, int groups)
{
    (void)be, (void)y, (void)x, (void)w, (void)b;
    return conv1d_gen(nb, t, ic, oc, k, stride, dil, groups, 0, 0, 0);
}

op_cost op_cost_conv1d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                    const float *w, int nb, int t, int ic, int oc, int k, int stride, int dil,
                                    int groups, int acc)
{
    (void)be, (void)dw, (void)db, (void)dy, (void)x, (void)w;
    return conv1d_gen(nb, t, ic, oc, k, stride, dil, groups, 1, dx != NULL, acc);
}

op_cost op_cost_swap12(backend *be, float *y, const float *x, int nb, int d1, int d2, int d3)
{
    (void)be, (void)y, (void)x;
    return elementwise((size_t)nb * d1 * d2 * d3, 0, 2);
}

op_cost op_cost_relu_forward(backend *be, float *y, const float *x, size_t n)
{
    (void)be, (void)y, (void)x;
    return elementwise(n, 1, 2);
}

op_cost op_cost_relu_backward(backend *be, float *dx, const float *dy, const float *y, size_t n)
{
    (void)be, (void)dx, (void)dy, (void)y;
    return elementwise(n, 1, 3);
}

op_cost op_cost_layernorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x, const float *w,
                                  const float *b, int n, int c, double eps)
{
    (void)be, (void)y, (void)mean, (void)rstd, (void)x, (void)w, (void)b, (void)eps;
    double N = n, C = c;
    return cost(8 * N * C, 2 * N * C + 2 * C + 2 * N);
}

op_cost op_cost_rownorm_forward(backend *be, float *y, float *a, const float *x, const float *w, int n, int c,
                                int kind, int p, double eps)
{
    (void)be, (void)y, (void)a, (void)x, (void)w, (void)kind, (void)p, (void)eps;
    double N = n, C = c;
    return cost(4 * N * C, 2 * N * C + C + N);
}

op_cost op_cost_rownorm_backward(backend *be, float *dx, float *dw, const float *dy, const float *x, const float *w,
                                 const float *a, int n, int c, int kind, int p, double eps, int acc)
{
    (void)be, (void)dx, (void)dw, (void)dy, (void)x, (void)w, (void)a, (void)kind, (void)p, (void)eps;
    double N = n, C = c;
    return cost(10 * N * C, N * C * (acc ? 4 : 3) + 2 * C + N);
}

op_cost op_cost_layernorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                   const float *w, const float *mean, const float *rstd, int n, int c, int acc)
{
    (void)be, (void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)mean, (void)rstd;
    double N = n, C = c;
    return cost(12 * N * C, N * C * (acc ? 4 : 3) + 5 * C + 2 * N);
}

op_cost op_cost_add(backend *be, float *y, const float *a, const float *b, size_t n)
{
    (void)be, (void)y, (void)a, (void)b;
    return elementwise(n, 1, 3);
}

op_cost op_cost_scale(backend *be, float *y, const float *x, double s, size_t n)
{
    (void)be, (void)y, (void)x, (void)s;
    return elementwise(n, 1, 2);
}

op_cost op_cost_posenc_forward(backend *be, float *y, const float *x, double xscale, int nb, int t, int d)
{
    (void)be, (void)y, (void)x, (void)xscale;
    return cost(2.0 * nb * t * d + 2.0 * t * d, 2.0 * nb * t * d);
}

/* Attention of nb x h heads of hd, tq queries over tk keys: the score and value products, the
 * softmax (a few operations per score), the weights kept for the backward. */
static op_cost attention(int nb, int h, int hd, int tq, int tk, int backward)
{
    double heads = (double)nb * h, scores = heads * tq * tk, qv = heads * tq * hd, kv = heads * tk * hd;
    if (!backward) return cost(4 * scores * hd + 5 * scores, 2 * qv + 2 * kv + scores);
    return cost(8 * scores * hd + 4 * scores, 3 * qv + 4 * kv + scores);
}

op_cost op_cost_attention_forward(backend *be, float *y, float *att, const float *q, const float *k, const float *v,
                                  int ld, const int *lens, int nb, int t, int h, int hd, float p, uint64_t seed,
                                  uint64_t stream)
{
    (void)be, (void)y, (void)att, (void)q, (void)k, (void)v, (void)ld, (void)lens, (void)p, (void)seed, (void)stream;
    return attention(nb, h, hd, t, t, 0);
}

op_cost op_cost_attention_backward(backend *be, float *dq, float *dk, float *dv, const float *dy, const float *att,
                                   const float *q, const float *k, const float *v, int ld, const int *lens, int nb,
                                   int t, int h, int hd, float p, uint64_t seed, uint64_t stream)
{
    (void)be, (void)dq, (void)dk, (void)dv, (void)dy, (void)att, (void)q, (void)k, (void)v, (void)ld, (void)lens,
        (void)p, (void)seed, (void)stream;
    return attention(nb, h, hd, t, t, 1);
}

op_cost op_cost_log_softmax_forward(backend *be, float *y, const float *x, int n, int v)
{
    (void)be, (void)y, (void)x;
    return elementwise((size_t)n * v, 4, 2);
}

op_cost op_cost_log_softmax_backward(backend *be, float *dx, const float *dy, const float *y, int n, int v)
{
    (void)be, (void)dx, (void)dy, (void)y;
    return elementwise((size_t)n * v, 4, 3);
}

op_cost op_cost_softmax_forward(backend *be, float *y, const float *x, int n, int v)
{
    (void)be, (void)y, (void)x;
    return elementwise((size_t)n * v, 4, 2);
}

op_cost op_cost_softmax_backward(backend *be, float *dx, const float *dy, const float *y, int n, int v)
{
    (void)be, (void)dx, (void)dy, (void)y;
    return elementwise((size_t)n * v, 4, 3);
}

op_cost op_cost_dropout_forward(backend *be, float *y, const float *x, size_t n, float p, uint64_t seed,
                                uint64_t stream)
{
    (void)be, (void)y, (void)x, (void)seed, (void)stream;
    return p > 0 ? elementwise(n, 2, 2) : elementwise(n, 0, 2);
}

op_cost op_cost_dropout_backward(backend *be, float *dx, const float *dy, size_t n, float p, uint64_t seed,
                                 uint64_t stream)
{
    (void)be, (void)dx, (void)dy, (void)seed, (void)stream;
    return p > 0 ? elementwise(n, 2, 2) : elementwise(n, 0, 2);
}

op_cost op_cost_act_dropout_forward(backend *be, float *y, const float *x, size_t n, int relu, float p, uint64_t seed,
                                    uint64_t stream)
{
    (void)be, (void)y, (void)x, (void)seed, (void)stream;
    return elementwise(n, (relu ? 1 : 4) + (p > 0 ? 2 : 0), 2);
}

op_cost op_cost_act_dropout_backward(backend *be, float *dx, const float *dy, const float *z, size_t n, int relu,
                                     float p, uint64_t seed, uint64_t stream)
{
    (void)be, (void)dx, (void)dy, (void)z, (void)seed, (void)stream;
    return elementwise(n, (relu ? 1 : 7) + (p > 0 ? 2 : 0), 3);
}

op_cost op_cost_dropout_add(backend *be, float *y, const float *x, const float *r, size_t n, double s, float p,
                            uint64_t seed, uint64_t stream)
{
    (void)be, (void)y, (void)seed, (void)stream, (void)r;
    return elementwise(n, (p > 0 ? 2 : 0) + (s != 1) + (x != NULL), x ? 3 : 2);
}

op_cost op_cost_dropout_add_layernorm(backend *be, float *h, float *y, float *mean, float *rstd, const float *x,
                                      const float *r, const float *w, const float *b, int n, int c, double eps,
                                      double s, float p, uint64_t seed, uint64_t stream)
{
    (void)h, (void)y, (void)mean, (void)rstd, (void)w, (void)b, (void)eps;
    op_cost a = op_cost_dropout_add(be, NULL, x, r, (size_t)n * c, s, p, seed, stream);
    double N = n, C = c; /* h written once and normalized in the same pass: not read back */
    return cost(a.flops + 8 * N * C, a.bytes / F + N * C + 2 * C + 2 * N);
}

op_cost op_cost_layernorm_dropout_backward(backend *be, float *dx, float *dw, float *db, float *dr, const float *dy,
                                           const float *x, const float *w, const float *mean, const float *rstd,
                                           int n, int c, double s, float p, uint64_t seed, uint64_t stream)
{
    (void)dr, (void)seed, (void)stream;
    op_cost a = op_cost_layernorm_backward(be, dx, dw, db, dy, x, w, mean, rstd, n, c, 1);
    double N = n, C = c; /* dr: computed from dx in registers, written once */
    return cost(a.flops + ((p > 0 ? 2 : 0) + (s != 1)) * N * C, a.bytes / F + N * C);
}

op_cost op_cost_mha_forward(backend *be, float *y, float *att, const float *q, int ldq, const float *k, const float *v,
                            int ldkv, const int *lens, int nb, int tq, int tk, int causal, int h, int hd, float p,
                            uint64_t seed, uint64_t stream)
{
    (void)be, (void)y, (void)att, (void)q, (void)ldq, (void)k, (void)v, (void)ldkv, (void)lens, (void)causal,
        (void)p, (void)seed, (void)stream;
    return attention(nb, h, hd, tq, tk, 0);
}

op_cost op_cost_mha_backward(backend *be, float *dq, float *dk, float *dv, const float *dy, const float *att,
                             const float *q, int ldq, const float *k, const float *v, int ldkv, const int *lens, int nb,
                             int tq, int tk, int h, int hd, float p, uint64_t seed, uint64_t stream)
{
    (void)be, (void)dq, (void)dk, (void)dv, (void)dy, (void)att, (void)q, (void)ldq, (void)k, (void)v, (void)ldkv,
        (void)lens, (void)p, (void)seed, (void)stream;
    return attention(nb, h, hd, tq, tk, 1);
}

op_cost op_cost_embedding_forward(backend *be, float *y, const float *w, const int *ids, int n, int v, int d)
{
    (void)be, (void)y, (void)w, (void)ids, (void)v;
    return cost(0, 2.0 * n * d + n);
}

op_cost op_cost_embedding_backward(backend *be, float *dw, const float *dy, const int *ids, int n, int v, int d)
{
    (void)be, (void)dw, (void)dy, (void)ids, (void)v;
    return cost((double)n * d, 3.0 * n * d + n);
}

op_cost op_cost_label_smoothing_forward(backend *be, const float *logp, const int *target, int n, int v,
                                        double smoothing, int64_t *correct)
{
    (void)be, (void)logp, (void)target, (void)smoothing, (void)correct;
    return elementwise((size_t)n * v, 3, 1);
}

op_cost op_cost_label_smoothing_backward(backend *be, float *dlogits, const float *logp, const int *target, int n,
                                         int v, double smoothing, double scale)
{
    (void)be, (void)dlogits, (void)logp, (void)target, (void)smoothing, (void)scale;
    return elementwise((size_t)n * v, 4, 2);
}

op_cost op_cost_swish_forward(backend *be, float *y, const float *x, size_t n)
{
    (void)be, (void)y, (void)x;
    return elementwise(n, 4, 2);
}

op_cost op_cost_swish_backward(backend *be, float *dx, const float *dy, const float *x, size_t n)
{
    (void)be, (void)dx, (void)dy, (void)x;
    return elementwise(n, 7, 3);
}

op_cost op_cost_glu_forward(backend *be, float *y, const float *x, int n, int c)
{
    (void)be, (void)y, (void)x;
    return elementwise((size_t)n * c, 4, 3);
}

op_cost op_cost_glu_backward(backend *be, float *dx, const float *dy, const float *x, int n, int c)
{
    (void)be, (void)dx, (void)dy, (void)x;
    return elementwise((size_t)n * c, 7, 5);
}

op_cost op_cost_dwconv1d_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int t,
                                 int c, int k)
{
    (void)be, (void)y, (void)x, (void)w, (void)b;
    double ntc = (double)nb * t * c;
    return cost(2 * ntc * k + ntc, 2 * ntc + (double)c * k + c);
}

op_cost op_cost_dwconv1d_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                  const float *w, int nb, int t, int c, int k)
{
    (void)be, (void)dw, (void)db, (void)dy, (void)x, (void)w;
    double ntc = (double)nb * t * c;
    return cost(2 * ntc * k * (dx ? 2 : 1) + ntc, (dx ? 3 : 2) * ntc + 3.0 * c * k + 2.0 * c);
}

op_cost op_cost_batchnorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x, const float *w,
                                  const float *b, float *run_mean, float *run_var, float *run_count, int n, int c,
                                  double eps, double momentum, int train)
{
    (void)be, (void)y, (void)mean, (void)rstd, (void)x, (void)w, (void)b, (void)run_mean, (void)run_var,
        (void)run_count, (void)eps, (void)momentum;
    double nc = (double)n * c;
    return cost((train ? 3 : 0) * nc + 2 * nc, (train ? 3 : 2) * nc + 8.0 * c);
}

op_cost op_cost_batchnorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                   const float *w, const float *mean, const float *rstd, int n, int c)
{
    (void)be, (void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)mean, (void)rstd;
    double nc = (double)n * c;
    return cost(8 * nc, 5 * nc + 7.0 * c);
}

op_cost op_cost_batchnorm_stats(backend *be, float *out, const float *x, const float *dy, const float *mean, int n,
                                int c)
{
    (void)be, (void)out, (void)x, (void)dy, (void)mean;
    double nc = (double)n * c;
    return cost(3 * nc, 2 * nc + 3.0 * c);
}

op_cost op_cost_batchnorm_backward_global(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                                          const float *w, const float *mean, const float *rstd, const float *l,
                                          const float *g, double count, int n, int c)
{
    (void)be, (void)dx, (void)dw, (void)db, (void)dy, (void)x, (void)w, (void)mean, (void)rstd, (void)l, (void)g,
        (void)count;
    double nc = (double)n * c;
    return cost(5 * nc, 3 * nc + 9.0 * c);
}

op_cost op_cost_relpos_encoding(backend *be, float *pe, int t, int d)
{
    (void)be, (void)pe;
    return elementwise((size_t)(2 * t - 1) * d, 2, 1);
}

/* ESPnet's relative-position attention: the content scores (q + u) k^T, the position scores
 * (q + vb) p^T over 2t - 1 positions (shifted into place), softmax, the value product. */
static op_cost relattn(int nb, int h, int hd, int t, int backward)
{
    double heads = (double)nb * h, scores = heads * t * t, pos = heads * t * (2.0 * t - 1), qkv = heads * t * hd,
           pe = (2.0 * t - 1) * h * hd;
    if (!backward) return cost(4 * scores * hd + 2 * pos * hd + 6 * scores + 2 * qkv, 4 * qkv + pe + scores + 2.0 * h * hd);
    return cost(8 * scores * hd + 4 * pos * hd + 5 * scores + 2 * qkv, 8 * qkv + 2 * pe + scores + 4.0 * h * hd);
}

op_cost op_cost_relattn_forward(backend *be, float *y, float *att, const float *q, const float *k, const float *v,
                                int ld, const float *p, const float *u, const float *vb, const int *lens, int nb, int t,
                                int h, int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream)
{
    (void)be, (void)y, (void)att, (void)q, (void)k, (void)v, (void)ld, (void)p, (void)u, (void)vb, (void)lens,
        (void)chunk, (void)left, (void)pdrop, (void)seed, (void)stream;
    return relattn(nb, h, hd, t, 0);
}

op_cost op_cost_relattn_backward(backend *be, float *dq, float *dk, float *dv, float *dp, float *du, float *dvb,
                                 const float *dy, const float *att, const float *q, const float *k, const float *v,
                                 int ld, const float *p, const float *u, const float *vb, const int *lens, int nb,
                                 int t, int h, int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream)
{
    (void)be, (void)dq, (void)dk, (void)dv, (void)dp, (void)du, (void)dvb, (void)dy, (void)att, (void)q, (void)k,
        (void)v, (void)ld, (void)p, (void)u, (void)vb, (void)lens, (void)chunk, (void)left, (void)pdrop, (void)seed,
        (void)stream;
    return relattn(nb, h, hd, t, 1);
}

op_cost op_cost_gelu_forward(backend *be, float *y, const float *x, size_t n)
{
    (void)be, (void)y, (void)x;
    return elementwise(n, 5, 2);
}

op_cost op_cost_gelu_backward(backend *be, float *dx, const float *dy, const float *x, size_t n)
{
    (void)be, (void)dx, (void)dy, (void)x;
    return elementwise(n, 9, 3);
}

op_cost op_cost_mul_forward(backend *be, float *y, const float *a, const float *b, size_t n)
{
    (void)be, (void)y, (void)a, (void)b;
    return elementwise(n, 1, 3);
}

op_cost op_cost_mul_backward(backend *be, float *da, float *db, const float *dy, const float *a, const float *b,
                             size_t n)
{
    (void)be, (void)da, (void)db, (void)dy, (void)a, (void)b;
    return elementwise(n, 2, 5);
}

op_cost op_cost_lstm_cell_forward(backend *be, float *h, float *c, float *act, const float *gates, const float *c_prev,
                                  int n, int H)
{
    (void)be, (void)h, (void)c, (void)act, (void)gates;
    double nh = (double)n * H;
    return cost(25 * nh, (c_prev ? 11 : 10) * nh);
}

op_cost op_cost_lstm_cell_backward(backend *be, float *dgates, float *dc_prev, const float *dh, const float *dc,
                                   const float *act, const float *c_prev, const float *c, int n, int H)
{
    (void)be, (void)dgates, (void)dh, (void)act, (void)c;
    double nh = (double)n * H;
    return cost(20 * nh, (9 + (dc ? 1 : 0) + (c_prev ? 1 : 0) + (dc_prev ? 1 : 0)) * nh + nh);
}

op_cost op_cost_gru_cell_forward(backend *be, float *h, float *act, const float *gi, const float *gh, const float *h_prev,
                                 int n, int H)
{
    (void)be, (void)h, (void)act, (void)gi, (void)gh;
    double nh = (double)n * H;
    return cost(20 * nh, (11 + (h_prev ? 1 : 0)) * nh);
}

op_cost op_cost_gru_cell_backward(backend *be, float *dgi, float *dgh, float *dh_prev, const float *dh,
                                  const float *act, const float *h_prev, int n, int H)
{
    (void)be, (void)dgi, (void)dgh, (void)dh, (void)act;
    double nh = (double)n * H;
    return cost(16 * nh, (11 + (h_prev ? 1 : 0) + (dh_prev ? 1 : 0)) * nh);
}

op_cost op_cost_joint_tanh_forward(backend *be, float *z, const float *enc, const float *dec, int B, int T, int t0,
                                   int tc, int U1, int J)
{
    (void)be, (void)z, (void)enc, (void)dec, (void)T, (void)t0;
    double n = (double)B * tc * U1 * J;
    return cost(21 * n, n + (double)B * (tc + U1) * J);
}

op_cost op_cost_joint_tanh_backward(backend *be, float *denc, float *ddec, const float *dz, const float *z, int B,
                                    int T, int t0, int tc, int U1, int J)
{
    (void)be, (void)denc, (void)ddec, (void)dz, (void)z, (void)T, (void)t0;
    double n = (double)B * tc * U1 * J;
    return cost(8 * n, 4 * n + 2 * (double)B * (tc + U1) * J);
}

/* CTC's lattice: 2L + 1 states per frame of each utterance, a few operations per state and pass. */
static double ctc_states(const int *hlens, const int *label_lens, int B)
{
    double s = 0;
    for (int b = 0; b < B; b++) s += (double)hlens[b] * (2.0 * label_lens[b] + 1);
    return s;
}

op_cost op_cost_ctc_loss_forward(backend *be, double *losses, const float *logp, const int *hlens, const int *labels,
                                 const int *label_lens, int stride, int B, int T, int V, int zero_infinity)
{
    (void)be, (void)losses, (void)logp, (void)labels, (void)stride, (void)T, (void)V, (void)zero_infinity;
    double states = ctc_states(hlens, label_lens, B);
    return cost(6 * states, states / 2 + states);
}

op_cost op_cost_ctc_loss_backward(backend *be, float *dlogits, const float *logp, const int *hlens, const int *labels,
                                  const int *label_lens, int stride, int B, int T, int V, int zero_infinity, float dloss)
{
    (void)be, (void)dlogits, (void)logp, (void)labels, (void)stride, (void)zero_infinity, (void)dloss;
    double states = ctc_states(hlens, label_lens, B), btv = (double)B * T * V;
    return cost(8 * states + 3 * btv, 2 * states + 2 * btv);
}

/* Nodes (b, t, u) of frames [t0, t0 + tc) that lie in their utterance: t < hlens[b], u <= ylens[b]. */
static double rnnt_nodes(const int *hlens, const int *label_lens, int B, int t0, int tc)
{
    double s = 0;
    for (int b = 0; b < B; b++) {
        int frames = hlens[b] - t0 < tc ? hlens[b] - t0 : tc;
        if (frames > 0) s += (double)frames * (label_lens[b] + 1);
    }
    return s;
}

/* Per logit: the max, the shifted exp and its sum (reads the chunk once, the lattice's 3 doubles
 * per node written). */
op_cost op_cost_rnnt_logprobs(backend *be, const float *logits, const int *hlens, const int *labels,
                              const int *label_lens, int stride, int B, int T, int U1, int V, int blank, int t0,
                              int tc)
{
    (void)be, (void)logits, (void)labels, (void)stride, (void)T, (void)U1, (void)blank;
    double nodes = rnnt_nodes(hlens, label_lens, B, t0, tc);
    return cost(4 * nodes * V, (double)B * tc * U1 * V + 6 * nodes);
}

/* Two log-adds per node for alpha and for beta, 4 doubles read and 1 written each. */
op_cost op_cost_rnnt_loss_forward(backend *be, double *losses, const int *hlens, const int *label_lens, int B, int T,
                                  int U1)
{
    (void)be, (void)losses, (void)U1;
    double nodes = rnnt_nodes(hlens, label_lens, B, 0, T);
    return cost(2 * 6 * nodes, 2 * 10 * nodes);
}

/* Per logit: the shift, exp, the product by the occupancy, the scale; the chunk read and written. */
op_cost op_cost_rnnt_loss_backward(backend *be, float *dlogits, const float *logits, const int *hlens,
                                   const int *labels, const int *label_lens, int stride, int B, int T, int U1, int V,
                                   int blank, int t0, int tc, float fastemit, float clamp, float dloss)
{
    (void)be, (void)dlogits, (void)logits, (void)labels, (void)stride, (void)T, (void)blank, (void)fastemit,
        (void)clamp, (void)dloss;
    double nodes = rnnt_nodes(hlens, label_lens, B, t0, tc);
    return cost(4 * nodes * V, 2.0 * B * tc * U1 * V + 10 * nodes);
}

op_cost op_cost_adam_update(backend *be, float *params, float *exp_avg, float *exp_avg_sq, float *max_exp_avg_sq,
                            const float *grads, size_t n, const adam_coefs *c)
{
    (void)be, (void)params, (void)exp_avg, (void)exp_avg_sq, (void)grads, (void)c;
    return elementwise(n, max_exp_avg_sq ? 13 : 12, max_exp_avg_sq ? 9 : 7);
}

op_cost op_cost_sgd_update(backend *be, float *params, float *momentum_buffer, const float *grads, size_t n,
                           const sgd_coefs *c)
{
    (void)be, (void)params, (void)grads, (void)c;
    return elementwise(n, momentum_buffer ? 5 : 3, momentum_buffer ? 5 : 3);
}

op_cost op_cost_adadelta_update(backend *be, float *params, float *square_avg, float *acc_delta, const float *grads,
                                size_t n, const adadelta_coefs *c)
{
    (void)be, (void)params, (void)square_avg, (void)acc_delta, (void)grads, (void)c;
    return elementwise(n, 12, 7);
}

op_cost op_cost_sum(backend *be, const float *x, size_t n)
{
    (void)be, (void)x;
    return elementwise(n, 1, 1);
}

op_cost op_cost_sum_squares(backend *be, const float *x, size_t n)
{
    (void)be, (void)x;
    return elementwise(n, 2, 1);
}

op_cost op_cost_clip_grad_norm(backend *be, float *g, size_t n, double max_norm)
{
    (void)be, (void)g, (void)max_norm;
    return elementwise(n, 2, 1); /* the scaling pass, when the norm is above max_norm, is not known here */
}

op_cost op_cost_clip_grad_value(backend *be, float *g, size_t n, float v)
{
    (void)be, (void)g, (void)v;
    return elementwise(n, 1, 2);
}

op_cost op_cost_ema_update(backend *be, float *avg, const float *cur, size_t n, float decay, float one_minus_decay,
                           int counts)
{
    (void)be, (void)avg, (void)cur, (void)decay, (void)one_minus_decay, (void)counts;
    return elementwise(n, 3, 3);
}

op_cost op_cost_unscale_grads(backend *be, float *g, size_t n, float inv_scale)
{
    (void)be, (void)g, (void)inv_scale;
    return elementwise(n, 2, 2);
}

op_cost op_cost_ctc_align(backend *be, int *path, const float *logp, int T, int V, const int *labels, int L)
{
    (void)be, (void)path, (void)logp, (void)V, (void)labels;
    double states = (double)T * (2.0 * L + 1); /* the Viterbi lattice, a few operations per state */
    return cost(4 * states, (double)T * (L + 1) + (double)T + states / 4);
}
