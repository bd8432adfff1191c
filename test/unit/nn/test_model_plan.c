/* The arena planner (core/nn/model_plan.h) against the CPU backend's buffers: for the tiny
 * Transformer, Conformer and hybrid CTC/attention models at a batch shape, the planned regions
 * must be exactly the buffers the model allocates on the CPU backend at init (parameters,
 * gradients), by Adam (moments) and in a real forward, loss and backward of a batch of that shape
 * (activations), in order and size; regions aligned and disjoint; the totals add up. Suite
 * `model_plan`. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/nn/model_plan.h"
#include "core/train/optim.h"

TestSuite(model_plan);

/* A CPU backend that records the size of every allocation. */
static backend *cpu;
static size_t rec[4096];
static size_t nrec;

static void *rec_alloc(backend *be, size_t bytes)
{
    (void)be;
    cr_assert(nrec < sizeof rec / sizeof rec[0]);
    rec[nrec++] = bytes;
    return cpu->alloc(cpu, bytes);
}

static void rec_free(backend *be, void *p)
{
    (void)be;
    cpu->free(cpu, p);
}

static model_dims dims_of(const char *kind)
{
    model_dims d = {.idim = 80, .d = 32, .heads = 4, .ff = 64, .blocks = 2, .vocab = 31};
    if (!strcmp(kind, "conformer")) {
        d.encoder = ENC_CONFORMER, d.macaron = 1, d.rel_pos = 1, d.use_cnn = 1, d.cnn_kernel = 7;
        d.act = ACT_SWISH;
    }
    if (!strcmp(kind, "hybrid")) d.dec_blocks = 2, d.dec_heads = 4, d.dec_ff = 64;
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    return d;
}

