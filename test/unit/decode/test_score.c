/* Scoring (core/decode/score.h, core/decode/score_report.h): text cleaning and tokens, the aligner on known
 * cases (expected lines as sctk's sclite prints them), and the aligner against sclite itself on
 * thousands of random ref/hyp pairs, utterance by utterance. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/rng.h"
#include "core/decode/score.h"
#include "core/decode/score_report.h"

/* The pra block of one utterance, as our writer prints it (caller frees). */
static char *pra_of(const char *utt, const char *ref, const char *hyp, score_unit unit, score_counts *c)
{
    char *rc = score_clean(ref), *hc = score_clean(hyp);
    score_tokens rt, ht;
    score_tokenize(rc, unit, &rt);
    score_tokenize(hc, unit, &ht);
    memset(c, 0, sizeof *c);
    size_t n;
    score_step *steps = score_align(&rt, &ht, &n, c);
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    score_write_pra(fp, utt, &rt, &ht, steps, n, c);
    fclose(fp);
    free(steps);
    score_tokens_free(&rt);
    score_tokens_free(&ht);
    free(rc);
    free(hc);
    return text;
}

static void expect_pra(const char *ref, const char *hyp, long corr, long sub, long del, long ins, const char *lines)
{
    score_counts c;
    char *got = pra_of("u", ref, hyp, SCORE_WORDS, &c);
    cr_expect_eq(c.corr, corr, "'%s' vs '%s': corr %ld", ref, hyp, c.corr);
    cr_expect_eq(c.sub, sub, "'%s' vs '%s': sub %ld", ref, hyp, c.sub);
    cr_expect_eq(c.del, del, "'%s' vs '%s': del %ld", ref, hyp, c.del);
    cr_expect_eq(c.ins, ins, "'%s' vs '%s': ins %ld", ref, hyp, c.ins);
    const char *body = strstr(got, "REF:");
    cr_assert_not_null(body);
    cr_expect_str_eq(body, lines, "'%s' vs '%s':\n%s", ref, hyp, got);
    free(got);
}

Test(score, clean_collapses_whitespace)
{
    char *c = score_clean("  the\tcat \r\n sat  ");
    cr_expect_str_eq(c, "the cat sat");
    free(c);
    c = score_clean(" \t\n");
    cr_expect_str_eq(c, "");
    free(c);
}

Test(score, tokens_words_and_chars)
{
    score_tokens t;
    score_tokenize("ab c", SCORE_CHARS, &t);
    cr_assert_eq(t.n, 4);
    cr_expect_str_eq(t.tok[0], "a");
    cr_expect_str_eq(t.tok[1], "b");
    cr_expect_str_eq(t.tok[2], "<space>");
    cr_expect_str_eq(t.tok[3], "c");
    score_tokens_free(&t);
    score_tokenize("na\xc3\xafve x", SCORE_CHARS, &t); /* one token per UTF-8 character */
    cr_assert_eq(t.n, 7);
    cr_expect_str_eq(t.tok[2], "\xc3\xaf");
    score_tokens_free(&t);
    score_tokenize("don't stop", SCORE_WORDS, &t);
    cr_assert_eq(t.n, 2);
    cr_expect_str_eq(t.tok[0], "don't");
    score_tokens_free(&t);
    score_tokenize("", SCORE_WORDS, &t);
    cr_expect_eq(t.n, 0);
    score_tokens_free(&t);
}

Test(score, token_equal_folds_ascii_case_only)
{
    cr_expect(score_token_equal("Cat", "cAT"));
    cr_expect(!score_token_equal("cat", "cats"));
    cr_expect(!score_token_equal("\xc3\xa9", "\xc3\x89")); /* é vs É: bytes differ beyond ASCII */
}

/* Expected lines are sclite 2.4.10's output for the same pairs (`-i rm -o pra`). */
Test(score, known_alignments_as_sclite)
{
    expect_pra("a b c d", "a x c", 2, 1, 1, 0, "REF:  a B c D \nHYP:  a X c * \nEval:   S   D \n\n");
    expect_pra("the cat sat", "cat sat on mat", 2, 0, 1, 2,
               "REF:  THE cat sat ** *** \nHYP:  *** cat sat ON MAT \nEval: D           I  I   \n\n");
    /* Ties: a substitution wins over an equal-cost deletion/insertion, an insertion over a deletion. */
    expect_pra("a", "b c", 0, 1, 0, 1, "REF:  * A \nHYP:  B C \nEval: I S \n\n");
    expect_pra("a b", "b a", 1, 0, 1, 1, "REF:  A b * \nHYP:  * b A \nEval: D   I \n\n");
    expect_pra("a b c", "c a b", 2, 0, 1, 1, "REF:  * a b C \nHYP:  C a b * \nEval: I     D \n\n");
    expect_pra("the cat sat on the mat", "the the cat sat mat", 4, 0, 2, 1,
               "REF:  *** the cat sat ON THE mat \nHYP:  THE the cat sat ** *** mat \n"
               "Eval: I               D  D       \n\n");
    expect_pra("Cat sat", "cAT SAT", 2, 0, 0, 0, "REF:  cat sat \nHYP:  cat sat \nEval:         \n\n");
    expect_pra("x y z", "", 0, 0, 3, 0, "REF:  X Y Z \nHYP:  * * * \nEval: D D D \n\n");
    expect_pra("", "q", 0, 0, 0, 1, "REF:  * \nHYP:  Q \nEval: I \n\n");
    score_counts c;
    char *empty = pra_of("u", "", " ", SCORE_WORDS, &c);
    cr_expect_str_eq(empty, "id: (u)\nScores: (#C #S #D #I) 0 0 0 0\n\n");
    free(empty);
}

