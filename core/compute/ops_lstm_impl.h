/* The LSTM cell (core/compute/ops_decl.h), instantiated by core/compute/ops_f32.c and
 * core/compute/ops_f64.c after core/compute/ops_act_impl.h (real, OPS_FN, KM and VEXP defined
 * there; ACT_BLOCK and act_block from ops_act_impl.h). The per-unit math is kernel_math_lstm.h's,
 * so a GPU kernel computes the same values; the sigmoids' exp comes a block at a time from VEXP
 * (core/compute/vmath.h), tanh per element from libm. Rows are independent: a split over rows
 * (core/compute/backend_cpu.c) gives the same bits on any thread count. */

void OPS_FN(lstm_cell_forward)(real *h, real *c, real *act, const real *gates, const real *c_prev, int n, int H)
{
    real e[3 * ACT_BLOCK];
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
            for (size_t u = 0; u < k; u++) {
                size_t j = o + u;
                KM(lstm_cell_e)(ei[u], ef[u], gg[j], eo[u], cp ? cp[j] : (real)0, &ai[j], &af[j], &ag[j], &ao[j],
                                &cr[j], &hr[j]);
            }
        }
    }
}

void OPS_FN(lstm_cell_backward)(real *dgates, real *dc_prev, const real *dh, const real *dc, const real *act,
                                const real *c_prev, const real *c, int n, int H)
{
    for (int r = 0; r < n; r++) {
        size_t row = (size_t)r * H;
        const real *ai = act + 4 * row, *af = ai + H, *ag = af + H, *ao = ag + H;
        const real *dhr = dh + row, *dcr = dc ? dc + row : NULL, *cp = c_prev ? c_prev + row : NULL, *cr = c + row;
        real *di = dgates + 4 * row, *df = di + H, *dg = df + H, *dout = dg + H;
        real *dcp = dc_prev ? dc_prev + row : NULL;
        for (int u = 0; u < H; u++) {
            real g;
            KM(lstm_cell_grad)(dhr[u], dcr ? dcr[u] : (real)0, ai[u], af[u], ag[u], ao[u], cp ? cp[u] : (real)0,
                               cr[u], &di[u], &df[u], &dg[u], &dout[u], &g);
            if (dcp) dcp[u] = g;
        }
    }
}
