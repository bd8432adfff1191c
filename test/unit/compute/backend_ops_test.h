/* test_backend_ops: the cases and the harness they run in (test/unit/compute/test_backend_ops.c).
 *
 * A case is one op of core/compute/backend_ops.h at a few shapes: tb_case_<op name>, one per op
 * (declared below from the op list, so an op without its case does not link). Its run(r, shape) function
 * builds the inputs with the tb_* helpers below (random values from a generator seeded by the op
 * and the shape, so every backend sees the same bits), calls the op on tb_be(r), and registers
 * what the op produced with tb_out*. The harness runs it on the reference backend ("ref64") and
 * on the backend under test, and compares every registered output by normalized mean squared
 * error, NMSE = sum((a - b)^2) / sum(b^2), b the reference, against the case's tolerance
 * (tb_out_exact: 0, bit-identical). */
#ifndef ESPNET3_TEST_BACKEND_OPS_TEST_H
#define ESPNET3_TEST_BACKEND_OPS_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/compute/backend.h"

typedef struct tb_run tb_run;

/* NMSE tolerances (each case's, in its table). Against a float64 reference, float32 rounding alone
 * gives NMSE ~2^-48 (4e-15) per element; the CPU backend measures 1e-16..5e-13. ggml's default
 * of 1e-7 would let a relative error of 3e-4 in every element pass, so these are tighter, with
 * a margin of about 100x over the CPU backend for kernels that round or sum in another order:
 *   0           bit-identical where that is promised: data movement (swap12), selects (ReLU), one
 *               rounding of an exact result (add), dropout masks (tb_out_mask);
 *   TOL_DOUBLE  results accumulated in double from float inputs (sum, sum_squares);
 *   TOL_ELEM    a few roundings per element in float (scale, dropout values, Adam, clipping, the
 *               CTC loss, which is computed in double from float log-probabilities);
 *   TOL_ACC     float32 dot products, row sums and float libm calls (gemm, linear, conv2d with its
 *               Winograd transforms, layernorm, attention, log_softmax, posenc, the CTC gradient). */
#define TOL_DOUBLE 1e-20
#define TOL_ELEM 1e-12
#define TOL_ACC 1e-10

typedef struct tb_case {
    int nshapes;
    double tol; /* NMSE tolerance of the outputs registered with tb_out / tb_out_host */
    void (*run)(tb_run *r, int shape);
} tb_case;

/* The cases (test/unit/compute/backend_ops_cases_*.c): tb_case_gemm, tb_case_linear_forward, ... */
#define X(OP, name, ret, params, args) extern const tb_case tb_case_##name;
BACKEND_OPS(X)
#undef X

/* ---- for the cases */

backend *tb_be(tb_run *r);
/* Describes the shape (printf format), for failure messages. */
void tb_shape(tb_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Uniform in [lo, hi), from the case's generator. */
double tb_uniform(tb_run *r, double lo, double hi);
uint64_t tb_bits(tb_run *r);
/* Host memory that lives until the case returns (zeroed). */
void *tb_host(tb_run *r, size_t bytes);
/* n random host floats in [lo, hi). */
float *tb_host_rand(tb_run *r, size_t n, double lo, double hi);
/* rows x v log-probabilities: log_softmax of uniform logits in [-range, range], in double. */
float *tb_host_logp(tb_run *r, int rows, int v, double range);
/* A backend buffer: n random values in [lo, hi); a copy of host values; zeros. */
float *tb_rand(tb_run *r, size_t n, double lo, double hi);
float *tb_upload(tb_run *r, const float *host, size_t n);
float *tb_zeros(tb_run *r, size_t n);

/* Outputs, read back from the backend buffer dev (n floats) when registered, so register after
 * the op: tb_out with the case's tolerance, tb_out_exact bit-identical, tb_out_mask the pattern
 * of non-zero values (dropout masks), bit-identical. */
void tb_out(tb_run *r, const char *name, const float *dev, size_t n);
void tb_out_exact(tb_run *r, const char *name, const float *dev, size_t n);
void tb_out_mask(tb_run *r, const char *name, const float *dev, size_t n);
/* Host results (losses, norms, sums) with the case's tolerance. */
void tb_out_host(tb_run *r, const char *name, const double *v, size_t n);

#endif
