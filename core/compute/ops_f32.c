/* The float instantiation of the ops (production; see core/compute/ops.h). */
#define real float
#define OPS_FN(name) ops_##name##_f32
#define ACT(name) act_##name##_f32
#define VEXP vmath_expf   /* exp of an array (core/compute/vmath.h) */
#define VERFC vmath_erfcf
#define VTANH vmath_tanhf
#define KM(name) name##_f32
#define GEMM ops_sgemm_mp /* cblas_sgemm, with 16-bit inputs under mixed precision */
/* Whether a GEMM call copies its operands first (OpenBLAS packs them; under mixed precision they are
 * rounded into copies); libxsmm's kernels read them in place (core/compute/ops_xsmm.h). */
#define GEMM_COPIES_OPERANDS() (!ops_xsmm_enabled() || ops_gemm_precision() != AMP_FP32)
#define GEMM_SERIAL ops_sgemm_mp_serial /* the same on the calling thread alone */
#define GEMV cblas_sgemv
#define GEMV_TAKES() (ops_gemm_precision() == AMP_FP32) /* mixed precision: GEMM rounds the inputs */
#define GEMM_QT_TAKES ops_sgemm_qt_takes /* scores of a few query rows from Q^T (core/compute/ops_sgemm.h) */
/* Linear layers of a few rows (a beam's hypotheses) without packing the weights */
#define LINEAR_ROWS_TAKES ops_rows_linear_takes
#define LINEAR_ROWS ops_rows_linear
#include "core/compute/ops_rows.h"
#include "core/compute/ops_sgemm.h"
#include "core/compute/ops_precision.h"
#include "core/compute/ops_xsmm.h"
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
