/* The CPU backend: fills core/compute/backend.h with the float ops of core/compute/ops.h (OpenBLAS
 * sgemm), core/compute/ctc.h, core/compute/rnnt.h and core/compute/ops_step.h. Host memory is
 * device memory here; copies are memcpy and every op is synchronous. */
#include "core/compute/backend_cpu.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/base/parallel.h"
#include "core/compute/ctc.h"
#include "core/compute/ctc_align.h"
#include "core/compute/loss_state.h"
#include "core/compute/ops.h"
#include "core/compute/ops_precision.h"
#include "core/compute/ops_sgemm.h"
#include "core/compute/ops_step.h"

/* The Winograd kernels conv2d_forward made from a weight (core/compute/ops_mt_decl.h's
 * conv2d_kernels_mt), kept with a copy of that weight: a stream's encoder runs its convolution on
 * each push's few frames, and transforming the 256 x 256 x 9 weight again each time cost more
 * than the convolution (perf, docs/benchmarks.md "## Streaming"). Used only while the weight's
 * values are those of the copy (training changes them every step: made again then). */
enum { CONV_KERNELS_KEPT = 4 }; /* a stream's pushes pick a few tile sizes */
typedef struct conv_kernels {
    const float *w;  /* the weight they were made from (NULL: unused) */
    int ic, oc, key; /* its shape; ops_conv2d_kernels_key */
    float *w_copy, *u;
    size_t cap_w, cap_u;
} conv_kernels;

typedef struct cpu_impl {
    int threads;    /* OpenBLAS' and the threaded loops' thread count */
    size_t held, limit; /* bytes of the buffers handed out (rounded up as cpu_alloc does); the cap (0: none) */
    float *scratch; /* grown on demand, shared by the ops (one op runs at a time) */
    size_t scratch_n;
    loss_state loss; /* the CTC workspace and the RNN-T lattice between a loss' ops */
    conv_kernels kept[CONV_KERNELS_KEPT];
    int kept_next; /* the entry a new weight replaces */
} cpu_impl;

static int threads_of(const backend *be)
{
    return ((const cpu_impl *)be->impl)->threads;
}

static float *scratch(backend *be, size_t n)
{
    cpu_impl *c = be->impl;
    if (n > c->scratch_n) {
        /* By half at least: a stream's growing attention and each push's conv asked a little more
         * almost every call, and each new block was zeroed page by page (be->alloc). */
        size_t grown = c->scratch_n + c->scratch_n / 2;
        n = n > grown ? n : grown;
        be->free(be, c->scratch);
        c->scratch = be->alloc(be, n * sizeof(float));
        c->scratch_n = n;
    }
    return c->scratch;
}

/* ---- threads. Every op runs on the backend's `threads`, all on the one pool of
 * core/base/parallel.h: the GEMMs split by blocks of their output (core/compute/ops_sgemm.h, OpenBLAS
 * on one thread), everything else split so that each output element is computed by the same
 * arithmetic whatever the thread count (by elements, rows, items or heads; sums over rows split by
 * output column). A split loop that calls GEMMs itself (one per attention head) runs them whole on
 * its thread: the pool runs one loop at a time, and a loop started inside one runs serially. */

/* Elements (or row elements) below which a part is not worth waking a thread for. */
enum { MT_MIN = 1 << 15 };

/* One job type for the elementwise and row-wise passes split here over the existing ops. */
typedef enum {
    EW_RELU_F, EW_RELU_B, EW_ADD, EW_SWISH_F, EW_SWISH_B, EW_DROPOUT, EW_GLU_F, EW_GLU_B, EW_LN_F, EW_LSM_F,
    EW_LSM_B, EW_SM_F, EW_SM_B, EW_POSENC, EW_SWAP12, EW_EMBED_F, EW_FILL, EW_COPY, EW_GELU_F, EW_GELU_B, EW_MUL_F, EW_MUL_B,
    EW_LSTM_F, EW_LSTM_B, EW_GRU_F, EW_GRU_B
} ew_kind;

typedef struct ew_job {
    ew_kind kind;
    float *y, *m, *r;
    const float *a, *b, *c, *d, *e;
    const int *ids;
    size_t row; /* elements per unit of the split (1 for elementwise) */
    int d1, d2, d3, t, v;
    double s;
    float p;
    uint64_t seed, stream;
} ew_job;

/* p + o, or NULL for an optional buffer that is absent. */
static const float *at(const float *p, size_t o)
{
    return p ? p + o : NULL;
}

