/* Validation: the mean loss and the greedy CER of the valid split, its batches striped over the
 * ranks. The log-probabilities are copied to the host for the greedy decode. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/train/trainer_internal.h"

/* Greedy CER counts of one batch's log-probabilities (device) against its labels. */
static void batch_cer(trainer *t, const asr_batch *ab, float **host_logp, size_t *cap, err_counts *cer)
{
    asr_model *m = &t->model;
    size_t n = (size_t)ab->B * (size_t)m->T2 * (size_t)m->dims.vocab;
    if (n > *cap) {
        *host_logp = xrealloc(*host_logp, n * sizeof **host_logp);
        *cap = n;
    }
    t->be->synchronize(t->be);
    t->be->copy(t->be, *host_logp, m->logp, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    int *hyp = xmalloc(((size_t)m->T2 + 1) * sizeof *hyp);
    for (int i = 0; i < ab->B; i++) {
        const float *lp = *host_logp + (size_t)i * m->T2 * m->dims.vocab;
        int nh = ctc_greedy_decode(hyp, lp, m->hlens[i], m->dims.vocab);
        cer_add(cer, &t->ec, hyp, (size_t)nh, ab->labels + (size_t)i * ab->Lmax, (size_t)ab->label_lens[i]);
    }
    free(hyp);
}

int validate(trainer *t, double *loss_out, double *cer_out, esp_err *err)
{
    split_data *s = &t->valid;
    size_t nb = limit_batches(t->o->limit_val, s->batches.n);
    size_t *items = xmalloc((s->keys.n + 1) * sizeof *items);
    float *host_logp = NULL;
    size_t cap = 0;
    double loss_sum = 0;
    size_t utts = 0;
    err_counts cer = {0};
    /* Eval-mode BatchNorm uses running statistics; every rank takes rank 0's, the saved ones. */
    int rc = sync_buffers_from_rank0(t, err);
    for (size_t b = (size_t)t->rank; rc == 0 && b < nb; b += (size_t)t->world) {
        size_t n = split_batch_items(s, &s->batches, b, items);
        asr_batch ab;
        if (asr_batch_load(&ab, &s->data, items, (int)n, 0, err) != 0) {
            rc = -1;
            break;
        }
        asr_model *m = &t->model;
        asr_model_forward(m, trainer_to_device(t, &ab), ab.feat_lens, ab.B, (int)ab.Tmax, 0, 0);
        double loss = asr_model_loss(m, ab.labels, ab.label_lens, (int)ab.Lmax, NULL);
        loss_sum += loss * (double)n;
        utts += n;
        batch_cer(t, &ab, &host_logp, &cap, &cer);
        asr_batch_free(&ab);
    }
    free(items);
    free(host_logp);
    if (rc != 0) return -1;
    if (t->world > 1) {
        /* Every rank's sums, gathered as doubles and added in rank order: the same bits everywhere. */
        double mine[4] = {loss_sum, (double)utts, (double)cer.edits, (double)cer.ref_len};
        double *all = xcalloc((size_t)t->world * 4, sizeof *all);
        memcpy(all + (size_t)t->rank * 4, mine, sizeof mine);
        rc = host_all_gather(t, all, (size_t)t->world * 4 * sizeof *all, err);
        loss_sum = 0, utts = 0, cer.edits = 0, cer.ref_len = 0;
        for (int r = 0; r < t->world; r++) {
            loss_sum += all[r * 4];
            utts += (size_t)all[r * 4 + 1];
            cer.edits += (size_t)all[r * 4 + 2];
            cer.ref_len += (size_t)all[r * 4 + 3];
        }
        free(all);
        if (rc != 0) return -1;
    }
    *loss_out = utts ? loss_sum / (double)utts : NAN;
    *cer_out = err_rate(&cer);
    return 0;
}
