/* CTC segmentation as the ctc_segmentation package computes it; see ctc_segment.h. The comments
 * name the package's variables. */
#include "core/decode/ctc_segment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROB (-10000000000.0) /* CtcSegmentationParameters.max_prob */
#define FILL_PROB_MAX (-1000000000.0f) /* cython_fill_table's prob_max */

void ctcseg_text_build(ctcseg_text *out, const int *const *ids, const size_t *lens, int n, int blank)
{
    size_t cap = 2;
    for (int i = 0; i < n; i++) cap += lens[i] + 1;
    out->gt = xmalloc(cap * sizeof *out->gt);
    out->utt_begin = xmalloc(((size_t)n + 1) * sizeof *out->utt_begin);
    out->n_utts = n;
    int r = 0;
    out->gt[r++] = -1;
    for (int i = 0; i < n; i++) {
        if (out->gt[r - 1] != blank) out->gt[r++] = blank; /* blanks between utterances */
        out->utt_begin[i] = r - 1;
        for (size_t k = 0; k < lens[i]; k++) out->gt[r++] = ids[i][k];
    }
    if (out->gt[r - 1] != blank) out->gt[r++] = blank;
    out->utt_begin[n] = r - 1;
    out->rows = r;
}

void ctcseg_text_free(ctcseg_text *t)
{
    free(t->gt);
    free(t->utt_begin);
    memset(t, 0, sizeof *t);
}

/* ---- the trellis (cython_fill_table, one ground-truth column) */

typedef struct trellis {
    float *table;  /* W x N, row-major */
    long *offsets; /* N: the window's offset of each row */
    int W, N;
} trellis;

static float fmaxf_py(float a, float b) { return b > a ? b : a; } /* Python's max(a, b) */

static void fill_table(trellis *tr, const float *lpz, int T, int V, const int *gt, int blank, int flags, int *t_out)
{
    const int W = tr->W, N = tr->N;
    float *table = tr->table;
    for (size_t i = 0; i < (size_t)W * N; i++) table[i] = (float)MAX_PROB;
    float mean_offset = (float)((double)(T - W) / (double)N);
    int higher_offset = (int)mean_offset + 1, offset = 0, offset_sum = 0, last_arg_max = -1;
    long cur_offset = -1;
    table[0] = 0;
    for (int c = 0; c < N; c++) {
        if (c > 0) {
            int lo = last_arg_max - W / 2, room = (T - W) - offset_sum;
            offset = lo > 0 ? lo : 0;
            int cap = higher_offset < room ? higher_offset : room;
            offset = offset < cap ? offset : cap;
            cur_offset = offset;
            offset_sum += offset;
        }
        tr->offsets[c] = offset_sum;
        last_arg_max = -1;
        float last_max = 0;
        int stay_free = (flags & 1) && gt[c] == 0, preamble_free = (flags & 2) && c == 0;
        for (int t = c == 0 ? 1 : 0; t < W; t++) {
            float switch_prob = FILL_PROB_MAX, max_lpz_prob = FILL_PROB_MAX;
            float lp = 0;
            if (gt[c] != -1) {
                lp = lpz[(size_t)(t + offset_sum) * V + gt[c]];
                float p = t >= W - (cur_offset - 1) || t - 1 + cur_offset < 0 || c == 0
                              ? FILL_PROB_MAX
                              : table[(size_t)(t - 1 + cur_offset) * N + c - 1] + lp;
                switch_prob = fmaxf_py(switch_prob, p);
                max_lpz_prob = fmaxf_py(max_lpz_prob, lp);
            }
            float stay;
            if (t - 1 < 0) stay = FILL_PROB_MAX;
            else if (preamble_free) stay = 0;
            else if (stay_free) stay = table[(size_t)(t - 1) * N + c];
            else stay = table[(size_t)(t - 1) * N + c] + fmaxf_py(lpz[(size_t)(t + offset_sum) * V + blank], max_lpz_prob);
            float v = fmaxf_py(switch_prob, stay);
            table[(size_t)t * N + c] = v;
            if (last_arg_max == -1 || last_max < v) last_max = v, last_arg_max = t;
        }
    }
    int best = 0; /* numpy's argmax of the last column: the first maximum */
    for (int t = 1; t < W; t++)
        if (table[(size_t)t * N + N - 1] > table[(size_t)best * N + N - 1]) best = t;
    *t_out = best;
}