Test(score, chars_count_spaces)
{
    score_counts c;
    char *got = pra_of("u", "ab cd", "ab  cd", SCORE_CHARS, &c); /* the double space is one <space> */
    cr_expect_eq(c.corr, 5);
    cr_expect_eq(c.sub + c.del + c.ins, 0);
    free(got);
    got = pra_of("u", "ab cd", "abcd", SCORE_CHARS, &c);
    cr_expect_eq(c.corr, 4);
    cr_expect_eq(c.del, 1);
    cr_expect(strstr(got, "REF:  a b <SPACE> c d \nHYP:  a b ******* c d \n") != NULL, "%s", got);
    free(got);
}

Test(score, summary_and_tables)
{
    score_summary s = {0};
    score_summary_add(&s, &(score_counts){.corr = 2, .sub = 1, .del = 1});
    score_summary_add(&s, &(score_counts){.corr = 3, .ins = 2});
    score_summary_add(&s, &(score_counts){.corr = 1});
    cr_expect_eq(s.n_sent, 3);
    cr_expect_eq(s.n_sent_err, 2);
    cr_expect_eq(s.n_ref, 8);
    cr_expect_eq(score_errors(&s), 4);
    cr_expect_float_eq(score_error_rate(&s), 50.0, 1e-12);
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    const char *names[] = {"test"};
    score_write_markdown_table(fp, names, &s, 1);
    score_write_result(fp, "test WER", &s);
    fclose(fp);
    cr_expect(strstr(text, "|test|3|8|75.0|12.5|12.5|25.0|50.0|66.7|\n") != NULL, "%s", text);
    cr_expect(strstr(text, "| Sum/Avg |     3         8 |    75.0    12.5    12.5    25.0    50.0    66.7 |") != NULL,
              "%s", text);
    cr_expect(strstr(text, "| Sum     |     3         8 |       6       1       1       2       4       2 |") != NULL,
              "%s", text);
    free(text);
    score_summary empty = {0};
    cr_expect_float_eq(score_error_rate(&empty), 0.0, 0.0);
}

/* ---- against sclite ---------------------------------------------------------------------- */

static const char *find_sclite(void)
{
    static char path[4096];
    const char *env_path = getenv("PATH");
    char *dirs = strdup(env_path ? env_path : "");
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(path, sizeof path, "%s/sclite", d);
        if (access(path, X_OK) == 0) {
            free(dirs);
            return path;
        }
    }
    free(dirs);
    /* Debian's sctk package keeps the tools out of PATH. */
    return access("/usr/lib/sctk/bin/sclite", X_OK) == 0 ? "/usr/lib/sctk/bin/sclite" : NULL;
}

/* Random edits of a random reference: keep, substitute, delete, insert. Mixed case checks the folding. */
static void random_pair(rng *r, char *ref, char *hyp, size_t cap)
{
    static const char *vocab[] = {"a", "b", "c", "the", "cat", "Cat", "sat", "on", "mat", "x", "yy", "zzz", "dog"};
    const size_t nv = sizeof vocab / sizeof *vocab;
    ref[0] = hyp[0] = '\0';
    size_t n = (unsigned)rng_next(r) % 13; /* some empty references */
    int mode = (int)((unsigned)rng_next(r) % 10);
    for (size_t i = 0; i < n; i++) {
        const char *w = vocab[(unsigned)rng_next(r) % nv];
        snprintf(ref + strlen(ref), cap - strlen(ref), "%s%s", *ref ? " " : "", w);
        if (mode == 0) continue; /* an empty hypothesis */
        unsigned e = (unsigned)rng_next(r) % 10;
        if (e == 0) continue; /* deletion */
        if (e == 1) /* insertion before the word */
            snprintf(hyp + strlen(hyp), cap - strlen(hyp), "%s%s", *hyp ? " " : "", vocab[(unsigned)rng_next(r) % nv]);
        const char *h = e == 2 || e == 3 ? vocab[(unsigned)rng_next(r) % nv] : w;
        snprintf(hyp + strlen(hyp), cap - strlen(hyp), "%s%s", *hyp ? " " : "", h);
    }
    if (mode == 1) /* insertions at the end */
        for (unsigned k = (unsigned)rng_next(r) % 3; k > 0; k--)
            snprintf(hyp + strlen(hyp), cap - strlen(hyp), "%s%s", *hyp ? " " : "", vocab[(unsigned)rng_next(r) % nv]);
}

