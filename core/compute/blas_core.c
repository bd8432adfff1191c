#include "core/compute/blas_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cblas.h> /* OpenBLAS' own: openblas_get_corename */

#include "core/base/log.h"

/* Set on the second start: the core OpenBLAS chose on the first (the variable's value). */
#define MARK_VAR "ESPNET3_OPENBLAS_DETECTED"

/* OpenBLAS' x86 cores without AVX2 kernels: where its detection lands when it falls back. */
static const char *const pre_avx2[] = {
    "Unknown",   "Katmai",     "Coppermine", "Northwood", "Prescott",     "Banias",
    "Atom",      "Core2",      "Penryn",     "Dunnington", "Nehalem",     "Athlon",
    "Opteron",   "Opteron_SSE3", "Barcelona", "Nano",      "Sandybridge", "Bobcat",
    "Bulldozer", "Piledriver", "Steamroller",
};

static char detected[64]; /* non-empty when this process set OPENBLAS_CORETYPE itself */

const char *blas_core_better(const char *core, int avx2_fma, int avx512)
{
    if (!avx2_fma || !core) return NULL;
    for (size_t i = 0; i < sizeof pre_avx2 / sizeof *pre_avx2; i++)
        if (strcasecmp(core, pre_avx2[i]) == 0) return avx512 ? "SkylakeX" : "Haswell";
    return NULL;
}

static int cpu_avx2_fma(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* What OpenBLAS' SkylakeX kernels use. */
static int cpu_avx512(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd");
#else
    return 0;
#endif
}

void blas_core_select(char **argv)
{
    const char *mark = getenv(MARK_VAR);
    if (mark) { /* the second start: OpenBLAS has read the variable; children detect their own */
        snprintf(detected, sizeof detected, "%s", mark);
        unsetenv("OPENBLAS_CORETYPE");
        unsetenv(MARK_VAR);
        return;
    }
    if (getenv("OPENBLAS_CORETYPE")) return; /* the user's choice */
    const char *core = openblas_get_corename();
    int avx512 = cpu_avx512();
    const char *want = blas_core_better(core, cpu_avx2_fma(), avx512);
    if (!want || !argv || !argv[0]) return;
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0 || setenv(MARK_VAR, core, 1) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(MARK_VAR);
    log_warn("OpenBLAS runs its %s kernels on this CPU, which has %s (its detection does not know this model; "
             "restarting with OPENBLAS_CORETYPE=%s failed; set it yourself)",
             core, avx512 ? "AVX-512" : "AVX2", want);
}

int blas_core_avx512(void)
{
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    const char *core = openblas_get_corename();
    for (size_t i = 0; core && i < sizeof avx512 / sizeof *avx512; i++)
        if (strcasecmp(core, avx512[i]) == 0) return 1;
    return 0;
}

const char *blas_core_name(void)
{
    return openblas_get_corename();
}

const char *blas_core_detected(void)
{
    return detected[0] ? detected : NULL;
}