static void ew_part(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const ew_job *j = ctx;
    size_t o = lo * j->row, n = (hi - lo) * j->row, cnt = hi - lo;
    switch (j->kind) {
    case EW_RELU_F: ops_relu_forward_f32(j->y + o, j->a + o, n); break;
    case EW_RELU_B: ops_relu_backward_f32(j->y + o, j->a + o, j->b + o, n); break;
    case EW_ADD: ops_add_f32(j->y + o, j->a + o, j->b + o, n); break;
    case EW_SWISH_F: ops_swish_forward_f32(j->y + o, j->a + o, n); break;
    case EW_SWISH_B: ops_swish_backward_f32(j->y + o, j->a + o, j->b + o, n); break;
    case EW_DROPOUT: ops_dropout_forward_at_f32(j->y + o, j->a + o, n, o, j->p, j->seed, j->stream); break;
    case EW_GLU_F: ops_glu_forward_f32(j->y + o, j->a + 2 * o, (int)cnt, j->d1); break;
    case EW_GLU_B: ops_glu_backward_f32(j->y + 2 * o, j->a + o, j->b + 2 * o, (int)cnt, j->d1); break;
    case EW_LN_F:
        ops_layernorm_forward_f32(j->y + o, j->m + lo, j->r + lo, j->a + o, j->b, j->c, (int)cnt, j->d1, j->s);
        break;
    case EW_LSM_F: ops_log_softmax_forward_f32(j->y + o, j->a + o, (int)cnt, j->v); break;
    case EW_LSM_B: ops_log_softmax_backward_f32(j->y + o, j->a + o, j->b + o, (int)cnt, j->v); break;
    case EW_SM_F: ops_softmax_forward_f32(j->y + o, j->a + o, (int)cnt, j->v); break;
    case EW_SM_B: ops_softmax_backward_f32(j->y + o, j->a + o, j->b + o, (int)cnt, j->v); break;
    case EW_POSENC: ops_posenc_forward_f32(j->y + o, j->a + o, j->s, (int)cnt, j->t, j->d1); break;
    case EW_SWAP12: ops_swap12_f32(j->y + o, j->a + o, (int)cnt, j->d1, j->d2, j->d3); break;
    case EW_EMBED_F: ops_embedding_forward_f32(j->y + o, j->a, j->ids + lo, (int)cnt, j->v, j->d1); break;
    case EW_FILL: memset((char *)j->y + o, (int)j->s, n); break;
    case EW_COPY: memcpy((char *)j->y + o, (const char *)j->a + o, n); break;
    case EW_GELU_F: ops_gelu_forward_f32(j->y + o, j->a + o, n); break;
    case EW_GELU_B: ops_gelu_backward_f32(j->y + o, j->a + o, j->b + o, n); break;
    case EW_MUL_F: ops_mul_forward_f32(j->y + o, j->a + o, j->b + o, n); break;
    case EW_MUL_B: ops_mul_backward_f32(j->y + o, j->m + o, j->a + o, j->b + o, j->c + o, n); break;
    case EW_LSTM_F: /* rows of d1 units: h, c at o, act and the gates at 4 * o */
        ops_lstm_cell_forward_f32(j->y + o, j->m + o, j->r + 4 * o, j->a + 4 * o, at(j->b, o), (int)cnt, j->d1);
        break;
    case EW_LSTM_B:
        ops_lstm_cell_backward_f32(j->y + 4 * o, j->m ? j->m + o : NULL, j->a + o, at(j->b, o), j->c + 4 * o,
                                   at(j->d, o), j->e + o, (int)cnt, j->d1);
        break;
    case EW_GRU_F: /* rows of d1 units: h, h_prev at o, act at 4 * o, the gates at 3 * o */
        ops_gru_cell_forward_f32(j->y + o, j->r + 4 * o, j->a + 3 * o, j->b + 3 * o, at(j->c, o), (int)cnt, j->d1);
        break;
    case EW_GRU_B:
        ops_gru_cell_backward_f32(j->y + 3 * o, j->m + 3 * o, j->r ? j->r + o : NULL, j->a + o, j->b + 4 * o,
                                  at(j->c, o), (int)cnt, j->d1);
        break;
    }
}

/* Runs job over `units` units of job->row elements on the backend's threads. */
static void ew_run(const backend *be, ew_job *job, size_t units)
{
    size_t min_units = job->row >= MT_MIN ? 1 : MT_MIN / (job->row ? job->row : 1);
    parallel_parts(units, min_units, threads_of(be), ew_part, job);
}

/* Elementwise ops over n values on the threads: CPU_UNARY op(y, x, n); CPU_BINARY op(y, a, b, n),
 * as a backward's (dx, dy, x or y, n). */
#define CPU_UNARY(op, k)                                                                                \
    static void cpu_##op(backend *be, float *y, const float *x, size_t n)                               \
    {                                                                                                   \
        ew_job j = {.kind = k, .y = y, .a = x, .row = 1};                                               \
        ew_run(be, &j, n);                                                                              \
    }
#define CPU_BINARY(op, k)                                                                               \
    static void cpu_##op(backend *be, float *y, const float *a, const float *b, size_t n)               \
    {                                                                                                   \
        ew_job j = {.kind = k, .y = y, .a = a, .b = b, .row = 1};                                       \
        ew_run(be, &j, n);                                                                              \
    }

/* ---- memory */

/* Buffers of a huge page or more are aligned to it and asked for transparent huge pages (madvise:
 * the kernel's usual THP mode gives them only to who asks): a step's passes run through hundreds
 * of MB of activations and Winograd tiles (121 streams per tile, 400 KB apart), which miss the
 * TLB on 4 KB pages. Advice only: where THP is off, nothing changes.
 * They come from calloc, aligned inside it here: glibc maps large sizes fresh and then skips the
 * zeroing (the kernel zeroes each page when first touched), so a buffer with room to grow costs
 * only the pages used; a memset of all of it zeroed ~900 MB of the decoder's key/value slots on a
 * 41 s stream (6% of its pushes, perf). Smaller ones are zeroed here. Each buffer is preceded by its
 * block's header, so that free finds the allocation. */
enum { CPU_HUGE_PAGE = 2u << 20 };
typedef struct cpu_block {
    void *base;   /* what malloc returned */
    size_t bytes; /* the buffer's, rounded up (counted in held) */
} cpu_block;

static void *cpu_alloc(backend *be, size_t bytes)
{
    cpu_impl *c = be->impl;
    void *base = NULL;
    char *p;
    size_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
    int huge = n >= CPU_HUGE_PAGE;
    if (huge) n = (n + CPU_HUGE_PAGE - 1) / CPU_HUGE_PAGE * CPU_HUGE_PAGE;
    if (c->limit && __atomic_load_n(&c->held, __ATOMIC_RELAXED) + n > c->limit)
        esp_die("cpu backend: out of memory allocating %zu bytes (the cap of %zu bytes, %zu held)", bytes, c->limit,
                c->held);
    if (huge) {
        if (!(base = calloc(1, n + CPU_HUGE_PAGE))) esp_die("cpu backend: out of memory allocating %zu bytes", bytes);
        p = (char *)(((uintptr_t)base + sizeof(cpu_block) + CPU_HUGE_PAGE - 1) / CPU_HUGE_PAGE * CPU_HUGE_PAGE);
#ifdef MADV_HUGEPAGE
        (void)madvise(p, n, MADV_HUGEPAGE);
#endif
    } else {
        if (posix_memalign(&base, 64, n + 64) != 0) esp_die("cpu backend: out of memory allocating %zu bytes", bytes);
        p = (char *)base + 64;
        memset(p, 0, n);
    }
    cpu_block *h = (cpu_block *)p - 1;
    h->base = base, h->bytes = n;
    __atomic_add_fetch(&c->held, n, __ATOMIC_RELAXED);
    return p;
}

