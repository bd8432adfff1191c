#include "cli/version.h"

#include <stdio.h>
#include <yaml.h>

#include "core/compute/blas_core.h"
#include "core/compute/cuda_api.h"

void print_version(void *fpv)
{
    FILE *fp = fpv;
    fprintf(fp, "espnet3 %s\n", ESPNET3_VERSION);
    fprintf(fp, "backends: cpu");
#ifdef ESPNET3_CUDA
    char info[256];
    cuda_describe(info, sizeof info);
    fprintf(fp, " cuda (%s)", info);
#endif
    fprintf(fp, "\nlibyaml %s\n", yaml_get_version_string());
    const char *det = blas_core_detected();
    fprintf(fp, "openblas core %s", blas_core_name());
    if (det) fprintf(fp, " (OPENBLAS_CORETYPE set by espnet3: OpenBLAS' own detection chose %s)", det);
    fprintf(fp, "\n");
}
