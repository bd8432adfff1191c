/* The LSTM cell (core/compute/ops_decl.h), instantiated by core/compute/ops_f32.c and
 * core/compute/ops_f64.c after core/compute/ops_act_impl.h (real, OPS_FN, KM, VEXP and VTANH
 * defined there; ACT_BLOCK and act_block from ops_act_impl.h). The per-unit math is
 * kernel_math_lstm.h's, so a GPU kernel computes the same values up to exp and tanh: here they
 * come a block at a time from VEXP and VTANH (core/compute/vmath.h; libm's in the double
 * instantiation). Rows are independent: a split over rows (core/compute/backend_cpu.c) gives the
 * same bits on any thread count. */

void OPS_FN(lstm_cell_forward)(real *h, real *c, real *act, const real *gates, const real *c_prev, int n, int H)
{
    real e[3 * ACT_BLOCK], t[ACT_BLOCK];
    for (int r = 0; r < n; r++) {
        size_t row = (size_t)r * H;
        const real *gi = gates + 4 * row, *gf = gi + H, *gg = gf + H, *go = gg + H;
        const real *cp = c_prev ? c_prev + row : NULL;
        real *ai = act + 4 * row, *af = ai + H, *ag = af + H, *ao = ag + H, *cr = c + row, *hr = h + row;
        for (size_t o = 0; o < (size_t)H; o += ACT_BLOCK) {
            size_t k = OPS_FN(act_block)((size_t)H, o);
            real *ei = e, *ef = e + k, *eo = e + 2 * k;
            for (size_t u = 0; u < k; u++) ei[u] = -gi[o + u], ef[u] = -gf[o + u], eo[u] = -go[o + u];
            VEXP(e, e, 3 * k);
            VTANH(ag + o, gg + o, k);
            for (size_t u = 0; u < k; u++) {
                size_t j = o + u;
                KM(lstm_cell_c)(ei[u], ef[u], ag[j], eo[u], cp ? cp[j] : (real)0, &ai[j], &af[j], &ao[j], &cr[j]);
            }
            VTANH(t, cr + o, k);
            for (size_t u = 0; u < k; u++) hr[o + u] = ao[o + u] * t[u];
        }
    }
}

void OPS_FN(lstm_cell_backward)(real *dgates, real *dc_prev, const real *dh, const real *dc, const real *act,
                                const real *c_prev, const real *c, int n, int H)
{
    real t[ACT_BLOCK];
    for (int r = 0; r < n; r++) {
        size_t row = (size_t)r * H;
        const real *ai = act + 4 * row, *af = ai + H, *ag = af + H, *ao = ag + H;
        const real *dhr = dh + row, *dcr = dc ? dc + row : NULL, *cp = c_prev ? c_prev + row : NULL, *cr = c + row;
        real *di = dgates + 4 * row, *df = di + H, *dg = df + H, *dout = dg + H;
        real *dcp = dc_prev ? dc_prev + row : NULL;
        for (size_t o = 0; o < (size_t)H; o += ACT_BLOCK) {
            size_t k = OPS_FN(act_block)((size_t)H, o);
            VTANH(t, cr + o, k);
            for (size_t u = 0; u < k; u++) {
                size_t j = o + u;
                real g;
                KM(lstm_cell_grad_t)(dhr[j], dcr ? dcr[j] : (real)0, ai[j], af[j], ag[j], ao[j],
                                     cp ? cp[j] : (real)0, t[u], &di[j], &df[j], &dg[j], &dout[j], &g);
                if (dcp) dcp[j] = g;
            }
        }
    }
}
