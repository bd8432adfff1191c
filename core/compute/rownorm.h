/* The kinds of the rownorm ops (core/compute/backend_ops.h): the asr_transducer task's norms other
 * than LayerNorm (ESPnet2's asr_transducer/normalization.py), named once for the CPU ops, the CUDA
 * kernels and the encoder code that picks one. */
#ifndef ESPNET3_COMPUTE_ROWNORM_H
#define ESPNET3_COMPUTE_ROWNORM_H

/* BasicNorm (one learned value: log eps), RMSNorm (c learned scales), ScaleNorm (one learned scale). */
enum rownorm_kind { ROWNORM_BASIC = 0, ROWNORM_RMS = 1, ROWNORM_SCALE = 2 };

#endif
