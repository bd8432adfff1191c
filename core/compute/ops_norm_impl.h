/* BatchNorm1d over channels-last rows (core/compute/ops_conformer_decl.h), instantiated by
 * core/compute/ops_f32.c and core/compute/ops_f64.c after core/compute/ops_impl.h. Statistics are
 * summed in double over the rows, a block of channels at a time (rows stay contiguous reads), and
 * rounded to the element type where torch keeps float tensors (mean, variance sum, rstd). */

enum { BN_CBLOCK = 64 };

/* Per-channel sums of channels [c0, c0 + cn): s1 = sum x, s2 = sum (x - mean)^2 (mean from s1). */
OPS_CLONE_INLINE void bn_stats(const real *x, int n, int c, int c0, int cn, real *mean, real *var_sum)
{
    double s[BN_CBLOCK] = {0}, q[BN_CBLOCK] = {0};
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * c + c0;
        for (int i = 0; i < cn; i++) s[i] += (double)xr[i];
    }
    for (int i = 0; i < cn; i++) mean[i] = (real)(s[i] / n);
    for (int r = 0; r < n; r++) {
        const real *xr = x + (size_t)r * c + c0;
        for (int i = 0; i < cn; i++) {
            double dv = (double)xr[i] - (double)mean[i];
            q[i] += dv * dv;
        }
    }
    for (int i = 0; i < cn; i++) var_sum[i] = (real)q[i];
}

typedef struct OPS_FN(bn_job) {
    real *y, *mean, *rstd, *run_mean, *run_var, *dx, *dw, *db;
    const real *x, *w, *b, *dy, *cmean, *crstd;
    int n, c, train;
    double eps, momentum;
} OPS_FN(bn_job);

/* The forward of channel blocks lo .. hi - 1 (BN_CBLOCK channels each). */
OPS_SIMD_CLONES
static void OPS_FN(bn_forward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(bn_job) *j = ctx;
    real *y = j->y, *mean = j->mean, *rstd = j->rstd, *run_mean = j->run_mean, *run_var = j->run_var;
    const real *x = j->x, *w = j->w, *b = j->b;
    int n = j->n, c = j->c, train = j->train;
    double eps = j->eps, momentum = j->momentum;
    for (int c0 = (int)lo * BN_CBLOCK; c0 < c && c0 < (int)hi * BN_CBLOCK; c0 += BN_CBLOCK) {
        int cn = c - c0 < BN_CBLOCK ? c - c0 : BN_CBLOCK;
        real m[BN_CBLOCK], vs[BN_CBLOCK], rs[BN_CBLOCK], alpha[BN_CBLOCK], beta[BN_CBLOCK];
        for (int i = 0; i < cn; i++) {
            m[i] = train ? 0 : run_mean[c0 + i];
            rs[i] = train ? 1 : KM(bn_rstd)((double)run_var[c0 + i], eps);
        }
        if (train && n > 0) {
            bn_stats(x, n, c, c0, cn, m, vs);
            for (int i = 0; i < cn; i++) {
                rs[i] = KM(bn_rstd)((double)vs[i] / n, eps);
                if (mean) mean[c0 + i] = m[i];
                if (rstd) rstd[c0 + i] = rs[i];
                if (!run_mean) continue;
                run_mean[c0 + i] = KM(bn_running)(run_mean[c0 + i], (double)m[i], momentum);
                if (n > 1) run_var[c0 + i] = KM(bn_running)(run_var[c0 + i], (double)vs[i] / (n - 1), momentum);
            }
        }
        for (int i = 0; i < cn; i++) {
            alpha[i] = rs[i] * w[c0 + i];
            beta[i] = b[c0 + i] - m[i] * alpha[i];
        }
        for (int r = 0; r < n; r++) {
            const real *xr = x + (size_t)r * c + c0;
            real *yr = y + (size_t)r * c + c0;
#pragma omp simd
            for (int i = 0; i < cn; i++) yr[i] = KM(bn_apply)(xr[i], alpha[i], beta[i]);
        }
    }
}

void OPS_FN(batchnorm_forward_mt)(real *y, real *mean, real *rstd, const real *x, const real *w,
                                  const real *b, real *run_mean, real *run_var, real *run_count, int n,
                                  int c, double eps, double momentum, int train, int threads)
{
    OPS_FN(bn_job) j = {.y = y, .mean = mean, .rstd = rstd, .run_mean = run_mean, .run_var = run_var, .x = x,
                        .w = w, .b = b, .n = n, .c = c, .train = train, .eps = eps, .momentum = momentum};
    size_t blocks = ((size_t)c + BN_CBLOCK - 1) / BN_CBLOCK;
    parallel_parts(blocks, 1, (size_t)n * c < OPS_MT_MIN_ELEMS ? 1 : threads, OPS_FN(bn_forward_part), &j);
    if (train && run_count) *run_count += 1;
}

void OPS_FN(batchnorm_forward)(real *y, real *mean, real *rstd, const real *x, const real *w,
                               const real *b, real *run_mean, real *run_var, real *run_count, int n,
                               int c, double eps, double momentum, int train)
{
    OPS_FN(batchnorm_forward_mt)(y, mean, rstd, x, w, b, run_mean, run_var, run_count, n, c, eps, momentum, train,
                                 1);
}

