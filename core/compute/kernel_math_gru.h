/* The GRU cell of torch.nn.GRU (gate order r, z, n; b_hn inside r * (W_hn h + b_hn)), per unit, for
 * one type: included by core/compute/kernel_math.h once per type after kernel_math_act.h, with KM_T
 * (float | double), KM_FN(name) (name_f32 | name_f64), KM_EXP (expf | exp) and KM_TANH (tanhf |
 * tanh) defined; no include guard on purpose. Every function is `static inline KM_HD` (C11 and
 * CUDA). The sigmoids are act_sigmoid's (1 / (1 + exp(-x))), the tanh libm's.
 *
 *   gru_cell_n(er, ez, in, hn, hp, r, z, gn)
 *        one unit's forward from er = exp(-(i_r + h_r)), ez = exp(-(i_z + h_z)) (the input and
 *        hidden pre-activations of r and z, each with its bias), in = W_in x + b_in and
 *        hn = W_hn hp + b_hn: *r, *z = sigmoid, *gn = in + r * hn (tanh of it is the candidate n;
 *        the CPU takes exp and tanh a block at a time, core/compute/vmath.h)
 *   gru_cell_h(z, n, hp)
 *        the new state n + z * (hp - n) (ATen's GRUCell's order of operations)
 *   gru_cell(ir, iz, in, hr, hz, hn, hp, r, z, n, h)
 *        both with every exp and tanh per unit: *n = tanh(gn), *h = gru_cell_h(z, n, hp)
 *   gru_cell_grad(dh, r, z, n, hn, hp, dr, dz, dn, dhn, dhp)
 *        the backward of one unit from the forward's r, z, n, hn and hp and the gradient dh of h:
 *        dnp = dh (1 - z) (1 - n^2), *dr = dnp * hn * r (1 - r), *dz = dh (hp - n) z (1 - z) (the
 *        pre-activations' gradients: the input side's and the hidden side's for r and z), *dn = dnp
 *        (the input side's of n), *dhn = dnp * r (the hidden side's of n), *dhp = dh * z (the part
 *        of hp's gradient that skips W_hh)
 *
 * Each product and sum is one rounding (no FMA: C11 contracts nothing, the kernels build with
 * -fmad=false). A NaN input gives NaN. */

static inline KM_HD void KM_FN(gru_cell_n)(KM_T er, KM_T ez, KM_T in, KM_T hn, KM_T *r, KM_T *z, KM_T *gn)
{
    *r = KM_FN(act_sigmoid_e)(er);
    *z = KM_FN(act_sigmoid_e)(ez);
    *gn = in + *r * hn;
}

static inline KM_HD KM_T KM_FN(gru_cell_h)(KM_T z, KM_T n, KM_T hp) { return n + z * (hp - n); }

static inline KM_HD void KM_FN(gru_cell)(KM_T ir, KM_T iz, KM_T in, KM_T hr, KM_T hz, KM_T hn, KM_T hp, KM_T *r,
                                         KM_T *z, KM_T *n, KM_T *h)
{
    KM_T gn;
    KM_FN(gru_cell_n)(KM_EXP(-(ir + hr)), KM_EXP(-(iz + hz)), in, hn, r, z, &gn);
    *n = KM_TANH(gn);
    *h = KM_FN(gru_cell_h)(*z, *n, hp);
}

static inline KM_HD void KM_FN(gru_cell_grad)(KM_T dh, KM_T r, KM_T z, KM_T n, KM_T hn, KM_T hp, KM_T *dr, KM_T *dz,
                                              KM_T *dn, KM_T *dhn, KM_T *dhp)
{
    KM_T dnp = dh * ((KM_T)1 - z) * ((KM_T)1 - n * n);
    *dr = dnp * hn * r * ((KM_T)1 - r);
    *dz = dh * (hp - n) * z * ((KM_T)1 - z);
    *dn = dnp;
    *dhn = dnp * r;
    *dhp = dh * z;
}
