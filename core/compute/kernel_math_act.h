/* Activations, per element, for one type: included by core/compute/kernel_math.h once per type
 * with KM_T (float | double), KM_FN(name) (name_f32 | name_f64), KM_EXP (expf | exp) and KM_ERFC
 * (erfcf | erfc) defined;
 * no include guard on purpose. Every function is `static inline KM_HD` (C11 and CUDA).
 *
 *   act_relu(x)                  max(x, 0)
 *   act_relu_grad(dy, y)         dy where the OUTPUT y > 0, else 0 (the backward reads the output)
 *   act_sigmoid(x)               1 / (1 + exp(-x))
 *   act_silu(x)                  SiLU / Swish: x * sigmoid(x), computed as torch's CPU kernel does,
 *                                x / (1 + exp(-x))
 *   act_swish(x)                 ESPnet's Swish module (the Conformer's activation): x * sigmoid(x),
 *                                two roundings as its two torch ops (act_silu's value to an ulp)
 *   act_silu_grad(dy, x)         dy * s * (1 + x * (1 - s)), s = sigmoid(x) (torch's silu_backward;
 *                                reads the INPUT x)
 *   act_glu(a, b)                GLU on one pair: a * sigmoid(b), where torch's glu(x, dim) splits x
 *                                in halves a (first) and b (second) along dim
 *   act_glu_grad(dy, a, b, da, db)  *da = dy * s, *db = dy * a * s * (1 - s), s = sigmoid(b)
 *   act_gelu(x)                  torch.nn.GELU() (approximate 'none', the E-Branchformer's cgMLP):
 *                                x * Phi(x), Phi(x) = 0.5 * erfc(-x / sqrt(2)) the normal CDF; torch
 *                                writes 0.5 * (1 + erf(x / sqrt(2))), which in float cancels to 0 below
 *                                x = -5.5 (values under 1e-7 there: the same to float's resolution)
 *   act_gelu_grad(dy, x)         dy * (Phi(x) + x * phi(x)), phi the normal density (reads the INPUT x)
 *
 * The CPU's passes take exp and erfc of a block at a time (core/compute/vmath.h) and finish with
 * the same math given them, through the *_e forms each function above is built on:
 *   act_swish_e(x, e)            act_swish with e = exp(-x)
 *   act_silu_grad_e(dy, x, e)    act_silu_grad with e = exp(-x)
 *   act_glu_e(a, e)              act_glu with e = exp(-b)
 *   act_glu_grad_e(dy, a, e, da, db)  act_glu_grad with e = exp(-b)
 *   act_gelu_e(x, c)             act_gelu with c = erfc(-x / sqrt(2)) (act_gelu_arg(x) is that argument)
 *   act_gelu_grad_e(dy, x, c, e) act_gelu_grad with c as above and e = exp(-x * x / 2)
 *
 * Large |x| saturates without NaN: exp(-x) overflows to inf and the quotients go to 0 (SiLU of a
 * very negative x is -0). A NaN input gives NaN. */

static inline KM_HD KM_T KM_FN(act_relu)(KM_T x)
{
    return x > 0 ? x : (KM_T)0;
}

/* A select on y, not a branch on dy: dy is read unconditionally so loops vectorize. */
static inline KM_HD KM_T KM_FN(act_relu_grad)(KM_T dy, KM_T y)
{
    return y > 0 ? dy : (KM_T)0;
}

static inline KM_HD KM_T KM_FN(act_sigmoid_e)(KM_T e)
{
    return (KM_T)1 / ((KM_T)1 + e);
}

static inline KM_HD KM_T KM_FN(act_sigmoid)(KM_T x)
{
    return KM_FN(act_sigmoid_e)(KM_EXP(-x));
}

static inline KM_HD KM_T KM_FN(act_silu)(KM_T x)
{
    return x / ((KM_T)1 + KM_EXP(-x));
}

static inline KM_HD KM_T KM_FN(act_swish_e)(KM_T x, KM_T e)
{
    return x * KM_FN(act_sigmoid_e)(e);
}

static inline KM_HD KM_T KM_FN(act_swish)(KM_T x)
{
    return KM_FN(act_swish_e)(x, KM_EXP(-x));
}

static inline KM_HD KM_T KM_FN(act_silu_grad_e)(KM_T dy, KM_T x, KM_T e)
{
    KM_T s = KM_FN(act_sigmoid_e)(e);
    return dy * s * ((KM_T)1 + x * ((KM_T)1 - s));
}

static inline KM_HD KM_T KM_FN(act_silu_grad)(KM_T dy, KM_T x)
{
    return KM_FN(act_silu_grad_e)(dy, x, KM_EXP(-x));
}

static inline KM_HD KM_T KM_FN(act_glu_e)(KM_T a, KM_T e)
{
    return a * KM_FN(act_sigmoid_e)(e);
}

static inline KM_HD KM_T KM_FN(act_glu)(KM_T a, KM_T b)
{
    return KM_FN(act_glu_e)(a, KM_EXP(-b));
}

static inline KM_HD void KM_FN(act_glu_grad_e)(KM_T dy, KM_T a, KM_T e, KM_T *da, KM_T *db)
{
    KM_T s = KM_FN(act_sigmoid_e)(e);
    *da = dy * s;
    *db = dy * a * s * ((KM_T)1 - s);
}

static inline KM_HD void KM_FN(act_glu_grad)(KM_T dy, KM_T a, KM_T b, KM_T *da, KM_T *db)
{
    KM_FN(act_glu_grad_e)(dy, a, KM_EXP(-b), da, db);
}

static inline KM_HD KM_T KM_FN(act_gelu_arg)(KM_T x)
{
    return -x * (KM_T)0.70710678118654752440;
}

static inline KM_HD KM_T KM_FN(act_gelu_e)(KM_T x, KM_T c)
{
    return x * (KM_T)0.5 * c;
}

static inline KM_HD KM_T KM_FN(act_gelu)(KM_T x)
{
    return KM_FN(act_gelu_e)(x, KM_ERFC(KM_FN(act_gelu_arg)(x)));
}

static inline KM_HD KM_T KM_FN(act_gelu_grad_e)(KM_T dy, KM_T x, KM_T c, KM_T e)
{
    KM_T cdf = (KM_T)0.5 * c;
    KM_T pdf = e * (KM_T)0.39894228040143267794; /* 1 / sqrt(2 pi) */
    return dy * (cdf + x * pdf);
}

static inline KM_HD KM_T KM_FN(act_gelu_grad)(KM_T dy, KM_T x)
{
    return KM_FN(act_gelu_grad_e)(dy, x, KM_ERFC(KM_FN(act_gelu_arg)(x)), KM_EXP((KM_T)-0.5 * x * x));
}
