// The CUDA part's entry for `--version`: runtime and driver versions and visible devices.
#include <cuda_runtime.h>
#include <stdio.h>

#include "core/compute/cuda_api.h"

extern "C" void cuda_describe(char *buf, size_t n)
{
    int runtime = 0, driver = 0, devices = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess) devices = 0;
    snprintf(buf, n, "CUDA runtime %d.%d, driver %d.%d, %d device%s", runtime / 1000, runtime % 1000 / 10,
             driver / 1000, driver % 1000 / 10, devices, devices == 1 ? "" : "s");
}

extern "C" int cuda_device_count(void)
{
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
    return devices;
}
