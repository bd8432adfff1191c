/* Lightning's validation points; see val_check.h. */
#include "core/train/val_check.h"

int64_t val_check_batch(const val_check_opts *o, int64_t nb)
{
    if (o->interval < 0) {
        int64_t n = (int64_t)-o->interval;
        return o->every_n_epochs > 0 && n > nb ? 0 : n;
    }
    if (o->interval == 0 || o->interval == 1.0) return nb > 0 ? nb : 1;
    int64_t n = (int64_t)((double)nb * o->interval); /* Python's int(max_batches * val_check_interval) */
    return n > 1 ? n : 1;
}

int val_check_due(const val_check_opts *o, int64_t vcb, int64_t epoch_idx, int64_t done, int64_t total)
{
    if (vcb <= 0) return 0;
    if (o->every_n_epochs > 0 && (epoch_idx + 1) % o->every_n_epochs != 0) return 0;
    return (o->every_n_epochs > 0 ? done : total) % vcb == 0;
}

int val_check_at_epoch_ends(const val_check_opts *o)
{
    return (o->interval == 0 || o->interval == 1.0) && o->every_n_epochs > 0;
}

int val_check_early_stopping_at_epoch_end(const val_check_opts *o)
{
    return (o->interval == 0 || o->interval == 1.0 || o->interval == -1) && o->every_n_epochs == 1;
}
