/* Conv1d with any kernel, stride, dilation and groups, no padding, channels last
 * (core/compute/ops_decl.h: conv1d_gen_*), instantiated by core/compute/ops_f32.c and
 * core/compute/ops_f64.c after core/compute/ops_impl.h: ESPnet2's asr_transducer conv1d block.
 * Per batch item and group, the patch matrix (ot x kg, kg = k * icg, column j * icg + ci: tap j's
 * icg channels of the group, a contiguous run of the input row) times the group's rows of the
 * packed weight (oc x kg, the same column order: convg_pack's of a k x 1 kernel on icg channels,
 * core/compute/ops_convg_impl.h, which the instantiations include first). */

/* col[q][j * icg + ci] = x[s * q + d * j][c0 + ci] of one item (rows of ic channels). */
static void c1g_gather(real *restrict col, const real *restrict x, int ic, int icg, int c0, int ot, int k, int s,
                       int d)
{
    size_t kg = (size_t)k * icg;
    for (int q = 0; q < ot; q++)
        for (int j = 0; j < k; j++)
            memcpy(col + q * kg + (size_t)j * icg, x + ((size_t)s * q + (size_t)d * j) * ic + c0,
                   (size_t)icg * sizeof(real));
}

/* The adjoint of c1g_gather: dx[...] += col[...]. */
static void c1g_scatter_add(real *restrict dx, const real *restrict col, int ic, int icg, int c0, int ot, int k,
                            int s, int d)
{
    size_t kg = (size_t)k * icg;
    for (int q = 0; q < ot; q++)
        for (int j = 0; j < k; j++) {
            real *r = dx + ((size_t)s * q + (size_t)d * j) * ic + c0;
            const real *c = col + q * kg + (size_t)j * icg;
            for (int ci = 0; ci < icg; ci++) r[ci] += c[ci];
        }
}

void OPS_FN(conv1d_gen_forward)(real *y, const real *x, const real *w, const real *b, int nb, int t, int ic, int oc,
                                int k, int stride, int dil, int groups, real *scratch)
{
    /* Reference loop (g the group of o, icg = ic / groups):
     *   y[n][q][o] = b[o] + sum_{ci,j} w[o][ci][j] * x[n][stride * q + dil * j][g * icg + ci] */
    int ot = ops_conv1d_gen_len(t, k, stride, dil), icg = ic / groups, ocg = oc / groups;
    size_t kg = (size_t)k * icg;
    if (ot == 0 || nb <= 0) return;
    real *wp = scratch, *col = wp + (size_t)oc * kg;
    convg_pack(wp, w, oc, icg, k, 1);
    for (int n = 0; n < nb; n++) {
        real *yn = y + (size_t)n * ot * oc;
        for (int q = 0; q < ot; q++)
            for (int o = 0; o < oc; o++) yn[(size_t)q * oc + o] = b ? b[o] : 0;
        for (int g = 0; g < groups; g++) {
            c1g_gather(col, x + (size_t)n * t * ic, ic, icg, g * icg, ot, k, stride, dil);
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, ot, ocg, (int)kg, 1, col, (int)kg, wp + (size_t)g * ocg * kg,
                 (int)kg, 1, yn + (size_t)g * ocg, oc);
        }
    }
}

void OPS_FN(conv1d_gen_backward)(real *dx, real *dw, real *db, const real *dy, const real *x, const real *w, int nb,
                                 int t, int ic, int oc, int k, int stride, int dil, int groups, int acc, real *scratch)
{
    /* Per item and group g, with G the group's columns of the output gradient (ot x ocg):
     *   db[o] += sum_q dy[q][o];  dwp_g (ocg x kg) += G^T @ col_g;  dcol_g = G @ wp_g, scattered onto dx. */
    int ot = ops_conv1d_gen_len(t, k, stride, dil), icg = ic / groups, ocg = oc / groups;
    size_t kg = (size_t)k * icg;
    if (dx && !acc) memset(dx, 0, (size_t)nb * t * ic * sizeof(real));
    if (ot == 0 || nb <= 0) return;
    real *wp = scratch, *dwp = wp + (size_t)oc * kg, *col = dwp + (size_t)oc * kg;
    if (dx) convg_pack(wp, w, oc, icg, k, 1);
    if (dw) memset(dwp, 0, (size_t)oc * kg * sizeof(real));
    for (int n = 0; n < nb; n++) {
        const real *gn = dy + (size_t)n * ot * oc, *xn = x + (size_t)n * t * ic;
        if (db)
            for (int q = 0; q < ot; q++)
                for (int o = 0; o < oc; o++) db[o] += gn[(size_t)q * oc + o];
        for (int g = 0; g < groups; g++) {
            const real *gg = gn + (size_t)g * ocg;
            if (dw) {
                c1g_gather(col, xn, ic, icg, g * icg, ot, k, stride, dil);
                GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, ocg, (int)kg, ot, 1, gg, oc, col, (int)kg, 1,
                     dwp + (size_t)g * ocg * kg, (int)kg);
            }
            if (dx) {
                GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, ot, (int)kg, ocg, 1, gg, oc,
                     wp + (size_t)g * ocg * kg, (int)kg, 0, col, (int)kg);
                c1g_scatter_add(dx + (size_t)n * t * ic, col, ic, icg, g * icg, ot, k, stride, dil);
            }
        }
    }
    if (dw) convg_unpack_add(dw, dwp, oc, icg, k, 1);
}
