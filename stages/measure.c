/* Stage 7 measure (alias score): WER, CER and TER of every test set from the hypotheses stage 6
 * wrote, scored as ESPnet scores with sclite (core/decode/score.h); TER (ESPnet3's esp2_asr metric)
 * over the SentencePiece pieces of the text, as ESPnet2's stage 13 scores `ter`. For each test set
 * and metric: ${inference_dir}/<test>/{wer,cer,ter}_alignment (sclite's per-utterance lines) and
 * ${inference_dir}/<test>/score_{wer,cer,ter}/result.txt (sclite's summary; ESPnet2's place for it);
 * then ${inference_dir}/metrics.json in ESPnet3's shape and ${inference_dir}/RESULTS.md, the
 * `## Results` tables also printed on stdout. Every input is read and checked before the first
 * file is written. */
#include "stages/stages.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/dataset_src.h"
#include "core/base/progress.h"
#include "core/data/spm_shim.h"
#include "core/decode/score.h"
#include "core/decode/score_report.h"
#include "core/decode/text_cleaner.h"
#include "core/formats/text_scp.h"

typedef struct metric_kind {
    const char *target; /* the _target_ ESPnet3 configs name */
    const char *name;   /* key in metrics.json, heading of the Markdown table */
    const char *file;   /* <file>_alignment, score_<file>/ */
    score_unit unit;
    int pieces;         /* TER: words are the SentencePiece pieces of `bpemodel` */
} metric_kind;

/* ESPnet3's asr system names and its esp2_asr system's (the same metrics). */
static const metric_kind metric_kinds[] = {
    {"espnet3.systems.asr.metrics.wer.WER", "WER", "wer", SCORE_WORDS, 0},
    {"espnet3.systems.asr.metrics.cer.CER", "CER", "cer", SCORE_CHARS, 0},
    {"espnet3.systems.esp2_asr.metrics.wer.WER", "WER", "wer", SCORE_WORDS, 0},
    {"espnet3.systems.esp2_asr.metrics.cer.CER", "CER", "cer", SCORE_CHARS, 0},
    {"espnet3.systems.esp2_asr.metrics.ter.TER", "TER", "ter", SCORE_WORDS, 1},
};

/* One test set under one metric: its inputs, then what scoring made of them. */
typedef struct scored_set {
    const metric_kind *kind;
    spm_model *spm; /* TER's pieces (borrowed) */
    const char *test;
    int skip; /* the metric's apply_to leaves this set out */
    text_scp ref, hyp;
    score_summary sum;
    char *alignment;
    size_t alignment_len;
} scored_set;

static const metric_kind *kind_of(const char *target)
{
    for (size_t i = 0; i < sizeof metric_kinds / sizeof *metric_kinds; i++)
        if (target && !strcmp(metric_kinds[i].target, target)) return &metric_kinds[i];
    return NULL;
}

/* The scp file (without .scp) a metric reads for `alias`: its `inputs` entry, or the alias itself
 * when the metric lists no inputs (ESPnet3: inputs default to [ref_key, hyp_key]). */
static const char *input_file(const metric_cfg *m, const char *alias)
{
    /* ESPnet3's "dataset:text": the test set's transcript, which stage 6 copies into ref.scp. */
    if (!strcmp(alias, "dataset:text")) return "ref";
    if (!m->n_inputs) return alias;
    for (unsigned i = 0; i < m->n_inputs; i++)
        if (!strcmp(m->inputs[i].alias, alias)) return m->inputs[i].file;
    return NULL;
}

/* The metric's clean_types (ESPnet2's TextCleaner, before anything else: ESPnet3's metrics clean each
 * text as they read it) over every text of f, in place. */
static int clean_texts(const metric_cfg *m, text_scp *f, esp_err *err)
{
    int *kinds = xmalloc(m->n_clean_types * sizeof *kinds), rc = 0;
    for (unsigned k = 0; k < m->n_clean_types; k++) ESP_CHECK((kinds[k] = text_cleaner_of(m->clean_types[k])) >= 0);
    for (size_t i = 0; rc == 0 && i < f->n; i++) {
        text_scp_entry *e = &f->items[i];
        char *clean = text_clean(kinds, m->n_clean_types, e->text);
        if (!clean) {
            rc = esp_fail(err, "%s:%ld: utterance %s: the text is not valid UTF-8 (clean_types reads Unicode)",
                          f->path, e->line, e->id);
            break;
        }
        free(e->text);
        e->text = clean;
    }
    free(kinds);
    return rc;
}

