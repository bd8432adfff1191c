/* What a host backend (cpu, ref64) keeps from a loss' op for a later one: the CTC forward's
 * workspace for its backward, the RNN-T loss' lattice from rnnt_logprobs to rnnt_loss_backward
 * (both grown on demand), and the RNN-T ops' order checks (rnnt_batch, core/compute/rnnt.h). */
#ifndef ESPNET3_LOSS_STATE_H
#define ESPNET3_LOSS_STATE_H

#include <stddef.h>

#include "core/compute/ctc.h"
#include "core/compute/rnnt.h"

typedef struct loss_state {
    double *ctc_work;
    size_t ctc_cap;
    double *rnnt_lat;
    size_t rnnt_cap;
    rnnt_batch rnnt;
} loss_state;

/* The CTC forward's workspace for a batch of B utterances of T frames and labels y. */
double *loss_state_ctc_work(loss_state *s, const ctc_labels *y, int B, int T);
/* The lattice that rnnt_logprobs fills for frames t0 .. t0 + tc - 1, after the order checks
 * (rnnt_batch_chunk; the lattice is sized at t0 == 0). */
double *loss_state_rnnt_chunk(loss_state *s, const int *hlens, const ctc_labels *y, int B, int T, int U1, int V,
                              int blank, int t0, int tc);
void loss_state_free(loss_state *s);

#endif
