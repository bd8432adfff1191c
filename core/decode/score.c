/* Text cleaning, tokens and sclite's alignment (see score.h). The DP follows sctk's net_dp.c on
 * linear networks: cell (a, b) aligns the first a ref tokens with the first b hyp tokens; the
 * diagonal wins whenever it is no worse than both others, then a deletion when strictly cheaper
 * than the insertion, else the insertion. The trace goes back from (n_ref, n_hyp). */
#include "core/decode/score.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"

enum { COST_SUB = 4, COST_INS_DEL = 3 };

static int is_blank(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

char *score_clean(const char *text)
{
    size_t len = strlen(text);
    char *out = xmalloc(len + 1), *o = out;
    const unsigned char *p = (const unsigned char *)text;
    while (*p) {
        while (*p && is_blank(*p)) p++;
        if (!*p) break;
        if (o != out) *o++ = ' ';
        while (*p && !is_blank(*p)) *o++ = (char)*p++;
    }
    *o = '\0';
    return out;
}

static void push(score_tokens *t, size_t *cap, char *tok)
{
    if (t->n == *cap) {
        *cap = *cap ? 2 * *cap : 16;
        t->tok = xrealloc(t->tok, *cap * sizeof *t->tok);
    }
    t->tok[t->n++] = tok;
}

/* Length of the UTF-8 sequence starting at p (1 for a stray byte, so bad input still moves on). */
static size_t utf8_len(const unsigned char *p)
{
    size_t n = *p < 0x80 ? 1 : (*p >> 5) == 0x6 ? 2 : (*p >> 4) == 0xE ? 3 : (*p >> 3) == 0x1E ? 4 : 1;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 1;
    return n;
}

void score_tokenize(const char *clean, score_unit unit, score_tokens *out)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    const unsigned char *p = (const unsigned char *)clean;
    while (*p) {
        if (unit == SCORE_WORDS) {
            if (*p == ' ') {
                p++;
                continue;
            }
            const unsigned char *start = p;
            while (*p && *p != ' ') p++;
            push(out, &cap, xstrndup((const char *)start, (size_t)(p - start)));
        } else if (*p == ' ') {
            push(out, &cap, xstrdup("<space>"));
            p++;
        } else {
            size_t n = utf8_len(p);
            push(out, &cap, xstrndup((const char *)p, n));
            p += n;
        }
    }
}

void score_tokens_free(score_tokens *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->tok[i]);
    free(t->tok);
    t->tok = NULL;
    t->n = 0;
}

static unsigned char ascii_lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c; }

int score_token_equal(const char *a, const char *b)
{
    const unsigned char *x = (const unsigned char *)a, *y = (const unsigned char *)b;
    for (; *x && *y; x++, y++)
        if (ascii_lower(*x) != ascii_lower(*y)) return 0;
    return *x == *y;
}

score_step *score_align(const score_tokens *ref, const score_tokens *hyp, size_t *n_steps, score_counts *counts)
{
    size_t n = ref->n, m = hyp->n, w = m + 1;
    ESP_CHECK(n < INT32_MAX / 8 && m < INT32_MAX / 8 && (n + 1) <= SIZE_MAX / w / sizeof(int32_t));
    int32_t *cost = xmalloc((n + 1) * w * sizeof *cost);
    unsigned char *back = xmalloc((n + 1) * w);
    cost[0] = 0;
    back[0] = SCORE_CORR;
    for (size_t b = 1; b <= m; b++) {
        cost[b] = cost[b - 1] + COST_INS_DEL;
        back[b] = SCORE_INS;
    }
    for (size_t a = 1; a <= n; a++) {
        cost[a * w] = cost[(a - 1) * w] + COST_INS_DEL;
        back[a * w] = SCORE_DEL;
        for (size_t b = 1; b <= m; b++) {
            int same = score_token_equal(ref->tok[a - 1], hyp->tok[b - 1]);
            int32_t diag = cost[(a - 1) * w + b - 1] + (same ? 0 : COST_SUB);
            int32_t del = cost[(a - 1) * w + b] + COST_INS_DEL;
            int32_t ins = cost[a * w + b - 1] + COST_INS_DEL;
            size_t i = a * w + b;
            if (diag <= del && diag <= ins) {
                cost[i] = diag;
                back[i] = same ? SCORE_CORR : SCORE_SUB;
            } else if (del < ins) {
                cost[i] = del;
                back[i] = SCORE_DEL;
            } else {
                cost[i] = ins;
                back[i] = SCORE_INS;
            }
        }
    }
    /* Trace back into the end of the buffer, then slide the steps to the front. */
    size_t cap = n + m, k = cap;
    score_step *steps = xmalloc((cap ? cap : 1) * sizeof *steps);
    size_t a = n, b = m;
    while (a > 0 || b > 0) {
        score_op op = (score_op)back[a * w + b];
        score_step s = {op, -1, -1};
        if (op != SCORE_INS) s.ref = (int)--a;
        if (op != SCORE_DEL) s.hyp = (int)--b;
        steps[--k] = s;
        switch (op) {
        case SCORE_CORR: counts->corr++; break;
        case SCORE_SUB: counts->sub++; break;
        case SCORE_DEL: counts->del++; break;
        case SCORE_INS: counts->ins++; break;
        }
    }
    memmove(steps, steps + k, (cap - k) * sizeof *steps);
    *n_steps = cap - k;
    free(cost);
    free(back);
    return steps;
}
