/* The label-smoothing loss of the attention decoder (documented in core/compute/ops_decl.h),
 * instantiated by core/compute/ops_f32.c and core/compute/ops_f64.c after core/compute/ops_impl.h;
 * not a header to include elsewhere. The per-element math is core/compute/kernel_math.h's. */

double OPS_FN(label_smoothing_forward)(const real *logp, const int *target, int n, int v,
                                       double smoothing, int64_t *correct)
{
    double sum = 0;
    int64_t hits = 0;
    for (int r = 0; r < n; r++) {
        int tg = target[r];
        if (tg < 0) continue; /* padding (ignore_id -1) */
        ESP_CHECK(tg < v);
        const real *lp = logp + (size_t)r * v;
        double row = 0;
        int best = 0;
        for (int c = 0; c < v; c++) {
            row += kl_div_term(label_smoothing_prob(c, tg, smoothing, v), (double)lp[c]);
            if (lp[c] > lp[best]) best = c; /* the first maximum, as torch's argmax */
        }
        sum += row;
        hits += best == tg;
    }
    if (correct) *correct = hits;
    return sum;
}

void OPS_FN(label_smoothing_backward)(real *dlogits, const real *logp, const int *target, int n,
                                      int v, double smoothing, double scale)
{
    for (int r = 0; r < n; r++) {
        int tg = target[r];
        real *g = dlogits + (size_t)r * v;
        const real *lp = logp + (size_t)r * v;
        if (tg < 0) {
            memset(g, 0, (size_t)v * sizeof(real));
            continue;
        }
        for (int c = 0; c < v; c++)
            g[c] = (real)label_smoothing_grad((double)lp[c], label_smoothing_prob(c, tg, smoothing, v),
                                              scale);
    }
}
