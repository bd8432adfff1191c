/* Token times from a CTC forced alignment; see ctc_times.h. */
#include "core/decode/ctc_times.h"

#include <math.h>
#include <stdlib.h>

#include "core/base/log.h"
#include "core/nn/model_params.h"

ctc_clock ctc_clock_of(int input_layer, int hop, int fs, int feat_frames)
{
    input_conv c[3];
    int n = input_layer_convs(input_layer, c), S = 1, R = 1;
    for (int i = 0; i < n; i++) {
        R += (c[i].k - 1) * S;
        S *= c[i].s;
    }
    double h = (double)hop / fs;
    return (ctc_clock){.origin = 0.5 * (R - 1 - S) * h, .step = S * h, .limit = (feat_frames > 1 ? feat_frames - 1 : 0) * h};
}

static double clamp_time(const ctc_clock *ck, double t)
{
    return t < 0 ? 0 : t > ck->limit ? ck->limit : t;
}

double ctc_token_times(backend *be, const float *logp_dev, const float *logp_host, int T, int V, const int *ids,
                       size_t n, const ctc_clock *ck, double *start, double *end, double *score)
{
    int *path = xmalloc(((size_t)T + 1) * sizeof *path);
    size_t *frames = xcalloc(n + 1, sizeof *frames);
    double best = be->ctc_align(be, path, logp_dev, T, V, ids, (int)n);
    for (size_t i = 0; i < n; i++) start[i] = end[i] = score[i] = NAN;
    if (best > -INFINITY)
        for (int t = 0; t < T; t++) {
            if (!(path[t] & 1)) continue; /* a blank */
            size_t i = (size_t)path[t] / 2;
            double a = clamp_time(ck, ck->origin + t * ck->step), b = clamp_time(ck, ck->origin + (t + 1) * ck->step);
            double lp = logp_host[(size_t)t * V + ids[i]];
            if (frames[i]++ == 0) start[i] = a, score[i] = 0;
            end[i] = b;
            score[i] += lp;
        }
    for (size_t i = 0; i < n; i++)
        if (frames[i]) score[i] /= (double)frames[i];
    free(frames);
    free(path);
    return best;
}