/* Reads the metric's reference and hypothesis files of one test set (ref.scp and hyp.scp unless
 * `inputs` says otherwise) and checks that they list the same utterances. Every file `inputs`
 * names must be there, as ESPnet3's load_scp_fields asserts. */
static int load_pairs(const char *inference_dir, const metric_cfg *m, scored_set *s, esp_err *err)
{
    char *test_dir = path_join(inference_dir, s->test);
    const char *hyp_file = input_file(m, m->hyp_key ? m->hyp_key : "hyp");
    const char *ref_file = input_file(m, m->ref_key ? m->ref_key : "ref");
    char *hyp_path = xasprintf("%s/%s.scp", test_dir, hyp_file ? hyp_file : "");
    char *ref_path = xasprintf("%s/%s.scp", test_dir, ref_file ? ref_file : "");
    int rc = 0;
    for (unsigned i = 0; rc == 0 && i < m->n_inputs; i++) {
        char *p = xasprintf("%s/%s.scp", test_dir, m->inputs[i].file);
        if (!path_exists(p))
            rc = esp_fail(err, "%s: missing for test set %s (the metric's inputs name %s; stage 6 infer writes "
                          "<test>/<field>.scp)", p, s->test, m->inputs[i].file);
        free(p);
    }
    if (rc != 0)
        ; /* a listed input is missing: said above */
    else if (!path_exists(hyp_path))
        rc = esp_fail(err, "%s: no hypotheses for test set %s (run stage 6 first: --stages infer)", hyp_path, s->test);
    else if (!path_exists(ref_path))
        rc = esp_fail(err, "%s: no references for test set %s (stage 6 infer writes it beside %s; rerun it)",
                      ref_path, s->test, hyp_path);
    else if (text_scp_read(ref_path, &s->ref, err) != 0) rc = -1;
    else if (text_scp_read(hyp_path, &s->hyp, err) != 0) rc = -1;
    else if (m->n_clean_types && (clean_texts(m, &s->ref, err) != 0 || clean_texts(m, &s->hyp, err) != 0)) rc = -1;
    for (size_t i = 0; rc == 0 && i < s->ref.n; i++) {
        const text_scp_entry *r = &s->ref.items[i];
        if (!text_scp_find(&s->hyp, r->id))
            rc = esp_fail(err, "%s:%ld: utterance %s has no hypothesis in %s (rerun stage 6 infer for %s)", ref_path,
                          r->line, r->id, hyp_path, s->test);
    }
    for (size_t i = 0; rc == 0 && i < s->hyp.n; i++) {
        const text_scp_entry *h = &s->hyp.items[i];
        if (!text_scp_find(&s->ref, h->id))
            rc = esp_fail(err, "%s:%ld: utterance %s is not in %s (hypotheses and references must list the same "
                          "utterances)", hyp_path, h->line, h->id, ref_path);
    }
    free(ref_path);
    free(hyp_path);
    free(test_dir);
    return rc;
}

/* Whether metric m scores test set t: every set, or those its apply_to lists (ESPnet3's score). */
static int applies(const metric_cfg *m, const char *test)
{
    if (!m->apply_to) return 1;
    for (unsigned i = 0; i < m->n_apply_to; i++)
        if (!strcmp(m->apply_to[i], test)) return 1;
    return 0;
}

/* TER's words: the SentencePiece pieces of the cleaned text, joined by spaces; an empty text or
 * one with no pieces is "." (as ESPnet3's TER, which never hands jiwer an empty string). Takes
 * clean; other metrics get it back as it is. */
static char *pieces_of(const scored_set *s, char *clean)
{
    if (!s->kind->pieces) return clean;
    char **pieces = NULL, err[256];
    int *ids = NULL;
    unsigned char *unknown = NULL;
    size_t n = 0;
    if (!clean[0] || spm_encode(s->spm, clean, &pieces, &ids, &unknown, &n, err, sizeof err) != 0 || n == 0) {
        if (pieces) spm_pieces_free(pieces, ids, unknown, n);
        free(clean);
        return xstrdup(".");
    }
    size_t len = 1;
    for (size_t i = 0; i < n; i++) len += strlen(pieces[i]) + 1;
    char *out = xmalloc(len), *o = out;
    for (size_t i = 0; i < n; i++) o += sprintf(o, "%s%s", i ? " " : "", pieces[i]);
    spm_pieces_free(pieces, ids, unknown, n);
    free(clean);
    return out;
}

