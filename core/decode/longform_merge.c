/* The merge of overlapping windows' timed hypotheses: see longform_merge.h. */
#include "core/decode/longform_merge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

void lf_piece_free(lf_piece *p)
{
    free(p->ids), free(p->start), free(p->end), free(p->score), free(p->word);
    free(p->wstart), free(p->wend);
    memset(p, 0, sizeof *p);
}

/* The next word span in start order of the two pieces' words that reach into [lo, hi): *ia and *ib
 * walk a's and b's words. 0 when both are exhausted. */
static int next_span(const lf_piece *a, size_t *ia, const lf_piece *b, size_t *ib, double lo, double hi, double *s,
                     double *e)
{
    for (;;) {
        int ha = *ia < a->n_words, hb = *ib < b->n_words;
        if (!ha && !hb) return 0;
        const lf_piece *p = !hb || (ha && a->wstart[*ia] <= b->wstart[*ib]) ? a : b;
        size_t *i = p == a ? ia : ib;
        *s = p->wstart[*i], *e = p->wend[*i];
        (*i)++;
        if (*e > lo && *s < hi) return 1;
    }
}

double lf_cut(const lf_piece *a, const lf_piece *b)
{
    double lo = b->t0, hi = a->t1, mid = 0.5 * (lo + hi);
    if (!(lo < hi)) return lo;
    double best = mid, best_dist = INFINITY, cur = lo, s, e;
    size_t ia = 0, ib = 0;
    int more;
    do {
        more = next_span(a, &ia, b, &ib, lo, hi, &s, &e);
        double gap_end = more ? s : hi;
        if (gap_end > cur) { /* a gap [cur, gap_end) outside every word */
            double c = 0.5 * (cur + gap_end), d = fabs(c - mid);
            if (d < best_dist) best = c, best_dist = d;
        }
        if (more && e > cur) cur = e;
    } while (more);
    return best;
}

static void push(lf_merge *m, const lf_piece *p, size_t i)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->ids = xrealloc(m->ids, m->cap * sizeof *m->ids);
        m->start = xrealloc(m->start, m->cap * sizeof *m->start);
        m->end = xrealloc(m->end, m->cap * sizeof *m->end);
        m->score = xrealloc(m->score, m->cap * sizeof *m->score);
    }
    m->ids[m->n] = p->ids[i];
    m->start[m->n] = p->start[i], m->end[m->n] = p->end[i], m->score[m->n] = p->score[i];
    m->n++;
    m->ends_in_word = p->word[i] >= 0;
}

static int kept(const lf_piece *p, int w, double lo, double hi)
{
    double c = 0.5 * (p->wstart[w] + p->wend[w]);
    return c >= lo && c < hi;
}

/* The separators at a join: the piece's own before token `first` (when a word of the piece precedes
 * them), else the earlier piece's trailing ones. */
static void join(lf_merge *m, const lf_piece *p, size_t first)
{
    size_t i = first;
    while (i > 0 && p->word[i - 1] < 0) i--;
    if (i > 0 && i < first) {
        for (; i < first; i++) push(m, p, i);
        return;
    }
    for (size_t k = 0; k < m->n_trail; k++) {
        lf_piece sep = {.ids = &m->trail[k], .start = &p->start[first], .end = &p->start[first],
                        .score = (double[]){0.0}, .word = (int[]){-1}};
        push(m, &sep, 0);
    }
}

/* Emits the pending piece's words whose centre lies in [m->lo, hi) and the separators between them. */
static void emit(lf_merge *m, double hi)
{
    const lf_piece *p = &m->pending;
    int last_kept = -1; /* token index of the last kept word's last token */
    size_t pending_sep = 0; /* separators seen since the last kept word */
    for (size_t i = 0; i < p->n; i++) {
        int w = p->word[i];
        if (w < 0) {
            if (last_kept >= 0) pending_sep++;
            continue;
        }
        if (!kept(p, w, m->lo, hi)) {
            if (last_kept >= 0 && p->wstart[w] >= hi) break;
            pending_sep = 0;
            continue;
        }
        if (last_kept < 0 && m->n > 0 && m->ends_in_word) join(m, p, i);
        else
            for (size_t k = i - pending_sep; k < i; k++) push(m, p, k);
        pending_sep = 0;
        push(m, p, i);
        last_kept = (int)i;
    }
    /* The separators right after the last kept word, for the next join. */
    m->n_trail = 0;
    for (size_t i = last_kept >= 0 ? (size_t)last_kept + 1 : p->n; i < p->n && p->word[i] < 0; i++) {
        m->trail = xrealloc(m->trail, (m->n_trail + 1) * sizeof *m->trail);
        m->trail[m->n_trail++] = p->ids[i];
    }
    m->hyp_score += p->hyp_score;
}

void lf_merge_add(lf_merge *m, lf_piece *p)
{
    if (m->has_pending) {
        double c = lf_cut(&m->pending, p);
        emit(m, c);
        lf_piece_free(&m->pending);
        m->lo = c;
    } else {
        m->lo = -INFINITY;
    }
    m->pending = *p;
    m->has_pending = 1;
    memset(p, 0, sizeof *p);
}

void lf_merge_finish(lf_merge *m)
{
    if (!m->has_pending) return;
    emit(m, INFINITY);
    lf_piece_free(&m->pending);
    m->has_pending = 0;
}

void lf_merge_free(lf_merge *m)
{
    lf_piece_free(&m->pending);
    free(m->ids), free(m->start), free(m->end), free(m->score), free(m->trail);
    memset(m, 0, sizeof *m);
}
