/* all_reduce bus bandwidth of the CPU collectives, 2 ranks (forked) on this machine, against a
 * plain memcpy of the same bytes in one process. Usage: allreduce_bench [min_bytes max_bytes]
 * Prints a markdown row per size: bytes, shared-memory and TCP time and bus bandwidth, memcpy. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/dist/comm.h"
#include "core/dist/dist_store.h"
#include "core/base/progress.h"

#define WORLD 2

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds of one call of all_reduce on `bytes`, timed on rank 0 between barriers. */
static double time_allreduce(comm *c, float *buf, size_t bytes)
{
    size_t n = bytes / sizeof(float);
    esp_err e;
    double t[64];
    int runs = bytes >= (64u << 20) ? 5 : bytes >= (1u << 20) ? 15 : 51;
    comm_all_reduce(c, buf, n, COMM_SUM, &e); /* warm-up: page faults, connections */
    for (int i = 0; i < runs; i++) {
        if (comm_barrier(c, &e) != 0) exit(3);
        double t0 = now_seconds();
        if (comm_all_reduce(c, buf, n, COMM_AVG, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            exit(3);
        }
        t[i] = now_seconds() - t0;
    }
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    return t[runs / 2];
}

static double time_memcpy(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    memset(a, 1, bytes), memset(b, 2, bytes);
    double t[64];
    int runs = bytes >= (64u << 20) ? 5 : bytes >= (1u << 20) ? 15 : 51;
    for (int i = 0; i < runs; i++) {
        double t0 = now_seconds();
        memcpy(b, a, bytes);
        __asm__ __volatile__("" ::"r"(b) : "memory");
        t[i] = now_seconds() - t0;
    }
    free(a), free(b);
    qsort(t, (size_t)runs, sizeof *t, cmp_d);
    return t[runs / 2];
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    bind(fd, (struct sockaddr *)&a, sizeof a);
    getsockname(fd, (struct sockaddr *)&a, &al);
    close(fd);
    return ntohs(a.sin_port);
}

/* Runs the sizes with both ranks on one "node" (shared memory) or two (TCP); rank 0 writes the
 * medians into out[]. */
static void run(int tcp, size_t lo, size_t hi, double *out)
{
    int port = free_port(), pfd[2];
    if (pipe(pfd) != 0) exit(1);
    pid_t kids[WORLD];
    for (int r = 0; r < WORLD; r++) {
        if ((kids[r] = fork()) != 0) continue;
        esp_err e;
        dist_store *s = store_open("127.0.0.1", port, r == 0, "bench", r, WORLD, 60, &e);
        char key[16];
        snprintf(key, sizeof key, "node%d", tcp ? r : 0);
        comm *c = s ? comm_cpu_create(s, r, WORLD, key, "bench", 60, &e) : NULL;
        if (!c) {
            fprintf(stderr, "rank %d: %s\n", r, e.msg);
            _exit(2);
        }
        float *buf = calloc(hi / sizeof(float), sizeof(float));
        for (size_t b = lo; b <= hi; b *= 4) {
            double t = time_allreduce(c, buf, b);
            if (r == 0 && write(pfd[1], &t, sizeof t) != (ssize_t)sizeof t) _exit(4);
        }
        comm_barrier(c, &e);
        comm_destroy(c);
        store_close(s);
        _exit(0);
    }
    close(pfd[1]);
    for (int i = 0; read(pfd[0], &out[i], sizeof *out) == (ssize_t)sizeof *out; i++) {}
    close(pfd[0]);
    for (int r = 0; r < WORLD; r++) {
        int st;
        waitpid(kids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) exit(1);
    }
}

int main(int argc, char **argv)
{
    size_t lo = argc > 2 ? strtoull(argv[1], NULL, 10) : 1024, hi = argc > 2 ? strtoull(argv[2], NULL, 10) : (256u << 20);
    double shm[32] = {0}, tcp[32] = {0};
    run(0, lo, hi, shm);
    run(1, lo, hi, tcp);
    /* Bus bandwidth (NCCL's definition): bytes * 2 (W - 1) / W / time, what each link carries. */
    double f = 2.0 * (WORLD - 1) / WORLD;
    printf("| bytes | shm all_reduce µs | shm bus GB/s | TCP all_reduce µs | TCP bus GB/s | memcpy GB/s |\n");
    printf("|------:|------------------:|-------------:|------------------:|-------------:|------------:|\n");
    int i = 0;
    for (size_t b = lo; b <= hi; b *= 4, i++) {
        char sz[32];
        if (b >= (1u << 20)) snprintf(sz, sizeof sz, "%zu MB", b >> 20);
        else snprintf(sz, sizeof sz, "%zu KB", b >> 10);
        printf("| %s | %.1f | %.2f | %.1f | %.2f | %.2f |\n", sz, shm[i] * 1e6, f * (double)b / shm[i] / 1e9, tcp[i] * 1e6,
               f * (double)b / tcp[i] / 1e9, (double)b / time_memcpy(b) / 1e9);
    }
    return 0;
}
