/* The CPU backend's constructor, for core/compute/backend.c alone (everything else opens a
 * backend by kind with backend_open). */
#ifndef ESPNET3_COMPUTE_BACKEND_CPU_H
#define ESPNET3_COMPUTE_BACKEND_CPU_H

#include "core/compute/backend.h"

/* OpenBLAS sgemm and the threaded step loops with `threads` threads (>= 1; it sets OpenBLAS'
 * global thread count). Release with be->destroy(be). */
int backend_cpu_init(backend *be, int threads, esp_err *err);

#endif
