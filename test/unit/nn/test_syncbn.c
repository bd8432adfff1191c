/* trainer.sync_batchnorm (core/nn/encoder_syncbn.c) on two ranks simulated by two threads, each
 * with its own backend and model and an all-reduce hook that sums the two ranks' buffers: with the
 * same padded length on every rank, two synchronized ranks of batch 2 compute what one rank computes
 * on the batch of 4 (torch's SyncBatchNorm = BatchNorm over the global batch): the mean of the
 * ranks' gradients is the one rank's gradient, each rank's encoder output is its half of the one
 * rank's, and both ranks hold the one rank's running statistics, bit for bit the same on both.
 * Without the hook the ranks normalize with their own halves and the gradients differ. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/nn/model.h"
#include "test/unit/test_util.h"

enum { B = 4, T = 40, IDIM = 20, L = 4 };

typedef struct shared {
    pthread_barrier_t bar;
    float *slot[2];
    size_t n[2];
} shared;

typedef struct rank_ctx {
    shared *sh;
    int rank, sync;
    const model_dims *dims;
    const float *state, *feats; /* the whole batch */
    const int *labels;
    float *grads, *enc, *buffers; /* out: gradients, encoder output (2 x T2 x d), buffers */
    size_t nenc;
} rank_ctx;

static void hook(void *ctx, float *host, size_t n)
{
    rank_ctx *r = ctx;
    shared *sh = r->sh;
    sh->slot[r->rank] = host, sh->n[r->rank] = n;
    pthread_barrier_wait(&sh->bar);
    cr_assert_eq(sh->n[0], sh->n[1], "the ranks reduce different lengths");
    float *sum = malloc(n * sizeof *sum);
    for (size_t i = 0; i < n; i++) sum[i] = sh->slot[0][i] + sh->slot[1][i];
    pthread_barrier_wait(&sh->bar); /* both have read both inputs */
    memcpy(host, sum, n * sizeof *sum);
    free(sum);
}

static model_dims dims_of(void)
{
    model_dims d = {.idim = IDIM, .d = 16, .heads = 2, .ff = 24, .blocks = 2, .vocab = 9, .encoder = ENC_CONFORMER,
                    .macaron = 1, .rel_pos = 1, .use_cnn = 1, .cnn_kernel = 5, .input_layer = IN_CONV2D};
    d.f2 = input_layer_out_bins(IN_CONV2D, IDIM);
    return d;
}

/* One training step of `nb` utterances starting at `first`; outputs into r. */
static void run_model(rank_ctx *r, int first, int nb, bn_sync sync)
{
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    model_rates rates = {0};
    asr_model_init(&m, be, r->dims, &rates);
    asr_model_state_from_host(&m, r->state);
    m.sync = sync;
    int lens[B], ylens[B];
    for (int b = 0; b < nb; b++) lens[b] = T, ylens[b] = L;
    asr_model_zero_grad(&m);
    asr_model_forward(&m, r->feats + (size_t)first * T * IDIM, lens, nb, T, 1, 0);
    asr_model_loss(&m, r->labels + (size_t)first * L, ylens, L, NULL);
    asr_model_backward(&m, 1.0f);
    r->nenc = (size_t)nb * m.T2 * m.dims.d;
    r->enc = malloc(r->nenc * sizeof *r->enc);
    be->copy(be, r->enc, m.lnf, r->nenc * sizeof(float), BACKEND_DEVICE_TO_HOST);
    r->grads = malloc(m.table.total * sizeof *r->grads);
    be->copy(be, r->grads, m.grads, m.table.total * sizeof(float), BACKEND_DEVICE_TO_HOST);
    float *st = malloc(m.table.state_total * sizeof *st);
    asr_model_state_to_host(&m, st);
    r->buffers = malloc((m.table.state_total - m.table.total + 1) * sizeof *st);
    memcpy(r->buffers, st + m.table.total, (m.table.state_total - m.table.total) * sizeof *st);
    free(st);
    asr_model_free(&m);
    backend_close(be);
}

static void *rank_main(void *p)
{
    rank_ctx *r = p;
    run_model(r, 2 * r->rank, 2, r->sync ? (bn_sync){hook, r} : (bn_sync){0});
    return NULL;
}

static double rel(const float *a, const float *b, size_t n)
{
    return test_err_ff(a, b, n, 1.0, NULL);
}

