/* What core/ and cli/ may call from the CUDA part (cuda/ implements it, built with `make CUDA=1`).
 * core/ never includes a cuda/ header: this file is the whole interface. */
#ifndef ESPNET3_CUDA_API_H
#define ESPNET3_CUDA_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One line: runtime/driver versions and device count ("no device" when none is visible). */
void cuda_describe(char *buf, size_t n);
/* Devices the CUDA runtime sees (after CUDA_VISIBLE_DEVICES); 0 when none or on error. It
 * initialises CUDA in the calling process: call it where no fork() follows (runner_gpu.c probes
 * in a child process). */
int cuda_device_count(void);

#ifdef __cplusplus
}
#endif

#endif
