/* core/compute/ops_xsmm.h: libxsmm's GEMMs against OpenBLAS' over the edges of its blocking (k
 * around the 256 of one kernel call, C's columns around the 64 of a call and the 256 of a panel,
 * rows around the 7 of a call and the 56 of a block, C wider than 512 columns where B is packed),
 * padded strides, A or B transposed, beta 0 and 1;
 * the same bits however C is split into parts; and the shapes it leaves to OpenBLAS. On a CPU
 * without AVX-512 only the last holds (it takes nothing). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "core/compute/blas_core.h"
#include "core/compute/ops_xsmm.h"

static uint64_t gen_state = 42;

static float *rnd(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    cr_assert(p);
    for (size_t i = 0; i < n; i++) {
        gen_state = gen_state * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((gen_state >> 40) * (2.0 / 16777216.0) - 1.0);
    }
    return p;
}

/* One product both ways; C has ldc = n + pad, A and B their own padding. ta and tb: A (k x m) or B
 * (n x k) transposed, not both. */
static void check_shape(int m, int n, int k, int ta, int tb, float beta, int pad)
{
    int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
    size_t nc = (size_t)m * ldc;
    float *a = rnd((size_t)(ta ? k : m) * lda), *b = rnd((size_t)(tb ? n : k) * ldb), *c = rnd(nc);
    float *want = malloc(nc * sizeof *want);
    cr_assert(want);
    memcpy(want, c, nc * sizeof *c);
    if (beta == 0.0f) /* beta 0: C is written, never read */
        for (int i = 0; i < m; i++) c[(size_t)i * ldc] = NAN;
    enum CBLAS_TRANSPOSE at = ta ? CblasTrans : CblasNoTrans, t = tb ? CblasTrans : CblasNoTrans;
    cr_assert(ops_xsmm_takes(at, t, m, n, k, 1.0f, beta), "%dx%dx%d not taken", m, n, k);
    cr_assert(ops_xsmm_sgemm(at, t, m, n, k, a, lda, b, ldb, beta, c, ldc));
    cblas_sgemm(CblasRowMajor, at, t, m, n, k, 1.0f, a, lda, b, ldb, beta, want, ldc);
    float tol = 1e-6f * (float)k;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            float got = c[(size_t)i * ldc + j], w = want[(size_t)i * ldc + j];
            if (j >= n) { /* the padding is left alone */
                cr_assert(memcmp(&got, &w, sizeof got) == 0, "%dx%dx%d: padding at row %d col %d written", m, n,
                          k, i, j);
                continue;
            }
            cr_assert(fabsf(got - w) <= tol, "%dx%dx%d ta %d tb %d beta %g pad %d: C[%d][%d] %g, OpenBLAS %g", m,
                      n, k, ta, tb, beta, pad, i, j, got, w);
        }
    free(a), free(b), free(c), free(want);
}

Test(ops_xsmm, matches_openblas_at_the_block_edges)
{
    if (!ops_xsmm_available()) cr_skip_test("libxsmm's GEMMs cannot run on this CPU (no AVX-512)");
    ops_xsmm_enable(1); /* the kernels, also where OpenBLAS' AVX-512 ones run the products by default */
    static const int ms[] = {16, 20, 56, 57, 119}, ns[] = {17, 30, 64, 65, 80, 81, 256, 257, 320, 336, 512, 600, 1024},
                     ks[] = {128, 255, 256, 257, 512, 700};
    int count = 0;
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++, count++) /* A as is, B transposed, A transposed */
                check_shape(ms[mi], ns[ni], ks[ki], count % 3 == 2, count % 3 == 1, (count / 3) % 2 ? 1.0f : 0.0f,
                            (count / 6) % 3 == 2 ? 5 : 0);
}

/* Each element of C is one chain of fused multiply-adds over k in order, from beta C (what makes
 * its bits independent of the split): against fmaf's chain for every width of the last column
 * block (1 to 64 left after the full blocks: those of 1 to 16 run as 48 + (16 + r)), every count of
 * rows in the last row block, k over one kernel call and over several, A or B transposed. */
