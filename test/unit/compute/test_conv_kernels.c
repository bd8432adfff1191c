/* The CPU backend's kept Winograd kernels (core/compute/backend_cpu.c, conv_kernels_of): a
 * convolution whose weight is unchanged gives the bits of one that transforms it afresh
 * (ops_conv2d_forward_mt_f32), over inputs whose sizes pick different tile sizes, alternating, as a
 * stream's pushes do; a weight changed in place (the same pointer, as a training step does) is
 * transformed again. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/compute/backend_cpu.h"
#include "core/compute/ops.h"

enum { IC = 32, OC = 32, WD = 19 };

static uint64_t gen_state = 11;

static void fill(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        gen_state = gen_state * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((gen_state >> 40) * (2.0 / 16777216.0) - 1.0);
    }
}

/* The backend's output against the op that transforms w itself. */
static void expect_fresh(backend *be, const float *x, const float *w, const float *b, int h, const char *what)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(WD);
    size_t ny = (size_t)oh * ow * OC;
    float *y = be->alloc(be, ny * sizeof *y), *want = malloc(ny * sizeof *want);
    float *s = malloc(ops_conv2d_forward_scratch_mt(IC, OC, h, WD, 1) * sizeof *s);
    be->conv2d_forward(be, y, x, w, b, 1, IC, OC, h, WD, 1, NULL);
    ops_conv2d_forward_mt_f32(want, x, w, b, 1, IC, OC, h, WD, 1, NULL, s, 1);
    cr_assert(memcmp(y, want, ny * sizeof *y) == 0, "%s (h %d): the kept kernels' output differs", what, h);
    be->free(be, y), free(want), free(s);
}

Test(conv_kernels, kept_while_the_weight_is_unchanged)
{
    backend be;
    esp_err err;
    cr_assert_eq(backend_cpu_init(&be, 1, &err), 0, "%s", err.msg);
    static const int hs[] = {9, 21, 9, 41, 21, 13, 9}; /* tile sizes 2..5 along h, revisited */
    size_t nw = (size_t)OC * IC * 9, nx = (size_t)41 * WD * IC;
    float *w = be.alloc(&be, nw * sizeof *w), *b = be.alloc(&be, OC * sizeof *b), *x = be.alloc(&be, nx * sizeof *x);
    fill(w, nw), fill(b, OC), fill(x, nx);
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) expect_fresh(&be, x, w, b, hs[i], "unchanged weight");
    w[nw - 1] += 0.5f; /* in place: only its last tap of its last channel pair */
    expect_fresh(&be, x, w, b, 9, "weight changed in place");
    fill(w, nw);
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) expect_fresh(&be, x, w, b, hs[i], "weight refilled");
    be.free(&be, w), be.free(&be, b), be.free(&be, x);
    be.destroy(&be);
}