static void cpu_free(backend *be, void *p)
{
    cpu_impl *c = be->impl;
    if (!p) return;
    const cpu_block *h = (const cpu_block *)p - 1;
    __atomic_sub_fetch(&c->held, h->bytes, __ATOMIC_RELAXED);
    free(h->base);
}

static size_t cpu_mem_available(backend *be)
{
    const cpu_impl *c = be->impl;
    size_t held = __atomic_load_n(&c->held, __ATOMIC_RELAXED);
    if (!c->limit) return SIZE_MAX;
    return held < c->limit ? c->limit - held : 0;
}

static void cpu_set_mem_limit(backend *be, size_t bytes) { ((cpu_impl *)be->impl)->limit = bytes; }

static void cpu_copy(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind)
{
    (void)kind;
    if (!bytes) return;
    const char *d = dst, *s = src;
    if (bytes < ((size_t)1 << 20) || (d < s + bytes && s < d + bytes)) { /* small, or overlapping */
        memmove(dst, src, bytes);
        return;
    }
    ew_job j = {.kind = EW_COPY, .y = dst, .a = src, .row = 1};
    parallel_parts(bytes, (size_t)1 << 18, threads_of(be), ew_part, &j);
}

static void cpu_fill(backend *be, void *p, int byte, size_t bytes)
{
    if (!bytes) return;
    ew_job j = {.kind = EW_FILL, .y = p, .row = 1, .s = byte};
    parallel_parts(bytes, (size_t)1 << 18, threads_of(be), ew_part, &j);
}

static void cpu_synchronize(backend *be)
{
    (void)be;
}

static void cpu_destroy(backend *be)
{
    ops_set_gemm_precision(AMP_FP32); /* the next backend starts in float32 */
    cpu_impl *c = be->impl;
    if (!c) return;
    cpu_free(be, c->scratch);
    for (int i = 0; i < CONV_KERNELS_KEPT; i++) free(c->kept[i].w_copy), free(c->kept[i].u);
    loss_state_free(&c->loss);
    free(c);
    be->impl = NULL;
}

/* ---- ops: the f32 instantiation, with the backend's scratch */

static void cpu_gemm(backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                     int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    (void)be;
    ops_sgemm_mp(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                 k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void cpu_set_gemm_precision(backend *be, amp_precision p)
{
    (void)be;
    ops_set_gemm_precision(p);
}

static int cpu_unscale_grads(backend *be, float *g, size_t n, float inv_scale)
{
    (void)be;
    return ops_unscale_grads_f32(g, n, inv_scale);
}

static void cpu_linear_forward(backend *be, float *y, const float *x, const float *w,
                               const float *b, int n, int ic, int oc)
{
    ops_linear_forward_mt_f32(y, x, w, b, n, ic, oc, threads_of(be));
}

static void cpu_linear_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w, int n, int ic, int oc, int acc)
{
    ops_linear_backward_mt_f32(dx, dw, db, dy, x, w, n, ic, oc, acc, threads_of(be));
}

static size_t cpu_conv2d_saved_floats(backend *be, int nb, int ic, int oc, int h, int wd)
{
    (void)be, (void)oc;
    return ops_conv2d_saved_floats(nb, ic, h, wd);
}

/* The Winograd kernels of w for inputs of h x wd: kept ones when w's values are those they were
 * made from, else made now (into the entry of this weight and tile size, or the oldest). */
static const float *conv_kernels_of(backend *be, const float *w, int ic, int oc, int h, int wd, float *s)
{
    cpu_impl *c = be->impl;
    size_t nw = (size_t)oc * ic * 9, nu = ops_conv2d_kernels_floats(ic, oc, h, wd);
    int key = ops_conv2d_kernels_key(h, wd);
    conv_kernels *e = NULL;
    for (int i = 0; i < CONV_KERNELS_KEPT && !e; i++) {
        conv_kernels *k = &c->kept[i];
        if (k->w == w && k->ic == ic && k->oc == oc && k->key == key) e = k;
    }
    if (e && !memcmp(e->w_copy, w, nw * sizeof *w)) return e->u;
    if (!e) e = &c->kept[c->kept_next], c->kept_next = (c->kept_next + 1) % CONV_KERNELS_KEPT;
    if (nw > e->cap_w) free(e->w_copy), e->w_copy = xmalloc(nw * sizeof *w), e->cap_w = nw;
    if (nu > e->cap_u) free(e->u), e->u = xmalloc(nu * sizeof *e->u), e->cap_u = nu;
    memcpy(e->w_copy, w, nw * sizeof *w);
    ops_conv2d_kernels_mt_f32(e->u, w, ic, oc, h, wd, s, threads_of(be));
    e->w = w, e->ic = ic, e->oc = oc, e->key = key;
    return e->u;
}

static void cpu_conv2d_forward(backend *be, float *y, const float *x, const float *w,
                               const float *b, int nb, int ic, int oc, int h, int wd, int relu, float *saved)
{
    float *s = scratch(be, ops_conv2d_forward_scratch_mt(ic, oc, h, wd, threads_of(be)));
    const float *u = ops_conv2d_kernels_floats(ic, oc, h, wd) ? conv_kernels_of(be, w, ic, oc, h, wd, s) : NULL;
    ops_conv2d_forward_u_mt_f32(y, x, w, u, b, nb, ic, oc, h, wd, relu, saved, s, threads_of(be));
}

static void cpu_conv2d_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                const float *x, const float *w, const float *y, int nb, int ic,
                                int oc, int h, int wd, int acc, const float *saved)
{
    float *s = scratch(be, ops_conv2d_backward_scratch_mt(ic, oc, h, wd, threads_of(be)));
    ops_conv2d_backward_mt_f32(dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, acc, saved, s, threads_of(be));
}