/* ---- the backtracking (ctc_segmentation's loop), with numpy's indexing */

/* A numpy index into n elements: negative counts from the end; outside is an IndexError (-1). */
static long np_index(long i, long n)
{
    if (i < 0) i += n;
    return i >= 0 && i < n ? i : -1;
}

typedef struct bt_ctx {
    const trellis *tr;
    const float *lpz;
    int T, V, blank;
    const int *gt;
    int bad; /* an IndexError happened */
} bt_ctx;

static float tab(bt_ctx *b, long t, long c)
{
    long ti = np_index(t, b->tr->W), ci = np_index(c, b->tr->N);
    if (ti < 0 || ci < 0) return b->bad = 1, 0;
    return b->tr->table[(size_t)ti * b->tr->N + ci];
}

static float lp_at(bt_ctx *b, long t, long k)
{
    long ti = np_index(t, b->T), ki = np_index(k, b->V);
    if (ti < 0 || ki < 0) return b->bad = 1, 0;
    return b->lpz[(size_t)ti * b->V + ki];
}

static long at(bt_ctx *b, long i, long n)
{
    long k = np_index(i, n);
    if (k < 0) b->bad = 1;
    return k < 0 ? 0 : k;
}

/* Returns 0, or -1 on an IndexError (the window is too small). */
static int backtrack(bt_ctx *b, int t0, double index_duration, double *timings, double *char_probs)
{
    const trellis *tr = b->tr;
    const long N = tr->N, T = b->T;
    long t = t0, c = N - 1, offset = 0;
    for (long i = 0; i < N; i++) timings[i] = 0;
    for (long i = 0; i < T; i++) char_probs[i] = 0;
    while ((t != 0 || c != 0) && !b->bad) {
        int have_s = 0;
        float min_delta = INFINITY, max_lpz_prob = (float)MAX_PROB;
        long oc = tr->offsets[at(b, c, N)];
        if (b->gt[at(b, c, N)] != -1) {
            offset = oc - (c > 0 ? tr->offsets[at(b, c - 1, N)] : 0);
            float sw = c > 0 ? lp_at(b, t + oc, b->gt[at(b, c, N)]) : (float)MAX_PROB;
            float est = tab(b, t, c) - tab(b, t - 1 + offset, c - 1);
            if (fabsf(sw - est) < min_delta) min_delta = fabsf(sw - est), have_s = 1;
            max_lpz_prob = fmaxf_py(max_lpz_prob, sw);
        }
        float stay = t > 0 ? fmaxf_py(lp_at(b, t + oc, b->blank), max_lpz_prob) : (float)MAX_PROB;
        float est_stay = tab(b, t, c) - tab(b, t - 1, c);
        if (b->bad) break;
        if (fabsf(stay - est_stay) > min_delta) {
            (void)have_s; /* min_s is 0: one ground-truth column */
            if (c > 0) {
                timings[c] = (double)(oc + t) * index_duration;
                char_probs[at(b, oc + t, T)] = max_lpz_prob;
            }
            c -= 1;
            t -= 1 - offset;
        } else {
            char_probs[at(b, oc + t, T)] = stay;
            t -= 1;
        }
    }
    return b->bad ? -1 : 0;
}

/* ---- segments (determine_utterance_segments) */