/* Aligns every utterance in reference order; keeps the alignment text and the totals. */
static void score_set(scored_set *s)
{
    FILE *fp = open_memstream(&s->alignment, &s->alignment_len);
    ESP_CHECK(fp != NULL);
    char *label = xasprintf("measure %s %s", s->test, s->kind->name);
    progress pr;
    progress_start(&pr, label, s->ref.n);
    for (size_t i = 0; i < s->ref.n; i++) {
        const text_scp_entry *r = &s->ref.items[i], *h = text_scp_find(&s->hyp, r->id);
        char *rc = pieces_of(s, score_clean(r->text)), *hc = pieces_of(s, score_clean(h->text));
        score_tokens rt, ht;
        score_tokenize(rc, s->kind->unit, &rt);
        score_tokenize(hc, s->kind->unit, &ht);
        score_counts c = {0};
        size_t n_steps;
        score_step *steps = score_align(&rt, &ht, &n_steps, &c);
        score_write_pra(fp, r->id, &rt, &ht, steps, n_steps, &c);
        score_summary_add(&s->sum, &c);
        free(steps);
        score_tokens_free(&rt);
        score_tokens_free(&ht);
        free(rc);
        free(hc);
        progress_update(&pr, i + 1);
    }
    progress_finish(&pr);
    free(label);
    ESP_CHECK(fclose(fp) == 0);
}

/* Python's round(x, 2) for the rates in metrics.json: printf rounds the exact binary value as it does. */
static double round2(double x)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.2f", x);
    return strtod(buf, NULL);
}

static int write_text(const char *path, const char *text, size_t len, esp_err *err)
{
    char *dir = path_dirname(path);
    int rc = mkdir_p(dir, err);
    free(dir);
    return rc == 0 ? atomic_write_file(path, text, len, err) : -1;
}

static int write_set_files(const char *inference_dir, const scored_set *s, esp_err *err)
{
    char *align_path = xasprintf("%s/%s/%s_alignment", inference_dir, s->test, s->kind->file);
    char *result_path = xasprintf("%s/%s/score_%s/result.txt", inference_dir, s->test, s->kind->file);
    char *result = NULL;
    size_t result_len = 0;
    FILE *fp = open_memstream(&result, &result_len);
    ESP_CHECK(fp != NULL);
    char *title = xasprintf("%s %s", s->test, s->kind->name);
    score_write_result(fp, title, &s->sum);
    ESP_CHECK(fclose(fp) == 0);
    int rc = write_text(align_path, s->alignment, s->alignment_len, err);
    if (rc == 0) rc = write_text(result_path, result, result_len, err);
    free(title);
    free(result);
    free(result_path);
    free(align_path);
    return rc;
}

/* {"<target>": {"<test>": {"WER": 12.34, "WER_errors": .., "WER_ref_len": .., "WER_sub": .., "WER_del": ..,
 *  "WER_ins": .., "WER_hit": ..}}}: ESPnet3's metrics.json with the counts its error rates report. */
static char *metrics_json(const scored_set *sets, size_t n)
{
    json_t *root = json_object();
    for (size_t i = 0; i < n; i++) {
        const scored_set *s = &sets[i];
        if (s->skip) continue;
        json_t *per_metric = json_object_get(root, s->kind->target);
        if (!per_metric) json_object_set_new(root, s->kind->target, per_metric = json_object());
        json_t *o = json_object();
        const char *k = s->kind->name;
        char key[32];
        json_object_set_new(o, k, json_real(round2(score_error_rate(&s->sum))));
        const struct {
            const char *suffix;
            long value;
        } counts[] = {{"errors", score_errors(&s->sum)}, {"ref_len", s->sum.n_ref}, {"sub", s->sum.c.sub},
                      {"del", s->sum.c.del}, {"ins", s->sum.c.ins}, {"hit", s->sum.c.corr}};
        for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
            snprintf(key, sizeof key, "%s_%s", k, counts[j].suffix);
            json_object_set_new(o, key, json_integer(counts[j].value));
        }
        json_object_set_new(per_metric, s->test, o);
    }
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    ESP_CHECK(text != NULL);
    json_decref(root);
    char *with_newline = xasprintf("%s\n", text);
    free(text);
    return with_newline;
}

/* `## Results`, then one `### WER` / `### CER` table per metric with a row per test set. */
static char *results_markdown(const scored_set *sets, size_t n_metrics, size_t n_tests)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    ESP_CHECK(fp != NULL);
    fputs("## Results\n", fp);
    const char **names = xmalloc(n_tests * sizeof *names);
    score_summary *sums = xmalloc(n_tests * sizeof *sums);
    for (size_t m = 0; m < n_metrics; m++) {
        size_t rows = 0;
        for (size_t t = 0; t < n_tests; t++) {
            const scored_set *s = &sets[m * n_tests + t];
            if (s->skip) continue;
            names[rows] = s->test;
            sums[rows++] = s->sum;
        }
        if (!rows) continue;
        fprintf(fp, "\n### %s\n\n", sets[m * n_tests].kind->name);
        score_write_markdown_table(fp, names, sums, rows);
    }
    free(names);
    free(sums);
    ESP_CHECK(fclose(fp) == 0);
    return text;
}