static void check(const char *kind, int B, int T, int Lmax)
{
    model_dims d = dims_of(kind);
    model_rates rates = {.dropout = 0.1f, .ctc_weight = d.dec_blocks ? 0.3f : 1.0f, .lsm_weight = 0.1f};
    arena_plan p;
    optim_opts adam = optim_opts_default(OPTIM_ADAM);
    model_arena_plan(&p, &d, &rates, B, T, Lmax, optim_buffer_count(&adam));

    /* Aligned, disjoint, in kind order, totals. */
    size_t sum[ARENA_KINDS] = {0}, end = 0;
    for (size_t i = 0; i < p.n; i++) {
        cr_assert_eq(p.regions[i].offset % ARENA_ALIGN, 0);
        cr_assert_geq(p.regions[i].offset, end, "%s: region %zu overlaps", kind, i);
        cr_assert(i == 0 || p.regions[i].kind >= p.regions[i - 1].kind);
        end = p.regions[i].offset + p.regions[i].bytes;
        sum[p.regions[i].kind] += p.regions[i].bytes;
    }
    cr_assert_leq(end, p.total);
    cr_assert_lt(p.total - end, ARENA_ALIGN);
    for (int k = 0; k < ARENA_KINDS; k++) cr_assert_eq(sum[k], p.kind_bytes[k], "%s %s", kind, arena_kind_name(k));
    cr_assert_eq(p.staging_bytes, (size_t)B * T * 80 * 4 + (size_t)B * Lmax * 4 + 2 * (size_t)B * 4);

    /* The real thing on the CPU backend. */
    esp_err err;
    cpu = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert(cpu, "%s", err.msg);
    backend w = *cpu;
    w.alloc = rec_alloc, w.free = rec_free;
    nrec = 0;
    asr_model m;
    asr_model_init(&m, &w, &d, &rates);
    optim_state opt;
    optim_state_init(&opt, &w, m.table.total, &adam);
    size_t n_setup = nrec;
    cr_assert_eq(m.table.state_total * 4, p.kind_bytes[ARENA_PARAMS]);
    cr_assert_eq(m.table.total * 4, p.kind_bytes[ARENA_GRADS]);
    cr_assert_eq(2 * m.table.total * 4, p.kind_bytes[ARENA_MOMENTS]);
    /* A batch of exactly that shape: random features, lengths up to T, labels up to Lmax. */
    float *feats = w.alloc(&w, (size_t)B * T * 80 * sizeof(float));
    nrec--; /* the test's own buffer */
    float *host = malloc((size_t)B * T * 80 * sizeof *host);
    srand(7);
    for (size_t i = 0; i < (size_t)B * T * 80; i++) host[i] = (float)rand() / RAND_MAX - 0.5f;
    w.copy(&w, feats, host, (size_t)B * T * 80 * sizeof *host, BACKEND_HOST_TO_DEVICE);
    int lens[8], *labels = calloc((size_t)B * Lmax, sizeof *labels), llens[8];
    for (int b = 0; b < B; b++) {
        lens[b] = T - 7 * b;
        llens[b] = Lmax - b;
        for (int i = 0; i < llens[b]; i++) labels[b * Lmax + i] = 1 + (b + 3 * i) % (d.vocab - 2);
    }
    float *params = calloc(m.table.state_total, sizeof *params);
    for (size_t i = 0; i < m.table.total; i++) params[i] = ((float)rand() / RAND_MAX - 0.5f) * 0.2f;
    asr_model_params_from_host(&m, params);
    asr_model_zero_grad(&m);
    asr_model_forward(&m, feats, lens, B, T, 1, 5);
    double loss = asr_model_loss(&m, labels, llens, Lmax, NULL);
    cr_assert(loss == loss, "%s: NaN loss", kind);
    asr_model_backward(&m, 1.0f);

    /* Setup: the first regions exactly. */
    size_t i = 0;
    for (; i < n_setup; i++) cr_assert_eq(rec[i], p.regions[i].bytes, "%s: setup allocation %zu", kind, i);
    cr_assert_eq(p.regions[n_setup].kind, ARENA_ACTS);
    /* The step: the plan's activations in order, the first ones before any op runs (the encoder's
     * and the head's); the CPU backend's own scratch may come between (not planned). */
    cr_assert_eq(rec[n_setup], p.regions[n_setup].bytes, "%s: the first activation", kind);
    size_t j = n_setup, unplanned = 0;
    for (i = n_setup; i < nrec && j < p.n; i++) {
        if (rec[i] == p.regions[j].bytes) j++;
        else unplanned++;
    }
    unplanned += nrec - i;
    cr_assert_eq(j, p.n, "%s: planned region %zu (%zu bytes) never allocated", kind, j,
                 j < p.n ? p.regions[j].bytes : 0);
    fprintf(stderr, "model_plan: %s B %d T %d Lmax %d: %zu regions, arena %zu bytes (params %zu, grads %zu, moments "
            "%zu, activations %zu), staging %zu; the CPU run allocated all of them in order, plus %zu of its own "
            "scratch\n", kind, B, T, Lmax, p.n, p.total, p.kind_bytes[0], p.kind_bytes[1], p.kind_bytes[2],
            p.kind_bytes[3], p.staging_bytes, unplanned);
    free(params), free(labels), free(host);
    w.free(&w, feats);
    optim_state_free(&opt);
    asr_model_free(&m);
    backend_close(cpu);
    arena_plan_free(&p);
}

Test(model_plan, transformer_matches_the_cpu_backends_buffers) { check("transformer", 3, 150, 9); }
Test(model_plan, conformer_matches_the_cpu_backends_buffers) { check("conformer", 2, 131, 7); }
Test(model_plan, hybrid_matches_the_cpu_backends_buffers) { check("hybrid", 3, 97, 11); }

/* The plan grows with the batch as the activations do, and only they. */
Test(model_plan, activations_scale_with_the_batch_shape)
{
    model_dims d = dims_of("hybrid");
    model_rates r = {.ctc_weight = 0.3f};
    arena_plan a, b;
    model_arena_plan(&a, &d, &r, 2, 100, 10, 2);
    model_arena_plan(&b, &d, &r, 4, 100, 10, 3);
    cr_assert_eq(a.kind_bytes[ARENA_PARAMS], b.kind_bytes[ARENA_PARAMS]);
    cr_assert_eq(a.kind_bytes[ARENA_GRADS], b.kind_bytes[ARENA_GRADS]);
    cr_assert_eq(3 * a.kind_bytes[ARENA_MOMENTS], 2 * b.kind_bytes[ARENA_MOMENTS]); /* amsgrad: a third moment */
    cr_assert_gt(b.kind_bytes[ARENA_ACTS], a.kind_bytes[ARENA_ACTS] * 19 / 10);
    arena_plan_free(&a);
    arena_plan_free(&b);
}