Test(ops_xsmm, every_element_is_one_fma_chain)
{
    if (!ops_xsmm_available()) cr_skip_test("libxsmm's GEMMs cannot run on this CPU (no AVX-512)");
    ops_xsmm_enable(1); /* the kernels, also where OpenBLAS' AVX-512 ones run the products by default */
    static const int ks[] = {128, 300};
    for (int n = 17; n <= 64 + 64; n++)
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
            int m = 16 + n % 7, k = ks[ki], tr = n % 3, ta = tr == 2, tb = tr == 1, lda = ta ? m : k, ldb = tb ? k : n;
            float beta = n % 2 ? 1.0f : 0.0f;
            float *a = rnd((size_t)m * k), *b = rnd((size_t)k * n), *c = rnd((size_t)m * n);
            float *want = malloc((size_t)m * n * sizeof *want);
            cr_assert(want);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < n; j++) {
                    float acc = beta == 0.0f ? 0.0f : c[(size_t)i * n + j];
                    for (int p = 0; p < k; p++)
                        acc = fmaf(ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p],
                                   tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j], acc);
                    want[(size_t)i * n + j] = acc;
                }
            enum CBLAS_TRANSPOSE at = ta ? CblasTrans : CblasNoTrans, t = tb ? CblasTrans : CblasNoTrans;
            cr_assert(ops_xsmm_sgemm(at, t, m, n, k, a, lda, b, ldb, beta, c, n));
            size_t bad = 0;
            while (bad < (size_t)m * n && memcmp(&c[bad], &want[bad], sizeof *c) == 0) bad++;
            cr_expect(bad == (size_t)m * n, "%dx%dx%d ta %d tb %d: C[%zu][%zu] %.9g, the fma chain %.9g", m, n, k, ta,
                      tb, bad / (size_t)n, bad % (size_t)n, bad < (size_t)m * n ? c[bad] : 0.0,
                      bad < (size_t)m * n ? want[bad] : 0.0);
            free(a), free(b), free(c), free(want);
        }
}

/* C computed in parts (by rows, then by columns at column block starts, as core/compute/ops_sgemm.c
 * splits it) has the bits of C computed whole. */
Test(ops_xsmm, parts_give_the_bits_of_the_whole)
{
    if (!ops_xsmm_available()) cr_skip_test("libxsmm's GEMMs cannot run on this CPU (no AVX-512)");
    ops_xsmm_enable(1); /* the kernels, also where OpenBLAS' AVX-512 ones run the products by default */
    for (int wide = 0; wide < 2; wide++) /* C read in place, and wider than 512 (B packed) */
        for (int tr = 0; tr < 3; tr++) /* A B, A B^T, A^T B */
            for (int beta = 0; beta < 2; beta++) {
                const int M = 150, N = wide ? 720 : 336, K = 600; /* last blocks 16 wide */
                int ta = tr == 2, tb = tr == 1, lda = ta ? M : K;
                enum CBLAS_TRANSPOSE at = ta ? CblasTrans : CblasNoTrans, t = tb ? CblasTrans : CblasNoTrans;
                float *a = rnd((size_t)M * K), *b = rnd((size_t)K * N), *whole = rnd((size_t)M * N);
                float *rows = malloc((size_t)M * N * sizeof *rows), *cols = malloc((size_t)M * N * sizeof *cols);
                cr_assert(rows && cols);
                memcpy(rows, whole, (size_t)M * N * sizeof *rows);
                memcpy(cols, whole, (size_t)M * N * sizeof *cols);
                int ldb = tb ? K : N;
                cr_assert(ops_xsmm_sgemm(at, t, M, N, K, a, lda, b, ldb, (float)beta, whole, N));
                const int row_cuts[] = {0, 16, 23, 80, M};
                const int col_cuts[] = {0, ops_xsmm_col_start(N, 1), ops_xsmm_col_start(N, 2),
                                        ops_xsmm_col_start(N, ops_xsmm_col_blocks(N) - 1), N}; /* the last: 32 wide */
                for (int p = 0; p < 4; p++) {
                    int r0 = row_cuts[p], r1 = row_cuts[p + 1], c0 = col_cuts[p], c1 = col_cuts[p + 1];
                    const float *ap = ta ? a + r0 : a + (size_t)r0 * K, *bp = tb ? b + (size_t)c0 * K : b + c0;
                    cr_assert(ops_xsmm_sgemm(at, t, r1 - r0, N, K, ap, lda, b, ldb, (float)beta, rows + (size_t)r0 * N,
                                             N));
                    cr_assert(ops_xsmm_sgemm(at, t, M, c1 - c0, K, a, lda, bp, ldb, (float)beta, cols + c0, N));
                }
                size_t bytes = (size_t)M * N * sizeof *whole;
                cr_expect(memcmp(rows, whole, bytes) == 0, "n %d ta %d tb %d beta %d: split by rows differs", N, ta, tb,
                          beta);
                cr_expect(memcmp(cols, whole, bytes) == 0, "n %d ta %d tb %d beta %d: split by columns differs", N, ta,
                          tb, beta);
                free(a), free(b), free(whole), free(rows), free(cols);
            }
}

