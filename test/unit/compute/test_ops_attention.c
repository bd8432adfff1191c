/* Multi-head attention (core/compute/ops.h): the double forward against a plain softmax loop,
 * the backward against central finite differences (padding masks with unequal lengths, attention
 * dropout held fixed by the seed), float against double with fused and separate q/k/v, and the
 * key mask (padded keys get weight 0; changing them changes nothing). Suite `ops`. */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/compute/ops.h"
#include "test/unit/compute/ops_test_util.h"

typedef struct {
    int nb, t, h, hd, ld;
    const int *lens;
    float p;
    double *qkv, *r, *y, *att, *scr;
} att_ctx;

#define ATT_SEED 7u
#define ATT_STREAM 11u

static double att_loss(void *p)
{
    att_ctx *c = p;
    int d = c->h * c->hd;
    ops_attention_forward_f64(c->y, c->att, c->qkv, c->qkv + d, c->qkv + 2 * d, c->ld, c->lens,
                              c->nb, c->t, c->h, c->hd, c->p, ATT_SEED, ATT_STREAM, c->scr);
    return dsum_prod(c->y, c->r, (size_t)c->nb * c->t * d);
}

static void attention_case(const int *lens, int nb, int t, int h, int hd, float p)
{
    int d = h * hd;
    att_ctx c = {.nb = nb, .t = t, .h = h, .hd = hd, .ld = 3 * d, .lens = lens, .p = p};
    size_t nq = (size_t)nb * t * 3 * d, ny = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    c.qkv = drand(nq, -1.5, 1.5), c.r = drand(ny, -1, 1), c.y = dz(ny), c.att = dz(na);
    c.scr = dz(ops_attention_forward_scratch(t, p) + 1);
    att_loss(&c);

    /* Reference: softmax over the valid keys, torch's masked_fill(-inf) -> softmax -> fill 0. */
    if (p == 0)
        for (int b = 0; b < nb; b++)
            for (int j = 0; j < h; j++)
                for (int i = 0; i < t; i++) {
                    double s[64], mx = -INFINITY, z = 0;
                    for (int k = 0; k < lens[b]; k++) {
                        s[k] = 0;
                        for (int e = 0; e < hd; e++)
                            s[k] += c.qkv[((size_t)b * t + i) * 3 * d + j * hd + e] *
                                    c.qkv[((size_t)b * t + k) * 3 * d + d + j * hd + e];
                        s[k] /= sqrt(hd);
                        mx = fmax(mx, s[k]);
                    }
                    for (int k = 0; k < lens[b]; k++) z += exp(s[k] - mx);
                    for (int k = 0; k < t; k++) {
                        double a = k < lens[b] ? exp(s[k] - mx) / z : 0;
                        cr_assert(fabs(c.att[(((size_t)b * h + j) * t + i) * t + k] - a) < 1e-14);
                    }
                    for (int e = 0; e < hd; e++) {
                        double yv = 0;
                        for (int k = 0; k < lens[b]; k++)
                            yv += c.att[(((size_t)b * h + j) * t + i) * t + k] *
                                  c.qkv[((size_t)b * t + k) * 3 * d + 2 * d + j * hd + e];
                        cr_assert(fabs(c.y[((size_t)b * t + i) * d + j * hd + e] - yv) < 1e-13);
                    }
                }

    double *dqkv = dz(nq), *bscr = dz(ops_attention_backward_scratch(t));
    for (size_t i = 0; i < nq; i++) dqkv[i] = 5; /* overwritten, masked key rows included */
    ops_attention_backward_f64(dqkv, dqkv + d, dqkv + 2 * d, c.r, c.att, c.qkv, c.qkv + d,
                               c.qkv + 2 * d, c.ld, lens, nb, t, h, hd, p, ATT_SEED, ATT_STREAM,
                               bscr);
    fd_check(att_loss, &c, c.qkv, dqkv, nq, p > 0 ? "attention dqkv (dropout)" : "attention dqkv");

    /* Float against double, with separate q, k, v buffers (ld = d). */
    float *fq = fz(ny), *fk = fz(ny), *fv = fz(ny);
    for (size_t r = 0; r < (size_t)nb * t; r++)
        for (int e = 0; e < d; e++) {
            fq[r * d + e] = (float)c.qkv[r * 3 * d + e];
            fk[r * d + e] = (float)c.qkv[r * 3 * d + d + e];
            fv[r * d + e] = (float)c.qkv[r * 3 * d + 2 * d + e];
        }
    float *fy = fz(ny), *fa = fz(na), *fdq = fz(ny), *fdk = fz(ny), *fdv = fz(ny);
    ops_attention_forward_f32(fy, fa, fq, fk, fv, d, lens, nb, t, h, hd, p, ATT_SEED, ATT_STREAM,
                              fz(ops_attention_forward_scratch(t, p) + 1));
    att_loss(&c);
    CHECK_F32(fy, c.y, ny, "attention y");
    CHECK_F32(fa, c.att, na, "attention att");
    ops_attention_backward_f32(fdq, fdk, fdv, tof(c.r, ny), fa, fq, fk, fv, d, lens, nb, t, h, hd,
                               p, ATT_SEED, ATT_STREAM, fz(ops_attention_backward_scratch(t)));
    double *dq = dz(ny), *dk = dz(ny), *dv = dz(ny);
    for (size_t r = 0; r < (size_t)nb * t; r++)
        for (int e = 0; e < d; e++) {
            dq[r * d + e] = dqkv[r * 3 * d + e];
            dk[r * d + e] = dqkv[r * 3 * d + d + e];
            dv[r * d + e] = dqkv[r * 3 * d + 2 * d + e];
        }
    CHECK_F32(fdq, dq, ny, "attention dq");
    CHECK_F32(fdk, dk, ny, "attention dk");
    CHECK_F32(fdv, dv, ny, "attention dv");
}

