/* Where Lightning validates inside training, against core/train/val_check.c: sixteen recorded fits
 * of lightning 2.6.6 (scripts/make_val_check_fixtures.py -> test/fixtures/train/val_check.json;
 * fractions and counts, the last batch, an integer above the epoch's batches, limit_train_batches
 * as a fraction and a count, check_val_every_n_epoch 2 and null, max_steps between two points,
 * accumulate_grad_batches) replayed here the way the trainer walks an epoch (train_epoch.c: after
 * each batch inside the epoch; trainer.c: at its end): the same validations at the same (epoch,
 * batch, global step), hence the same ESPnet3 checkpoint names, the same refusal, and where
 * EarlyStopping checks. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/train_data.h"
#include "core/train/val_check.h"
#include "test/unit/test_util.h"

/* A Lightning setting as the stage passes it on (stages/train.c's limit_of: an integer is -count). */
static double written(const json_t *v, double dflt)
{
    if (!v) return dflt;
    return json_is_integer(v) ? -(double)json_integer_value(v) : json_real_value(v);
}

typedef struct replay {
    char names[64][48];
    int64_t val[64][3];
    size_t n;
    int refused;
} replay;

static void record(replay *r, int64_t epoch, int64_t batch, int64_t step)
{
    cr_assert_lt(r->n, 64);
    r->val[r->n][0] = epoch, r->val[r->n][1] = batch, r->val[r->n][2] = step;
    snprintf(r->names[r->n], sizeof r->names[0], "epoch%lld_step%lld", (long long)epoch, (long long)step);
    r->n++;
}

/* The trainer's walk over the epochs: a step after every accumulate batches and at the epoch's last
 * batch, max_steps ending the epoch, validation after a batch inside the epoch where it is due,
 * and at the epoch's end by val_check_at_epoch_ends' rule or where it is due. */
static void run(const json_t *s, int64_t n, replay *r)
{
    const json_t *every = json_object_get(s, "check_val_every_n_epoch");
    val_check_opts o = {.interval = written(json_object_get(s, "val_check_interval"), 0),
                        .every_n_epochs = !every ? 1 : json_is_string(every) ? 0 : json_integer_value(every)};
    int64_t nb = (int64_t)limit_batches(written(json_object_get(s, "limit_train_batches"), 0), (size_t)n);
    const json_t *a = json_object_get(s, "accumulate_grad_batches"), *ms = json_object_get(s, "max_steps");
    int64_t acc = a ? json_integer_value(a) : 1, max_steps = ms ? json_integer_value(ms) : 0;
    int64_t epochs = json_integer_value(json_object_get(s, "max_epochs")), step = 0, total = 0;
    memset(r, 0, sizeof *r);
    for (int64_t e = 0; e < epochs && !(max_steps && step >= max_steps); e++) {
        int64_t vcb = val_check_batch(&o, nb), b = 0;
        if (!vcb) {
            r->refused = 1;
            return;
        }
        while (b < nb) {
            b++, total++;
            if (b % acc == 0 || b == nb) step++;
            if (max_steps && step >= max_steps) break;
            if (b < nb && val_check_due(&o, vcb, e, b, total)) record(r, e, b, step);
        }
        int at_end = val_check_at_epoch_ends(&o) ? (e + 1) % o.every_n_epochs == 0
                                                 : val_check_due(&o, vcb, e, b, total);
        if (at_end) record(r, e, b, step);
    }
}

static int by_name(const void *a, const void *b) { return strcmp(a, b); }

Test(val_check, validates_where_lightning_does)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/train/val_check.json", test_root_dir());
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    cr_assert_not_null(root, "%s: %s", path, je.text);
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(root, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        const json_t *s = json_object_get(c, "settings");
        replay r;
        run(s, json_integer_value(json_object_get(c, "batches")), &r);
        json_t *error = json_object_get(c, "error");
        cr_expect_eq(r.refused, error != NULL, "%s: refused %d, Lightning: %s", name, r.refused,
                     error ? json_string_value(error) : "no error");
        if (error) continue;
        json_t *vals = json_object_get(c, "validations"), *ckpts = json_object_get(c, "checkpoints");
        cr_expect_eq(r.n, json_array_size(vals), "%s: %zu validations, Lightning %zu", name, r.n,
                     json_array_size(vals));
        for (size_t k = 0; k < r.n && k < json_array_size(vals); k++)
            for (int f = 0; f < 3; f++)
                cr_expect_eq(r.val[k][f], json_integer_value(json_array_get(json_array_get(vals, k), (size_t)f)),
                             "%s: validation %zu field %d", name, k, f);
        qsort(r.names, r.n, sizeof r.names[0], by_name); /* the fixture lists the files in name order */
        for (size_t k = 0; k < r.n && k < json_array_size(ckpts); k++)
            cr_expect_str_eq(r.names[k], json_string_value(json_array_get(ckpts, k)), "%s: checkpoint %zu", name, k);
        const json_t *every = json_object_get(s, "check_val_every_n_epoch");
        val_check_opts o = {.interval = written(json_object_get(s, "val_check_interval"), 0),
                            .every_n_epochs = !every ? 1 : json_is_string(every) ? 0 : json_integer_value(every)};
        cr_expect_eq(val_check_early_stopping_at_epoch_end(&o),
                     json_is_true(json_object_get(c, "early_stopping_checks_at_epoch_end")), "%s: EarlyStopping", name);
    }
    cr_assert_eq(i, 16);
    json_decref(root);
}