static void cpu_conv2d_gen_forward(backend *be, float *y, const float *x, const float *w,
                                   const float *b, int nb, int ic, int oc, int h, int wd, int kh,
                                   int kw, int sh, int sw, int relu)
{
    float *s = scratch(be, ops_conv2d_gen_forward_scratch(ic, oc, h, wd, kh, kw, sh, sw));
    ops_conv2d_gen_forward_f32(y, x, w, b, nb, ic, oc, h, wd, kh, kw, sh, sw, relu, s);
}

static void cpu_conv2d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                    const float *x, const float *w, const float *y, int nb, int ic,
                                    int oc, int h, int wd, int kh, int kw, int sh, int sw, int acc)
{
    float *s = scratch(be, ops_conv2d_gen_backward_scratch(ic, oc, h, wd, kh, kw, sh, sw));
    ops_conv2d_gen_backward_f32(dx, dw, db, dy, x, w, y, nb, ic, oc, h, wd, kh, kw, sh, sw, acc, s);
}

static void cpu_conv1d_gen_forward(backend *be, float *y, const float *x, const float *w,
                                   const float *b, int nb, int t, int ic, int oc, int k, int stride,
                                   int dil, int groups)
{
    float *s = scratch(be, ops_conv1d_gen_forward_scratch(t, ic, oc, k, stride, dil, groups));
    ops_conv1d_gen_forward_f32(y, x, w, b, nb, t, ic, oc, k, stride, dil, groups, s);
}

static void cpu_conv1d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                    const float *x, const float *w, int nb, int t, int ic, int oc,
                                    int k, int stride, int dil, int groups, int acc)
{
    float *s = scratch(be, ops_conv1d_gen_backward_scratch(t, ic, oc, k, stride, dil, groups));
    ops_conv1d_gen_backward_f32(dx, dw, db, dy, x, w, nb, t, ic, oc, k, stride, dil, groups, acc, s);
}

static void cpu_swap12(backend *be, float *y, const float *x, int nb, int d1, int d2, int d3)
{
    ew_job j = {.kind = EW_SWAP12, .y = y, .a = x, .row = (size_t)d1 * d2 * d3, .d1 = d1, .d2 = d2, .d3 = d3};
    ew_run(be, &j, (size_t)nb);
}

CPU_UNARY(relu_forward, EW_RELU_F)
CPU_BINARY(relu_backward, EW_RELU_B)

static void cpu_layernorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x,
                                  const float *w, const float *b, int n, int c, double eps)
{
    ew_job j = {.kind = EW_LN_F, .y = y, .m = mean, .r = rstd, .a = x, .b = w, .c = b, .row = (size_t)c, .d1 = c,
                .s = eps};
    ew_run(be, &j, (size_t)n);
}

static void cpu_rownorm_forward(backend *be, float *y, float *a, const float *x, const float *w, int n, int c,
                                int kind, int p, double eps)
{
    (void)be;
    ops_rownorm_forward_f32(y, a, x, w, n, c, kind, p, eps);
}

static void cpu_rownorm_backward(backend *be, float *dx, float *dw, const float *dy, const float *x, const float *w,
                                 const float *a, int n, int c, int kind, int p, double eps, int acc)
{
    (void)be;
    ops_rownorm_backward_f32(dx, dw, dy, x, w, a, n, c, kind, p, eps, acc);
}

static void cpu_layernorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                   const float *x, const float *w, const float *mean,
                                   const float *rstd, int n, int c, int acc)
{
    ops_layernorm_backward_mt_f32(dx, dw, db, dy, x, w, mean, rstd, n, c, acc, threads_of(be));
}

CPU_BINARY(add, EW_ADD)

static void cpu_scale(backend *be, float *y, const float *x, double s, size_t n)
{
    ops_scale_threaded_f32(y, x, s, n, threads_of(be));
}

static void cpu_posenc_forward(backend *be, float *y, const float *x, double xscale, int nb, int t,
                               int d)
{
    ew_job j = {.kind = EW_POSENC, .y = y, .a = x, .s = xscale, .row = (size_t)t * d, .t = t, .d1 = d};
    ew_run(be, &j, (size_t)nb);
}

static void cpu_attention_forward(backend *be, float *y, float *att, const float *q, const float *k,
                                  const float *v, int ld, const int *lens, int nb, int t, int h,
                                  int hd, float p, uint64_t seed, uint64_t stream)
{
    size_t n = ops_attention_forward_scratch(t, p) * (size_t)threads_of(be);
    float *s = n ? scratch(be, n) : NULL;
    ops_mha_forward_mt_f32(y, att, q, ld, k, v, ld, lens, nb, t, t, 0, h, hd, p, seed, stream, s, threads_of(be));
}

static void cpu_attention_backward(backend *be, float *dq, float *dk, float *dv, const float *dy,
                                   const float *att, const float *q, const float *k, const float *v,
                                   int ld, const int *lens, int nb, int t, int h, int hd, float p,
                                   uint64_t seed, uint64_t stream)
{
    float *s = scratch(be, ops_attention_backward_scratch(t) * (size_t)threads_of(be));
    ops_mha_backward_mt_f32(dq, dk, dv, dy, att, q, ld, k, v, ld, lens, nb, t, t, h, hd, p, seed, stream, s,
                            threads_of(be));
}

static void cpu_log_softmax_forward(backend *be, float *y, const float *x, int n, int v)
{
    ew_job j = {.kind = EW_LSM_F, .y = y, .a = x, .row = (size_t)v, .v = v};
    ew_run(be, &j, (size_t)n);
}

