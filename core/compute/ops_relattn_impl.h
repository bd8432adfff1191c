/* The relative positional encoding and the rel-pos multi-head attention of ESPnet's Conformer
 * (core/compute/ops_conformer_decl.h), instantiated by core/compute/ops_f32.c and
 * core/compute/ops_f64.c after core/compute/ops_impl.h (GEMM, dropout_apply). Per utterance and
 * head, the position term is one GEMM against all 2t - 1 relative positions, read back through
 * rel_shift's index (relpos_shift_col); its gradient is scattered the same way and goes back
 * through two GEMMs. Without u / vb (simplified_att_score) the position term is p's scalar of
 * the head, read through the same index, and its gradient the scattered scores summed. */

void OPS_FN(relpos_encoding)(real *pe, int t, int d)
{
    ESP_CHECK(d % 2 == 0);
    for (int r = 0; r < 2 * t - 1; r++)
        for (int i = 0; i < d / 2; i++) {
            real a = KM(relpos_angle)(t - 1 - r, i, d);
            pe[(size_t)r * d + 2 * i] = sin(a);
            pe[(size_t)r * d + 2 * i + 1] = cos(a);
        }
}

/* qu = Q + u and qv = Q + vb for one head (t x hd, contiguous). */
OPS_CLONE_INLINE void relattn_biased_queries(real *qu, real *qv, const real *q, int ld, const real *u,
                                             const real *vb, int t, int hd)
{
    for (int i = 0; i < t; i++)
        for (int e = 0; e < hd; e++) {
            real x = q[(size_t)i * ld + e];
            qu[(size_t)i * hd + e] = x + u[e];
            qv[(size_t)i * hd + e] = x + vb[e];
        }
}

typedef struct OPS_FN(relattn_job) {
    real *y, *att, *dq, *dk, *dv, *dp, *du, *dvb, *scratch;
    const real *q, *k, *v, *p, *u, *vb, *dy, *catt;
    const int *lens;
    size_t scratch_n;
    int ld, nb, t, h, hd, chunk, left;
    float pdrop;
    uint64_t seed, stream;
} OPS_FN(relattn_job);

/* relattn_forward of pairs (utterance b, head j) = lo .. hi - 1 as b * h + j. */
OPS_SIMD_CLONES
static void OPS_FN(relattn_forward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    const OPS_FN(relattn_job) *jb = ctx;
    int t = jb->t, h = jb->h, hd = jb->hd, ld = jb->ld, d = h * hd, tp = 2 * t - 1;
    float pdrop = jb->pdrop;
    real sq = (real)sqrt((double)hd);
    real *qu = jb->scratch + (size_t)part * jb->scratch_n, *qv = qu + (size_t)t * hd, *bd = qv + (size_t)t * hd,
         *drop = bd + (size_t)t * tp;
    for (size_t bj = lo; bj < hi; bj++) {
        int b = (int)(bj / (size_t)h), j = (int)(bj % (size_t)h);
        int len = jb->lens[b];
        size_t in_off = (size_t)b * t * ld + (size_t)j * hd;
        const real *qb = jb->q + in_off, *kb = jb->k + in_off, *vbb = jb->v + in_off;
        real *a = jb->att + ((size_t)b * h + j) * t * t;
        real *yb = jb->y + (size_t)b * t * d + (size_t)j * hd;
        if (len == 0) {
            memset(a, 0, (size_t)t * t * sizeof(real));
            for (int i = 0; i < t; i++) memset(yb + (size_t)i * d, 0, (size_t)hd * sizeof(real));
            continue;
        }
        /* matrix_bd: (Q + vb) P^T per row, or (simplified) the head's column of p at stride h */
        const real *br = jb->p + j;
        size_t bs = (size_t)h, brow = 0;
        if (jb->u) {
            relattn_biased_queries(qu, qv, qb, ld, jb->u + (size_t)j * hd, jb->vb + (size_t)j * hd, t, hd);
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, t, len, hd, 1, qu, hd, kb, ld, 0, a, t); /* matrix_ac */
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, t, tp, hd, 1, qv, hd, jb->p + (size_t)j * hd, d, 0, bd, tp);
            br = bd, bs = 1, brow = (size_t)tp;
        } else {
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, t, len, hd, 1, qb, ld, kb, ld, 0, a, t);
        }
        for (int i = 0; i < t; i++) {
            real *ar = a + (size_t)i * t, mx = 0;
            const real *bi = br + (size_t)i * brow;
            int lo, hi; /* the keys the chunk mask leaves row i, up to len (none: a row of zeros) */
            attn_chunk_keys(i, jb->chunk, jb->left, len, &lo, &hi);
            for (int c = lo; c < hi; c++) {
                ar[c] = (ar[c] + bi[(size_t)relpos_shift_col(i, c, t) * bs]) / sq;
                mx = c == lo || ar[c] > mx ? ar[c] : mx;
            }
            for (int c = 0; c < lo; c++) ar[c] = 0;
            if (hi > lo) attn_softmax_row(ar + lo, hi - lo, t - lo, mx);
            else memset(ar + lo, 0, (size_t)(t - lo) * sizeof(real));
        }
        const real *pa =
            attn_dropped(drop, a, (size_t)t * t, ((size_t)b * h + j) * t * t, pdrop, jb->seed, jb->stream);
        GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hd, len, 1, pa, t, vbb, ld, 0, yb, d);
    }
}

