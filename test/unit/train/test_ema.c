/* Lightning's EMAWeightAveraging against core/train/ema.c on the CPU backend's ema_update op: the
 * averages torch 2.11's AveragedModel (avg_fn=get_ema_avg_fn, as Lightning 2.6.6 builds it) made
 * over 300 updates of a module with parameters, a float buffer and an int64 counter, for five
 * decays with and without use_buffers (scripts/make_ema_fixtures.py -> test/fixtures/train/ema.json),
 * bit for bit after updates 1, 2, 3, 150 and 300; and should_update's answers for six argument
 * sets after steps 0-19 and epochs 0-5. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/train/ema.h"
#include "test/unit/test_util.h"

static json_t *fixture(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/train/ema.json", test_root_dir());
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    cr_assert_not_null(root, "%s: %s", path, je.text);
    return root;
}

/* The fixture's value(t, i): a whole multiple of 2^-12 from a 32-bit hash. */
static float value(uint32_t t, uint32_t i)
{
    uint32_t h = t * 2654435761u + i * 40503u + 12345u;
    h ^= h >> 13;
    h *= 0x5BD1E995u;
    h ^= h >> 15;
    return (float)(((double)(h % 40001u) - 20000.0) / 4096.0);
}

enum { N_PARAMS = 63 + 5, N_RUN = 4, N_ALL = N_PARAMS + N_RUN + 1 };

/* The module at update t: parameters w, b, the float buffer run, then the counter. */
static void model_at(float *m, uint32_t t)
{
    for (uint32_t i = 0; i < N_PARAMS + N_RUN; i++) m[i] = value(t, i);
    m[N_PARAMS + N_RUN] = (float)(7 * t + t % 5);
}

Test(ema, averages_bit_for_bit_as_torch)
{
    json_t *root = fixture();
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 2, &err);
    cr_assert_not_null(be, "%s", err.msg);
    static const ema_span spans[] = {{0, N_RUN, 0}, {N_RUN, 1, 1}};
    size_t i, checked = 0;
    json_t *c;
    json_array_foreach(json_object_get(root, "averages"), i, c) {
        ema_opts o = {.on = 1, .decay = json_number_value(json_object_get(c, "decay")), .every_n_steps = 1,
                      .start_step = -1, .start_epoch = -1,
                      .use_buffers = json_is_true(json_object_get(c, "use_buffers"))};
        float cur[N_ALL], avg[N_ALL];
        model_at(avg, 0); /* AveragedModel starts as a copy of the model */
        int64_t n_averaged = 0;
        size_t k;
        json_t *snap;
        uint32_t t = 0;
        json_array_foreach(json_object_get(c, "snapshots"), k, snap) {
            uint32_t after = (uint32_t)json_integer_value(json_object_get(snap, "after"));
            for (; t < after; n_averaged++) {
                model_at(cur, ++t);
                ema_update(be, &o, n_averaged, avg, cur, N_PARAMS, avg + N_PARAMS, cur + N_PARAMS, spans, 2);
            }
            json_t *bits = json_object_get(snap, "bits");
            cr_assert_eq(json_array_size(bits), (size_t)(N_PARAMS + N_RUN));
            for (size_t e = 0; e < N_PARAMS + N_RUN; e++) {
                uint32_t want = (uint32_t)json_integer_value(json_array_get(bits, e)), got;
                memcpy(&got, &avg[e], sizeof got);
                cr_assert_eq(got, want, "decay %g use_buffers %d after %u: element %zu is %08x (%.9g), torch %08x",
                             o.decay, o.use_buffers, after, e, got, (double)avg[e], want);
            }
            cr_assert_eq((int64_t)avg[N_PARAMS + N_RUN], json_integer_value(json_object_get(snap, "count")),
                         "decay %g use_buffers %d after %u: count %.0f", o.decay, o.use_buffers, after,
                         (double)avg[N_PARAMS + N_RUN]);
            checked++;
        }
    }
    cr_assert_eq(checked, 50);
    backend_close(be);
    json_decref(root);
}

Test(ema, updates_when_lightning_does)
{
    json_t *root = fixture();
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "should_update"), i, c) {
        json_t *a = json_object_get(c, "args"), *v;
        v = json_object_get(a, "update_every_n_steps");
        ema_opts o = {.on = 1, .decay = 0.999, .every_n_steps = v ? json_integer_value(v) : 1, .start_step = -1,
                      .start_epoch = -1, .use_buffers = 1};
        if ((v = json_object_get(a, "update_starting_at_step"))) o.start_step = json_integer_value(v);
        if ((v = json_object_get(a, "update_starting_at_epoch"))) o.start_epoch = json_integer_value(v);
        size_t k;
        json_array_foreach(json_object_get(c, "steps"), k, v)
            cr_expect_eq(ema_should_update_step(&o, (int64_t)k), json_is_true(v), "args %zu step %zu", i, k);
        json_array_foreach(json_object_get(c, "epochs"), k, v)
            cr_expect_eq(ema_should_update_epoch(&o, (int64_t)k), json_is_true(v), "args %zu epoch %zu", i, k);
    }
    cr_assert_eq(i, 6);
    json_decref(root);
}