static void cpu_log_softmax_backward(backend *be, float *dx, const float *dy, const float *y, int n,
                                     int v)
{
    ew_job j = {.kind = EW_LSM_B, .y = dx, .a = dy, .b = y, .row = (size_t)v, .v = v};
    ew_run(be, &j, (size_t)n);
}

static void cpu_softmax_forward(backend *be, float *y, const float *x, int n, int v)
{
    ew_job j = {.kind = EW_SM_F, .y = y, .a = x, .row = (size_t)v, .v = v};
    ew_run(be, &j, (size_t)n);
}

static void cpu_softmax_backward(backend *be, float *dx, const float *dy, const float *y, int n, int v)
{
    ew_job j = {.kind = EW_SM_B, .y = dx, .a = dy, .b = y, .row = (size_t)v, .v = v};
    ew_run(be, &j, (size_t)n);
}

/* Also dropout's backward: the mask is linear in its input, so the backward is the forward applied
 * to dy. */
static void cpu_dropout_forward(backend *be, float *y, const float *x, size_t n, float p,
                                uint64_t seed, uint64_t stream)
{
    ew_job j = {.kind = EW_DROPOUT, .y = y, .a = x, .row = 1, .p = p, .seed = seed, .stream = stream};
    ew_run(be, &j, n);
}

/* ---- Conformer layers */

CPU_UNARY(swish_forward, EW_SWISH_F)
CPU_BINARY(swish_backward, EW_SWISH_B)

/* ---- the fused chains: the ops they fuse, in turn (the unfused path's bits) */

static void cpu_act_dropout_forward(backend *be, float *y, const float *x, size_t n, int relu, float p,
                                    uint64_t seed, uint64_t stream)
{
    if (relu)
        cpu_relu_forward(be, y, x, n);
    else
        cpu_swish_forward(be, y, x, n);
    cpu_dropout_forward(be, y, y, n, p, seed, stream);
}

static void cpu_act_dropout_backward(backend *be, float *dx, const float *dy, const float *z, size_t n, int relu,
                                     float p, uint64_t seed, uint64_t stream)
{
    cpu_dropout_forward(be, dx, dy, n, p, seed, stream);
    if (relu)
        cpu_relu_backward(be, dx, dx, z, n);
    else
        cpu_swish_backward(be, dx, dx, z, n);
}

static void cpu_dropout_add(backend *be, float *y, const float *x, const float *r, size_t n, double s, float p,
                            uint64_t seed, uint64_t stream)
{
    ESP_CHECK(!x || y != x);
    cpu_dropout_forward(be, y, r, n, p, seed, stream);
    if (s != 1) cpu_scale(be, y, y, s, n);
    if (x) cpu_add(be, y, x, y, n);
}

static void cpu_dropout_add_layernorm(backend *be, float *h, float *y, float *mean, float *rstd, const float *x,
                                      const float *r, const float *w, const float *b, int n, int c, double eps,
                                      double s, float p, uint64_t seed, uint64_t stream)
{
    cpu_dropout_add(be, h, x, r, (size_t)n * c, s, p, seed, stream);
    cpu_layernorm_forward(be, y, mean, rstd, h, w, b, n, c, eps);
}

static void cpu_layernorm_dropout_backward(backend *be, float *dx, float *dw, float *db, float *dr, const float *dy,
                                           const float *x, const float *w, const float *mean, const float *rstd,
                                           int n, int c, double s, float p, uint64_t seed, uint64_t stream)
{
    cpu_layernorm_backward(be, dx, dw, db, dy, x, w, mean, rstd, n, c, 1);
    cpu_dropout_add(be, dr, NULL, dx, (size_t)n * c, s, p, seed, stream);
}

static void cpu_glu_forward(backend *be, float *y, const float *x, int n, int c)
{
    ew_job j = {.kind = EW_GLU_F, .y = y, .a = x, .row = (size_t)c, .d1 = c};
    ew_run(be, &j, (size_t)n);
}

static void cpu_glu_backward(backend *be, float *dx, const float *dy, const float *x, int n, int c)
{
    ew_job j = {.kind = EW_GLU_B, .y = dx, .a = dy, .b = x, .row = (size_t)c, .d1 = c};
    ew_run(be, &j, (size_t)n);
}

static void cpu_dwconv1d_forward(backend *be, float *y, const float *x, const float *w, const float *b,
                                 int nb, int t, int c, int k)
{
    ops_dwconv1d_forward_mt_f32(y, x, w, b, nb, t, c, k, threads_of(be));
}

static void cpu_dwconv1d_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                  const float *x, const float *w, int nb, int t, int c, int k)
{
    ops_dwconv1d_backward_mt_f32(dx, dw, db, dy, x, w, nb, t, c, k, threads_of(be));
}

static void cpu_batchnorm_forward(backend *be, float *y, float *mean, float *rstd, const float *x,
                                  const float *w, const float *b, float *run_mean, float *run_var,
                                  float *run_count, int n, int c, double eps, double momentum, int train)
{
    ops_batchnorm_forward_mt_f32(y, mean, rstd, x, w, b, run_mean, run_var, run_count, n, c, eps, momentum, train,
                                 threads_of(be));
}

static void cpu_batchnorm_backward(backend *be, float *dx, float *dw, float *db, const float *dy,
                                   const float *x, const float *w, const float *mean, const float *rstd,
                                   int n, int c)
{
    ops_batchnorm_backward_mt_f32(dx, dw, db, dy, x, w, mean, rstd, n, c, threads_of(be));
}

static void cpu_batchnorm_stats(backend *be, float *out, const float *x, const float *dy, const float *mean, int n,
                                int c)
{
    (void)be;
    ops_batchnorm_stats_f32(out, x, dy, mean, n, c);
}

static void cpu_batchnorm_backward_global(backend *be, float *dx, float *dw, float *db, const float *dy,
                                          const float *x, const float *w, const float *mean, const float *rstd,
                                          const float *l, const float *g, double count, int n, int c)
{
    (void)be;
    ops_batchnorm_backward_global_f32(dx, dw, db, dy, x, w, mean, rstd, l, g, count, n, c);
}

