/* A cblas_sgemm timer for scripts/bench/gemm_shapes, loaded with LD_PRELOAD: every call goes on to
 * the real cblas_sgemm (dlsym RTLD_NEXT) and is timed; at exit one line per (layout, transposes, M,
 * N, K, beta == 0) on stderr, "gemm_shape ...", with its calls, seconds and GFLOP/s. Calls from
 * several threads are serialized for the bookkeeping only (a mutex around the table, not the call). */
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*sgemm_fn)(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE, blasint, blasint, blasint,
                         float, const float *, blasint, const float *, blasint, float, float *, blasint);

typedef struct shape {
    int order, ta, tb, m, n, k, beta0;
    long calls;
    double seconds;
} shape;

enum { MAX_SHAPES = 4096 };
static shape shapes[MAX_SHAPES];
static int nshapes, overflow;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void report(void)
{
    for (int i = 0; i < nshapes; i++) {
        const shape *s = &shapes[i];
        double gflops = s->seconds > 0 ? 2.0 * s->m * s->n * s->k * (double)s->calls / s->seconds / 1e9 : 0;
        fprintf(stderr, "gemm_shape %s %c%c %d %d %d %s %ld %.6f %.1f\n", s->order == CblasRowMajor ? "row" : "col",
                s->ta == CblasNoTrans ? 'N' : 'T', s->tb == CblasNoTrans ? 'N' : 'T', s->m, s->n, s->k,
                s->beta0 ? "beta0" : "beta1", s->calls, s->seconds, gflops);
    }
    if (overflow) fprintf(stderr, "gemm_shape: more than %d shapes, the rest not counted\n", MAX_SHAPES);
}

static void record(int order, int ta, int tb, int m, int n, int k, int beta0, double seconds)
{
    pthread_mutex_lock(&lock);
    int i = 0;
    while (i < nshapes && !(shapes[i].order == order && shapes[i].ta == ta && shapes[i].tb == tb &&
                            shapes[i].m == m && shapes[i].n == n && shapes[i].k == k && shapes[i].beta0 == beta0))
        i++;
    if (i == nshapes) {
        if (nshapes == MAX_SHAPES) {
            overflow = 1;
            pthread_mutex_unlock(&lock);
            return;
        }
        shapes[nshapes++] = (shape){order, ta, tb, m, n, k, beta0, 0, 0};
    }
    shapes[i].calls++;
    shapes[i].seconds += seconds;
    pthread_mutex_unlock(&lock);
}

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint m, const blasint n, const blasint k, const float alpha, const float *a,
                 const blasint lda, const float *b, const blasint ldb, const float beta, float *c, const blasint ldc)
{
    static sgemm_fn real;
    if (!real) {
        real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm");
        if (!real) {
            fprintf(stderr, "gemm_shapes_preload: no cblas_sgemm after this library\n");
            abort();
        }
        atexit(report);
    }
    double t0 = now();
    real(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    record(order, ta, tb, m, n, k, beta == 0, now() - t0);
}
