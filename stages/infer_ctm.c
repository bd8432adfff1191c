/* Stage 6's hyp.ctm; see infer_ctm.h. */
#include "stages/infer_ctm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

typedef struct ctm_line {
    char *file, *word;
    double start, dur, conf;
    size_t order; /* the order words came in: ties of file and start keep it */
} ctm_line;

struct ctm_lines {
    ctm_line *v;
    size_t n, cap;
};

ctm_lines *ctm_lines_new(void) { return xcalloc(1, sizeof(ctm_lines)); }

void ctm_lines_free(ctm_lines *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) free(c->v[i].file), free(c->v[i].word);
    free(c->v);
    free(c);
}

/* The recording of a Kaldi segment as an STM names it: the audio file's name without its folder
 * and extension. */
static char *recording_name(const char *wav)
{
    const char *base = strrchr(wav, '/');
    base = base ? base + 1 : wav;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    char *r = xmalloc(n + 1);
    memcpy(r, base, n);
    r[n] = 0;
    return r;
}

void ctm_add(ctm_lines *c, const manifest_entry *e, double start, double end, double score, const char *text,
             size_t len)
{
    if (!isfinite(start) || !isfinite(end)) return;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->v = xrealloc(c->v, c->cap * sizeof *c->v);
    }
    int segment = e->end > 0;
    double off = segment ? e->start : 0.0, conf = exp(score);
    char *word = xmalloc(len + 1);
    memcpy(word, text, len);
    word[len] = 0;
    c->v[c->n] = (ctm_line){.file = segment ? recording_name(e->wav) : xstrdup(e->utt), .word = word,
                            .start = start + off, .dur = end - start,
                            .conf = conf > 1 ? 1 : conf >= 0 ? conf : 0, .order = c->n};
    c->n++;
}

static int by_file_time(const void *a, const void *b)
{
    const ctm_line *x = a, *y = b;
    int k = strcmp(x->file, y->file);
    if (k) return k;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

int ctm_write(ctm_lines *c, const char *path, esp_err *err)
{
    qsort(c->v, c->n, sizeof *c->v, by_file_time);
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    for (size_t i = 0; i < c->n; i++)
        fprintf(af.fp, "%s 1 %.3f %.3f %s %.4f\n", c->v[i].file, c->v[i].start, c->v[i].dur, c->v[i].word,
                c->v[i].conf);
    return atomic_commit(&af, err);
}
