/* test/unit/nn/nn_fixture.h. */
#include "test/unit/nn/nn_fixture.h"
#include "test/unit/test_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const npy_array *fx_get(const npz_file *f, const char *name)
{
    const npy_array *a = npz_get(f, name);
    cr_assert_not_null(a, "fixture has no array %s", name);
    return a;
}

float *fx_floats(const npy_array *a)
{
    float *v = malloc((a->count ? a->count : 1) * sizeof *v);
    for (size_t i = 0; i < a->count; i++)
        v[i] = a->dtype == NPY_F32 ? ((const float *)a->data)[i]
               : a->dtype == NPY_I64 ? (float)((const int64_t *)a->data)[i]
                                     : (float)((const double *)a->data)[i];
    return v;
}

double fx_rel_err(const float *a, const float *b, size_t n) { return test_err_ff(a, b, n, 1.0, NULL); }

double fx_compare(const npz_file *f, const char *name, const float *ours, size_t n, double *worst, double tol)
{
    const npy_array *a = fx_get(f, name);
    cr_assert_eq(a->count, n, "%s: %zu values in the fixture, %zu here", name, a->count, n);
    float *ref = fx_floats(a);
    double e = fx_rel_err(ours, ref, n);
    free(ref);
    *worst = fmax(*worst, e);
    cr_expect_lt(e, tol, "%s differs: %g", name, e);
    return e;
}

void fx_load_state(asr_model *m, const npz_file *f)
{
    const param_table *t = &m->table;
    float *state = calloc(t->state_total, sizeof *state);
    unsigned char *seen = calloc(t->n, 1);
    for (size_t i = 0; i < f->n; i++) {
        const npy_array *a = &f->arrays[i];
        if (strncmp(a->name, "param.", 6)) continue;
        const param_info *p = param_find_alias(t, a->name + 6);
        cr_assert_not_null(p, "no entry for ESPnet's %s", a->name + 6);
        cr_assert_eq(a->count, p->count, "%s", p->name);
        cr_assert_eq(a->dtype == NPY_I64, p->kind == PARAM_COUNTER, "%s: dtype", p->name);
        float *v = fx_floats(a);
        memcpy(state + p->offset, v, p->count * sizeof *v);
        free(v);
        seen[p - t->items]++;
    }
    for (size_t k = 0; k < t->n; k++) cr_assert_eq(seen[k], 1, "%s set %d times", t->items[k].name, seen[k]);
    asr_model_state_from_host(m, state);
    free(state), free(seen);
}

void fx_load_batch(fx_batch *b, const npz_file *f, int idim, int pad)
{
    const npy_array *fe = fx_get(f, "in.feats"), *ys = fx_get(f, "in.ys");
    b->feats = fx_floats(fe);
    b->T = (int)fe->shape[1];
    cr_assert_eq((int)fe->shape[2], idim);
    float *l = fx_floats(fx_get(f, "in.lens")), *yl = fx_floats(fx_get(f, "in.ylens")), *y = fx_floats(ys);
    b->stride = (int)ys->shape[1];
    for (int i = 0; i < 2; i++) b->lens[i] = (int)l[i], b->ylens[i] = (int)yl[i];
    cr_assert(ys->count <= sizeof b->labels / sizeof *b->labels, "%zu labels", ys->count);
    for (size_t i = 0; i < ys->count; i++) b->labels[i] = y[i] < 0 ? pad : (int)y[i];
    free(l), free(yl), free(y);
}

void fx_snapshot(const asr_model *m, float **params, float **grads)
{
    size_t n = m->table.total;
    *params = malloc(n * sizeof **params);
    *grads = malloc(n * sizeof **grads);
    cr_assert(*params && *grads);
    memcpy(*params, m->params, n * sizeof **params);
    memcpy(*grads, m->grads, n * sizeof **grads);
}
