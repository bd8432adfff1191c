/* The GRU cell (core/compute/ops_decl.h), instantiated by core/compute/ops_f32.c and
 * core/compute/ops_f64.c after core/compute/ops_act_impl.h (real, OPS_FN, KM, VEXP and VTANH
 * defined there; ACT_BLOCK and act_block from ops_act_impl.h). The per-unit math is
 * kernel_math_gru.h's, so a GPU kernel computes the same values up to exp and tanh: here they come
 * a block at a time from VEXP and VTANH (core/compute/vmath.h; libm's in the double
 * instantiation). Rows are independent: a split over rows (core/compute/backend_cpu.c) gives the
 * same bits on any thread count. */

void OPS_FN(gru_cell_forward)(real *h, real *act, const real *gi, const real *gh, const real *h_prev, int n, int H)
{
    real e[2 * ACT_BLOCK], gn[ACT_BLOCK];
    for (int r = 0; r < n; r++) {
        size_t row = (size_t)r * H;
        const real *ir = gi + 3 * row, *iz = ir + H, *in = iz + H, *hr = gh + 3 * row, *hz = hr + H, *hn = hz + H;
        const real *hp = h_prev ? h_prev + row : NULL;
        real *ar = act + 4 * row, *az = ar + H, *an = az + H, *ahn = an + H, *hrow = h + row;
        for (size_t o = 0; o < (size_t)H; o += ACT_BLOCK) {
            size_t k = OPS_FN(act_block)((size_t)H, o);
            real *er = e, *ez = e + k;
            for (size_t u = 0; u < k; u++) er[u] = -(ir[o + u] + hr[o + u]), ez[u] = -(iz[o + u] + hz[o + u]);
            VEXP(e, e, 2 * k);
            for (size_t u = 0; u < k; u++) {
                size_t j = o + u;
                ahn[j] = hn[j];
                KM(gru_cell_n)(er[u], ez[u], in[j], hn[j], &ar[j], &az[j], &gn[u]);
            }
            VTANH(an + o, gn, k);
            for (size_t u = 0; u < k; u++) hrow[o + u] = KM(gru_cell_h)(az[o + u], an[o + u], hp ? hp[o + u] : (real)0);
        }
    }
}

void OPS_FN(gru_cell_backward)(real *dgi, real *dgh, real *dh_prev, const real *dh, const real *act,
                               const real *h_prev, int n, int H)
{
    for (int r = 0; r < n; r++) {
        size_t row = (size_t)r * H;
        const real *ar = act + 4 * row, *az = ar + H, *an = az + H, *ahn = an + H, *dhr = dh + row;
        const real *hp = h_prev ? h_prev + row : NULL;
        real *ir = dgi + 3 * row, *iz = ir + H, *in = iz + H, *hr = dgh + 3 * row, *hz = hr + H, *hn = hz + H;
        real *dhp = dh_prev ? dh_prev + row : NULL;
        for (int j = 0; j < H; j++) {
            real dr, dz, dn, dhn, dp;
            KM(gru_cell_grad)(dhr[j], ar[j], az[j], an[j], ahn[j], hp ? hp[j] : (real)0, &dr, &dz, &dn, &dhn, &dp);
            ir[j] = hr[j] = dr;
            iz[j] = hz[j] = dz;
            in[j] = dn;
            hn[j] = dhn;
            if (dhp) dhp[j] = dp;
        }
    }
}
