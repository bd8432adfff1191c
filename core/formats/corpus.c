#include "core/formats/corpus.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/formats/text_file.h"

/* Sorted names of the subfolders of dir (hidden ones left out); -1 when dir cannot be read. */
static int list_dirs(const char *dir, char ***names, size_t *n, esp_err *err)
{
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return esp_fail(err, "%s: cannot read the folder", dir);
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = path_join(dir, e->d_name);
        int sub = is_dir(p);
        free(p);
        if (!sub) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            *names = xrealloc(*names, cap * sizeof **names);
        }
        (*names)[(*n)++] = xstrdup(e->d_name);
    }
    closedir(d);
    for (size_t i = 1; i < *n; i++) /* insertion sort: folders per level are few */
        for (size_t j = i; j > 0 && strcmp((*names)[j - 1], (*names)[j]) > 0; j--) {
            char *t = (*names)[j];
            (*names)[j] = (*names)[j - 1];
            (*names)[j - 1] = t;
        }
    return 0;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* After sorting: an id given twice is an error naming it and where it came from. */
static int check_sorted_unique(const manifest *m, const char *where, esp_err *err)
{
    for (size_t i = 1; i < m->n; i++)
        if (!strcmp(m->items[i - 1].utt, m->items[i].utt))
            return esp_fail(err, "%s: utterance id %s appears twice (audio %s and %s)", where, m->items[i].utt,
                            m->items[i - 1].wav, m->items[i].wav);
    return 0;
}

char *corpus_librispeech_root(const char *root)
{
    char *sub = path_join(root, "LibriSpeech");
    if (is_dir(sub)) return sub;
    free(sub);
    return is_dir(root) ? xstrdup(root) : NULL;
}

typedef struct trans_ctx {
    const char *path, *dir, *prefix; /* prefix: "<spk>-<chapter>-" */
    const char *spk;                 /* "<spk>-<chapter>" */
    manifest *m;
} trans_ctx;

static int trans_line(void *vctx, char *line, size_t lineno, esp_err *err)
{
    trans_ctx *c = vctx;
    size_t len = strlen(line);
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ')) line[--len] = '\0';
    if (!len) return 0;
    char *sp = strchr(line, ' ');
    if (!sp || sp == line)
        return esp_fail(err, "%s:%zu: expected '<spk>-<chapter>-<utt> TRANSCRIPT'", c->path, lineno);
    *sp = '\0';
    const char *text = sp + 1;
    size_t plen = strlen(c->prefix);
    if (strncmp(line, c->prefix, plen) || !line[plen] || strspn(line + plen, "0123456789") != strlen(line + plen))
        return esp_fail(err, "%s:%zu: utterance id '%s' is not <spk>-<chapter>-<number> of this chapter (%s...)",
                        c->path, lineno, line, c->prefix);
    if (strchr(text, '\t'))
        return esp_fail(err, "%s:%zu: utterance %s: the transcript holds a tab", c->path, lineno, line);
    char *name = xasprintf("%s.flac", line);
    char *wav = path_join(c->dir, name);
    free(name);
    int rc = 0;
    if (!path_exists(wav))
        rc = esp_fail(err, "%s:%zu: utterance %s: no audio file %s", c->path, lineno, line, wav);
    else manifest_add(c->m, line, wav, text, c->spk);
    free(wav);
    return rc;
}

static int read_chapter(const char *dir, const char *spk, const char *chapter, manifest *m, esp_err *err)
{
    char *id = xasprintf("%s-%s", spk, chapter);
    char *name = xasprintf("%s.trans.txt", id);
    char *path = path_join(dir, name);
    char *prefix = xasprintf("%s-", id);
    int rc = -1;
    if (!path_exists(path)) {
        esp_fail(err, "%s: missing (each LibriSpeech chapter folder holds its <spk>-<chapter>.trans.txt)", path);
    } else {
        char *buf = text_file_read(path, "a LibriSpeech transcript", NULL, err);
        if (buf) {
            trans_ctx c = {.path = path, .dir = dir, .prefix = prefix, .spk = id, .m = m};
            rc = for_each_line(buf, trans_line, &c, err);
            free(buf);
        }
    }
    free(id);
    free(name);
    free(path);
    free(prefix);
    return rc;
}

int corpus_read_librispeech(const char *root, const char *split, manifest *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    char *ls = corpus_librispeech_root(root);
    if (!ls) return esp_fail(err, "%s: no LibriSpeech folder here (expected %s/LibriSpeech/<split>/ or %s/<split>/)",
                             root, root, root);
    char *split_dir = path_join(ls, split);
    free(ls);
    int rc = 0;
    if (!is_dir(split_dir)) {
        rc = esp_fail(err, "%s: missing LibriSpeech split %s (download and unpack %s.tar.gz from openslr.org/12)",
                      split_dir, split, split);
        free(split_dir);
        return rc;
    }
    char **spks;
    size_t n_spk;
    rc = list_dirs(split_dir, &spks, &n_spk, err);
    for (size_t s = 0; s < n_spk && rc == 0; s++) {
        char *spk_dir = path_join(split_dir, spks[s]);
        char **chs;
        size_t n_ch;
        rc = list_dirs(spk_dir, &chs, &n_ch, err);
        for (size_t c = 0; c < n_ch && rc == 0; c++) {
            char *ch_dir = path_join(spk_dir, chs[c]);
            rc = read_chapter(ch_dir, spks[s], chs[c], out, err);
            free(ch_dir);
        }
        free_names(chs, n_ch);
        free(spk_dir);
    }
    free_names(spks, n_spk);
    if (rc == 0 && out->n == 0)
        rc = esp_fail(err, "%s: no utterances (an empty split: expected <spk>/<chapter>/<spk>-<chapter>.trans.txt)",
                      split_dir);
    if (rc == 0) {
        manifest_sort(out);
        rc = check_sorted_unique(out, split_dir, err);
    }
    free(split_dir);
    if (rc != 0) manifest_free(out);
    return rc;
}

