/* Conv2d with any kernel and stride (core/compute/ops_decl.h: conv2d_gen_*), instantiated by
 * core/compute/ops_f32.c and core/compute/ops_f64.c after core/compute/ops_impl.h: per batch item,
 * the patch matrix (P x kk, P = oh * ow output positions, kk = kh * kw * ic, column
 * (i * kw + j) * ic + ci, so a patch row reads runs of kw * ic contiguous inputs) times the packed
 * weight (oc x kk, the same column order), with the bias and a fused ReLU. The input layers of
 * ESPnet's Conv2dSubsampling2/6 (3x3 stride 1, 5x5 stride 3) and Conv1dSubsampling2 (Conv1d as
 * kw = 1 over wd = 1, channels = features) run here; the stride-2 3x3 convs keep conv2d_*. */

/* wp[o][(i * kw + j) * ic + ci] = w[o][ci][i][j]. */
static void convg_pack(real *restrict wp, const real *restrict w, int oc, int ic, int kh, int kw)
{
    size_t kk = (size_t)kh * kw * ic;
    for (int o = 0; o < oc; o++)
        for (int ci = 0; ci < ic; ci++)
            for (int t = 0; t < kh * kw; t++) wp[o * kk + (size_t)t * ic + ci] = w[((size_t)o * ic + ci) * kh * kw + t];
}

/* dw (torch's layout) += dwp (packed). */
static void convg_unpack_add(real *restrict dw, const real *restrict dwp, int oc, int ic, int kh, int kw)
{
    size_t kk = (size_t)kh * kw * ic;
    for (int o = 0; o < oc; o++)
        for (int ci = 0; ci < ic; ci++)
            for (int t = 0; t < kh * kw; t++) dw[((size_t)o * ic + ci) * kh * kw + t] += dwp[o * kk + (size_t)t * ic + ci];
}

/* col[(oy * ow + ox)][(i * kw + j) * ic + ci] = x[sh * oy + i][sw * ox + j][ci] of one item. */
static void convg_gather(real *restrict col, const real *restrict x, int ic, int wd, int oh, int ow, int kh, int kw,
                         int sh, int sw)
{
    size_t run = (size_t)kw * ic, kk = (size_t)kh * run;
    for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
            real *c = col + ((size_t)oy * ow + ox) * kk;
            for (int i = 0; i < kh; i++)
                memcpy(c + i * run, x + (((size_t)sh * oy + i) * wd + (size_t)sw * ox) * ic, run * sizeof(real));
        }
}

/* The adjoint of convg_gather: dx[...] += col[...]. */
static void convg_scatter_add(real *restrict dx, const real *restrict col, int ic, int wd, int oh, int ow, int kh,
                              int kw, int sh, int sw)
{
    size_t run = (size_t)kw * ic, kk = (size_t)kh * run;
    for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++) {
            const real *c = col + ((size_t)oy * ow + ox) * kk;
            for (int i = 0; i < kh; i++) {
                real *d = dx + (((size_t)sh * oy + i) * wd + (size_t)sw * ox) * ic;
                const real *ci = c + i * run;
                for (size_t k = 0; k < run; k++) d[k] += ci[k];
            }
        }
}

void OPS_FN(conv2d_gen_forward)(real *y, const real *x, const real *w, const real *b, int nb, int ic, int oc,
                                int h, int wd, int kh, int kw, int sh, int sw, int relu, real *scratch)
{
    /* Reference loop:
     *   y[n][oy][ox][o] = b[o] + sum_{c,i,j} w[o][c][i][j] * x[n][sh * oy + i][sw * ox + j][c] */
    int oh = ops_conv_len(h, kh, sh), ow = ops_conv_len(wd, kw, sw);
    size_t p = (size_t)oh * ow, kk = (size_t)kh * kw * ic, o_n = (size_t)oc;
    if (p == 0 || nb <= 0) return;
    real *wp = scratch, *col = wp + o_n * kk;
    convg_pack(wp, w, oc, ic, kh, kw);
    for (int n = 0; n < nb; n++) {
        real *yn = y + (size_t)n * p * o_n;
        convg_gather(col, x + (size_t)n * h * wd * ic, ic, wd, oh, ow, kh, kw, sh, sw);
        for (size_t q = 0; q < p; q++)
            for (size_t o = 0; o < o_n; o++) yn[q * o_n + o] = b ? b[o] : 0;
        GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)p, oc, (int)kk, 1, col, (int)kk, wp, (int)kk, 1, yn, oc);
        if (relu)
            for (size_t e = 0; e < p * o_n; e++) yn[e] = ACT(relu)(yn[e]);
    }
}

void OPS_FN(conv2d_gen_backward)(real *dx, real *dw, real *db, const real *dy, const real *x, const real *w,
                                 const real *y, int nb, int ic, int oc, int h, int wd, int kh, int kw, int sh, int sw,
                                 int acc, real *scratch)
{
    /* Per item, with g the output gradient (P x oc, masked by y > 0 when ReLU was fused):
     *   db[o] += sum_P g[.][o];  dwp (oc x kk) += g^T @ col;  dcol (P x kk) = g @ wp, scattered onto dx. */
    int oh = ops_conv_len(h, kh, sh), ow = ops_conv_len(wd, kw, sw);
    size_t p = (size_t)oh * ow, kk = (size_t)kh * kw * ic, o_n = (size_t)oc;
    if (dx && !acc) memset(dx, 0, (size_t)nb * h * wd * ic * sizeof(real));
    if (p == 0 || nb <= 0) return;
    real *wp = scratch, *dwp = wp + o_n * kk, *col = dwp + o_n * kk, *gm = col + p * kk;
    if (dx) convg_pack(wp, w, oc, ic, kh, kw);
    if (dw) memset(dwp, 0, o_n * kk * sizeof(real));
    for (int n = 0; n < nb; n++) {
        const real *g = dy + (size_t)n * p * o_n;
        if (y) {
            const real *yn = y + (size_t)n * p * o_n;
            for (size_t e = 0; e < p * o_n; e++) gm[e] = ACT(relu_grad)(g[e], yn[e]);
            g = gm;
        }
        if (db)
            for (size_t q = 0; q < p; q++)
                for (size_t o = 0; o < o_n; o++) db[o] += g[q * o_n + o];
        const real *xn = x + (size_t)n * h * wd * ic;
        if (dw) {
            convg_gather(col, xn, ic, wd, oh, ow, kh, kw, sh, sw);
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, oc, (int)kk, (int)p, 1, g, oc, col, (int)kk, 1, dwp, (int)kk);
        }
        if (dx) {
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)p, (int)kk, oc, 1, g, oc, wp, (int)kk, 0, col, (int)kk);
            convg_scatter_add(dx + (size_t)n * h * wd * ic, col, ic, wd, oh, ow, kh, kw, sh, sw);
        }
    }
    if (dw) convg_unpack_add(dw, dwp, oc, ic, kh, kw);
}
