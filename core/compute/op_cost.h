/* The work of one backend op call, from its arguments: the floating-point operations it performs
 * and the bytes it must move at least (each input read once, each output written once, float32;
 * an accumulated output read and written), for the profiler's achieved rates and roofline
 * (core/compute/backend_profile.h). The counts follow scripts/flops_model.py's: 2 m n k per GEMM,
 * a few operations per element for the elementwise ops, norms and losses. One function per op of
 * BACKEND_OPS (op_cost_<name>, same parameters): an op without one does not link. */
#ifndef ESPNET3_COMPUTE_OP_COST_H
#define ESPNET3_COMPUTE_OP_COST_H

#include "core/compute/backend.h"

typedef struct op_cost {
    double flops;
    double bytes;
} op_cost;

#define X(OP, name, ret, params, args) op_cost op_cost_##name params;
BACKEND_OPS(X)
#undef X

#endif
