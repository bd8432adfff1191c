#include "core/compute/ops_xsmm.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <libxsmm.h>

#include "core/base/log.h"
#include "core/compute/blas_core.h"

/* Blocking (measured on a Zen 4 core, docs/notes/2026-11-cpu-step-rounds.md): one kernel call computes COLS columns x
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
    MAX_COLS = 512,  /* wider C with B read in place: B's rows 2-4 KB apart alias in L1; B is packed */
    MAX_COLS_AT = 1024, /* wider A^T B (B in place; packing it costs more than it gains): OpenBLAS */
    MIN_DEPTH = 128, /* shorter sums (the attention's per-head products): OpenBLAS' small kernels */
    MIN_ROWS = 16,
    NARROW_MAX = 16, /* kernels this narrow (one vector) split their sums over k: never run */
};

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int cpu_takes;          /* libxsmm generates AVX-512 code on this CPU */
static int by_default;         /* ... and OpenBLAS runs AVX2 kernels there: libxsmm's are faster */
static int enabled = -1;       /* -1: by_default; else ops_xsmm_enable's */

static void probe(void)
{
    libxsmm_init();
    cpu_takes = libxsmm_get_target_archid() >= LIBXSMM_X86_AVX512_CORE;
    /* Where OpenBLAS runs its own AVX-512 kernels they beat these on the step's main shapes
     * (Emerald Rapids, one thread: 105-151 GFLOP/s against 70-93; the step 10-14% faster); where it
     * runs AVX2 kernels on an AVX-512 CPU (0.3.21's Zen kernels on Zen 4) these win (ops_xsmm.h). */
    by_default = cpu_takes && !blas_core_avx512();
}

void ops_xsmm_enable(int on)
{
    __atomic_store_n(&enabled, on ? 1 : 0, __ATOMIC_RELAXED);
}

int ops_xsmm_available(void)
{
    pthread_once(&probe_once, probe);
    return cpu_takes;
}

