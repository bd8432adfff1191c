/* The LSTM cell of torch.nn.LSTM (gate order i, f, g, o), per unit, for one type: included by
 * core/compute/kernel_math.h once per type after kernel_math_act.h, with KM_T (float | double),
 * KM_FN(name) (name_f32 | name_f64), KM_EXP (expf | exp) and KM_TANH (tanhf | tanh) defined; no
 * include guard on purpose. Every function is `static inline KM_HD` (C11 and CUDA). The sigmoids
 * are act_sigmoid's (1 / (1 + exp(-x))), the tanh libm's.
 *
 *   lstm_cell(i, f, g, o, cp, si, sf, tg, so, c, h)
 *        one unit's forward from its gates' pre-activations (both biases added) and the previous
 *        cell state cp: *si, *sf, *so = sigmoid(i, f, o), *tg = tanh(g) (kept for the backward),
 *        *c = sf * cp + si * tg, *h = so * tanh(c)
 *   lstm_cell_c(ei, ef, tg, eo, cp, si, sf, so, c)
 *        the part before tanh(c), from ei = exp(-i), ef = exp(-f), eo = exp(-o) and tg = tanh(g):
 *        the CPU takes exp and tanh a block at a time (core/compute/vmath.h) and sets
 *        h = so * tanh(c) after; lstm_cell is this with every exp and tanh per unit
 *   lstm_cell_grad(dh, dc, si, sf, tg, so, cp, c, di, df, dg, d_o, dcp)
 *        the backward of one unit from the forward's si, sf, tg, so, cp and c, the gradient dh of h
 *        and dc of c (from the next step): tc = tanh(c), dct = dh * so * (1 - tc^2) + dc;
 *        *di = dct * tg * si (1 - si), *df = dct * cp * sf (1 - sf), *dg = dct * si * (1 - tg^2),
 *        *d_o = dh * tc * so (1 - so) (the pre-activations' gradients), *dcp = dct * sf
 *   lstm_cell_grad_t(dh, dc, si, sf, tg, so, cp, tc, ...)
 *        lstm_cell_grad with tc = tanh(c) given
 *
 * Each product and sum is one rounding (no FMA: C11 contracts nothing, the kernels build with
 * -fmad=false). A NaN input gives NaN. */

static inline KM_HD void KM_FN(lstm_cell_c)(KM_T ei, KM_T ef, KM_T tg, KM_T eo, KM_T cp, KM_T *si, KM_T *sf,
                                            KM_T *so, KM_T *c)
{
    KM_T i = KM_FN(act_sigmoid_e)(ei), f = KM_FN(act_sigmoid_e)(ef), o = KM_FN(act_sigmoid_e)(eo);
    *si = i;
    *sf = f;
    *so = o;
    *c = f * cp + i * tg;
}

static inline KM_HD void KM_FN(lstm_cell)(KM_T i, KM_T f, KM_T g, KM_T o, KM_T cp, KM_T *si, KM_T *sf, KM_T *tg,
                                          KM_T *so, KM_T *c, KM_T *h)
{
    *tg = KM_TANH(g);
    KM_FN(lstm_cell_c)(KM_EXP(-i), KM_EXP(-f), *tg, KM_EXP(-o), cp, si, sf, so, c);
    *h = *so * KM_TANH(*c);
}

static inline KM_HD void KM_FN(lstm_cell_grad_t)(KM_T dh, KM_T dc, KM_T si, KM_T sf, KM_T tg, KM_T so, KM_T cp,
                                                 KM_T tc, KM_T *di, KM_T *df, KM_T *dg, KM_T *d_o, KM_T *dcp)
{
    KM_T dct = dh * so * ((KM_T)1 - tc * tc) + dc;
    *di = dct * tg * si * ((KM_T)1 - si);
    *df = dct * cp * sf * ((KM_T)1 - sf);
    *dg = dct * si * ((KM_T)1 - tg * tg);
    *d_o = dh * tc * so * ((KM_T)1 - so);
    *dcp = dct * sf;
}

static inline KM_HD void KM_FN(lstm_cell_grad)(KM_T dh, KM_T dc, KM_T si, KM_T sf, KM_T tg, KM_T so, KM_T cp,
                                               KM_T c, KM_T *di, KM_T *df, KM_T *dg, KM_T *d_o, KM_T *dcp)
{
    KM_FN(lstm_cell_grad_t)(dh, dc, si, sf, tg, so, cp, KM_TANH(c), di, df, dg, d_o, dcp);
}
