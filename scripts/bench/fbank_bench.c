/* Log-mel throughput of core/data/frontend.c: reads the WAVs named on stdin into memory, then computes
 * features for all of them with N threads (one frontend each, utterances handed out through an
 * atomic counter), `runs` times after one warm-up pass. Prints the median seconds and the audio
 * seconds processed per second. Built and run by scripts/bench/fbank.
 *   fbank_bench <threads> <runs> <n_fft> <win_length> <hop_length> < wav_list */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/progress.h"
#include "core/data/audio.h"
#include "core/data/frontend.h"

typedef struct job {
    float **x;
    size_t *n;
    size_t count;
    frontend_opts o;
    atomic_size_t next;
    double checksum[64];
} job;

typedef struct worker {
    job *j;
    int id;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    job *j = w->j;
    frontend *f = frontend_new(&j->o);
    float *out = NULL;
    size_t cap = 0;
    double sum = 0;
    for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->count;) {
        size_t need = frontend_num_frames(f, j->n[i]) * (size_t)j->o.n_mels;
        if (need > cap) out = xrealloc(out, (cap = need) * sizeof *out);
        frontend_logmel(out, f, j->x[i], j->n[i]);
        sum += out[need / 2]; /* keeps the work observable */
    }
    j->checksum[w->id] = sum;
    free(out);
    frontend_free(f);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: fbank_bench <threads> <runs> <n_fft> <win_length> <hop_length> < wav_list\n");
        return 2;
    }
    int threads = atoi(argv[1]), runs = atoi(argv[2]);
    if (threads < 1 || threads > 64 || runs < 1 || runs > 100) return 2;
    job j = {0};
    frontend_conf_cfg c = {.n_fft = atoi(argv[3]), .win_length = atoi(argv[4]), .hop_length = atoi(argv[5])};
    frontend_opts_from_cfg(&c, &j.o);
    esp_err err;
    if (frontend_opts_check(&j.o, &err)) esp_die_err(&err);
    char line[4096];
    size_t cap = 0, samples = 0;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (!*line) continue;
        if (j.count == cap) {
            cap = cap ? 2 * cap : 256;
            j.x = xrealloc(j.x, cap * sizeof *j.x);
            j.n = xrealloc(j.n, cap * sizeof *j.n);
        }
        if (audio_read(line, j.o.fs, "model.frontend_conf.fs", &j.x[j.count], &j.n[j.count], &err)) esp_die_err(&err);
        samples += j.n[j.count++];
    }
    double *secs = xmalloc((size_t)(runs + 1) * sizeof *secs);
    for (int r = 0; r <= runs; r++) { /* run 0 warms caches and FFTW */
        atomic_store(&j.next, 0);
        pthread_t tid[64];
        worker w[64];
        double t0 = now_seconds();
        for (int t = 0; t < threads; t++) {
            w[t] = (worker){&j, t};
            pthread_create(&tid[t], NULL, work, &w[t]);
        }
        for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
        secs[r] = now_seconds() - t0;
    }
    qsort(secs + 1, (size_t)runs, sizeof *secs, cmp_double);
    double med = secs[1 + runs / 2], audio = (double)samples / j.o.fs;
    printf("utterances %zu audio_s %.3f median_s %.6f audio_s_per_s %.1f\n", j.count, audio, med, audio / med);
    for (size_t i = 0; i < j.count; i++) free(j.x[i]);
    free(j.x);
    free(j.n);
    free(secs);
    return 0;
}