static void cpu_relpos_encoding(backend *be, float *pe, int t, int d)
{
    (void)be;
    ops_relpos_encoding_f32(pe, t, d);
}

static void cpu_relattn_forward(backend *be, float *y, float *att, const float *q, const float *k,
                                const float *v, int ld, const float *p, const float *u, const float *vb,
                                const int *lens, int nb, int t, int h, int hd, int chunk, int left, float pdrop, uint64_t seed,
                                uint64_t stream)
{
    float *s = scratch(be, ops_relattn_forward_scratch(t, hd, pdrop) * (size_t)threads_of(be));
    ops_relattn_forward_mt_f32(y, att, q, k, v, ld, p, u, vb, lens, nb, t, h, hd, chunk, left, pdrop, seed, stream, s,
                               threads_of(be));
}

static void cpu_relattn_backward(backend *be, float *dq, float *dk, float *dv, float *dp, float *du,
                                 float *dvb, const float *dy, const float *att, const float *q,
                                 const float *k, const float *v, int ld, const float *p, const float *u,
                                 const float *vb, const int *lens, int nb, int t, int h, int hd, int chunk, int left,
                                 float pdrop, uint64_t seed, uint64_t stream)
{
    float *s = scratch(be, ops_relattn_backward_scratch(t, hd) * (size_t)threads_of(be));
    ops_relattn_backward_mt_f32(dq, dk, dv, dp, du, dvb, dy, att, q, k, v, ld, p, u, vb, lens, nb, t, h, hd, chunk, left, pdrop,
                                seed, stream, s, threads_of(be));
}

/* ---- E-Branchformer layers */

CPU_UNARY(gelu_forward, EW_GELU_F)
CPU_BINARY(gelu_backward, EW_GELU_B)
CPU_BINARY(mul_forward, EW_MUL_F)

static void cpu_mul_backward(backend *be, float *da, float *db, const float *dy, const float *a, const float *b,
                             size_t n)
{
    ew_job j = {.kind = EW_MUL_B, .y = da, .m = db, .a = dy, .b = a, .c = b, .row = 1};
    ew_run(be, &j, n);
}

/* ---- the LSTM cell: rows of H units split over the threads */

static void cpu_lstm_cell_forward(backend *be, float *h, float *c, float *act, const float *gates,
                                  const float *c_prev, int n, int H)
{
    if (n <= 0 || H <= 0) return;
    ew_job j = {.kind = EW_LSTM_F, .y = h, .m = c, .r = act, .a = gates, .b = c_prev, .row = (size_t)H, .d1 = H};
    ew_run(be, &j, (size_t)n);
}

static void cpu_lstm_cell_backward(backend *be, float *dgates, float *dc_prev, const float *dh, const float *dc,
                                   const float *act, const float *c_prev, const float *c, int n, int H)
{
    if (n <= 0 || H <= 0) return;
    ew_job j = {.kind = EW_LSTM_B, .y = dgates, .m = dc_prev, .a = dh, .b = dc, .c = act, .d = c_prev, .e = c,
                .row = (size_t)H, .d1 = H};
    ew_run(be, &j, (size_t)n);
}

/* ---- the GRU cell: rows of H units split over the threads */

static void cpu_gru_cell_forward(backend *be, float *h, float *act, const float *gi, const float *gh,
                                 const float *h_prev, int n, int H)
{
    if (n <= 0 || H <= 0) return;
    ew_job j = {.kind = EW_GRU_F, .y = h, .r = act, .a = gi, .b = gh, .c = h_prev, .row = (size_t)H, .d1 = H};
    ew_run(be, &j, (size_t)n);
}

static void cpu_gru_cell_backward(backend *be, float *dgi, float *dgh, float *dh_prev, const float *dh,
                                  const float *act, const float *h_prev, int n, int H)
{
    if (n <= 0 || H <= 0) return;
    ew_job j = {.kind = EW_GRU_B, .y = dgi, .m = dgh, .r = dh_prev, .a = dh, .b = act, .c = h_prev,
                .row = (size_t)H, .d1 = H};
    ew_run(be, &j, (size_t)n);
}

/* ---- the transducer's joint activation */

static void cpu_joint_tanh_forward(backend *be, float *z, const float *enc, const float *dec, int B, int T, int t0,
                                   int tc, int U1, int J)
{
    ops_joint_tanh_forward_f32(z, enc, dec, B, T, t0, tc, U1, J, threads_of(be));
}

static void cpu_joint_tanh_backward(backend *be, float *denc, float *ddec, const float *dz, const float *z, int B,
                                    int T, int t0, int tc, int U1, int J)
{
    ops_joint_tanh_backward_f32(denc, ddec, dz, z, B, T, t0, tc, U1, J, threads_of(be));
}

static double cpu_sum(backend *be, const float *x, size_t n)
{
    (void)be;
    return ops_sum_f32(x, n);
}

static double cpu_sum_squares(backend *be, const float *x, size_t n)
{
    return ops_sum_squares_blocked_f32(x, n, threads_of(be));
}

static double cpu_clip_grad_norm(backend *be, float *g, size_t n, double max_norm)
{
    double norm = sqrt(ops_sum_squares_blocked_f32(g, n, threads_of(be)));
    float coef = clip_grad_coef(norm, max_norm);
    if (coef < 1.0f) ops_scale_threaded_f32(g, g, coef, n, threads_of(be));
    return norm;
}

static void cpu_clip_grad_value(backend *be, float *g, size_t n, float v)
{
    (void)be;
    ops_clip_grad_value_f32(g, n, v);
}

static void cpu_ema_update(backend *be, float *avg, const float *cur, size_t n, float decay, float one_minus_decay,
                           int counts)
{
    ops_ema_update_f32(avg, cur, n, decay, one_minus_decay, counts, threads_of(be));
}

/* ---- the attention decoder's ops */

