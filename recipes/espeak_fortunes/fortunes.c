#include "recipes/espeak_fortunes/fortunes.h"
#include "recipes/espeak_fortunes/str_list.h"
#include "core/base/fsio.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>


/* Words ending in '.' that do not end a sentence; the builder drops sentences holding them, since
 * a synthesizer expands them ("Dr." -> doctor) and the transcript would not match. */
static int is_abbreviation(const char *word, size_t len)
{
    static const char *const abbrev[] = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "prof",
                                         "gen", "col", "lt", "sgt", "capt", "mt", "inc", "ltd", "co",
                                         "rev", "gov", "sen", "rep", "ave", "dept", "univ", "approx",
                                         "fig", "vol", "ed", "esp", "corp", "jan", "feb", "mar", "apr",
                                         "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"};
    if (len == 1) return 1; /* initials: "J. R. R. Tolkien", "e.g." */
    for (size_t i = 0; i < sizeof abbrev / sizeof abbrev[0]; i++)
        if (strlen(abbrev[i]) == len && strncasecmp(word, abbrev[i], len) == 0) return 1;
    return 0;
}

typedef struct sentence_list {
    fortune_sentence *v;
    size_t n, cap;
} sentence_list;

static void add_sentence(sentence_list *l, const char *text, size_t len, int has_abbrev)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = (fortune_sentence){text, len, has_abbrev};
}

/* Splits one fortune (lines joined by spaces, attribution lines "-- Author" dropped) into
 * sentences ending in . ! or ? (closing quotes and brackets included) and hands them to fn. */
static void split_fortune(const char *fortune, size_t len, sentence_list *l, fortune_fn fn, void *ctx)
{
    char *joined = xmalloc(len + 2);
    size_t j = 0;
    for (size_t i = 0; i < len;) {
        size_t eol = i;
        while (eol < len && fortune[eol] != '\n') eol++;
        size_t k = i;
        while (k < eol && isspace((unsigned char)fortune[k])) k++;
        int attribution = eol - k >= 2 && fortune[k] == '-' && fortune[k + 1] == '-';
        if (!attribution) {
            memcpy(joined + j, fortune + i, eol - i);
            j += eol - i;
            joined[j++] = ' ';
        }
        i = eol + 1;
    }
    joined[j] = '\0';

    l->n = 0;
    size_t start = 0;
    int has_abbrev = 0;
    for (size_t i = 0; i < j; i++) {
        char c = joined[i];
        if (c != '.' && c != '!' && c != '?') continue;
        size_t end = i + 1;
        while (end < j && strchr("\"')]", joined[end])) end++;
        if (end < j && !isspace((unsigned char)joined[end])) continue;
        if (c == '.') {
            size_t w = i;
            while (w > start && isalpha((unsigned char)joined[w - 1])) w--;
            if (i > w && is_abbreviation(joined + w, i - w)) {
                has_abbrev = 1;
                continue;
            }
        }
        add_sentence(l, joined + start, end - start, has_abbrev);
        start = end;
        has_abbrev = 0;
        i = end > i ? end - 1 : i;
    }
    if (start < j) add_sentence(l, joined + start, j - start, has_abbrev);
    fn(ctx, joined, l->v, l->n);
    free(joined);
}

/* A fortune file: fortunes separated by lines holding a single '%'. */
static void split_fortune_file(const char *text, sentence_list *l, fortune_fn fn, void *ctx)
{
    const char *fortune = text;
    for (const char *p = text;; p++) {
        int at_line_start = p == text || p[-1] == '\n';
        int separator = at_line_start && p[0] == '%' && (p[1] == '\n' || p[1] == '\0');
        if (separator || *p == '\0') {
            split_fortune(fortune, (size_t)(p - fortune), l, fn, ctx);
            if (*p == '\0' || p[1] == '\0') break;
            fortune = p + 2;
            p++;
        }
    }
}

static int list_text_files(const char *source, str_list *files, esp_err *err)
{
    if (!is_dir(source)) {
        if (path_exists(source)) {
            str_list_push(files, xstrdup(source));
            return 0;
        }
        return esp_fail(err, "create_dataset.text_source: %s does not exist (install the Debian package "
                        "fortunes, or point text_source at a directory of fortune files)", source);
    }
    DIR *d = opendir(source);
    if (!d) return esp_fail(err, "create_dataset.text_source: %s: %s", source, strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
        size_t n = strlen(name);
        if (name[0] == '.' || (n > 4 && strcmp(name + n - 4, ".dat") == 0) ||
            (n > 3 && strcmp(name + n - 3, ".u8") == 0))
            continue;
        char *path = path_join(source, name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) str_list_push(files, path);
        else free(path);
    }
    closedir(d);
    if (files->n == 0)
        return esp_fail(err, "create_dataset.text_source: %s holds no fortune files (install the Debian "
                        "package fortunes)", source);
    qsort(files->v, files->n, sizeof *files->v, str_list_cmp);
    return 0;
}

int fortunes_for_each(const char *text_source, fortune_fn fn, void *ctx, esp_err *err)
{
    str_list files = {0};
    sentence_list sentences = {0};
    int rc = list_text_files(text_source, &files, err);
    for (size_t i = 0; i < files.n && rc == 0; i++) {
        char *text = read_file(files.v[i], READ_LIST, NULL, err);
        if (!text) {
            rc = -1;
            break;
        }
        split_fortune_file(text, &sentences, fn, ctx);
        free(text);
    }
    free(sentences.v);
    str_list_free(&files);
    return rc;
}