Test(ops, attention, .fini = ops_arena_free)
{
    rng_init(&ops_rng, 5);
    static const int lens3[3] = {6, 4, 1};
    attention_case(lens3, 3, 6, 2, 3, 0);
    static const int lens2[2] = {5, 3};
    attention_case(lens2, 2, 5, 2, 4, 0.25f); /* attention dropout: the mask is fixed by the seed */
    static const int lens1[1] = {7};
    attention_case(lens1, 1, 7, 1, 5, 0);
}

Test(ops, attention_mask, .fini = ops_arena_free)
{
    /* Padded keys get weight 0, and changing padded k/v leaves every output unchanged;
     * an utterance of length 0 gives zero weights, outputs and gradients. */
    rng_init(&ops_rng, 6);
    int nb = 3, t = 6, h = 2, hd = 3, d = h * hd;
    static const int lens[3] = {6, 2, 0};
    size_t nq = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    double *q = drand(nq, -1, 1), *k = drand(nq, -1, 1), *v = drand(nq, -1, 1);
    double *y = dz(nq), *y2 = dz(nq), *att = dz(na);
    ops_attention_forward_f64(y, att, q, k, v, d, lens, nb, t, h, hd, 0, 0, 0, NULL);
    for (int b = 0; b < nb; b++)
        for (int j = 0; j < h; j++)
            for (int i = 0; i < t; i++) {
                double s = 0;
                for (int c = 0; c < t; c++) {
                    double a = att[(((size_t)b * h + j) * t + i) * t + c];
                    if (c >= lens[b]) cr_assert_eq(a, 0.0, "b %d key %d", b, c);
                    s += a;
                }
                cr_assert(fabs(s - (lens[b] ? 1 : 0)) < 1e-12);
            }
    for (int b = 0; b < nb; b++)
        for (int r = lens[b]; r < t; r++)
            for (int e = 0; e < d; e++) {
                k[((size_t)b * t + r) * d + e] += 100;
                v[((size_t)b * t + r) * d + e] -= 50;
            }
    ops_attention_forward_f64(y2, att, q, k, v, d, lens, nb, t, h, hd, 0, 0, 0, NULL);
    cr_assert(err_dd(y2, y, nq) == 0);
    for (size_t i = 2 * t * d; i < nq; i++) cr_assert_eq(y[i], 0.0);

    double *dy = drand(nq, -1, 1), *dq = drand(nq, 1, 2), *dk = drand(nq, 1, 2),
           *dv = drand(nq, 1, 2);
    ops_attention_backward_f64(dq, dk, dv, dy, att, q, k, v, d, lens, nb, t, h, hd, 0, 0, 0,
                               dz(ops_attention_backward_scratch(t)));
    for (int b = 0; b < nb; b++)
        for (int r = 0; r < t; r++)
            for (int e = 0; e < d; e++) {
                size_t o = ((size_t)b * t + r) * d + e;
                if (r >= lens[b]) cr_assert(dk[o] == 0 && dv[o] == 0);
                if (lens[b] == 0) cr_assert(dq[o] == 0);
            }
}
