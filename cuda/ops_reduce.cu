// Reductions: the sum of a buffer to a host double, the blocked sums that sum_squares and the
// gradient norm use (cuda/ops_step.cu), and the column sums of the bias gradients.
#include <stdlib.h>

#include "cuda/cuda_common.cuh"

// ---- blocked sums in double: block b holds elements [b * SUM_SQUARES_BLOCK, (b + 1) * ...); each is
// summed by one thread in index order with explicitly rounded operations (no contraction into an
// FMA), so a block's sum has the CPU's bits (core/compute/ops_step.c sq_range). A warp owns 32
// blocks and stages 32 x 32 tiles through shared memory, so its global reads stay coalesced.

enum { BS_WARP = 32 };

template <int SQUARE>
static __global__ void blocked_sum_kernel(double *partial, const float *x, size_t n, size_t nblocks)
{
    __shared__ float tile[BS_WARP][BS_WARP + 1];
    const unsigned lane = threadIdx.x;
    const size_t b0 = (size_t)blockIdx.x * BS_WARP;
    double acc = 0.0;
    for (int c = 0; c < SUM_SQUARES_BLOCK; c += BS_WARP) {
        for (int r = 0; r < BS_WARP; r++) {
            size_t i = (b0 + r) * SUM_SQUARES_BLOCK + c + lane;
            // Zeros past the end: +0.0 added to a sum that starts at +0.0 changes no bit.
            tile[r][lane] = b0 + r < nblocks && i < n ? x[i] : 0.0f;
        }
        __syncwarp();
        for (int j = 0; j < BS_WARP; j++) {
            double v = tile[lane][j];
            acc = SQUARE ? __dadd_rn(acc, __dmul_rn(v, v)) : __dadd_rn(acc, v);
        }
        __syncwarp();
    }
    if (b0 + lane < nblocks) partial[b0 + lane] = acc;
}

double cu_blocked_sum(backend *be, const float *x, size_t n, int square)
{
    size_t blocks = (n + SUM_SQUARES_BLOCK - 1) / SUM_SQUARES_BLOCK;
    if (blocks == 0) return 0.0;
    double *dpart = (double *)cu_grow(be, &cu_of(be)->partial, blocks * sizeof(double));
    unsigned grid = (unsigned)((blocks + BS_WARP - 1) / BS_WARP);
    if (square)
        blocked_sum_kernel<1><<<grid, BS_WARP, 0, cu_stream(be)>>>(dpart, x, n, blocks);
    else
        blocked_sum_kernel<0><<<grid, BS_WARP, 0, cu_stream(be)>>>(dpart, x, n, blocks);
    KERNEL_CHECK();
    double *part = (double *)xmalloc(blocks * sizeof(double));
    be->copy(be, part, dpart, blocks * sizeof(double), BACKEND_DEVICE_TO_HOST);
    double sum = 0.0; // the blocks in order, on the host, as the CPU does
    for (size_t b = 0; b < blocks; b++) sum += part[b];
    free(part);
    return sum;
}

// The CPU's sum is one serial pass in double; this is the blocked form, in double too: the two
// differ by rounding only (far inside test_backend_ops' 1e-20 NMSE).
double cu_sum(backend *be, const float *x, size_t n)
{
    return cu_blocked_sum(be, x, n, 0);
}

// ---- column sums: out[c] += sum_r x[r][c]. Blocks of 32 columns x CS_TY row lanes sum a chunk
// of rows each into a partial row; a second kernel adds the partial rows in chunk order. No
// atomics: the result does not depend on scheduling.

enum { CS_TX = 32, CS_TY = 8, CS_MAX_CHUNKS = 128 };

static __global__ void colsum_partial_kernel(float *partial, const float *x, int rows, int cols, int rows_per)
{
    __shared__ float sh[CS_TY][CS_TX + 1];
    int c = blockIdx.x * CS_TX + threadIdx.x;
    int r0 = blockIdx.y * rows_per, r1 = min(rows, r0 + rows_per);
    float acc = 0.0f;
    if (c < cols)
        for (int r = r0 + (int)threadIdx.y; r < r1; r += CS_TY) acc += x[(size_t)r * cols + c];
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < cols) {
        float s = 0.0f;
        for (int k = 0; k < CS_TY; k++) s += sh[k][threadIdx.x];
        partial[(size_t)blockIdx.y * cols + c] = s;
    }
}

static __global__ void colsum_finish_kernel(float *out, const float *partial, int chunks, int cols)
{
    CU_GRID_STRIDE(c, (size_t)cols)
    {
        float s = out[c];
        for (int k = 0; k < chunks; k++) s += partial[(size_t)k * cols + c];
        out[c] = s;
    }
}

void cu_colsum_add(backend *be, float *out, const float *x, int rows, int cols)
{
    if (rows <= 0 || cols <= 0) return;
    int chunks = (rows + CU_COLSUM_MIN_ROWS - 1) / CU_COLSUM_MIN_ROWS;
    if (chunks > CS_MAX_CHUNKS) chunks = CS_MAX_CHUNKS;
    int rows_per = (rows + chunks - 1) / chunks;
    float *part = (float *)cu_grow(be, &cu_of(be)->partial, (size_t)chunks * cols * sizeof(float));
    dim3 grid((unsigned)((cols + CS_TX - 1) / CS_TX), (unsigned)chunks), block(CS_TX, CS_TY);
    colsum_partial_kernel<<<grid, block, 0, cu_stream(be)>>>(part, x, rows, cols, rows_per);
    KERNEL_CHECK();
    colsum_finish_kernel<<<cu_blocks(be, (size_t)cols), CU_THREADS, 0, cu_stream(be)>>>(out, part, chunks, cols);
    KERNEL_CHECK();
}
