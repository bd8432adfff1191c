/* The per-op profiler (core/compute/backend_profile.h): it wraps every op a backend has and gives
 * them back, changes no result, charges each call to its op and layer kind with the work op_cost
 * counts, and reports; op_cost's counts on known shapes. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/compute/backend_profile.h"
#include "core/compute/op_cost.h"

static backend *open_cpu(void)
{
    esp_err err = {0};
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    return be;
}

Test(backend_profile, wraps_every_op_and_gives_the_entries_back)
{
    backend *be = open_cpu();
    backend before = *be;
    backend_profile_start(be);
    cr_assert_not_null(be->profile);
#define X(OP, name, ret, params, args) \
    cr_assert(before.name && be->name != before.name, "%s is not timed", #name);
    BACKEND_OPS(X)
#undef X
    cr_assert(be->copy != before.copy && be->fill != before.fill && be->synchronize != before.synchronize);
    cr_assert(!be->mark, "the CPU times its ops by the clock: no marks");
    cr_assert(be->alloc == before.alloc && be->impl == before.impl, "memory and state stay the backend's own");
    backend_profile_stop(be);
    cr_assert_null(be->profile);
#define X(OP, name, ret, params, args) cr_assert(be->name == before.name, "%s not restored", #name);
    BACKEND_OPS(X)
#undef X
    cr_assert(be->copy == before.copy && be->fill == before.fill && be->synchronize == before.synchronize);
    backend_close(be);
}

/* A GEMM and an add, profiled and not: the same bits; the calls and their work counted under
 * the layer kind in force. */
Test(backend_profile, changes_no_result_and_charges_ops_to_their_layer)
{
    backend *be = open_cpu();
    enum { M = 37, N = 29, K = 23 };
    float *a = be->alloc(be, M * K * sizeof(float)), *b = be->alloc(be, K * N * sizeof(float));
    float *c0 = be->alloc(be, M * N * sizeof(float)), *c1 = be->alloc(be, M * N * sizeof(float));
    float host[M * K];
    for (int i = 0; i < M * K; i++) host[i] = (float)((i * 7919) % 101) / 50.0f - 1.0f;
    be->copy(be, a, host, sizeof host, BACKEND_HOST_TO_DEVICE);
    be->copy(be, b, host, K * N * sizeof(float), BACKEND_HOST_TO_DEVICE);
    be->gemm(be, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c0, N);

    backend_profile_start(be);
    prof_layer outer = backend_profile_enter(be, PROF_LAYER_DECODER);
    cr_assert_eq(outer, PROF_LAYER_OTHER);
    be->gemm(be, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c1, N);
    be->gemm(be, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c1, N);
    backend_profile_leave(be, outer);
    be->add(be, c1, c1, c1, (size_t)M * N);

    prof_counts g = backend_profile_counts(be, BACKEND_OP_GEMM, PROF_LAYER_DECODER);
    cr_assert_eq(g.calls, 2);
    cr_assert_float_eq(g.flops, 2 * 2.0 * M * N * K, 0.5);
    cr_assert_float_eq(g.bytes, 2 * 4.0 * (M * K + K * N + M * N), 0.5);
    cr_assert(g.seconds > 0);
    cr_assert_eq(backend_profile_counts(be, BACKEND_OP_GEMM, PROF_LAYER_OTHER).calls, 0);
    cr_assert_eq(backend_profile_counts(be, BACKEND_OP_ADD, PROF_LAYER_OTHER).calls, 1);

    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    backend_profile_report(be, "unit test", mem);
    fclose(mem);
    cr_assert(strstr(text, "profile (cpu backend): unit test:"), "%s", text);
    cr_assert(strstr(text, "\ngemm "), "%s", text);
    cr_assert(strstr(text, "\nattention decoder "), "%s", text);
    cr_assert(strstr(text, "\nadd "), "%s", text);
    cr_assert_null(strstr(text, "\nrelu_forward "), "ops never called are not listed: %s", text);
    free(text);
    backend_profile_stop(be);

    float r0[M * N], r1[M * N];
    be->gemm(be, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c1, N); /* c1 again, unprofiled */
    be->copy(be, r0, c0, sizeof r0, BACKEND_DEVICE_TO_HOST);
    be->copy(be, r1, c1, sizeof r1, BACKEND_DEVICE_TO_HOST);
    cr_assert_eq(memcmp(r0, r1, sizeof r0), 0);
    be->free(be, a), be->free(be, b), be->free(be, c0), be->free(be, c1);
    backend_close(be);
}

Test(backend_profile, op_cost_counts)
{
    op_cost c = op_cost_linear_forward(NULL, NULL, NULL, NULL, NULL, 10, 20, 30);
    cr_assert_float_eq(c.flops, 2.0 * 10 * 20 * 30, 1e-9); /* no bias */
    cr_assert_float_eq(c.bytes, 4.0 * (10 * 20 + 20 * 30 + 10 * 30), 1e-9);
    /* conv2d 3x3 stride 2 of 1 x 9 x 9 x 1 into 4 x 4 x 8 */
    c = op_cost_conv2d_forward(NULL, NULL, NULL, NULL, NULL, 1, 1, 8, 9, 9, 0, NULL);
    cr_assert_float_eq(c.flops, 2.0 * 4 * 4 * 8 * 9 + 4 * 4 * 8, 1e-9);
    int hl[2] = {10, 20}, ll[2] = {3, 4};
    c = op_cost_ctc_loss_forward(NULL, NULL, NULL, hl, NULL, ll, 4, 2, 20, 5, 0);
    cr_assert_float_eq(c.flops, 6.0 * (10 * 7 + 20 * 9), 1e-9);
    c = op_cost_add(NULL, NULL, NULL, NULL, 100);
    cr_assert_float_eq(c.bytes, 1200, 1e-9);
}