static int check_config(const metrics_cfg *cfg, const char *file, esp_err *err)
{
    if (!cfg->inference_dir)
        return esp_fail(err, "%s: inference_dir: missing (set where stage 6 wrote <test>/hyp.scp)", file);
    if (!cfg->n_metrics)
        return esp_fail(err, "%s: metrics: empty (add - _target_: espnet3.systems.asr.metrics.wer.WER and/or "
                        "...cer.CER)", file);
    for (unsigned i = 0; i < cfg->n_metrics; i++) {
        const metric_kind *k = kind_of(cfg->metrics[i].target);
        if (!k)
            return esp_fail(err, "%s: metrics[%u]._target_: %s is not a metric this build computes (use %s, %s or %s)",
                            file, i, cfg->metrics[i].target ? cfg->metrics[i].target : "(missing)",
                            metric_kinds[0].target, metric_kinds[1].target, metric_kinds[4].target);
        for (unsigned j = 0; j < i; j++)
            if (!strcmp(kind_of(cfg->metrics[j].target)->file, k->file))
                return esp_fail(err, "%s: metrics[%u]: %s is listed twice (keep one)", file, i, k->name);
        const metric_cfg *m = &cfg->metrics[i];
        if (k->pieces && !m->bpemodel)
            return esp_fail(err, "%s: metrics[%u].bpemodel: missing (TER scores the SentencePiece pieces of the text: "
                            "name the recipe's bpe.model)", file, i);
        if (k->pieces && !path_exists(m->bpemodel))
            return esp_fail(err, "%s: metrics[%u].bpemodel: %s does not exist (run train_tokenizer, stage 2)", file, i,
                            m->bpemodel);
        const char *keys[2] = {m->ref_key ? m->ref_key : "ref", m->hyp_key ? m->hyp_key : "hyp"};
        for (int r = 0; r < 2; r++)
            if (!input_file(m, keys[r]))
                return esp_fail(err, "%s: metrics[%u].inputs: no '%s' (%s reads its %s as '%s'; list it in inputs, or "
                                "set %s)", file, i, keys[r], k->name, r ? "hypotheses" : "references", keys[r],
                                r ? "hyp_key" : "ref_key");
        for (unsigned a = 0; a < m->n_inputs; a++)
            if (!m->inputs[a].file[0] || strchr(m->inputs[a].file, '/'))
                return esp_fail(err, "%s: metrics[%u].inputs: '%s' is not an scp name (a file <test>/<name>.scp)", file,
                                i, m->inputs[a].file);
    }
    return 0;
}

/* The test sets to score: dataset.test names, else test_sets, else (as ESPnet3's measure) every
 * folder under inference_dir that holds hyp.scp and ref.scp, sorted. *owned holds what was
 * discovered (freed by the caller). */
static int find_tests(const metrics_cfg *cfg, const char *file, const char ***tests, size_t *n, char ***owned,
                      esp_err *err)
{
    *owned = NULL;
    *tests = xcalloc(256, sizeof **tests);
    *n = dataset_test_names(cfg->dataset, cfg->test_sets, cfg->n_test_sets, *tests, 256);
    for (size_t i = 0; i < *n; i++)
        if (!(*tests)[i][0] || strchr((*tests)[i], '/'))
            return esp_fail(err, "%s: test set '%s' is not a test set name (a folder under inference_dir)", file,
                            (*tests)[i]);
    if (*n) return 0;
    DIR *d = opendir(cfg->inference_dir);
    struct dirent *e;
    *owned = xcalloc(256, sizeof **owned);
    while (d && (e = readdir(d)) && *n < 256) {
        if (e->d_name[0] == '.') continue;
        char *hyp = xasprintf("%s/%s/hyp.scp", cfg->inference_dir, e->d_name);
        char *ref = xasprintf("%s/%s/ref.scp", cfg->inference_dir, e->d_name);
        if (path_exists(hyp) && path_exists(ref)) (*owned)[(*n)++] = xstrdup(e->d_name);
        free(hyp);
        free(ref);
    }
    if (d) closedir(d);
    for (size_t i = 1; i < *n; i++)
        for (size_t j = i; j > 0 && strcmp((*owned)[j - 1], (*owned)[j]) > 0; j--) {
            char *t = (*owned)[j];
            (*owned)[j] = (*owned)[j - 1];
            (*owned)[j - 1] = t;
        }
    for (size_t i = 0; i < *n; i++) (*tests)[i] = (*owned)[i];
    if (*n == 0)
        return esp_fail(err, "%s: no test sets to score: no test_sets or dataset.test, and no folder under %s holds "
                        "hyp.scp and ref.scp (run infer, stage 6, first)", file, cfg->inference_dir);
    return 0;
}

