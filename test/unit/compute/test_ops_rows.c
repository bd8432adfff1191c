/* core/compute/ops_rows.h: linear layers of a few rows against a double-precision sum over row
 * counts 1-16 (one pass of rows and two), inputs 16-2048, odd and even outputs, with and without
 * bias; each row's bits the same whatever the other rows and the threads; and what it leaves to
 * the GEMM. On a CPU without AVX-512 only the last holds (it takes nothing). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/compute/ops_precision.h"
#include "core/compute/ops_rows.h"
#include "test/unit/compute/ops_test_util.h"

/* n floats uniform in [-1, 1), freed by ops_arena_free. */
static float *rnd(size_t n) { return tof(drand(n ? n : 1, -1.0, 1.0), n ? n : 1); }

static int avx512(void) { return __builtin_cpu_supports("avx512f") != 0; }

static void check_shape(int n, int ic, int oc, int bias)
{
    float *x = rnd((size_t)n * ic), *w = rnd((size_t)oc * ic), *b = bias ? rnd((size_t)oc) : NULL;
    float *y = rnd((size_t)n * oc), *one = rnd((size_t)oc);
    cr_assert(ops_rows_linear_takes(n, ic), "%d rows of %d not taken", n, ic);
    ops_rows_linear(y, x, w, b, n, ic, oc, 1);
    for (int r = 0; r < n; r++) {
        ops_rows_linear(one, x + (size_t)r * ic, w, b, 1, ic, oc, 1);
        for (int o = 0; o < oc; o++) {
            double want = b ? b[o] : 0.0, mag = fabs(want);
            for (int i = 0; i < ic; i++) {
                want += (double)x[(size_t)r * ic + i] * w[(size_t)o * ic + i];
                mag += fabs((double)x[(size_t)r * ic + i] * w[(size_t)o * ic + i]);
            }
            float got = y[(size_t)r * oc + o];
            cr_assert(fabs(got - want) <= 1e-6 * mag + 1e-30, "%dx%dx%d bias %d: y[%d][%d] %.9g, want %.9g", n, ic,
                      oc, bias, r, o, got, want);
            cr_assert(memcmp(&got, &one[o], sizeof got) == 0, "%dx%dx%d: row %d's bits differ alone (%.9g, %.9g)",
                      n, ic, oc, r, got, one[o]);
        }
    }
    ops_arena_free(); /* this shape's buffers */
}

Test(ops_rows, matches_a_double_sum, .fini = ops_arena_free)
{
    rng_init(&ops_rng, 7);
    if (!avx512()) cr_skip_test("no AVX-512: nothing taken");
    static const int rows[] = {1, 2, 5, 10, 11, 12, 13, 16}, ics[] = {16, 48, 256, 2048}, ocs[] = {1, 2, 7, 33, 256};
    for (size_t a = 0; a < sizeof rows / sizeof *rows; a++)
        for (size_t c = 0; c < sizeof ics / sizeof *ics; c++)
            for (size_t d = 0; d < sizeof ocs / sizeof *ocs; d++) check_shape(rows[a], ics[c], ocs[d], (int)(d & 1));
}

Test(ops_rows, threads_keep_the_bits, .fini = ops_arena_free)
{
    rng_init(&ops_rng, 8);
    if (!avx512()) cr_skip_test("no AVX-512: nothing taken");
    int n = 10, ic = 256, oc = 2048 + 3;
    float *x = rnd((size_t)n * ic), *w = rnd((size_t)oc * ic), *b = rnd((size_t)oc);
    float *y1 = rnd((size_t)n * oc), *y2 = rnd((size_t)n * oc);
    ops_rows_linear(y1, x, w, b, n, ic, oc, 1);
    ops_rows_linear(y2, x, w, b, n, ic, oc, 2);
    cr_assert(memcmp(y1, y2, (size_t)n * oc * sizeof *y1) == 0, "two threads changed the bits");
}

Test(ops_rows, leaves_the_rest_to_the_gemm)
{
    cr_assert(!ops_rows_linear_takes(17, 256), "17 rows");
    cr_assert(!ops_rows_linear_takes(0, 256), "no rows");
    cr_assert(!ops_rows_linear_takes(10, 100), "inputs not a multiple of 16");
    cr_assert(ops_rows_linear_takes(10, 256) == avx512(), "10 x 256: taken exactly where AVX-512F is");
    ops_set_gemm_precision(AMP_BF16);
    cr_assert(!ops_rows_linear_takes(10, 256), "mixed precision rounds the GEMM's inputs");
    ops_set_gemm_precision(AMP_FP32);
}