/* What stays with OpenBLAS: A and B both transposed, alpha other than 1, beta other than 0 and 1, C = A^T B
 * wider than 1024 columns, C of 16 columns or fewer, k under 128 (the attention's per-head products),
 * fewer than 16 rows; and everything when switched off. */
Test(ops_xsmm, leaves_the_other_shapes_to_openblas)
{
    int on = ops_xsmm_enabled();
    cr_expect(ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 256, 256, 1.0f, 0.0f) == on);
    cr_expect(ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 512, 1024, 1.0f, 1.0f) == on);
    cr_expect(ops_xsmm_takes(CblasNoTrans, CblasTrans, 1584, 256, 256, 1.0f, 0.0f) == on);
    cr_expect(ops_xsmm_takes(CblasTrans, CblasNoTrans, 256, 256, 1584, 1.0f, 1.0f) == on); /* a weight gradient */
    cr_expect(!ops_xsmm_takes(CblasTrans, CblasTrans, 1584, 256, 256, 1.0f, 0.0f));
    cr_expect(!ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 256, 256, 0.5f, 0.0f));
    cr_expect(!ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 256, 256, 1.0f, 0.5f));
    cr_expect(ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 4864, 256, 1.0f, 0.0f) == on); /* B packed */
    cr_expect(ops_xsmm_takes(CblasNoTrans, CblasTrans, 1584, 1024, 256, 1.0f, 1.0f) == on);
    cr_expect(ops_xsmm_takes(CblasTrans, CblasNoTrans, 256, 1024, 1584, 1.0f, 1.0f) == on);
    cr_expect(!ops_xsmm_takes(CblasTrans, CblasNoTrans, 256, 4864, 1584, 1.0f, 1.0f));
    cr_expect(!ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 16, 256, 1.0f, 0.0f));
    cr_expect(ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 17, 256, 1.0f, 0.0f) == on);
    cr_expect(!ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 99, 99, 64, 1.0f, 0.0f));
    cr_expect(!ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 15, 256, 256, 1.0f, 0.0f));
    ops_xsmm_enable(0);
    cr_expect(!ops_xsmm_enabled());
    cr_expect(!ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 256, 256, 1.0f, 0.0f));
    ops_xsmm_enable(1);
    cr_expect(ops_xsmm_enabled() == ops_xsmm_available());
    cr_expect(ops_xsmm_takes(CblasNoTrans, CblasNoTrans, 1584, 256, 256, 1.0f, 0.0f) == ops_xsmm_available());
}

/* On by default where it can run, unless OpenBLAS runs its own AVX-512 kernels. */
Test(ops_xsmm, on_by_default_unless_openblas_runs_avx512_kernels)
{
    cr_expect(ops_xsmm_enabled() == (ops_xsmm_available() && !blas_core_avx512()), "libxsmm %s with OpenBLAS' %s",
              ops_xsmm_enabled() ? "on" : "off", blas_core_name());
}
