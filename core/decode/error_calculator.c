/* ESPnet's error calculators' text and rates (see error_calculator.h). */
#include "core/decode/error_calculator.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/edit_distance.h"
#include "core/base/log.h"

void err_calculator_from_cfg(err_calculator *c, err_calculator_kind kind, const token_list *tl,
                             const model_conf_cfg *mc)
{
    int report = kind != ERR_TRANSDUCER_BODY;
    *c = (err_calculator){.kind = kind, .tl = tl,
                          .space = mc && mc->sym_space ? mc->sym_space : TOKEN_SPACE,
                          .blank = mc && mc->sym_blank ? mc->sym_blank : TOKEN_BLANK,
                          .cer = mc && mc->report_cer ? *mc->report_cer : report,
                          .wer = mc && mc->report_wer ? *mc->report_wer : report};
}

/* Python's s.replace(old, new) on UTF-8 text (an empty old inserts new around every character).
 * Caller frees. */
static char *py_replace(const char *s, const char *old, const char *new_)
{
    size_t lo = strlen(old), ln = strlen(new_), ls = strlen(s), cap = ls + 1, n = 0;
    char *out = xmalloc(cap);
    for (const char *p = s;;) {
        const char *hit = lo ? strstr(p, old) : p;
        size_t keep = hit ? (size_t)(hit - p) : strlen(p);
        size_t need = n + keep + (hit ? ln : 0) + 1;
        if (need > cap) out = xrealloc(out, cap = 2 * need);
        memcpy(out + n, p, keep), n += keep;
        if (!hit) break;
        memcpy(out + n, new_, ln), n += ln;
        p = hit + lo;
        if (!lo) { /* step over one character (a UTF-8 sequence), or stop at the end */
            if (!*p) break;
            size_t k = 1;
            while (p[k] && ((unsigned char)p[k] & 0xC0) == 0x80) k++;
            if (n + k + 1 > cap) out = xrealloc(out, cap = 2 * (n + k + 1));
            memcpy(out + n, p, k), n += k, p += k;
        }
    }
    out[n] = '\0';
    return out;
}

/* convert_to_char: the ids' token strings joined, then sym_space -> ' ' and (unless keep_blank)
 * sym_blank -> ''. */
static char *to_text(const err_calculator *c, const int *ids, int n, int pad, int keep_blank)
{
    size_t len = 1;
    for (int i = 0; i < n + pad; i++) {
        int id = i < n ? ids[i] : 0;
        ESP_CHECK(id >= 0 && (size_t)id < c->tl->n);
        len += strlen(c->tl->tokens[id]);
    }
    char *joined = xmalloc(len), *q = joined;
    for (int i = 0; i < n + pad; i++) {
        const char *tok = c->tl->tokens[i < n ? ids[i] : 0];
        size_t k = strlen(tok);
        memcpy(q, tok, k), q += k;
    }
    *q = '\0';
    char *spaced = py_replace(joined, c->space, " ");
    free(joined);
    if (keep_blank) return spaced;
    char *text = py_replace(spaced, c->blank, "");
    free(spaced);
    return text;
}

/* The code points of text without its spaces (calculate_cer's replace(" ", "")). */
static int *cer_chars(const char *text, size_t *n_out)
{
    size_t n = 0;
    int *cps = xmalloc((strlen(text) + 1) * sizeof *cps);
    for (const unsigned char *p = (const unsigned char *)text; *p;) {
        int len = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 1;
        int cp = len == 1 ? *p : *p & (0x3F >> (len - 1));
        int k = 1;
        for (; k < len && (p[k] & 0xC0) == 0x80; k++) cp = (cp << 6) | (p[k] & 0x3F);
        if (k < len) cp = 0x110000 + *p, k = 1; /* a broken sequence: its first byte, apart */
        if (cp != ' ') cps[n++] = cp;
        p += k;
    }
    *n_out = n;
    return cps;
}

/* Python's str.split() on text (ASCII whitespace and the Unicode spaces token lists may hold),
 * each word given an id shared through (*words, *nw). */
static size_t ws_len(const unsigned char *p)
{
    if (*p == ' ' || (*p >= '\t' && *p <= '\r') || (*p >= 0x1C && *p <= 0x1F)) return 1;
    if (p[0] == 0xC2 && (p[1] == 0x85 || p[1] == 0xA0)) return 2;
    if (p[0] == 0xE3 && p[1] == 0x80 && p[2] == 0x80) return 3; /* U+3000 */
    if (p[0] == 0xE2 && p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8A) || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF))
        return 3;
    if (p[0] == 0xE2 && p[1] == 0x81 && p[2] == 0x9F) return 3; /* U+205F */
    if (p[0] == 0xE1 && p[1] == 0x9A && p[2] == 0x80) return 3; /* U+1680 */
    return 0;
}

static int *word_ids(char *text, char ***words, size_t *nw, size_t *n_out)
{
    int *ids = NULL;
    size_t n = 0;
    unsigned char *p = (unsigned char *)text;
    for (;;) {
        for (size_t k; *p && (k = ws_len(p)) > 0;) p += k;
        if (!*p) break;
        unsigned char *start = p;
        while (*p && !ws_len(p)) p++;
        int end = *p != 0;
        size_t k = end ? ws_len(p) : 0;
        *p = '\0';
        size_t w = 0;
        while (w < *nw && strcmp((*words)[w], (char *)start) != 0) w++;
        if (w == *nw) {
            *words = xrealloc(*words, (*nw + 1) * sizeof **words);
            (*words)[(*nw)++] = (char *)start;
        }
        ids = xrealloc(ids, (n + 1) * sizeof *ids);
        ids[n++] = (int)w;
        if (!end) break;
        p += k;
    }
    *n_out = n;
    return ids;
}

void err_calculator_rates(const err_calculator *c, int *const *hyps, const int *nh, const int *labels, int lstride,
                          const int *label_lens, int B, double *cer, double *wer)
{
    int att = c->kind == ERR_ATTENTION, u2581 = c->kind == ERR_TRANSDUCER_BODY;
    int lmax = 0;
    for (int i = 0; i < B; i++) lmax = label_lens[i] > lmax ? label_lens[i] : lmax;
    size_t ce = 0, cl = 0, we = 0, wl = 0;
    for (int i = 0; i < B; i++) {
        char *h = to_text(c, hyps[i], nh[i], 0, 0);
        char *r = to_text(c, labels + (size_t)i * lstride, label_lens[i], att ? 0 : lmax - label_lens[i], att);
        if (c->cer) {
            size_t a, b;
            int *hc = cer_chars(h, &a), *rc = cer_chars(r, &b);
            ce += edit_distance(hc, a, rc, b), cl += b;
            free(hc);
            free(rc);
        }
        if (c->wer) {
            char *hw = u2581 ? py_replace(h, "\xe2\x96\x81", " ") : xstrdup(h);
            char *rw = u2581 ? py_replace(r, "\xe2\x96\x81", " ") : xstrdup(r);
            char **words = NULL; /* point into hw and rw */
            size_t nw = 0, a, b;
            int *hi = word_ids(hw, &words, &nw, &a), *ri = word_ids(rw, &words, &nw, &b);
            we += edit_distance(hi, a, ri, b), wl += b;
            free(hi), free(ri), free(words), free(hw), free(rw);
        }
        free(h);
        free(r);
    }
    *cer = c->cer && cl ? (double)ce / (double)cl : NAN;
    *wer = c->wer && wl ? (double)we / (double)wl : NAN;
}