int corpus_an4_parse_line(const char *line, char **utt, char **src, char **words)
{
    *utt = *src = *words = NULL;
    size_t len = strlen(line);
    while (len && strchr(" \t\r", line[len - 1])) len--;
    if (!len || line[len - 1] != ')') return -1;
    const char *open = NULL;
    for (size_t i = len - 1; i-- > 0;)
        if (line[i] == '(') {
            open = line + i;
            break;
        }
    if (!open) return -1;
    const char *w = line;
    while (*w == ' ' || *w == '\t') w++;
    const char *we = open;
    if (we == w || (we[-1] != ' ' && we[-1] != '\t')) return -1; /* words, whitespace, then (src) */
    while (we > w && (we[-1] == ' ' || we[-1] == '\t')) we--;
    if (we == w) return -1;
    size_t slen = (size_t)(line + len - 1 - (open + 1));
    char *s = xstrndup(open + 1, slen);
    /* src is <a>-<b>-<c>: three non-empty parts without spaces or slashes */
    char *d1 = strchr(s, '-'), *d2 = d1 ? strchr(d1 + 1, '-') : NULL;
    if (!d1 || !d2 || strchr(d2 + 1, '-') || d1 == s || d2 == d1 + 1 || !d2[1] || strpbrk(s, " \t/()")) {
        free(s);
        return -1;
    }
    char *wd = xstrndup(w, (size_t)(we - w));
    size_t wl = strlen(wd);
    if (!strncmp(wd, "<s> ", 4)) memmove(wd, wd + 4, (wl -= 4) + 1);
    if (wl >= 5 && !strcmp(wd + wl - 5, " </s>")) wd[wl -= 5] = '\0';
    *d1 = *d2 = '\0';
    *utt = xasprintf("%s-%s-%s", d1 + 1, s, d2 + 1);
    *d1 = *d2 = '-';
    *src = s;
    *words = wd;
    return 0;
}

typedef struct an4_ctx {
    const char *path, *wav_dir;
    manifest *m;
} an4_ctx;

static int an4_line(void *vctx, char *line, size_t lineno, esp_err *err)
{
    an4_ctx *c = vctx;
    if (!line[strspn(line, " \t\r")]) return 0;
    char *utt, *src, *words;
    if (corpus_an4_parse_line(line, &utt, &src, &words) != 0)
        return esp_fail(err, "%s:%zu: expected 'WORDS (<id>-<speaker>-<n>)'", c->path, lineno);
    int rc = 0;
    const char *spk = strchr(src, '-') + 1;
    char *spk_only = xstrndup(spk, (size_t)(strchr(spk, '-') - spk));
    char *name = xasprintf("%s/%s.sph", spk_only, src);
    char *wav = path_join(c->wav_dir, name);
    if (strchr(words, '\t')) rc = esp_fail(err, "%s:%zu: the transcript holds a tab", c->path, lineno);
    else if (!path_exists(wav)) rc = esp_fail(err, "%s:%zu: utterance %s: no audio file %s", c->path, lineno, utt, wav);
    else manifest_add(c->m, utt, wav, words, spk_only);
    free(spk_only);
    free(name);
    free(wav);
    free(utt);
    free(src);
    free(words);
    return rc;
}

int corpus_read_an4(const char *an4_root, const char *split, manifest *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    const char *sub = !strcmp(split, "train") ? "an4_clstk" : !strcmp(split, "test") ? "an4test_clstk" : NULL;
    if (!sub) return esp_fail(err, "%s: AN4 has the splits train and test, not '%s'", an4_root, split);
    char *tname = xasprintf("etc/an4_%s.transcription", split);
    char *path = path_join(an4_root, tname);
    char *wsub = xasprintf("wav/%s", sub);
    char *wav_dir = path_join(an4_root, wsub);
    int rc = -1;
    if (!path_exists(path)) {
        esp_fail(err, "%s: missing (is %s an AN4 folder with etc/ and wav/?)", path, an4_root);
    } else {
        char *buf = text_file_read(path, "an AN4 transcription", NULL, err);
        if (buf) {
            an4_ctx c = {.path = path, .wav_dir = wav_dir, .m = out};
            rc = for_each_line(buf, an4_line, &c, err);
            free(buf);
        }
        if (rc == 0 && out->n == 0) rc = esp_fail(err, "%s: no utterances (an empty split)", path);
        if (rc == 0) {
            manifest_sort(out);
            rc = check_sorted_unique(out, path, err);
        }
    }
    free(tname);
    free(path);
    free(wsub);
    free(wav_dir);
    if (rc != 0) manifest_free(out);
    return rc;
}
