/* core/compute/blas_core: which OpenBLAS cores are taken for a fallback of its CPU detection, and
 * what is asked for instead. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "core/compute/blas_core.h"

static void expect(const char *core, int avx2_fma, int avx512, const char *want)
{
    const char *got = blas_core_better(core, avx2_fma, avx512);
    if (!want)
        cr_assert_null(got, "%s (avx2 %d, avx512 %d): %s instead of OpenBLAS' choice", core, avx2_fma, avx512, got);
    else
        cr_assert(got && strcmp(got, want) == 0, "%s (avx2 %d, avx512 %d): %s, not %s", core, avx2_fma, avx512,
                  got ? got : "(its choice)", want);
}

Test(blas_core, a_fallback_without_avx2_kernels_is_replaced_by_what_the_cpu_runs)
{
    expect("Prescott", 1, 1, "SkylakeX"); /* OpenBLAS 0.3.21 on an Emerald Rapids Xeon */
    expect("Prescott", 1, 0, "Haswell");
    expect("prescott", 1, 0, "Haswell"); /* OPENBLAS_CORETYPE's names are case-blind */
    expect("Nehalem", 1, 0, "Haswell");
    expect("Sandybridge", 1, 1, "SkylakeX");
    expect("Barcelona", 1, 0, "Haswell"); /* AMD's fallback */
}

Test(blas_core, a_core_with_avx2_kernels_or_a_cpu_without_avx2_keeps_openblas_choice)
{
    expect("Haswell", 1, 1, NULL); /* a choice, not a fallback: never second-guessed */
    expect("Zen", 1, 1, NULL);
    expect("SkylakeX", 1, 1, NULL);
    expect("Cooperlake", 1, 1, NULL);
    expect("SapphireRapids", 1, 1, NULL);
    expect("Prescott", 0, 0, NULL); /* the CPU has no AVX2: Prescott may be right */
    expect("Sandybridge", 0, 0, NULL);
    expect(NULL, 1, 1, NULL);
}
