/* Writers for scoring results (see score_report.h). */
#include "core/decode/score_report.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"

void score_summary_add(score_summary *s, const score_counts *utt)
{
    s->n_sent++;
    s->n_ref += utt->corr + utt->sub + utt->del;
    if (utt->sub + utt->del + utt->ins) s->n_sent_err++;
    s->c.corr += utt->corr;
    s->c.sub += utt->sub;
    s->c.del += utt->del;
    s->c.ins += utt->ins;
}

long score_errors(const score_summary *s) { return s->c.sub + s->c.del + s->c.ins; }

static double percent(long part, long whole) { return whole ? 100.0 * (double)part / (double)whole : 0.0; }

double score_error_rate(const score_summary *s) { return percent(score_errors(s), s->n_ref); }

/* Prints a token in sclite's case: lower when correct, upper when an error (ASCII only). */
static void put_cased(FILE *fp, const char *tok, int upper)
{
    for (const unsigned char *p = (const unsigned char *)tok; *p; p++) {
        unsigned char c = *p;
        if (upper && c >= 'a' && c <= 'z') c = (unsigned char)(c - 'a' + 'A');
        if (!upper && c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
        fputc(c, fp);
    }
}

static void put_fill(FILE *fp, int ch, size_t n)
{
    for (size_t i = 0; i < n; i++) fputc(ch, fp);
}

/* One pra line: each column is the token (or '*'s) padded with spaces to the column width, then a space. */
static void pra_line(FILE *fp, const char *label, const score_tokens *toks, int use_ref, const score_step *steps,
                     size_t n_steps, const size_t *width)
{
    fputs(label, fp);
    for (size_t i = 0; i < n_steps; i++) {
        int idx = use_ref ? steps[i].ref : steps[i].hyp;
        size_t len = 0;
        if (idx < 0) put_fill(fp, '*', len = width[i]);
        else {
            put_cased(fp, toks->tok[idx], steps[i].op != SCORE_CORR);
            len = strlen(toks->tok[idx]);
        }
        put_fill(fp, ' ', width[i] - len + 1);
    }
    fputc('\n', fp);
}

void score_write_pra(FILE *fp, const char *utt, const score_tokens *ref, const score_tokens *hyp,
                     const score_step *steps, size_t n_steps, const score_counts *c)
{
    size_t *width = xmalloc((n_steps ? n_steps : 1) * sizeof *width);
    for (size_t i = 0; i < n_steps; i++) {
        size_t r = steps[i].ref >= 0 ? strlen(ref->tok[steps[i].ref]) : 0;
        size_t h = steps[i].hyp >= 0 ? strlen(hyp->tok[steps[i].hyp]) : 0;
        width[i] = r > h ? r : h;
    }
    fprintf(fp, "id: (%s)\nScores: (#C #S #D #I) %ld %ld %ld %ld\n", utt, c->corr, c->sub, c->del, c->ins);
    /* Like sclite, an utterance with nothing on either side has only its Scores line. */
    if (n_steps) {
        pra_line(fp, "REF:  ", ref, 1, steps, n_steps, width);
        pra_line(fp, "HYP:  ", hyp, 0, steps, n_steps, width);
        fputs("Eval: ", fp);
        static const char mark[] = {[SCORE_CORR] = ' ', [SCORE_SUB] = 'S', [SCORE_DEL] = 'D', [SCORE_INS] = 'I'};
        for (size_t i = 0; i < n_steps; i++) {
            fputc(mark[steps[i].op], fp);
            put_fill(fp, ' ', width[i]);
        }
        fputc('\n', fp);
    }
    fputc('\n', fp);
    free(width);
}

/* Table columns: name (9), counts (17), six numbers of 7 (49), between bars. */
#define RESULT_RULE "-----------------------------------------------------------------------------"

static void result_table_top(FILE *fp, const char *title, const char *name, const char *const *heads)
{
    const int inner = (int)sizeof RESULT_RULE - 1, left = (inner + (int)strlen(name)) / 2;
    fprintf(fp, "\n\n%*s%s\n\n", 21, "", title);
    fprintf(fp, "     ,%s.\n     |%*s%*s|\n     |%s|\n", RESULT_RULE, left, name, inner - left, "", RESULT_RULE);
    fprintf(fp, "     | SPKR    |%6s %9s |", "# Snt", "# Wrd");
    for (int i = 0; i < 6; i++) fprintf(fp, " %7s", heads[i]);
    fprintf(fp, " |\n     |---------+-----------------+-------------------------------------------------|\n");
}

void score_write_result(FILE *fp, const char *name, const score_summary *s)
{
    static const char *const heads[] = {"Corr", "Sub", "Del", "Ins", "Err", "S.Err"};
    const double pct[] = {percent(s->c.corr, s->n_ref), percent(s->c.sub, s->n_ref), percent(s->c.del, s->n_ref),
                          percent(s->c.ins, s->n_ref), percent(score_errors(s), s->n_ref),
                          percent(s->n_sent_err, s->n_sent)};
    const long raw[] = {s->c.corr, s->c.sub, s->c.del, s->c.ins, score_errors(s), s->n_sent_err};

    result_table_top(fp, "SYSTEM SUMMARY PERCENTAGES by SPEAKER", name, heads);
    fprintf(fp, "     | Sum/Avg |%6ld %9ld |", s->n_sent, s->n_ref);
    for (int i = 0; i < 6; i++) fprintf(fp, " %7.1f", pct[i]);
    fprintf(fp, " |\n     `%s'\n", RESULT_RULE);

    result_table_top(fp, "SYSTEM SUMMARY COUNTS by SPEAKER", name, heads);
    fprintf(fp, "     | Sum     |%6ld %9ld |", s->n_sent, s->n_ref);
    for (int i = 0; i < 6; i++) fprintf(fp, " %7ld", raw[i]);
    fprintf(fp, " |\n     `%s'\n", RESULT_RULE);
}

void score_write_markdown_table(FILE *fp, const char *const *datasets, const score_summary *sums, size_t n)
{
    fputs("|dataset|Snt|Wrd|Corr|Sub|Del|Ins|Err|S.Err|\n|---|---|---|---|---|---|---|---|---|\n", fp);
    for (size_t i = 0; i < n; i++) {
        const score_summary *s = &sums[i];
        fprintf(fp, "|%s|%ld|%ld|%.1f|%.1f|%.1f|%.1f|%.1f|%.1f|\n", datasets[i], s->n_sent, s->n_ref,
                percent(s->c.corr, s->n_ref), percent(s->c.sub, s->n_ref), percent(s->c.del, s->n_ref),
                percent(s->c.ins, s->n_ref), percent(score_errors(s), s->n_ref), percent(s->n_sent_err, s->n_sent));
    }
}