int stage_measure(const stage_ctx *ctx, esp_err *err)
{
    const metrics_cfg *cfg = ctx->configs->metrics ? ctx->configs->metrics->typed : NULL;
    if (!cfg) return esp_fail(err, "measure: needs a metrics config (pass --metrics_config)");
    const char *file = ctx->configs->metrics->path;
    if (check_config(cfg, file, err) != 0) return -1;
    const char **tests;
    char **owned;
    size_t n_tests;
    if (find_tests(cfg, file, &tests, &n_tests, &owned, err) != 0) {
        for (size_t i = 0; owned && owned[i]; i++) free(owned[i]);
        free(owned);
        free(tests);
        return -1;
    }

    size_t n_metrics = cfg->n_metrics, n = n_metrics * n_tests;
    scored_set *sets = xcalloc(n, sizeof *sets);
    int rc = 0;
    spm_model **spms = xcalloc(n_metrics, sizeof *spms);
    for (size_t m = 0; m < n_metrics; m++) {
        const metric_cfg *mc = &cfg->metrics[m];
        size_t scored = 0;
        char spm_err[512];
        if (rc == 0 && kind_of(mc->target)->pieces && !(spms[m] = spm_load(mc->bpemodel, spm_err, sizeof spm_err)))
            rc = esp_fail(err, "%s: metrics[%zu].bpemodel: %s: %s", file, m, mc->bpemodel, spm_err);
        for (size_t t = 0; t < n_tests; t++) {
            scored_set *s = &sets[m * n_tests + t];
            s->kind = kind_of(mc->target);
            s->spm = spms[m];
            s->test = tests[t];
            s->skip = !applies(mc, tests[t]);
            scored += !s->skip;
            if (rc == 0 && !s->skip && load_pairs(cfg->inference_dir, mc, s, err) != 0) rc = -1;
        }
        for (unsigned a = 0; a < mc->n_apply_to; a++) {
            size_t t = 0;
            while (t < n_tests && strcmp(tests[t], mc->apply_to[a])) t++;
            if (t == n_tests)
                log_warn("%s: metrics[%zu].apply_to: %s is not a test set being scored; nothing to do for it", file, m,
                         mc->apply_to[a]);
        }
        if (!scored) log_warn("%s: metrics[%zu] (%s): apply_to names none of the test sets; it scores nothing", file, m,
                              sets[m * n_tests].kind->name);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (sets[i].skip) continue;
        score_set(&sets[i]);
        log_info("measure: %s %s %.2f%% (%ld errors / %ld reference %s in %ld utterances)", sets[i].test,
                 sets[i].kind->name, score_error_rate(&sets[i].sum), score_errors(&sets[i].sum), sets[i].sum.n_ref,
                 sets[i].kind->pieces ? "tokens" : sets[i].kind->unit == SCORE_WORDS ? "words" : "characters",
                 sets[i].sum.n_sent);
    }
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!sets[i].skip) rc = write_set_files(cfg->inference_dir, &sets[i], err);
    if (rc == 0) {
        char *json = metrics_json(sets, n);
        char *md = results_markdown(sets, n_metrics, n_tests);
        char *json_path = path_join(cfg->inference_dir, "metrics.json");
        char *md_path = path_join(cfg->inference_dir, "RESULTS.md");
        rc = atomic_write_file(json_path, json, strlen(json), err);
        if (rc == 0) rc = atomic_write_file(md_path, md, strlen(md), err);
        if (rc == 0) {
            fputs(md, stdout);
            fflush(stdout);
            log_info("measure: wrote %s and %s", json_path, md_path);
        }
        free(md_path);
        free(json_path);
        free(md);
        free(json);
    }
    for (size_t i = 0; i < n; i++) {
        text_scp_free(&sets[i].ref);
        text_scp_free(&sets[i].hyp);
        free(sets[i].alignment);
    }
    free(sets);
    for (size_t m = 0; m < n_metrics; m++) spm_free(spms[m]);
    free(spms);
    for (size_t i = 0; owned && owned[i]; i++) free(owned[i]);
    free(owned);
    free(tests);
    return rc;
}
