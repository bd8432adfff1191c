/* Greedy CTC decoding, CER and WER as ESPnet's ErrorCalculator (see ctc_decode.h). */
#include "core/decode/ctc_decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/edit_distance.h"
#include "core/base/log.h"

int ctc_greedy_decode(int *out, const float *logp, int hlen, int V)
{
    int n = 0, prev = -1;
    for (int t = 0; t < hlen; t++) {
        const float *row = logp + (size_t)t * V;
        int best = 0;
        for (int c = 1; c < V; c++)
            if (row[c] > row[best]) best = c;
        if (best != prev && best != 0) out[n++] = best;
        prev = best;
    }
    return n;
}

void err_calc_init(err_calc *ec, const token_list *tl)
{
    ec->tl = tl;
    ec->blank = (int)token_list_find(tl, TOKEN_BLANK);
    ec->space = (int)token_list_find(tl, TOKEN_SPACE);
}

static const char *token_str(const err_calc *ec, int id)
{
    ESP_CHECK(id >= 0 && (size_t)id < ec->tl->n);
    return ec->tl->tokens[id];
}

/* Appends the code points of UTF-8 text s to (*cps, *n, *cap); a byte that does not start a
 * valid sequence counts as one character of its own (kept apart from real code points). */
static void append_code_points(int **cps, size_t *n, size_t *cap, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int cp, len;
        if (p[0] < 0x80) cp = p[0], len = 1;
        else if ((p[0] & 0xE0) == 0xC0) cp = p[0] & 0x1F, len = 2;
        else if ((p[0] & 0xF0) == 0xE0) cp = p[0] & 0x0F, len = 3;
        else if ((p[0] & 0xF8) == 0xF0) cp = p[0] & 0x07, len = 4;
        else cp = -1, len = 1;
        for (int k = 1; k < len && cp >= 0; k++) {
            if ((p[k] & 0xC0) != 0x80) cp = -1;
            else cp = (cp << 6) | (p[k] & 0x3F);
        }
        if (cp < 0) cp = 0x110000 + p[0], len = 1;
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 64;
            *cps = xrealloc(*cps, *cap * sizeof **cps);
        }
        (*cps)[(*n)++] = cp;
        p += len;
    }
}

/* Characters of the ids without blanks and <space>s (calculate_cer_ctc's hyp_chars/ref_chars). */
static int *cer_chars(const err_calc *ec, const int *ids, size_t n, size_t *n_out)
{
    int *cps = NULL;
    size_t cnt = 0, cap = 0;
    for (size_t i = 0; i < n; i++) {
        const char *tok = token_str(ec, ids[i]);
        if (ids[i] == ec->blank || ids[i] == ec->space) continue;
        append_code_points(&cps, &cnt, &cap, tok);
    }
    *n_out = cnt;
    return cps;
}

void cer_add(err_counts *acc, const err_calc *ec, const int *hyp, size_t nhyp, const int *ref,
             size_t nref)
{
    size_t nh, nr;
    int *h = cer_chars(ec, hyp, nhyp, &nh);
    int *r = cer_chars(ec, ref, nref, &nr);
    if (nr > 0) {  /* ESPnet skips utterances with an empty reference */
        acc->edits += edit_distance(h, nh, r, nr);
        acc->ref_len += nr;
    }
    free(h);
    free(r);
}

char *token_ids_to_text(const err_calc *ec, const int *ids, size_t n) { return ids_to_text(ec->tl, ids, n); }

#define WS " \t\n\r\f\v"

/* Splits text on whitespace (str.split()) and maps every word to an id shared through *words. */
static int *word_ids(char *text, char ***words, size_t *n_words, size_t *n_out)
{
    int *ids = NULL;
    size_t n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(text, WS, &save); tok; tok = strtok_r(NULL, WS, &save)) {
        size_t w = 0;
        while (w < *n_words && strcmp((*words)[w], tok) != 0) w++;
        if (w == *n_words) {
            *words = xrealloc(*words, (*n_words + 1) * sizeof **words);
            (*words)[(*n_words)++] = tok;
        }
        ids = xrealloc(ids, (n + 1) * sizeof *ids);
        ids[n++] = (int)w;
    }
    *n_out = n;
    return ids;
}

void wer_add(err_counts *acc, const err_calc *ec, const int *hyp, size_t nhyp, const int *ref,
             size_t nref)
{
    char *ht = token_ids_to_text(ec, hyp, nhyp);
    char *rt = token_ids_to_text(ec, ref, nref);
    char **words = NULL;  /* points into ht and rt */
    size_t n_words = 0, nh, nr;
    int *h = word_ids(ht, &words, &n_words, &nh);
    int *r = word_ids(rt, &words, &n_words, &nr);
    acc->edits += edit_distance(h, nh, r, nr);
    acc->ref_len += nr;
    free(h);
    free(r);
    free(words);
    free(ht);
    free(rt);
}

double err_rate(const err_counts *acc)
{
    return acc->ref_len ? (double)acc->edits / (double)acc->ref_len : NAN;
}