/* A trn line as ESPnet writes it: the tokens joined by spaces, then "(spk-utt)". */
static void write_trn_line(FILE *fp, const char *text, score_unit unit, int i)
{
    score_tokens t;
    score_tokenize(text, unit, &t);
    for (size_t k = 0; k < t.n; k++) fprintf(fp, "%s ", t.tok[k]);
    fprintf(fp, "(spk-u%d)\n", i);
    score_tokens_free(&t);
}

/* The REF/HYP/Eval/Scores lines sclite printed for each utterance, in utterance order. */
static char **sclite_blocks(const char *pra_text, int n)
{
    char **blocks = calloc((size_t)n, sizeof *blocks);
    for (const char *p = strstr(pra_text, "\nid: (spk-u"); p; p = strstr(p + 1, "\nid: (spk-u")) {
        int i = atoi(p + strlen("\nid: (spk-u"));
        cr_assert(i >= 0 && i < n);
        const char *start = strstr(p, "\nScores:") + 1, *end = strstr(start, "\n\n");
        cr_assert_not_null(end);
        blocks[i] = strndup(start, (size_t)(end - start + 2));
    }
    return blocks;
}

static void compare_with_sclite(score_unit unit, int n, uint64_t seed)
{
    const char *sclite = find_sclite();
    if (!sclite) cr_skip_test("sclite not found on PATH or in /usr/lib/sctk/bin (install sctk: scripts/install_deps.sh)");
    char dir[] = "/tmp/espnet3_score_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char ref_path[128], hyp_path[128], out_path[128];
    snprintf(ref_path, sizeof ref_path, "%s/ref.trn", dir);
    snprintf(hyp_path, sizeof hyp_path, "%s/hyp.trn", dir);
    snprintf(out_path, sizeof out_path, "%s/pra", dir);
    FILE *rf = fopen(ref_path, "w"), *hf = fopen(hyp_path, "w");
    cr_assert(rf && hf);
    char (*refs)[512] = calloc((size_t)n, sizeof *refs), (*hyps)[512] = calloc((size_t)n, sizeof *hyps);
    rng r;
    rng_init(&r, seed);
    for (int i = 0; i < n; i++) {
        random_pair(&r, refs[i], hyps[i], sizeof refs[i]);
        write_trn_line(rf, refs[i], unit, i);
        write_trn_line(hf, hyps[i], unit, i);
    }
    fclose(rf);
    fclose(hf);
    char cmd[4800];
    snprintf(cmd, sizeof cmd, "'%s' -r '%s' trn -h '%s' trn -i rm -o pra stdout > '%s' 2>&1", sclite, ref_path,
             hyp_path, out_path);
    cr_assert_eq(system(cmd), 0, "%s failed", cmd);
    esp_err err;
    char *pra = read_file(out_path, READ_LIST, NULL, &err);
    cr_assert_not_null(pra, "%s", err.msg);
    char **blocks = sclite_blocks(pra, n);
    int differ = 0;
    long errors = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_not_null(blocks[i], "sclite printed no alignment for utterance %d", i);
        score_counts c;
        char *ours = pra_of("u", refs[i], hyps[i], unit, &c);
        errors += c.sub + c.del + c.ins;
        const char *body = strstr(ours, "Scores:");
        if (strcmp(body, blocks[i]) != 0 && differ++ < 5)
            cr_log_error("utterance %d: ref '%s' hyp '%s'\nsclite:\n%sours:\n%s", i, refs[i], hyps[i], blocks[i], body);
        free(ours);
        free(blocks[i]);
    }
    cr_expect_eq(differ, 0, "%d of %d utterances align differently from sclite", differ, n);
    cr_expect_gt(errors, n / 2, "the random pairs should carry errors");
    free(blocks);
    free(pra);
    free(refs);
    free(hyps);
    remove_tree(dir);
}

Test(score, words_equal_sclite_on_random_pairs) { compare_with_sclite(SCORE_WORDS, 3000, 7); }

Test(score, chars_equal_sclite_on_random_pairs) { compare_with_sclite(SCORE_CHARS, 1000, 11); }