int ops_xsmm_enabled(void)
{
    pthread_once(&probe_once, probe);
    int on = __atomic_load_n(&enabled, __ATOMIC_RELAXED);
    return (on < 0 ? by_default : on) && cpu_takes;
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

int ops_xsmm_col_blocks(int n)
{
    return (n + COLS - 1) / COLS;
}

int ops_xsmm_col_start(int n, int blk)
{
    int q = n / COLS, r = n % COLS;
    if (blk >= ops_xsmm_col_blocks(n)) return n;
    if (blk == q && q > 0 && r <= NARROW_MAX) return q * COLS - NARROW_MAX; /* 1..16 left: 48 + (16 + r) */
    return blk * COLS;
}

/* B (k x n; n x k when transposed) in panels, one per column block of C, each k x (the block's
 * width) with row stride COLS, for products wider than MAX_COLS: a block's rows then lie side by
 * side instead of 4 KB apart, where they would evict each other from L1. */
static const float *panels(enum CBLAS_TRANSPOSE tb, int n, int k, const float *b, int ldb)
{
    int blocks = ops_xsmm_col_blocks(n);
    float *p = scratch_for((size_t)k * (size_t)blocks * COLS);
    for (int blk = 0; blk < blocks; blk++) {
        int j = ops_xsmm_col_start(n, blk), w = ops_xsmm_col_start(n, blk + 1) - j;
        float *pj = p + (size_t)blk * COLS * k;
        if (tb == CblasTrans)
            libxsmm_otrans(pj, b + (size_t)j * ldb, sizeof *pj, k, w, ldb, COLS);
        else
            for (int r = 0; r < k; r++) memcpy(pj + (size_t)r * COLS, b + (size_t)r * ldb + j, (size_t)w * sizeof *pj);
    }
    return p;
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

/* Which of a product's (at most three) column block widths block `blk` has: COLS, the next to last's,
 * the last's. */
static int width_kind(int n, int blk)
{
    int w = ops_xsmm_col_start(n, blk + 1) - ops_xsmm_col_start(n, blk);
    return w == COLS ? 0 : blk + 1 == ops_xsmm_col_blocks(n) ? 2 : 1;
}

/* C = op(A) B + beta C, A (m x k, row stride lda; k x m when a_trans), B (k x n, ldb; in panels when
 * `packed`, ldb COLS), through the kernels; 0 when one of them cannot be generated (then before
 * anything is written: all are fetched first). */
static int gemm_blocks(int a_trans, int m, int n, int k, const float *a, int lda, const float *b, int ldb, int packed,
                       float beta, float *c, int ldc)
{
    /* kernels by [kind of k block][width kind of the column block][short last row block] */
    libxsmm_smmfunction kern[3][3][2] = {{{0}}};
    int blocks = ops_xsmm_col_blocks(n), short_rows = m % ROWS;
    for (int p0 = 0; p0 < k; p0 += DEPTH) {
        int kind = depth_kind(p0, k), kb = k - p0 < DEPTH ? k - p0 : DEPTH;
        for (int blk = 0; blk < blocks; blk++) {
            int wk = width_kind(n, blk), mb = ops_xsmm_col_start(n, blk + 1) - ops_xsmm_col_start(n, blk);
            for (int shrt = 0; shrt < 2; shrt++) {
                int nb = shrt ? short_rows : ROWS;
                if (kern[kind][wk][shrt] || nb == 0 || (!shrt && m < ROWS)) continue;
                kern[kind][wk][shrt] = kernel(mb, nb, kb, ldb, lda, ldc, kind ? 1.0f : beta, a_trans);
                if (!kern[kind][wk][shrt]) return 0;
            }
        }
    }
    for (int p0 = 0; p0 < k; p0 += DEPTH) {
        int kind = depth_kind(p0, k);
        for (int r0 = 0; r0 < m; r0 += ROW_BLOCK) {
            int r1 = r0 + ROW_BLOCK < m ? r0 + ROW_BLOCK : m;
            for (int b0 = 0; b0 < blocks; b0 += PANEL / COLS) {
                int b1 = b0 + PANEL / COLS < blocks ? b0 + PANEL / COLS : blocks;
                for (int i = r0; i < r1; i += ROWS)
                    for (int blk = b0; blk < b1; blk++) {
                        libxsmm_smmfunction f = kern[kind][width_kind(n, blk)][r1 - i < ROWS];
                        ESP_CHECK(f);
                        int j = ops_xsmm_col_start(n, blk);
                        const float *ai = a_trans ? a + (size_t)p0 * lda + i : a + (size_t)i * lda + p0;
                        const float *bj = packed ? b + ((size_t)blk * k + (size_t)p0) * COLS : b + (size_t)p0 * ldb + j;
                        f(bj, ai, c + (size_t)i * ldc + j);
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
           n > NARROW_MAX && n <= (ta == CblasTrans ? MAX_COLS_AT : INT_MAX) && k >= MIN_DEPTH && m >= MIN_ROWS;
}

int ops_xsmm_sgemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int m, int n, int k, const float *a, int lda,
                   const float *b, int ldb, float beta, float *c, int ldc)
{
    ESP_CHECK(transposes_taken(ta, tb) && (beta == 0.0f || beta == 1.0f) && m > 0 && n > NARROW_MAX && k > 0);
    int packed = n > MAX_COLS && ta == CblasNoTrans;
    if (packed) {
        b = panels(tb, n, k, b, ldb), ldb = COLS;
    } else if (tb == CblasTrans) { /* B is n x k: its transpose, k x n, is what the kernels read */
        float *bt = scratch_for((size_t)k * n);
        libxsmm_otrans(bt, b, sizeof *bt, k, n, ldb, n);
        b = bt, ldb = n;
    }
    if (gemm_blocks(ta == CblasTrans, m, n, k, a, lda, b, ldb, packed, beta, c, ldc)) return 1;
    /* libxsmm could not generate a kernel (no executable memory?): OpenBLAS from now on */
    if (__atomic_exchange_n(&enabled, 0, __ATOMIC_RELAXED))
        log_warn("libxsmm could not generate a GEMM kernel (%d x %d x %d); using OpenBLAS for every product", m,
                 n, k);
    return 0;
}
