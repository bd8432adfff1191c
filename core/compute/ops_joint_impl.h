/* The transducer joint network's activation (documented in core/compute/ops_decl.h), instantiated by
 * core/compute/ops_f32.c and core/compute/ops_f64.c after core/compute/ops_act_impl.h; not a header
 * to include elsewhere. The forward's rows are the chunk's nodes (b, t): U1 x J outputs each; the
 * backward's encoder rows (b, t) sum over u and its decoder rows (b, u) over t, each in a fixed
 * order, so a split over rows gives the same bits on any thread count. tanh comes a block at a time
 * from VTANH, as the LSTM cell's. */

typedef struct OPS_FN(joint_job) {
    real *z, *denc, *ddec;
    const real *enc, *dec, *dz, *zc;
    int T, t0, tc, U1, J;
} OPS_FN(joint_job);

/* Rows [lo, hi) of (b, t) of the chunk: z = tanh(enc[b, t0 + t] + dec[b, u]) for every u. */
static void OPS_FN(joint_fwd_part)(void *ctx, size_t lo, size_t hi, int slot)
{
    (void)slot;
    const OPS_FN(joint_job) *j = ctx;
    const size_t J = (size_t)j->J, U1 = (size_t)j->U1;
    for (size_t r = lo; r < hi; r++) {
        size_t b = r / (size_t)j->tc, t = r % (size_t)j->tc;
        const real *e = j->enc + (b * (size_t)j->T + (size_t)j->t0 + t) * J;
        for (size_t u = 0; u < U1; u++) {
            const real *d = j->dec + (b * U1 + u) * J;
            real *z = j->z + (r * U1 + u) * J;
            for (size_t k = 0; k < J; k++) z[k] = e[k] + d[k];
            for (size_t o = 0; o < J; o += ACT_BLOCK) {
                size_t n = OPS_FN(act_block)(J, o);
                VTANH(z + o, z + o, n);
            }
        }
    }
}

/* The encoder's rows (b, t) of the chunk: denc[b, t0 + t] += sum_u dz (1 - z^2). */
static void OPS_FN(joint_enc_part)(void *ctx, size_t lo, size_t hi, int slot)
{
    (void)slot;
    const OPS_FN(joint_job) *j = ctx;
    const size_t J = (size_t)j->J, U1 = (size_t)j->U1;
    for (size_t r = lo; r < hi; r++) {
        size_t b = r / (size_t)j->tc, t = r % (size_t)j->tc;
        real *de = j->denc + (b * (size_t)j->T + (size_t)j->t0 + t) * J;
        for (size_t u = 0; u < U1; u++) {
            const real *z = j->zc + (r * U1 + u) * J, *g = j->dz + (r * U1 + u) * J;
            for (size_t k = 0; k < J; k++) de[k] += g[k] * (1 - z[k] * z[k]);
        }
    }
}

/* The decoder's rows (b, u): ddec[b, u] += sum_t dz (1 - z^2) over the chunk's frames. */
static void OPS_FN(joint_dec_part)(void *ctx, size_t lo, size_t hi, int slot)
{
    (void)slot;
    const OPS_FN(joint_job) *j = ctx;
    const size_t J = (size_t)j->J, U1 = (size_t)j->U1, tc = (size_t)j->tc;
    for (size_t r = lo; r < hi; r++) {
        size_t b = r / U1, u = r % U1;
        real *dd = j->ddec + r * J;
        for (size_t t = 0; t < tc; t++) {
            size_t at = ((b * tc + t) * U1 + u) * J;
            const real *z = j->zc + at, *g = j->dz + at;
            for (size_t k = 0; k < J; k++) dd[k] += g[k] * (1 - z[k] * z[k]);
        }
    }
}

void OPS_FN(joint_tanh_forward)(real *z, const real *enc, const real *dec, int B, int T, int t0, int tc, int U1,
                                int J, int threads)
{
    if (B <= 0 || tc <= 0 || U1 <= 0 || J <= 0) return;
    OPS_FN(joint_job) j = {.z = z, .enc = enc, .dec = dec, .T = T, .t0 = t0, .tc = tc, .U1 = U1, .J = J};
    parallel_parts((size_t)B * tc, 1 + OPS_MT_MIN_ELEMS / ((size_t)U1 * J), threads, OPS_FN(joint_fwd_part), &j);
}

void OPS_FN(joint_tanh_backward)(real *denc, real *ddec, const real *dz, const real *z, int B, int T, int t0, int tc,
                                 int U1, int J, int threads)
{
    if (B <= 0 || tc <= 0 || U1 <= 0 || J <= 0) return;
    OPS_FN(joint_job) j = {.denc = denc, .ddec = ddec, .dz = dz, .zc = z, .T = T, .t0 = t0, .tc = tc, .U1 = U1,
                           .J = J};
    parallel_parts((size_t)B * tc, 1 + OPS_MT_MIN_ELEMS / ((size_t)U1 * J), threads, OPS_FN(joint_enc_part), &j);
    parallel_parts((size_t)B * U1, 1 + OPS_MT_MIN_ELEMS / ((size_t)tc * J), threads, OPS_FN(joint_dec_part), &j);
}
