/* The host backends' loss state (core/compute/loss_state.h). */
#include "core/compute/loss_state.h"

#include <stdlib.h>

#include "core/base/log.h"

double *loss_state_ctc_work(loss_state *s, const ctc_labels *y, int B, int T)
{
    size_t need = ctc_workspace_size(B, T, ctc_max_label_len(y, B));
    if (need > s->ctc_cap) {
        s->ctc_work = xrealloc(s->ctc_work, need * sizeof *s->ctc_work);
        s->ctc_cap = need;
    }
    return s->ctc_work;
}

double *loss_state_rnnt_chunk(loss_state *s, const int *hlens, const ctc_labels *y, int B, int T, int U1, int V,
                              int blank, int t0, int tc)
{
    rnnt_batch_chunk(&s->rnnt, hlens, y, B, T, U1, V, blank, t0, tc);
    size_t need = rnnt_lattice_size(B, T, U1);
    if (t0 == 0 && need > s->rnnt_cap) {
        s->rnnt_lat = xrealloc(s->rnnt_lat, need * sizeof *s->rnnt_lat);
        s->rnnt_cap = need;
    }
    return s->rnnt_lat;
}

void loss_state_free(loss_state *s)
{
    free(s->ctc_work);
    free(s->rnnt_lat);
}
