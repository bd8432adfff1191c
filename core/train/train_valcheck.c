/* Validation inside an epoch (trainer.val_check_interval, check_val_every_n_epoch null), on the
 * points of core/train/val_check.h: after such a batch every rank validates (on the EMA's average
 * when EMAWeightAveraging is on, as Lightning swaps it in), rank 0 logs the metrics at the global
 * step, EarlyStopping decides (unless it checks at epoch ends only) and a checkpoint of this batch
 * ranks in the best-k tables, as ESPnet3's best-k ModelCheckpoints save on every validation's end.
 * The checkpoint resumes at the next batch of the epoch, bit for bit. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/train/trainer_internal.h"
#include "core/train/val_check.h"

/* The least of the ranks' batch counts: the epoch ends when any rank runs out (the end-of-epoch
 * agreement), so that is the epoch Lightning would count. */
static int epoch_batches_all(trainer *t, size_t nb, int64_t *out, esp_err *err)
{
    float f = (float)nb;
    if (t->world > 1 && host_all_reduce(t, &f, 1, COMM_MIN, err) != 0) return -1;
    *out = (int64_t)f < (int64_t)nb ? (int64_t)f : (int64_t)nb;
    return 0;
}

int val_check_epoch_start(trainer *t, size_t nb, esp_err *err)
{
    const val_check_opts *o = &t->o->val_check;
    int64_t n = (int64_t)nb;
    if (val_check_at_epoch_ends(o)) { /* espnet3's default: validation at epoch ends only */
        t->val_batch = n > 0 ? n : 1;
        return 0;
    }
    if (epoch_batches_all(t, nb, &n, err) != 0) return -1;
    t->val_batch = val_check_batch(o, n);
    if (!t->val_batch)
        return esp_fail(err, "trainer.val_check_interval: %" PRId64 " must be less than or equal to the number of "
                             "the training batches (%" PRId64 " in epoch %" PRId64 "; Lightning's error: to validate "
                             "every %" PRId64 " batches counted over epochs, set "
                             "trainer.check_val_every_n_epoch: null)",
                        (int64_t)-o->interval, n, t->epoch + 1, (int64_t)-o->interval);
    /* a point inside an accumulation would need the partial gradients of every rank in its checkpoint */
    int64_t acc = t->o->accumulate;
    if (acc > 1 && t->val_batch < n && t->val_batch % acc != 0)
        return esp_fail(err, "trainer.val_check_interval: validation after every %" PRId64 " batches of epoch "
                             "%" PRId64 " falls inside accumulations of trainer.accumulate_grad_batches %" PRId64
                             " batches, where its checkpoint could not resume (make the interval a multiple of %"
                             PRId64 " batches)", t->val_batch, t->epoch + 1, acc, acc);
    return 0;
}

int val_check_after_batch(const trainer *t)
{
    return val_check_due(&t->o->val_check, t->val_batch, t->epoch, t->epoch_batches, t->total_batches);
}

int val_check_at_epoch_end(const trainer *t)
{
    const val_check_opts *o = &t->o->val_check;
    if (t->stopped_early) return 0; /* it validated after its last batch already */
    if (val_check_at_epoch_ends(o)) return t->epoch % o->every_n_epochs == 0;
    return val_check_due(o, t->val_batch, t->epoch - 1, t->epoch_batches, t->total_batches);
}

int validate_on_average(trainer *t, size_t max_batches, metric *out, size_t *n_out, esp_err *err)
{
    float *saved;
    if (train_ema_swap_in(t, &saved, err) != 0) return -1;
    int rc = validate(t, max_batches, out, n_out, err);
    train_ema_swap_out(t, saved);
    return rc;
}

void note_monitor(trainer *t, const metric *m, size_t nm)
{
    for (size_t i = 0; t->sched.monitor && i < nm; i++)
        if (!strcmp(m[i].name, t->sched.monitor)) t->monitor_latest = m[i].value, t->monitor_seen = 1;
}

int validate_in_epoch(trainer *t, esp_err *err)
{
    metric m[VALID_METRICS_MAX + 1];
    size_t nm = 0;
    if (validate_on_average(t, 0, m, &nm, err) != 0) return -1;
    note_monitor(t, m, nm);
    char line[256], where[96];
    size_t used = 0;
    for (size_t i = 0; i < nm && used < sizeof line; i++)
        used += (size_t)snprintf(line + used, sizeof line - used, " %s %.4f", m[i].name, m[i].value);
    log_info("epoch %" PRId64 " step %" PRId64 " (batch %" PRId64 "):%s", t->epoch + 1, t->step, t->epoch_batches,
             line);
    snprintf(where, sizeof where, "at epoch %" PRId64 " step %" PRId64, t->epoch + 1, t->step);
    if (!val_check_early_stopping_at_epoch_end(&t->o->val_check) && early_stopping_says_stop(t, m, nm, where))
        t->stopped_early = 1;
    m[nm++] = (metric){"epoch", (double)t->epoch, 1};
    trainer_log_metrics(t, m, nm);
    return save_checkpoint_validated_in_epoch(t, t->epoch_batches, m, nm, err);
}
