/* The float64 reference backend's constructor, for core/compute/backend.c alone (everything else
 * opens it with backend_open(BACKEND_REF64, ...)). */
#ifndef ESPNET3_COMPUTE_BACKEND_REF64_H
#define ESPNET3_COMPUTE_BACKEND_REF64_H

#include "core/compute/backend.h"

/* `threads` (>= 1) threads for the CTC loss; the double GEMMs use OpenBLAS' current thread count,
 * which this backend leaves as it is. Release with be->destroy(be). */
int backend_ref64_init(backend *be, int threads, esp_err *err);

#endif
