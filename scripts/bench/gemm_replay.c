/* Driver of scripts/bench/gemm_shapes' ceiling: a training step's GEMMs replayed with nothing else
 * running, to tell how much of the sgemm peak a step could reach if everything around its products
 * took no time. Reads one line per shape on stdin, "TA TB M N K beta0|beta1 CALLS" (row-major,
 * packed operands: lda, ldb, ldc as tight as the transposes allow; CALLS per step, all threads
 * together), and runs them THREADS at a time as the step does: each thread on its own operands,
 * OpenBLAS on one thread in each, the calls of every shape dealt out over the threads.
 *   gemm_replay THREADS REPEATS -> "replay hot <GFLOP/s> cold <GFLOP/s> gflop <per step>": the best
 *   of REPEATS replays of one step's calls each (hot and cold in turn), "hot" with the same
 *   operands in every call (they stay in the caches, as a product whose input the pass before it
 *   just wrote), "cold" with each call's operands after the last one's in an arena of 256 MB per
 *   thread (from memory, as in a step whose buffers take a gigabyte).
 *   The step's products read their inputs somewhere between the two. */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/progress.h"
#include "core/compute/blas_core.h"

enum {
    MAX_SHAPES = 512,
    MAX_THREADS = 64,
    PASSES = 2, /* per replay, the first a warm-up: fresh threads, OpenBLAS' buffers, first touches */
};
/* Floats of each thread's arena: 256 MB, so that two threads' together are past a 300 MB L3 (an
 * Emerald Rapids host's) and "cold" operands come from memory. */
static const size_t ARENA = (size_t)64 << 20;

typedef struct shape {
    enum CBLAS_TRANSPOSE ta, tb;
    int m, n, k, calls;
    float beta;
} shape;

static shape shapes[MAX_SHAPES];
static int nshapes, threads;
static pthread_barrier_t start, stop;

typedef struct thread_job {
    int me, cold;
    float *arena;
} thread_job;

/* 16 floats: keeps every operand 64-byte aligned, as the backend's buffers are */
static size_t rounded(size_t n) { return (n + 15) & ~(size_t)15; }

static void *run(void *arg)
{
    thread_job *j = arg;
    openblas_set_num_threads(1);
    for (int r = 0; r < PASSES; r++) {
        pthread_barrier_wait(&start);
        size_t at = 0;
        for (int s = 0; s < nshapes; s++) {
            const shape *p = &shapes[s];
            size_t na = rounded((size_t)p->m * p->k), nb = rounded((size_t)p->k * p->n), nc = rounded((size_t)p->m * p->n);
            int lda = p->ta == CblasNoTrans ? p->k : p->m, ldb = p->tb == CblasNoTrans ? p->n : p->k;
            /* the calls dealt out: thread `me` runs calls me, me + threads, ... */
            for (int call = j->me; call < p->calls; call += threads) {
                if (!j->cold || at + na + nb + nc > ARENA) at = 0;
                const float *a = j->arena + at, *b = a + na;
                float *c = j->arena + at + na + nb;
                cblas_sgemm(CblasRowMajor, p->ta, p->tb, p->m, p->n, p->k, 1, a, lda, b, ldb, p->beta, c, p->n);
                at += na + nb + nc;
            }
        }
        pthread_barrier_wait(&stop);
    }
    return NULL;
}

/* The wall time of one replay (after a warm-up), operands hot or cold. */
static double replay(float **arenas, int cold)
{
    thread_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&stop, NULL, (unsigned)threads + 1);
    for (int t = 0; t < threads; t++) {
        jobs[t] = (thread_job){.me = t, .cold = cold, .arena = arenas[t]};
        if (pthread_create(&tid[t], NULL, run, &jobs[t]) != 0) {
            fprintf(stderr, "gemm_replay: cannot start thread %d\n", t);
            exit(1);
        }
    }
    double dt = 0; /* the last pass's */
    for (int r = 0; r < PASSES; r++) {
        pthread_barrier_wait(&start);
        double t0 = now_seconds();
        pthread_barrier_wait(&stop);
        dt = now_seconds() - t0;
    }
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&start);
    pthread_barrier_destroy(&stop);
    return dt;
}

int main(int argc, char **argv)
{
    blas_core_select(argv); /* OpenBLAS' kernels as espnet3 runs them (core/compute/blas_core.h) */
    if (argc != 3 || (threads = atoi(argv[1])) < 1 || threads > MAX_THREADS || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: gemm_replay THREADS REPEATS < shapes (TA TB M N K beta0|beta1 CALLS)\n");
        return 2;
    }
    int repeats = atoi(argv[2]);
    char ta, tb, beta[8] = "";
    int m, n, k, calls, got;
    double flop = 0;
    while ((got = scanf(" %c%c %d %d %d %7s %d", &ta, &tb, &m, &n, &k, beta, &calls)) != EOF) {
        int beta0 = strcmp(beta, "beta0") == 0;
        if (got != 7 || nshapes == MAX_SHAPES || (ta != 'N' && ta != 'T') || (tb != 'N' && tb != 'T') || m < 1 ||
            n < 1 || k < 1 || calls < 1 || (!beta0 && strcmp(beta, "beta1") != 0)) {
            fprintf(stderr, "gemm_replay: line %d: not \"TA TB M N K beta0|beta1 CALLS\" (N or T; sizes and calls"
                            " above 0; at most %d lines)\n", nshapes + 1, MAX_SHAPES);
            return 2;
        }
        shapes[nshapes++] = (shape){ta == 'T' ? CblasTrans : CblasNoTrans, tb == 'T' ? CblasTrans : CblasNoTrans, m, n, k,
                                    calls, beta0 ? 0.0f : 1.0f};
        if (rounded((size_t)m * k) + rounded((size_t)k * n) + rounded((size_t)m * n) > ARENA) {
            fprintf(stderr, "gemm_replay: shape %d x %d x %d larger than the arena\n", m, n, k);
            return 2;
        }
        flop += 2.0 * m * n * k * calls;
    }
    if (!nshapes) {
        fprintf(stderr, "gemm_replay: no shapes on stdin\n");
        return 2;
    }
    float *arenas[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        if (!(arenas[t] = aligned_alloc(64, ARENA * sizeof(float)))) {
            fprintf(stderr, "gemm_replay: out of memory\n");
            return 1;
        }
        for (size_t i = 0; i < ARENA; i++) arenas[t][i] = (float)(i % 7) * 0.01f;
    }
    /* hot and cold in turn, so that a minute of a disturbed host weighs on both alike */
    double hot = 1e30, cold = 1e30;
    for (int r = 0; r < repeats; r++) {
        double h = replay(arenas, 0), c = replay(arenas, 1);
        hot = h < hot ? h : hot, cold = c < cold ? c : cold;
    }
    for (int t = 0; t < threads; t++) free(arenas[t]);
    printf("replay hot %.1f cold %.1f gflop %.2f\n", flop / hot * 1e-9, flop / cold * 1e-9, flop * 1e-9);
    return 0;
}