/* numpy's pairwise sum of n doubles (what mean() adds with). */
static double pairwise_sum(const double *a, long n)
{
    if (n < 8) {
        double r = 0.0;
        for (long i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        long i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    long n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

/* a[lo:hi].mean() with Python's slice bounds; NaN when empty (numpy's mean of nothing). */
static double slice_mean(const double *a, long n, long lo, long hi)
{
    if (lo < 0) lo = lo + n < 0 ? 0 : lo + n;
    if (hi < 0) hi = hi + n < 0 ? 0 : hi + n;
    if (lo > n) lo = n;
    if (hi > n) hi = n;
    if (hi <= lo) return NAN;
    return pairwise_sum(a + lo, hi - lo) / (double)(hi - lo);
}

static void segments(const ctcseg_opts *o, const ctcseg_text *text, const double *timings, const double *char_probs,
                     long T, ctcseg_segment *seg)
{
    for (int i = 0; i < text->n_utts; i++) {
        int b = text->utt_begin[i], e = text->utt_begin[i + 1];
        double mid = (timings[b] + timings[b - 1]) / 2, start = timings[b + 1] - 0.5;
        start = mid > start ? mid : start;
        mid = (timings[e] + timings[e - 1]) / 2;
        double end = timings[e - 1] + 0.5;
        end = mid < end ? mid : end;
        long st = (long)nearbyint(start / o->index_duration), et = (long)nearbyint(end / o->index_duration);
        long n = o->scoring_length;
        double score;
        if (et <= st) score = MAX_PROB;
        else if (et - st <= n) score = slice_mean(char_probs, T, st, et);
        else {
            score = 0.0;
            for (long t = st; t < et - n; t++) {
                double m = slice_mean(char_probs, T, t, t + n);
                score = m < score ? m : score;
            }
        }
        seg[i] = (ctcseg_segment){start, end, score};
    }
}

int ctcseg_run(const ctcseg_opts *o, const float *lpz, int T, int V, const ctcseg_text *text, ctcseg_segment *seg,
               esp_err *err)
{
    const int N = text->rows;
    if (N > T)
        return esp_fail(err, "the audio is shorter than the text: %d frames for %d tokens and the blanks between "
                             "utterances (a wrong transcript, or audio cut short?)", T, N);
    ESP_CHECK(o->blank >= 0 && o->blank < V && o->scoring_length > 0 && o->min_window_size > 0);
    double *timings = xmalloc((size_t)N * sizeof *timings), *char_probs = xmalloc(((size_t)T + 1) * sizeof *char_probs);
    int flags = (o->gratis_blank ? 1 : 0) | 2, rc = -1;
    for (long window = o->min_window_size;; window *= 2) {
        trellis tr = {.W = (int)(window < T ? window : T), .N = N};
        tr.table = xmalloc((size_t)tr.W * (size_t)N * sizeof *tr.table);
        tr.offsets = xmalloc((size_t)N * sizeof *tr.offsets);
        int t0;
        fill_table(&tr, lpz, T, V, text->gt, o->blank, flags, &t0);
        bt_ctx b = {.tr = &tr, .lpz = lpz, .T = T, .V = V, .blank = o->blank, .gt = text->gt};
        rc = backtrack(&b, t0, o->index_duration, timings, char_probs);
        free(tr.table);
        free(tr.offsets);
        if (rc == 0) break;
        if (window * 2 >= o->max_window_size) {
            esp_fail(err, "the backtracking left the trellis with a window of %ld frames, and the next (%ld) reaches "
                          "max_window_size %d (check the transcript and the model's token list)",
                     window, window * 2, o->max_window_size);
            break;
        }
        log_info("align: the backtracking left the trellis; window size %ld", window * 2);
    }
    if (rc == 0) segments(o, text, timings, char_probs, T, seg);
    free(timings);
    free(char_probs);
    return rc;
}

char *ctcseg_line(const char *utt, const char *name, const ctcseg_segment *s, int print_score, const char *text)
{
    char score[64] = "";
    if (print_score) snprintf(score, sizeof score, " %3.4f", s->score);
    return xasprintf("%s %s %.2f %.2f%s%s%s\n", utt, name, s->start, s->end, score, text ? " " : "", text ? text : "");
}