static void two_ranks(int sync, rank_ctx *r, const rank_ctx *base)
{
    shared sh;
    pthread_barrier_init(&sh.bar, NULL, 2);
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
        r[k] = *base;
        r[k].sh = &sh, r[k].rank = k, r[k].sync = sync;
        pthread_create(&th[k], NULL, rank_main, &r[k]);
    }
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&sh.bar);
}

Test(syncbn, two_synchronized_ranks_are_one_rank_on_the_whole_batch)
{
    model_dims dims = dims_of();
    param_table t;
    param_table_build(&t, &dims);
    float *state = calloc(t.state_total, sizeof *state);
    esp_err err;
    cr_assert_eq(param_init(state, &t, NULL, 11, &err), 0);
    param_buffers_init(state, &t);
    float *feats = malloc((size_t)B * T * IDIM * sizeof *feats);
    unsigned s = 7;
    for (size_t i = 0; i < (size_t)B * T * IDIM; i++) s = s * 1103515245u + 12345u, feats[i] = (float)((s >> 8) % 2001) / 500.0f - 2;
    /* Different utterances per rank: per-rank statistics then differ from the global ones. */
    for (size_t i = (size_t)2 * T * IDIM; i < (size_t)B * T * IDIM; i++) feats[i] = 0.5f * feats[i] + 0.7f;
    int labels[B * L];
    for (int i = 0; i < B * L; i++) labels[i] = 1 + i % 7;

    rank_ctx one = {.dims = &dims, .state = state, .feats = feats, .labels = labels};
    run_model(&one, 0, B, (bn_sync){0});
    rank_ctx r[2];
    two_ranks(1, r, &one);

    size_t np = t.total, nb = t.state_total - t.total;
    float *avg = malloc(np * sizeof *avg);
    for (size_t i = 0; i < np; i++) avg[i] = (r[0].grads[i] + r[1].grads[i]) / 2;
    double eg = 0;
    for (size_t i = 0; i < t.n; i++) {
        const param_info *p = &t.items[i];
        if (p->kind != PARAM_TRAINED || strstr(p->name, "linear_k.bias") || strstr(p->name, "depthwise_conv.bias"))
            continue; /* true gradient 0: rounding noise on both sides */
        double e = rel(avg + p->offset, one.grads + p->offset, p->count);
        cr_expect_lt(e, 1e-4, "%s: %g", p->name, e);
        eg = fmax(eg, e);
    }
    double e0 = rel(r[0].enc, one.enc, r[0].nenc), e1 = rel(r[1].enc, one.enc + r[0].nenc, r[1].nenc);
    cr_expect_lt(fmax(e0, e1), 1e-5, "encoder outputs: %g %g", e0, e1);
    cr_assert(!memcmp(r[0].buffers, r[1].buffers, nb * sizeof(float)), "the ranks' running statistics differ");
    double eb = rel(r[0].buffers, one.buffers, nb);
    cr_expect_lt(eb, 1e-5, "running statistics: %g", eb);
    cr_log_info("sync_batchnorm, 2 ranks x 2 vs 1 rank x 4: gradients %.3g, encoder outputs %.3g %.3g, running "
                "statistics %.3g (rel)", eg, e0, e1, eb);

    /* Without synchronization each rank normalizes its own half: the averaged gradient is not the
     * whole batch's. */
    rank_ctx u[2];
    two_ranks(0, u, &one);
    for (size_t i = 0; i < np; i++) avg[i] = (u[0].grads[i] + u[1].grads[i]) / 2;
    const param_info *bw = param_find(&t, "encoder.encoders.0.conv_module.norm.weight");
    double eu = rel(avg + bw->offset, one.grads + bw->offset, bw->count);
    cr_log_info("without sync_batchnorm: BatchNorm weight gradient differs by %.3g (rel)", eu);
    cr_expect_gt(eu, 1e-3, "unsynchronized ranks should differ from the whole batch");
    for (int k = 0; k < 2; k++) free(r[k].grads), free(r[k].enc), free(r[k].buffers);
    for (int k = 0; k < 2; k++) free(u[k].grads), free(u[k].enc), free(u[k].buffers);
    free(one.grads), free(one.enc), free(one.buffers), free(avg), free(feats), free(state);
    param_table_free(&t);
}
