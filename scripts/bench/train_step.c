/* Driver of scripts/bench/train_step: times one training step (forward + CTC loss + backward +
 * Adam) of the reference model (d 256, 4 heads, FF 1024, 6 blocks, vocab 30) on a batch of
 * 16 x 400 frames x 80 dims with 50 labels, dropout 0.1 as the reference's train mode.
 *   train_step THREADS STEPS WARMUP   -> prints "ms <median> min <min> loss <last>" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/backend.h"
#include "core/model.h"
#include "core/optim.h"
#include "core/progress.h"
#include "core/rng.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1, steps = argc > 2 ? atoi(argv[2]) : 10;
    int warmup = argc > 3 ? atoi(argv[3]) : 3;
    enum { B = 16, T = 400, L = 50 };
    model_dims d = {.idim = 80, .d = 256, .heads = 4, .ff = 1024, .blocks = 6, .vocab = 30};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    backend be;
    esp_err err;
    if (backend_cpu_init(&be, threads, &err) != 0) esp_die_err(&err);
    model_rates rates = {.dropout = 0.1f, .pos_dropout = 0.1f, .att_dropout = 0.0f};
    asr_model m;
    asr_model_init(&m, &be, &d, &rates);
    if (param_init(m.params, &m.table, NULL, 0, &err) != 0) esp_die_err(&err);
    float *feats = malloc((size_t)B * T * 80 * sizeof *feats);
    rng r;
    rng_init(&r, 1);
    for (size_t i = 0; i < (size_t)B * T * 80; i++) feats[i] = (float)((double)(rng_next(&r) >> 11) / 9007199254740992.0 * 2 - 1);
    int lens[B], labels[B * L], ylens[B];
    for (int b = 0; b < B; b++) lens[b] = T, ylens[b] = L;
    for (int i = 0; i < B * L; i++) labels[i] = (int)rng_uniform_int(&r, 2, 29);
    optim_opts o = optim_opts_default(OPTIM_ADAM);
    adam_state st;
    adam_state_init(&st, m.table.total, 0);
    double *ms = malloc((size_t)steps * sizeof *ms), loss = 0;
    for (int i = 0; i < warmup + steps; i++) {
        double t0 = now_seconds();
        asr_model_zero_grad(&m);
        asr_model_forward(&m, feats, lens, B, T, 1, (uint64_t)i);
        loss = asr_model_loss(&m, labels, ylens, L, NULL);
        asr_model_backward(&m, 1.0f);
        adam_step(m.params, &st, m.grads, &o, 1e-3, threads);
        double t = now_seconds() - t0;
        if (i >= warmup) ms[i - warmup] = t * 1e3;
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("ms %.1f min %.1f loss %.3f maxrss_mb %.0f params %zu\n", ms[steps / 2], ms[0], loss, ru.ru_maxrss / 1024.0,
           m.table.total);
    adam_state_free(&st);
    asr_model_free(&m);
    be.destroy(&be);
    free(feats);
    free(ms);
    return 0;
}
