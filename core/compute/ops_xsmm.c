#include "core/compute/ops_xsmm.h"

#include <pthread.h>
#include <stdlib.h>

#include <libxsmm.h>

#include "core/base/log.h"

/* Blocking (measured on a Zen 4 core, README, Benchmarks): one kernel call computes COLS columns x
 * ROWS rows of C over at most DEPTH of k, so its B block (DEPTH x COLS, 64 KB) stays in L2 and its A
 * rows (ROWS x DEPTH, 7 KB; with A transposed DEPTH pieces of ROWS floats, at most 32 KB of lines) in
 * L1; calls walk a ROW_BLOCK of rows per PANEL of columns, so the A rows are reused across the panel
 * and the panel's B (256 KB) across the row block. */
enum {
    COLS = 64,       /* four AVX-512 registers of C per row */
    ROWS = 7,        /* 28 accumulators of the 32 registers */
    DEPTH = 256,     /* k per call; longer sums continue through C */
    PANEL = 256,     /* columns of C per panel */
    ROW_BLOCK = 56,  /* rows of C per block */
    MAX_COLS = 512,  /* wider C: a panel per 4 KB row stride aliases in L1, OpenBLAS is faster */
    MIN_DEPTH = 128, /* shorter sums (the attention's per-head products): OpenBLAS' small kernels */
    MIN_ROWS = 16,
};

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int cpu_takes; /* libxsmm generates AVX-512 code on this CPU */
static int enabled = 1;

static void probe(void)
{
    libxsmm_init();
    cpu_takes = libxsmm_get_target_archid() >= LIBXSMM_X86_AVX512_CORE;
}

void ops_xsmm_enable(int on)
{
    __atomic_store_n(&enabled, on, __ATOMIC_RELAXED);
}

int ops_xsmm_enabled(void)
{
    pthread_once(&probe_once, probe);
    return __atomic_load_n(&enabled, __ATOMIC_RELAXED) && cpu_takes;
}

/* Per-thread scratch for transposed operands; grows, never shrinks (the pool's threads live as long
 * as the process). */
static _Thread_local float *scratch;
static _Thread_local size_t scratch_len;

static float *scratch_for(size_t n)
{
    if (n > scratch_len) {
        free(scratch);
        scratch = xmalloc(n * sizeof *scratch);
        scratch_len = n;
    }
    return scratch;
}

/* The column-major kernel C'(mb x nb) = A'(mb x kb) B'(kb x nb) + beta C' that is a row-major
 * C[nb rows][mb columns] block = A[nb][kb] B[kb][mb]: A' is B's block, B' is A's rows. With A
 * transposed (a_trans: A is stored kb x nb, its columns are C's rows) B' is read transposed: its
 * column for a row of C is a column of A, the nb values of one k side by side. */
static libxsmm_smmfunction kernel(int mb, int nb, int kb, int ldb, int lda, int ldc, float beta, int a_trans)
{
    float one = 1.0f;
    int flags = LIBXSMM_GEMM_FLAGS('N', a_trans ? 'T' : 'N'), prefetch = LIBXSMM_GEMM_PREFETCH_NONE;
    libxsmm_blasint la = ldb, lb = lda, lc = ldc;
    return libxsmm_smmdispatch(mb, nb, kb, &la, &lb, &lc, &one, &beta, &flags, &prefetch);
}

/* The block of k that starts at p0: the first (its beta is the caller's), a middle one, or the
 * last of several (both continuing the sums in C). */
static int depth_kind(int p0, int k)
{
    return p0 == 0 ? 0 : p0 + DEPTH >= k ? 2 : 1;
}

/* C = op(A) B + beta C, A (m x k, row stride lda; k x m when a_trans), B (k x n, ldb), through the
 * kernels; 0 when one of them cannot be generated (then before anything is written: all are fetched
 * first). */
static int gemm_blocks(int a_trans, int m, int n, int k, const float *a, int lda, const float *b, int ldb, float beta,
                       float *c, int ldc)
{
    /* kernels by [kind of k block][narrow last column block][short last row block] */
    libxsmm_smmfunction kern[3][2][2] = {{{0}}};
    int narrow_cols = n % COLS, short_rows = m % ROWS;
    for (int p0 = 0; p0 < k; p0 += DEPTH) {
        int kind = depth_kind(p0, k), kb = k - p0 < DEPTH ? k - p0 : DEPTH;
        if (kern[kind][0][0] || kern[kind][1][1] || kern[kind][0][1] || kern[kind][1][0]) continue;
        for (int narrow = 0; narrow < 2; narrow++)
            for (int shrt = 0; shrt < 2; shrt++) {
                int mb = narrow ? narrow_cols : COLS, nb = shrt ? short_rows : ROWS;
                if (mb == 0 || nb == 0 || (!narrow && n < COLS) || (!shrt && m < ROWS)) continue;
                kern[kind][narrow][shrt] = kernel(mb, nb, kb, ldb, lda, ldc, kind ? 1.0f : beta, a_trans);
                if (!kern[kind][narrow][shrt]) return 0;
            }
    }
    for (int p0 = 0; p0 < k; p0 += DEPTH) {
        int kind = depth_kind(p0, k);
        for (int r0 = 0; r0 < m; r0 += ROW_BLOCK) {
            int r1 = r0 + ROW_BLOCK < m ? r0 + ROW_BLOCK : m;
            for (int j0 = 0; j0 < n; j0 += PANEL) {
                int j1 = j0 + PANEL < n ? j0 + PANEL : n;
                for (int i = r0; i < r1; i += ROWS)
                    for (int j = j0; j < j1; j += COLS) {
                        libxsmm_smmfunction f = kern[kind][j1 - j < COLS][r1 - i < ROWS];
                        ESP_CHECK(f);
                        const float *ai = a_trans ? a + (size_t)p0 * lda + i : a + (size_t)i * lda + p0;
                        f(b + (size_t)p0 * ldb + j, ai, c + (size_t)i * ldc + j);
                    }
            }
        }
    }
    return 1;
}

/* The transposes the kernels take: A B, A B^T (B transposed first) and A^T B (the weight gradients). */
static int transposes_taken(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb)
{
    return ta == CblasNoTrans || tb == CblasNoTrans;
}

int ops_xsmm_takes(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, float beta)
{
    return ops_xsmm_enabled() && transposes_taken(ta, tb) && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) &&
           n <= MAX_COLS && k >= MIN_DEPTH && m >= MIN_ROWS;
}

int ops_xsmm_sgemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a, int lda,
                   const float *b, int ldb, float beta, float *c, int ldc)
{
    ESP_CHECK(transposes_taken(ta, tb) && (beta == 0.0f || beta == 1.0f) && m > 0 && n > 0 && k > 0);
    if (tb == CblasTrans) { /* B is n x k: its transpose, k x n, is what the kernels read */
        float *bt = scratch_for((size_t)k * n);
        libxsmm_otrans(bt, b, sizeof *bt, k, n, ldb, n);
        b = bt, ldb = n;
    }
    if (gemm_blocks(ta == CblasTrans, m, n, k, a, lda, b, ldb, beta, c, ldc)) return 1;
    /* libxsmm could not generate a kernel (no executable memory?): OpenBLAS from now on */
    if (__atomic_exchange_n(&enabled, 0, __ATOMIC_RELAXED))
        log_warn("libxsmm could not generate a GEMM kernel (%d x %d x %d); using OpenBLAS for every product", m,
                 n, k);
    return 0;
}
