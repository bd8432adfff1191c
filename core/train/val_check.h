/* Where Lightning 2.6.6 validates inside training: trainer.val_check_interval (a fraction of the
 * epoch's batches, or a number of batches) and check_val_every_n_epoch (every n-th epoch, or null:
 * the batches counted over epochs), as its fit loop computes val_check_batch
 * (loops/fit_loop.py setup_data) and decides after each batch (training_epoch_loop.py
 * _should_check_val_fx), and where its EarlyStopping checks (at the epoch's end or after each
 * validation). Pure functions; the trainer's side is core/train/train_valcheck.c. */
#ifndef ESPNET3_TRAIN_VAL_CHECK_H
#define ESPNET3_TRAIN_VAL_CHECK_H

#include <stdint.h>

typedef struct val_check_opts {
    double interval;        /* 0 (left out) or 1.0: the epoch's end; (0, 1): a fraction of its batches;
                             * < 0: every -interval batches (an integer in the config; -1: every batch) */
    int64_t every_n_epochs; /* check_val_every_n_epoch >= 1; 0: null (Lightning's None) */
} val_check_opts;

/* Lightning's val_check_batch for an epoch of nb batches: an integer's count, max(1, int(nb *
 * fraction)), nb at the epoch's end. 0 when an integer interval exceeds nb while epochs count
 * (Lightning's ValueError: "must be less than or equal to the number of the training batches"). */
int64_t val_check_batch(const val_check_opts *o, int64_t nb);

/* Whether validation runs after the batch that made `done` batches of epoch epoch_idx (0-based)
 * and `total` batches over all epochs, with that epoch's val_check_batch vcb. Lightning does not
 * validate at an epoch's end that is not such a point (an epoch of 5 batches at 0.5 validates
 * after batches 2 and 4). */
int val_check_due(const val_check_opts *o, int64_t vcb, int64_t epoch_idx, int64_t done, int64_t total);

/* 1 for espnet3's default (interval 1.0, every n epochs): validation at every n-th epoch's end, also
 * when max_steps ends an epoch early (as espnet3 did before val_check_interval was built). */
int val_check_at_epoch_ends(const val_check_opts *o);

/* Whether Lightning's EarlyStopping checks at the train epoch's end (its check_on_train_epoch_end
 * default: val_check_interval == 1.0, which the integer 1 equals in Python, and
 * check_val_every_n_epoch 1), else after each validation. */
int val_check_early_stopping_at_epoch_end(const val_check_opts *o);

#endif
