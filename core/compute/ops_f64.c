/* The double instantiation of the ops (finite-difference tests; see core/compute/ops.h). */
#define real double
#define OPS_FN(name) ops_##name##_f64
#define ACT(name) act_##name##_f64
#define VEXP vmath_exp   /* exp of an array (core/compute/vmath.h) */
#define VERFC vmath_erfc
#define VTANH vmath_tanh
#define KM(name) name##_f64
#define GEMM cblas_dgemm
#define GEMM_COPIES_OPERANDS() 1 /* cblas_dgemm packs them */
#define GEMM_SERIAL cblas_dgemm
#define GEMV cblas_dgemv
#define GEMV_TAKES() 1
#define GEMM_QT_TAKES(m, n, k, alpha) 0 /* the reference keeps the one form */
#include "core/compute/vmath.h"
#include "core/compute/ops_impl.h"
#include "core/compute/ops_embed_impl.h"
#include "core/compute/ops_loss_impl.h"
#include "core/compute/ops_act_impl.h"
#include "core/compute/ops_lstm_impl.h"
#include "core/compute/ops_gru_impl.h"
#include "core/compute/ops_joint_impl.h"
#include "core/compute/ops_rnnt_impl.h"
#include "core/compute/ops_conv1d_impl.h"
#include "core/compute/ops_norm_impl.h"
#include "core/compute/ops_relattn_impl.h"
#include "core/compute/ops_convg_impl.h"
#include "core/compute/ops_conv1d_gen_impl.h"
