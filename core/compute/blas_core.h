/* Which of OpenBLAS' kernel sets (its "core") this process runs, and a repair for one failure of
 * its detection.
 *
 * Why: an OpenBLAS built with DYNAMIC_ARCH picks its kernels from the CPU's family and model when
 * the library loads. Before 0.3.25 (Debian 12 ships 0.3.21) a model it does not know falls back to
 * Prescott's SSE3 kernels whatever the CPU can do (OpenBLAS issue 4267: an Emerald Rapids Xeon, family
 * 6 model 207, with AVX-512, runs Prescott's kernels; the Conformer step on two threads then takes
 * 1.2-1.5x as long). OPENBLAS_CORETYPE, read once as the library loads, is the documented way to
 * choose; so when OpenBLAS fell back to a core without AVX2 kernels on a CPU that has AVX2 and FMA,
 * and the user did not set OPENBLAS_CORETYPE, the process runs itself again with it set (SkylakeX
 * where the CPU has AVX-512, Haswell otherwise), then removes it from its environment so that the
 * processes it starts (ranks, SLURM jobs on other nodes, which may be other CPUs) detect their own.
 * A value the user set is never changed. */
#ifndef ESPNET3_COMPUTE_BLAS_CORE_H
#define ESPNET3_COMPUTE_BLAS_CORE_H

/* The core to ask for instead of `core` (OpenBLAS' own choice) on a CPU with these features, or
 * NULL when its choice stands (a core with AVX2 kernels, or a CPU without AVX2 + FMA). */
const char *blas_core_better(const char *core, int avx2_fma, int avx512);

/* Call first in main(), before any thread starts: may replace the process (execv of
 * /proc/self/exe with the same argv) as described above. Returns when nothing is to be done, after
 * the second start, or when the exec failed (with one warning). */
void blas_core_select(char **argv);

/* Whether OpenBLAS' core runs AVX-512 kernels (SkylakeX, Cooperlake, SapphireRapids). */
int blas_core_avx512(void);

/* OpenBLAS' core now, and the one its own detection chose when this process set another (else
 * NULL): for --version and the benchmarks' logs. */
const char *blas_core_name(void);
const char *blas_core_detected(void);

#endif
