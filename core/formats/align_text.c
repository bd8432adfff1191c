/* espnet3 align's transcript; see align_text.h. */
#include "core/formats/align_text.h"

#include <stdlib.h>
#include <string.h>

#include "core/formats/text_file.h"
#include "core/formats/text_scp.h"

static void add(align_text *t, size_t *cap, char *id, char *text, long line)
{
    if (t->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        t->ids = xrealloc(t->ids, *cap * sizeof *t->ids);
        t->texts = xrealloc(t->texts, *cap * sizeof *t->texts);
        t->lines = xrealloc(t->lines, *cap * sizeof *t->lines);
    }
    t->ids[t->n] = id, t->texts[t->n] = text, t->lines[t->n] = line;
    t->n++;
}

static int read_kaldi(const char *path, align_text *out, esp_err *err)
{
    text_scp scp;
    if (text_scp_read(path, &scp, err) != 0) return -1;
    size_t cap = 0;
    for (size_t i = 0; i < scp.n; i++)
        add(out, &cap, xstrdup(scp.items[i].id), xstrdup(scp.items[i].text), scp.items[i].line);
    text_scp_free(&scp);
    return 0;
}

static int read_plain(const char *path, const char *name, align_text *out, esp_err *err)
{
    char *data = text_file_read(path, "a transcript", NULL, err);
    if (!data) return -1;
    size_t cap = 0;
    long line = 0;
    for (char *p = data; *p;) {
        char *end = p + strcspn(p, "\n");
        size_t len = (size_t)(end - p);
        line++;
        if (len && p[len - 1] == '\r') len--;
        if (strspn(p, " \t\r") < len) {
            char *text = xmalloc(len + 1);
            memcpy(text, p, len);
            text[len] = 0;
            add(out, &cap, xasprintf("%s_%04zu", name, out->n), text, line);
        }
        p = *end ? end + 1 : end;
    }
    free(data);
    return 0;
}

int align_text_read(const char *path, int kaldi_style, const char *name, align_text *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = kaldi_style ? read_kaldi(path, out, err) : read_plain(path, name, out, err);
    if (rc == 0 && out->n == 0)
        rc = esp_fail(err, "%s: no utterances (one per line%s)", path, kaldi_style ? ": `utt_id text...`" : "");
    if (rc != 0) align_text_free(out);
    return rc;
}

void align_text_free(align_text *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->ids[i]), free(t->texts[i]);
    free(t->ids), free(t->texts), free(t->lines);
    memset(t, 0, sizeof *t);
}
