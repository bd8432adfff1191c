/* Lightning's EarlyStopping against core/train/early_stopping.c: the recorded decisions of
 * lightning 2.6.6 (scripts/make_early_stopping_fixtures.py -> test/fixtures/train/early_stopping.json)
 * on nine metric sequences (min/max, patience 0-3, min_delta, both thresholds, NaN and inf with
 * and without check_finite, float32 rounding at min_delta 1e-7): after every value the same
 * should_stop, wait_count and best (bit for bit as float32). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/train/early_stopping.h"
#include "test/unit/test_util.h"

static double number(const json_t *v)
{
    if (json_is_number(v)) return json_number_value(v);
    const char *s = json_string_value(v);
    cr_assert_not_null(s);
    return !strcmp(s, "nan") ? NAN : !strcmp(s, "inf") ? INFINITY : -INFINITY;
}

Test(early_stopping, decides_as_lightning_on_recorded_sequences)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/train/early_stopping.json", test_root_dir());
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    cr_assert_not_null(root, "%s: %s", path, je.text);
    json_t *cases = json_object_get(root, "cases");
    cr_assert(json_array_size(cases) >= 9);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *s = json_object_get(c, "settings");
        json_t *st = json_object_get(s, "stopping_threshold"), *dt = json_object_get(s, "divergence_threshold");
        json_t *md = json_object_get(s, "min_delta"), *cf = json_object_get(s, "check_finite");
        double stop_thr = st ? number(st) : 0, div_thr = dt ? number(dt) : 0;
        early_stopping e;
        early_stopping_init(&e, "valid/loss", !strcmp(json_string_value(json_object_get(s, "mode")), "max"),
                            md ? number(md) : 0.0, json_integer_value(json_object_get(s, "patience")),
                            cf ? json_is_true(cf) : 1, st ? &stop_thr : NULL, dt ? &div_thr : NULL);
        size_t k;
        json_t *step;
        json_array_foreach(json_object_get(c, "steps"), k, step) {
            const char *why;
            int stop = early_stopping_update(&e, number(json_object_get(step, "value")), &why);
            cr_expect_eq(stop, json_is_true(json_object_get(step, "stop")), "%s step %zu: stop %d", name, k, stop);
            cr_expect_eq(e.wait_count, json_integer_value(json_object_get(step, "wait_count")), "%s step %zu: wait %lld",
                         name, k, (long long)e.wait_count);
            float best = (float)number(json_object_get(step, "best"));
            cr_expect(memcmp(&best, &e.best, sizeof best) == 0, "%s step %zu: best %.9g, Lightning %.9g", name, k,
                      (double)e.best, (double)best);
        }
    }
    json_decref(root);
}
