/* The output formats of `espnet3 transcribe`; see transcribe_output.h. */
#include "cli/transcribe_output.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

static const char *const names[TR_FORMATS] = {"text", "json", "ctm", "srt", "vtt"};
static const char *const exts[TR_FORMATS] = {"txt", "json", "ctm", "srt", "vtt"};

int tr_format_parse(const char *name, tr_format *out)
{
    for (int f = 0; f < TR_FORMATS; f++)
        if (!strcmp(names[f], name)) return *out = (tr_format)f, 0;
    return -1;
}

const char *tr_format_ext(tr_format f) { return exts[f]; }

/* Seconds rounded to the millisecond, null where the model gave no time. */
static json_t *time_json(double t) { return t < 0 ? json_null() : json_real(round(t * 1000) / 1000); }

static json_t *item_json(const espnet3_item *it, const char *key)
{
    json_t *o = json_object();
    json_object_set_new(o, key, json_string(it->text));
    if (it->id >= 0) json_object_set_new(o, "id", json_integer(it->id));
    json_object_set_new(o, "start", time_json(it->start));
    json_object_set_new(o, "end", time_json(it->end));
    json_object_set_new(o, "score", it->start < 0 ? json_null() : json_real(it->score));
    return o;
}

static json_t *hyp_json(const espnet3_result *r, size_t k)
{
    json_t *h = json_object(), *tok = json_array(), *words = json_array();
    espnet3_item it;
    json_object_set_new(h, "text", json_string(espnet3_result_text(r, k)));
    json_object_set_new(h, "score", json_real(espnet3_result_score(r, k)));
    for (size_t i = 0; espnet3_result_token(r, k, i, &it) == 0; i++) json_array_append_new(tok, item_json(&it, "token"));
    for (size_t i = 0; espnet3_result_word(r, k, i, &it) == 0; i++) json_array_append_new(words, item_json(&it, "word"));
    json_object_set_new(h, "tokens", tok);
    json_object_set_new(h, "words", words);
    return h;
}

/* One line: {"file", "duration", the best's text, score, tokens and words, "nbest": every hypothesis}. */
static void write_json(FILE *fp, const char *name, const espnet3_result *r)
{
    json_t *o = json_object(), *nbest = json_array();
    json_object_set_new(o, "file", json_string(name));
    json_object_set_new(o, "duration", json_real(round(espnet3_result_duration(r) * 1000) / 1000));
    json_t *best = hyp_json(r, 0);
    json_object_update(o, best);
    json_decref(best);
    for (size_t k = 0; k < espnet3_result_count(r); k++) json_array_append_new(nbest, hyp_json(r, k));
    json_object_set_new(o, "nbest", nbest);
    json_dumpf(o, fp, JSON_COMPACT | JSON_REAL_PRECISION(10));
    fputc('\n', fp);
    json_decref(o);
}

/* CTM's recording id: the file's name without folders and extension ("stdin" for "-"); blanks
 * would split its field. */
static void ctm_id(const char *name, char *buf, size_t cap)
{
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    if (!strcmp(name, "-")) base = "stdin";
    size_t n = strcspn(base, "."), i;
    for (i = 0; i < n && i + 1 < cap; i++) buf[i] = base[i] == ' ' || base[i] == '\t' ? '_' : base[i];
    buf[i] = '\0';
}

/* NIST CTM: "<recording> 1 <start> <duration> <word> <confidence>", the confidence exp(score). */
static void write_ctm(FILE *fp, const char *name, const espnet3_result *r)
{
    char id[256];
    ctm_id(name, id, sizeof id);
    espnet3_item w;
    for (size_t i = 0; espnet3_result_word(r, 0, i, &w) == 0; i++) {
        if (w.start < 0) continue; /* a model without a CTC branch has no times */
        fprintf(fp, "%s 1 %.3f %.3f %s %.4f\n", id, w.start, w.end - w.start, w.text, exp(w.score));
    }
}

static void cue_time(FILE *fp, double t, char sep)
{
    long ms = lround(t * 1000);
    fprintf(fp, "%02ld:%02ld:%02ld%c%03ld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep, ms % 1000);
}

/* Subtitles: words grouped into cues of at most 42 characters and 5 seconds, a new cue after a pause
 * of a second; without word times one cue spans the audio. */
static void write_cues(FILE *fp, const espnet3_result *r, int vtt)
{
    char sep = vtt ? '.' : ',';
    if (vtt) fprintf(fp, "WEBVTT\n\n");
    espnet3_item w, first;
    size_t n = espnet3_result_words(r, 0), cue = 0;
    int timed = espnet3_result_word(r, 0, 0, &first) == 0 && first.start >= 0;
    char line[256];
    for (size_t i = 0; timed && i < n;) {
        espnet3_result_word(r, 0, i, &first);
        size_t j = i, len = 0;
        double end = first.end;
        line[0] = '\0';
        while (j < n && espnet3_result_word(r, 0, j, &w) == 0) {
            size_t add = strlen(w.text) + (len ? 1 : 0);
            if (j > i && (len + add > 42 || w.end - first.start > 5.0 || w.start - end > 1.0)) break;
            if (len + add < sizeof line) snprintf(line + len, sizeof line - len, "%s%s", len ? " " : "", w.text);
            len += add, end = w.end, j++;
        }
        if (!vtt) fprintf(fp, "%zu\n", ++cue);
        cue_time(fp, first.start, sep), fprintf(fp, " --> "), cue_time(fp, end, sep);
        fprintf(fp, "\n%s\n\n", line);
        i = j;
    }
    const char *text = espnet3_result_text(r, 0);
    if (!timed && *text) { /* no word times (a model without a CTC branch) */
        if (!vtt) fprintf(fp, "1\n");
        cue_time(fp, 0, sep), fprintf(fp, " --> "), cue_time(fp, espnet3_result_duration(r), sep);
        fprintf(fp, "\n%s\n\n", text);
    }
}

void tr_write(FILE *fp, tr_format f, const char *name, const espnet3_result *r, int with_name)
{
    switch (f) {
    case TR_TEXT:
        if (with_name) fprintf(fp, "%s\t", name);
        fprintf(fp, "%s\n", espnet3_result_text(r, 0));
        break;
    case TR_JSON: write_json(fp, name, r); break;
    case TR_CTM: write_ctm(fp, name, r); break;
    case TR_SRT: write_cues(fp, r, 0); break;
    case TR_VTT: write_cues(fp, r, 1); break;
    case TR_FORMATS: break;
    }
}