/* The backward of channel blocks lo .. hi - 1. */
OPS_SIMD_CLONES
static void OPS_FN(bn_backward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    /* torch's form: g = mean(dy), k = sum((x - mean) dy) rstd^2 / n,
     * dx = (dy - g - (x - mean) k) rstd w;  dw += sum((x - mean) dy) rstd;  db += sum(dy). */
    (void)part;
    const OPS_FN(bn_job) *j = ctx;
    real *dx = j->dx, *dw = j->dw, *db = j->db;
    const real *dy = j->dy, *x = j->x, *w = j->w, *mean = j->cmean, *rstd = j->crstd;
    int n = j->n, c = j->c;
    for (int c0 = (int)lo * BN_CBLOCK; c0 < c && c0 < (int)hi * BN_CBLOCK; c0 += BN_CBLOCK) {
        int cn = c - c0 < BN_CBLOCK ? c - c0 : BN_CBLOCK;
        double s[BN_CBLOCK] = {0}, dot[BN_CBLOCK] = {0};
        for (int r = 0; r < n; r++) {
            const real *xr = x + (size_t)r * c + c0, *gr = dy + (size_t)r * c + c0;
            for (int i = 0; i < cn; i++) {
                s[i] += (double)gr[i];
                dot[i] += ((double)xr[i] - (double)mean[c0 + i]) * (double)gr[i];
            }
        }
        real gm[BN_CBLOCK], kk[BN_CBLOCK], rw[BN_CBLOCK];
        for (int i = 0; i < cn; i++) {
            double rs = (double)rstd[c0 + i];
            gm[i] = (real)(s[i] / n);
            kk[i] = (real)(dot[i] * rs * rs / n);
            rw[i] = rstd[c0 + i] * w[c0 + i];
            dw[c0 + i] += (real)(dot[i] * rs);
            db[c0 + i] += (real)s[i];
        }
        for (int r = 0; r < n; r++) {
            const real *xr = x + (size_t)r * c + c0, *gr = dy + (size_t)r * c + c0;
            real *dxr = dx + (size_t)r * c + c0;
#pragma omp simd
            for (int i = 0; i < cn; i++) dxr[i] = KM(bn_dx)(gr[i], xr[i] - mean[c0 + i], gm[i], kk[i], rw[i]);
        }
    }
}

void OPS_FN(batchnorm_backward_mt)(real *dx, real *dw, real *db, const real *dy, const real *x,
                                   const real *w, const real *mean, const real *rstd, int n, int c, int threads)
{
    OPS_FN(bn_job) j = {.dx = dx, .dw = dw, .db = db, .dy = dy, .x = x, .w = w, .cmean = mean, .crstd = rstd,
                        .n = n, .c = c};
    size_t blocks = ((size_t)c + BN_CBLOCK - 1) / BN_CBLOCK;
    parallel_parts(blocks, 1, (size_t)n * c < OPS_MT_MIN_ELEMS ? 1 : threads, OPS_FN(bn_backward_part), &j);
}

void OPS_FN(batchnorm_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                                const real *w, const real *mean, const real *rstd, int n, int c)
{
    OPS_FN(batchnorm_backward_mt)(dx, dw, db, dy, x, w, mean, rstd, n, c, 1);
}

void OPS_FN(batchnorm_stats)(real *out, const real *x, const real *dy, const real *mean, int n, int c)
{
    for (int c0 = 0; c0 < c; c0 += BN_CBLOCK) {
        int cn = c - c0 < BN_CBLOCK ? c - c0 : BN_CBLOCK;
        double s[BN_CBLOCK] = {0}, q[BN_CBLOCK] = {0};
        for (int r = 0; r < n; r++) {
            const real *xr = x + (size_t)r * c + c0;
            if (dy) {
                const real *gr = dy + (size_t)r * c + c0;
                for (int i = 0; i < cn; i++) {
                    s[i] += (double)gr[i];
                    q[i] += ((double)xr[i] - (double)mean[c0 + i]) * (double)gr[i];
                }
            } else if (mean) {
                for (int i = 0; i < cn; i++) {
                    double dv = (double)xr[i] - (double)mean[c0 + i];
                    s[i] += dv * dv;
                }
            } else {
                for (int i = 0; i < cn; i++) s[i] += (double)xr[i];
            }
        }
        for (int i = 0; i < cn; i++) {
            out[c0 + i] = (real)s[i];
            if (dy) out[c + c0 + i] = (real)q[i];
        }
    }
}

void OPS_FN(batchnorm_backward_global)(real *dx, real *dw, real *db, const real *dy, const real *x, const real *w,
                                       const real *mean, const real *rstd, const real *l, const real *g, double count,
                                       int n, int c)
{
    for (int c0 = 0; c0 < c; c0 += BN_CBLOCK) {
        int cn = c - c0 < BN_CBLOCK ? c - c0 : BN_CBLOCK;
        real gm[BN_CBLOCK], kk[BN_CBLOCK], rw[BN_CBLOCK];
        for (int i = 0; i < cn; i++) {
            double rs = (double)rstd[c0 + i];
            gm[i] = (real)((double)g[c0 + i] / count);
            kk[i] = (real)((double)g[c + c0 + i] * rs * rs / count);
            rw[i] = rstd[c0 + i] * w[c0 + i];
            dw[c0 + i] += (real)((double)l[c + c0 + i] * rs);
            db[c0 + i] += l[c0 + i];
        }
        for (int r = 0; r < n; r++) {
            const real *xr = x + (size_t)r * c + c0, *gr = dy + (size_t)r * c + c0;
            real *dxr = dx + (size_t)r * c + c0;
#pragma omp simd
            for (int i = 0; i < cn; i++) dxr[i] = KM(bn_dx)(gr[i], xr[i] - mean[c0 + i], gm[i], kk[i], rw[i]);
        }
    }
}
