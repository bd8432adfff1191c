/* CTC forced alignment (core/compute/ctc_align.h): hand-made log-probabilities with a known best
 * path (a repeat that needs a blank, leading and trailing blanks), every path enumerated on small
 * random cases (the Viterbi's best must be the best of all), too few frames, no labels. The
 * backends against each other: test_backend_ops' case ctc_align. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/compute/ctc_align.h"

/* Log-probs from per-frame weights (each row normalized), as the model's log_softmax gives them. */
static void rows_from(float *logp, const double *w, int T, int V)
{
    for (int t = 0; t < T; t++) {
        double z = 0;
        for (int c = 0; c < V; c++) z += w[t * V + c];
        for (int c = 0; c < V; c++) logp[t * V + c] = (float)log(w[t * V + c] / z);
    }
}

Test(ctc_align, known_best_path)
{
    /* blank, a, a, blank, b, b, blank: labels a b */
    enum { T = 7, V = 3 };
    const double w[T * V] = {8, 1, 1, 1, 8, 1, 1, 8, 1, 8, 1, 1, 1, 1, 8, 1, 2, 8, 8, 1, 1};
    float logp[T * V];
    rows_from(logp, w, T, V);
    const int labels[] = {1, 2}, want[T] = {0, 1, 1, 2, 3, 3, 4};
    int path[T];
    double best = ctc_align_f32(path, logp, T, V, labels, 2), sum = 0;
    for (int t = 0; t < T; t++) cr_expect_eq(path[t], want[t], "frame %d: state %d, want %d", t, path[t], want[t]);
    for (int t = 0; t < T; t++) sum += logp[t * V + (want[t] & 1 ? labels[want[t] / 2] : 0)];
    cr_expect_eq(best, sum, "best %.17g, the path's sum %.17g", best, sum);
}

Test(ctc_align, repeat_takes_a_blank)
{
    /* a a: every frame prefers a, but the repeat needs a blank between; it goes where a is weakest */
    enum { T = 5, V = 2 };
    const double w[T * V] = {1, 9, 1, 9, 3, 4, 1, 9, 1, 9};
    float logp[T * V];
    rows_from(logp, w, T, V);
    const int labels[] = {1, 1}, want[T] = {1, 1, 2, 3, 3};
    int path[T];
    ctc_align_f32(path, logp, T, V, labels, 2);
    for (int t = 0; t < T; t++) cr_expect_eq(path[t], want[t], "frame %d: state %d, want %d", t, path[t], want[t]);
}

/* The best over every frame-label sequence that collapses to labels (V^T of them). */
static double brute_best(const float *logp, int T, int V, const int *labels, int L)
{
    double best = -INFINITY;
    long n = 1;
    for (int t = 0; t < T; t++) n *= V;
    for (long k = 0; k < n; k++) {
        int seq[16], out[16], m = 0, prev = -1;
        long x = k;
        for (int t = 0; t < T; t++) seq[t] = (int)(x % V), x /= V;
        double sum = 0;
        for (int t = 0; t < T; t++) {
            if (seq[t] != 0 && seq[t] != prev) out[m++] = seq[t];
            prev = seq[t];
            sum += logp[t * V + seq[t]];
        }
        if (m == L && !memcmp(out, labels, (size_t)L * sizeof *out) && sum > best) best = sum;
    }
    return best;
}

Test(ctc_align, best_of_all_paths)
{
    uint64_t st = 12345;
    for (int trial = 0; trial < 40; trial++) {
        int T = 3 + trial % 5, V = 3 + trial % 2, L = trial % 4;
        double w[8 * 4];
        for (int i = 0; i < T * V; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            w[i] = 0.05 + (double)(st >> 40) / (double)(1ull << 24);
        }
        float logp[8 * 4];
        rows_from(logp, w, T, V);
        int labels[4], path[8];
        for (int i = 0; i < L; i++) labels[i] = 1 + (trial + i * (i + 1)) % (V - 1);
        double want = brute_best(logp, T, V, labels, L), got = ctc_align_f32(path, logp, T, V, labels, L);
        double wide[8 * 4];
        int path64[8];
        for (int i = 0; i < T * V; i++) wide[i] = logp[i];
        cr_expect_eq(ctc_align_f64(path64, wide, T, V, labels, L), got, "trial %d: f64 on the same values", trial);
        cr_expect(!memcmp(path64, path, (size_t)T * sizeof *path), "trial %d: f64's path", trial);
        if (want == -INFINITY) {
            cr_expect(got == -INFINITY, "trial %d: no path, got %g", trial, got);
            continue;
        }
        cr_expect(fabs(got - want) < 1e-9, "trial %d (T %d L %d): Viterbi %.12g, best path %.12g", trial, T, L, got, want);
        /* the path itself: its states' log-probs sum to the best, and it collapses to the labels */
        double sum = 0;
        int m = 0;
        for (int t = 0; t < T; t++) {
            int c = path[t] & 1 ? labels[path[t] / 2] : 0;
            sum += logp[t * V + c];
            if (path[t] & 1 && (t == 0 || path[t - 1] != path[t])) cr_expect_eq(path[t] / 2, m++, "trial %d", trial);
        }
        cr_expect_eq(m, L, "trial %d: the path emits %d labels of %d", trial, m, L);
        cr_expect(fabs(sum - want) < 1e-9, "trial %d: path sum %.12g, best %.12g", trial, sum, want);
    }
}

Test(ctc_align, too_few_frames_and_no_labels)
{
    enum { T = 3, V = 2 };
    const double w[T * V] = {1, 1, 1, 1, 1, 1};
    float logp[T * V];
    rows_from(logp, w, T, V);
    int path[T], labels[] = {1, 1};
    cr_expect(ctc_align_f32(path, logp, T, V, labels, 2) > -INFINITY, "a a in 3 frames: a blank a");
    cr_expect(ctc_align_f32(path, logp, 2, V, labels, 2) == -INFINITY, "a a in 2 frames: no path");
    for (int t = 0; t < 2; t++) cr_expect_eq(path[t], -1);
    double best = ctc_align_f32(path, logp, T, V, labels, 0);
    cr_expect(fabs(best - 3 * log(0.5)) < 1e-6, "all blanks: %g", best);
    for (int t = 0; t < T; t++) cr_expect_eq(path[t], 0);
    cr_expect_eq(ctc_align_f32(path, logp, 0, V, labels, 0), 0.0, "no frames, no labels: the empty path");
}
