/* The double instantiation of the encoder ops (finite-difference tests; see core/compute/ops.h). */
#define real double
#define OPS_FN(name) ops_##name##_f64
#define ACT(name) act_##name##_f64
#define GEMM cblas_dgemm
#include "core/compute/ops_impl.h"