void OPS_FN(relattn_forward_mt)(real *y, real *att, const real *q, const real *k, const real *v, int ld,
                                const real *p, const real *u, const real *vb, const int *lens, int nb, int t,
                                int h, int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream, real *scratch,
                                int threads)
{
    for (int b = 0; b < nb; b++) ESP_CHECK(lens[b] >= 0 && lens[b] <= t);
    OPS_FN(relattn_job) jb = {.y = y, .att = att, .scratch = scratch, .q = q, .k = k, .v = v, .p = p, .u = u,
                              .vb = vb, .lens = lens, .scratch_n = ops_relattn_forward_scratch(t, hd, pdrop),
                              .ld = ld, .nb = nb, .t = t, .h = h, .hd = hd, .chunk = chunk, .left = left,
                              .pdrop = pdrop, .seed = seed, .stream = stream};
    parallel_parts((size_t)nb * h, 1, threads, OPS_FN(relattn_forward_part), &jb);
}

void OPS_FN(relattn_forward)(real *y, real *att, const real *q, const real *k, const real *v, int ld,
                             const real *p, const real *u, const real *vb, const int *lens, int nb, int t,
                             int h, int hd, int chunk, int left, float pdrop, uint64_t seed, uint64_t stream, real *scratch)
{
    OPS_FN(relattn_forward_mt)(y, att, q, k, v, ld, p, u, vb, lens, nb, t, h, hd, chunk, left, pdrop, seed, stream, scratch, 1);
}

/* relattn_backward of heads lo .. hi - 1, utterances in order (dp, du and dvb of a head sum over
 * the utterances). */