static void cpu_mha_forward(backend *be, float *y, float *att, const float *q, int ldq,
                            const float *k, const float *v, int ldkv, const int *lens, int nb,
                            int tq, int tk, int causal, int h, int hd, float p, uint64_t seed,
                            uint64_t stream)
{
    size_t n = ops_mha_forward_scratch(tq, tk, p) * (size_t)threads_of(be);
    float *s = n ? scratch(be, n) : NULL;
    ops_mha_forward_mt_f32(y, att, q, ldq, k, v, ldkv, lens, nb, tq, tk, causal, h, hd, p, seed, stream, s,
                           threads_of(be));
}

static void cpu_mha_backward(backend *be, float *dq, float *dk, float *dv, const float *dy,
                             const float *att, const float *q, int ldq, const float *k,
                             const float *v, int ldkv, const int *lens, int nb, int tq, int tk,
                             int h, int hd, float p, uint64_t seed, uint64_t stream)
{
    float *s = scratch(be, ops_mha_backward_scratch(tq, tk) * (size_t)threads_of(be));
    ops_mha_backward_mt_f32(dq, dk, dv, dy, att, q, ldq, k, v, ldkv, lens, nb, tq, tk, h, hd, p, seed, stream, s,
                            threads_of(be));
}

static void cpu_embedding_forward(backend *be, float *y, const float *w, const int *ids, int n,
                                  int v, int d)
{
    ew_job j = {.kind = EW_EMBED_F, .y = y, .a = w, .ids = ids, .row = (size_t)d, .v = v, .d1 = d};
    ew_run(be, &j, (size_t)n);
}

static void cpu_embedding_backward(backend *be, float *dw, const float *dy, const int *ids, int n,
                                   int v, int d)
{
    (void)be;
    ops_embedding_backward_f32(dw, dy, ids, n, v, d);
}

static double cpu_label_smoothing_forward(backend *be, const float *logp, const int *target, int n,
                                          int v, double smoothing, int64_t *correct)
{
    (void)be;
    return ops_label_smoothing_forward_f32(logp, target, n, v, smoothing, correct);
}

static void cpu_label_smoothing_backward(backend *be, float *dlogits, const float *logp,
                                         const int *target, int n, int v, double smoothing,
                                         double scale)
{
    (void)be;
    ops_label_smoothing_backward_f32(dlogits, logp, target, n, v, smoothing, scale);
}

/* ---- the step's loss and optimizer */

static double cpu_ctc_loss_forward(backend *be, double *losses, const float *logp, const int *hlens,
                                   const int *labels, const int *label_lens, int stride, int B, int T,
                                   int V, int zero_infinity)
{
    cpu_impl *c = be->impl;
    ctc_labels y = {.ids = labels, .lens = label_lens, .stride = stride};
    double *work = loss_state_ctc_work(&c->loss, &y, B, T);
    return ctc_loss_forward(losses, work, logp, hlens, &y, B, T, V, zero_infinity, c->threads);
}

static void cpu_ctc_loss_backward(backend *be, float *dlogits, const float *logp, const int *hlens,
                                  const int *labels, const int *label_lens, int stride, int B, int T,
                                  int V, int zero_infinity, float dloss)
{
    cpu_impl *c = be->impl;
    ESP_CHECK(c->loss.ctc_work != NULL); /* the forward of this batch ran */
    ctc_labels y = {.ids = labels, .lens = label_lens, .stride = stride};
    ctc_loss_backward(dlogits, c->loss.ctc_work, logp, hlens, &y, B, T, V, zero_infinity, dloss, CTC_GRAD_TORCH,
                      c->threads);
}

static double cpu_ctc_align(backend *be, int *path, const float *logp, int T, int V, const int *labels, int L)
{
    (void)be;
    return ctc_align_f32(path, logp, T, V, labels, L);
}

static void cpu_rnnt_logprobs(backend *be, const float *logits, const int *hlens, const int *labels,
                              const int *label_lens, int stride, int B, int T, int U1, int V, int blank, int t0,
                              int tc)
{
    cpu_impl *c = be->impl;
    ctc_labels y = {.ids = labels, .lens = label_lens, .stride = stride};
    double *lat = loss_state_rnnt_chunk(&c->loss, hlens, &y, B, T, U1, V, blank, t0, tc);
    ops_rnnt_logprobs_f32(lat, logits, hlens, &y, B, T, U1, V, blank, t0, tc, c->threads);
}

static double cpu_rnnt_loss_forward(backend *be, double *losses, const int *hlens, const int *label_lens, int B,
                                    int T, int U1)
{
    cpu_impl *c = be->impl;
    rnnt_batch_forward(&c->loss.rnnt, hlens, label_lens, B, T, U1);
    return rnnt_lattice_forward(c->loss.rnnt_lat, losses, hlens, label_lens, B, T, U1, c->threads);
}

static void cpu_rnnt_loss_backward(backend *be, float *dlogits, const float *logits, const int *hlens,
                                   const int *labels, const int *label_lens, int stride, int B, int T, int U1,
                                   int V, int blank, int t0, int tc, float fastemit, float clamp, float dloss)
{
    cpu_impl *c = be->impl;
    ctc_labels y = {.ids = labels, .lens = label_lens, .stride = stride};
    rnnt_batch_backward(&c->loss.rnnt, hlens, &y, B, T, U1, V, blank, t0, tc);
    ops_rnnt_grad_f32(dlogits, logits, c->loss.rnnt_lat, hlens, &y, B, T, U1, V, blank, t0, tc, fastemit,
                      clamp, (double)dloss / B, c->threads);
}

static void cpu_adam_update(backend *be, float *params, float *exp_avg, float *exp_avg_sq,
                            float *max_exp_avg_sq, const float *grads, size_t n, const adam_coefs *c)
{
    ops_adam_update_f32(params, exp_avg, exp_avg_sq, max_exp_avg_sq, grads, n, c, threads_of(be));
}

