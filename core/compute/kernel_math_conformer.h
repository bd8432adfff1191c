/* BatchNorm and the relative positional encoding of the Conformer, per element, for one type:
 * included by core/compute/kernel_math.h once per type with KM_T (float | double), KM_FN(name)
 * (name_f32 | name_f64) and KM_EXP (expf | exp) defined; no include guard on purpose. Every
 * function is `static inline KM_HD` (C11 and CUDA).
 *
 *   bn_rstd(var, eps)            1 / sqrt(var + eps), in double as torch's CPU kernel, rounded
 *   bn_apply(x, alpha, beta)     x * alpha + beta, with alpha = rstd * w, beta = b - mean * alpha
 *                                per channel (torch's CPU form of (x - mean) * rstd * w + b)
 *   bn_running(r, batch, m)      m * batch + (1 - m) * r in double (torch's running-stat update;
 *                                the variance's batch value is the unbiased var_sum / (n - 1))
 *   bn_dx(dy, xc, mean_dy, k, rstd_w)
 *                                the training-mode input gradient in torch's form:
 *                                (dy - mean(dy) - xc * k) * rstd * w, xc = x - mean,
 *                                k = sum(xc * dy) * rstd^2 / n
 *   relpos_angle(pos, i, d)      pos * exp(2i * -(ln 10000 / d)): the sinusoid argument of
 *                                relative position pos (negative too) at pair i, in the element
 *                                type as torch computes it */

static inline KM_HD KM_T KM_FN(bn_rstd)(double var, double eps)
{
    return (KM_T)(1.0 / sqrt(var + eps));
}

static inline KM_HD KM_T KM_FN(bn_apply)(KM_T x, KM_T alpha, KM_T beta)
{
    return x * alpha + beta;
}

static inline KM_HD KM_T KM_FN(bn_running)(KM_T running, double batch, double momentum)
{
    return (KM_T)(momentum * batch + (1 - momentum) * (double)running);
}

static inline KM_HD KM_T KM_FN(bn_dx)(KM_T dy, KM_T xc, KM_T mean_dy, KM_T k, KM_T rstd_w)
{
    return (dy - mean_dy - xc * k) * rstd_w;
}

static inline KM_HD KM_T KM_FN(relpos_angle)(int pos, int i, int d)
{
    KM_T div = KM_EXP((KM_T)(2 * i) * (KM_T)(-9.210340371976184 / d)); /* -(ln 10000) / d */
    return (KM_T)pos * div;
}