OPS_SIMD_CLONES
static void OPS_FN(relattn_backward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    /* With S' = dS / sqrt(hd): dQ = S' K + B' P, dK = S'^T (Q + u), du = sum_i (S' K)_i,
     * dvb = sum_i (B' P)_i, dP += B'^T (Q + vb), where B' is S' scattered to rel_shift's columns. */
    const OPS_FN(relattn_job) *jb = ctx;
    int t = jb->t, h = jb->h, hd = jb->hd, ld = jb->ld, d = h * hd, tp = 2 * t - 1;
    float pdrop = jb->pdrop;
    real sc = (real)(1.0 / sqrt((double)hd));
    real *qu = jb->scratch + (size_t)part * jb->scratch_n, *qv = qu + (size_t)t * hd, *dqv = qv + (size_t)t * hd,
         *dpa = dqv + (size_t)t * hd;
    real *pd = dpa + (size_t)t * t, *dbd = pd + (size_t)t * t;
    const real *p = jb->p;
    for (int b = 0; b < jb->nb; b++) {
        int len = jb->lens[b];
        for (int j = (int)lo; j < (int)hi; j++) {
            size_t in_off = (size_t)b * t * ld + (size_t)j * hd;
            const real *qb = jb->q + in_off, *kb = jb->k + in_off, *vbb = jb->v + in_off;
            real *dqb = jb->dq + in_off, *dkb = jb->dk + in_off, *dvbb = jb->dv + in_off;
            const real *a = jb->catt + ((size_t)b * h + j) * t * t;
            const real *dyb = jb->dy + (size_t)b * t * d + (size_t)j * hd;
            for (int i = len; i < t; i++) {
                memset(dkb + (size_t)i * ld, 0, (size_t)hd * sizeof(real));
                memset(dvbb + (size_t)i * ld, 0, (size_t)hd * sizeof(real));
            }
            if (len == 0) {
                for (int i = 0; i < t; i++) memset(dqb + (size_t)i * ld, 0, (size_t)hd * sizeof(real));
                continue;
            }
            size_t base = ((size_t)b * h + j) * t * t;
            const real *pa = attn_dropped(pd, a, (size_t)t * t, base, pdrop, jb->seed, jb->stream);
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, len, hd, t, 1, pa, t, dyb, d, 0, dvbb, ld);
            GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, t, len, hd, 1, dyb, d, vbb, ld, 0, dpa, t);
            attn_score_grad(dpa, a, t, t, len, base, pdrop, jb->seed, jb->stream);
            if (!jb->u) { /* simplified: dQ = S' K, dK = S'^T Q, dP[:, j] += S' summed into its columns */
                GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hd, len, sc, dpa, t, kb, ld, 0, dqb, ld);
                GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, len, hd, t, sc, dpa, t, qb, ld, 0, dkb, ld);
                for (int i = 0; i < t; i++)
                    for (int c = 0; c < len; c++)
                        jb->dp[(size_t)relpos_shift_col(i, c, t) * h + j] += sc * dpa[(size_t)i * t + c];
                continue;
            }
            relattn_biased_queries(qu, qv, qb, ld, jb->u + (size_t)j * hd, jb->vb + (size_t)j * hd, t, hd);
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hd, len, sc, dpa, t, kb, ld, 0, dqb, ld);
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, len, hd, t, sc, dpa, t, qu, hd, 0, dkb, ld);
            memset(dbd, 0, (size_t)t * tp * sizeof(real));
            for (int i = 0; i < t; i++)
                for (int c = 0; c < len; c++) dbd[(size_t)i * tp + relpos_shift_col(i, c, t)] = dpa[(size_t)i * t + c];
            GEMM(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, hd, tp, sc, dbd, tp, p + (size_t)j * hd, d, 0, dqv, hd);
            GEMM(CblasRowMajor, CblasTrans, CblasNoTrans, tp, hd, t, sc, dbd, tp, qv, hd, 1, jb->dp + (size_t)j * hd, d);
            real *duj = jb->du + (size_t)j * hd, *dvj = jb->dvb + (size_t)j * hd;
            for (int i = 0; i < t; i++)
                for (int e = 0; e < hd; e++) {
                    real gq = dqb[(size_t)i * ld + e], gv = dqv[(size_t)i * hd + e];
                    duj[e] += gq;
                    dvj[e] += gv;
                    dqb[(size_t)i * ld + e] = gq + gv;
                }
        }
    }
}

void OPS_FN(relattn_backward_mt)(real *dq, real *dk, real *dv, real *dp, real *du, real *dvb, const real *dy,
                                 const real *att, const real *q, const real *k, const real *v, int ld, const real *p,
                                 const real *u, const real *vb, const int *lens, int nb, int t, int h, int hd, int chunk, int left,
                                 float pdrop, uint64_t seed, uint64_t stream, real *scratch, int threads)
{
    int d = h * hd, tp = 2 * t - 1;
    (void)chunk, (void)left; /* the forward's zeros in att mask the chunk's keys here */
    for (int b = 0; b < nb; b++) ESP_CHECK(lens[b] >= 0 && lens[b] <= t);
    memset(dp, 0, (size_t)tp * (u ? d : h) * sizeof(real));
    OPS_FN(relattn_job) jb = {.dq = dq, .dk = dk, .dv = dv, .dp = dp, .du = du, .dvb = dvb, .scratch = scratch,
                              .q = q, .k = k, .v = v, .p = p, .u = u, .vb = vb, .dy = dy, .catt = att,
                              .lens = lens, .scratch_n = ops_relattn_backward_scratch(t, hd), .ld = ld, .nb = nb,
                              .t = t, .h = h, .hd = hd, .pdrop = pdrop, .seed = seed, .stream = stream};
    parallel_parts((size_t)h, 1, threads, OPS_FN(relattn_backward_part), &jb);
}

void OPS_FN(relattn_backward)(real *dq, real *dk, real *dv, real *dp, real *du, real *dvb, const real *dy,
                              const real *att, const real *q, const real *k, const real *v, int ld, const real *p,
                              const real *u, const real *vb, const int *lens, int nb, int t, int h, int hd, int chunk, int left,
                              float pdrop, uint64_t seed, uint64_t stream, real *scratch)
{
    OPS_FN(relattn_backward_mt)(dq, dk, dv, dp, du, dvb, dy, att, q, k, v, ld, p, u, vb, lens, nb, t, h, hd, chunk, left, pdrop,
                                seed, stream, scratch, 1);
}