static void cpu_sgd_update(backend *be, float *params, float *momentum_buffer, const float *grads, size_t n,
                           const sgd_coefs *c)
{
    ops_sgd_update_f32(params, momentum_buffer, grads, n, c, threads_of(be));
}

static void cpu_adadelta_update(backend *be, float *params, float *square_avg, float *acc_delta, const float *grads,
                                size_t n, const adadelta_coefs *c)
{
    ops_adadelta_update_f32(params, square_avg, acc_delta, grads, n, c, threads_of(be));
}

int backend_cpu_init(backend *be, int threads, esp_err *err)
{
    if (threads < 1) return esp_fail(err, "cpu backend: %d threads (use 1 or more)", threads);
    /* Process-wide settings: the last backend initialized wins. OpenBLAS stays on one thread; the
     * GEMMs are split over the pool instead (core/compute/ops_sgemm.h). */
    openblas_set_num_threads(1);
    ops_set_gemm_threads(threads);
    cpu_impl *impl = xcalloc(1, sizeof(cpu_impl));
    impl->threads = threads;
    *be = (backend){
        .name = "cpu",
        .kind = BACKEND_CPU,
        .impl = impl,
        .alloc = cpu_alloc,
        .free = cpu_free,
        .copy = cpu_copy,
        .fill = cpu_fill,
        .synchronize = cpu_synchronize,
        .destroy = cpu_destroy,
        .mem_available = cpu_mem_available,
        .set_mem_limit = cpu_set_mem_limit,
        .gemm = cpu_gemm,
        .linear_forward = cpu_linear_forward,
        .linear_backward = cpu_linear_backward,
        .conv2d_saved_floats = cpu_conv2d_saved_floats,
        .conv2d_forward = cpu_conv2d_forward,
        .conv2d_backward = cpu_conv2d_backward,
        .conv2d_gen_forward = cpu_conv2d_gen_forward,
        .conv2d_gen_backward = cpu_conv2d_gen_backward,
        .conv1d_gen_forward = cpu_conv1d_gen_forward,
        .conv1d_gen_backward = cpu_conv1d_gen_backward,
        .swap12 = cpu_swap12,
        .relu_forward = cpu_relu_forward,
        .relu_backward = cpu_relu_backward,
        .layernorm_forward = cpu_layernorm_forward,
        .layernorm_backward = cpu_layernorm_backward,
        .rownorm_forward = cpu_rownorm_forward,
        .rownorm_backward = cpu_rownorm_backward,
        .add = cpu_add,
        .scale = cpu_scale,
        .clip_grad_value = cpu_clip_grad_value,
        .ema_update = cpu_ema_update,
        .posenc_forward = cpu_posenc_forward,
        .attention_forward = cpu_attention_forward,
        .attention_backward = cpu_attention_backward,
        .log_softmax_forward = cpu_log_softmax_forward,
        .log_softmax_backward = cpu_log_softmax_backward,
        .softmax_forward = cpu_softmax_forward,
        .softmax_backward = cpu_softmax_backward,
        .dropout_forward = cpu_dropout_forward,
        .dropout_backward = cpu_dropout_forward,
        .act_dropout_forward = cpu_act_dropout_forward,
        .act_dropout_backward = cpu_act_dropout_backward,
        .dropout_add = cpu_dropout_add,
        .dropout_add_layernorm = cpu_dropout_add_layernorm,
        .layernorm_dropout_backward = cpu_layernorm_dropout_backward,
        .swish_forward = cpu_swish_forward,
        .swish_backward = cpu_swish_backward,
        .glu_forward = cpu_glu_forward,
        .glu_backward = cpu_glu_backward,
        .dwconv1d_forward = cpu_dwconv1d_forward,
        .dwconv1d_backward = cpu_dwconv1d_backward,
        .batchnorm_forward = cpu_batchnorm_forward,
        .batchnorm_backward = cpu_batchnorm_backward,
        .batchnorm_stats = cpu_batchnorm_stats,
        .batchnorm_backward_global = cpu_batchnorm_backward_global,
        .relpos_encoding = cpu_relpos_encoding,
        .relattn_forward = cpu_relattn_forward,
        .relattn_backward = cpu_relattn_backward,
        .gelu_forward = cpu_gelu_forward,
        .gelu_backward = cpu_gelu_backward,
        .mul_forward = cpu_mul_forward,
        .mul_backward = cpu_mul_backward,
        .lstm_cell_forward = cpu_lstm_cell_forward,
        .lstm_cell_backward = cpu_lstm_cell_backward,
        .gru_cell_forward = cpu_gru_cell_forward,
        .gru_cell_backward = cpu_gru_cell_backward,
        .joint_tanh_forward = cpu_joint_tanh_forward,
        .joint_tanh_backward = cpu_joint_tanh_backward,
        .sum = cpu_sum,
        .sum_squares = cpu_sum_squares,
        .clip_grad_norm = cpu_clip_grad_norm,
        .unscale_grads = cpu_unscale_grads,
        .set_gemm_precision = cpu_set_gemm_precision,
        .mha_forward = cpu_mha_forward,
        .mha_backward = cpu_mha_backward,
        .embedding_forward = cpu_embedding_forward,
        .embedding_backward = cpu_embedding_backward,
        .label_smoothing_forward = cpu_label_smoothing_forward,
        .label_smoothing_backward = cpu_label_smoothing_backward,
        .ctc_loss_forward = cpu_ctc_loss_forward,
        .ctc_loss_backward = cpu_ctc_loss_backward,
        .ctc_align = cpu_ctc_align,
        .rnnt_logprobs = cpu_rnnt_logprobs,
        .rnnt_loss_forward = cpu_rnnt_loss_forward,
        .rnnt_loss_backward = cpu_rnnt_loss_backward,
        .adam_update = cpu_adam_update,
        .sgd_update = cpu_sgd_update,
        .adadelta_update = cpu_adadelta_update,
    };
    return 0;
}
