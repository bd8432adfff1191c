/* Reading `<utt_id> <text>` lists (see text_scp.h). */
#include "core/formats/text_scp.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/formats/text_file.h"

static int by_id_cmp(const void *a, const void *b, void *items)
{
    const text_scp_entry *e = items;
    return strcmp(e[*(const size_t *)a].id, e[*(const size_t *)b].id);
}

typedef struct scp_ctx {
    text_scp *out;
    size_t cap;
} scp_ctx;

/* One `<id> <text>` line; blank lines are skipped. */
static int scp_line(void *vctx, char *line, size_t lineno, esp_err *err)
{
    (void)err;
    scp_ctx *c = vctx;
    char *id = line + strspn(line, " \t");
    if (!*id) return 0;
    size_t id_len = strcspn(id, " \t");
    char *text = id + id_len;
    if (*text) text++;
    text_scp *out = c->out;
    if (out->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        out->items = xrealloc(out->items, c->cap * sizeof *out->items);
    }
    out->items[out->n++] = (text_scp_entry){xstrndup(id, id_len), xstrdup(text), (long)lineno};
    return 0;
}

int text_scp_read(const char *path, text_scp *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    char *buf = text_file_read(path, "a `utt_id text` list", NULL, err);
    if (!buf) return -1;
    scp_ctx c = {.out = out};
    for_each_line(buf, scp_line, &c, err); /* scp_line never fails */
    free(buf);
    out->path = xstrdup(path);
    out->by_id = xmalloc((out->n ? out->n : 1) * sizeof *out->by_id);
    for (size_t i = 0; i < out->n; i++) out->by_id[i] = i;
    qsort_r(out->by_id, out->n, sizeof *out->by_id, by_id_cmp, out->items);
    for (size_t i = 1; i < out->n; i++) {
        const text_scp_entry *a = &out->items[out->by_id[i - 1]], *b = &out->items[out->by_id[i]];
        if (!strcmp(a->id, b->id)) {
            long first = a->line < b->line ? a->line : b->line, second = a->line < b->line ? b->line : a->line;
            esp_fail(err, "%s:%ld: utterance id %s appears again (first on line %ld; ids must be unique)", path,
                     second, a->id, first);
            text_scp_free(out);
            return -1;
        }
    }
    return 0;
}

const text_scp_entry *text_scp_find(const text_scp *scp, const char *id)
{
    size_t lo = 0, hi = scp->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const text_scp_entry *e = &scp->items[scp->by_id[mid]];
        int c = strcmp(e->id, id);
        if (c == 0) return e;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void text_scp_free(text_scp *scp)
{
    for (size_t i = 0; i < scp->n; i++) {
        free(scp->items[i].id);
        free(scp->items[i].text);
    }
    free(scp->items);
    free(scp->by_id);
    free(scp->path);
    memset(scp, 0, sizeof *scp);
}
