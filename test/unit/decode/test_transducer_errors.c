/* Validation's error rates (core/decode/error_calculator.h) against ESPnet's three calculators'
 * convert_to_char, calculate_cer and calculate_wer: the two transducer tasks' and the attention
 * decoder's (test/fixtures/transducer_errors/cases.jsonl, by
 * scripts/make_transducer_errors_fixtures.py), and the searches each transducer task's calculator
 * runs (core/decode/transducer_errors.h). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode/transducer_errors.h"
#include "test/unit/test_util.h"

static int *ids_of(const json_t *a, int *n)
{
    *n = (int)json_array_size(a);
    int *ids = calloc((size_t)*n + 1, sizeof *ids);
    for (int i = 0; i < *n; i++) ids[i] = (int)json_integer_value(json_array_get(a, (size_t)i));
    return ids;
}

static void expect_rate(double got, const json_t *want, const char *what, int line)
{
    if (json_is_null(want)) {
        cr_expect(isnan(got), "case %d %s: %g, ESPnet divides by zero (NaN here)", line, what, got);
        return;
    }
    double w = json_real_value(want) + (double)json_integer_value(want);
    cr_expect(fabs(got - w) <= 1e-15, "case %d %s: %.17g, ESPnet's %.17g", line, what, got, w);
}

Test(transducer_errors, rates_match_espnet_calculators)
{
    char *all = test_slurp(test_path(test_root_dir(), "test/fixtures/transducer_errors/cases.jsonl"));
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        n++;
        json_error_t jerr;
        json_t *c = json_loads(line, 0, &jerr);
        cr_assert_not_null(c, "cases.jsonl:%d: %s", n, jerr.text);
        const json_t *tj = json_object_get(c, "tokens"), *hj = json_object_get(c, "hyps"), *rj = json_object_get(c, "refs");
        size_t V = json_array_size(tj);
        char **toks = calloc(V, sizeof *toks);
        for (size_t k = 0; k < V; k++) toks[k] = (char *)json_string_value(json_array_get(tj, k));
        token_list tl = {.tokens = toks, .n = V};
        int B = (int)json_array_size(hj), lmax = 0;
        int **hyps = calloc((size_t)B, sizeof *hyps), *nh = calloc((size_t)B, sizeof *nh);
        int **refs = calloc((size_t)B, sizeof *refs), *nr = calloc((size_t)B, sizeof *nr);
        for (int i = 0; i < B; i++) {
            hyps[i] = ids_of(json_array_get(hj, (size_t)i), &nh[i]);
            refs[i] = ids_of(json_array_get(rj, (size_t)i), &nr[i]);
            lmax = nr[i] > lmax ? nr[i] : lmax;
        }
        int stride = lmax + 2; /* the batch's label rows, padded with -1 as asr_batch pads them */
        int *labels = malloc((size_t)B * (size_t)stride * sizeof *labels);
        for (int i = 0; i < B; i++)
            for (int k = 0; k < stride; k++) labels[i * stride + k] = k < nr[i] ? refs[i][k] : -1;
        const char *sp = json_string_value(json_object_get(c, "sym_space")), *bl = json_string_value(json_object_get(c, "sym_blank"));
        for (int body = 0; body < 2; body++) {
            tr_err_calc ec;
            esp_err err;
            cr_assert_eq(tr_err_calc_init(&ec, &tl, body, 1, 1, sp, bl, 2, &err), 0, "%s", err.msg);
            double cer, wer;
            err_calculator_rates(&ec.text, hyps, nh, labels, stride, nr, B, &cer, &wer);
            const json_t *want = json_object_get(c, body ? "asr_transducer" : "asr");
            expect_rate(cer, json_array_get(want, 0), body ? "asr_transducer cer" : "asr cer", n);
            expect_rate(wer, json_array_get(want, 1), body ? "asr_transducer wer" : "asr wer", n);
            /* report_cer false: its rate is off (NaN), the other unchanged */
            tr_err_calc_init(&ec, &tl, body, 0, 1, sp, bl, 2, &err);
            double cer2, wer2;
            err_calculator_rates(&ec.text, hyps, nh, labels, stride, nr, B, &cer2, &wer2);
            cr_expect(isnan(cer2) && (wer2 == wer || (isnan(wer) && isnan(wer2))));
        }
        /* The attention decoder's: rows of lmax + 1 argmax ids, each read up to its label length. */
        const json_t *aj = json_object_get(c, "att_hat");
        cr_assert_eq((int)json_array_size(aj), B, "case %d: att_hat rows", n);
        int **att = calloc((size_t)B, sizeof *att), na;
        for (int i = 0; i < B; i++) {
            att[i] = ids_of(json_array_get(aj, (size_t)i), &na);
            cr_assert_eq(na, lmax + 1);
        }
        err_calculator ac = {.kind = ERR_ATTENTION, .tl = &tl, .space = sp, .blank = bl, .cer = 1, .wer = 1};
        double acer, awer;
        err_calculator_rates(&ac, att, nr, labels, stride, nr, B, &acer, &awer);
        expect_rate(acer, json_array_get(json_object_get(c, "attention"), 0), "attention cer", n);
        expect_rate(awer, json_array_get(json_object_get(c, "attention"), 1), "attention wer", n);
        for (int i = 0; i < B; i++) free(att[i]);
        free(att);
        for (int i = 0; i < B; i++) free(hyps[i]), free(refs[i]);
        free(hyps), free(nh), free(refs), free(nr), free(labels), free(toks);
        json_decref(c);
    }
    free(all);
    cr_assert_geq(n, 8, "the fixture has %d cases", n);
}

Test(transducer_errors, each_task_runs_its_calculators_search)
{
    static char *toks[] = {"<blank>", "<unk>", "<space>", "a", "b", "<sos/eos>"};
    token_list tl = {.tokens = toks, .n = 6};
    tr_err_calc ec;
    esp_err err;
    /* ASR task: BeamSearchTransducer(beam_size=2, search_type="default", score_norm=False) */
    cr_assert_eq(tr_err_calc_from_cfg(&ec, &tl, 0, NULL, &err), 0);
    cr_expect(ec.beam == 2 && ec.search.search_type == TS_DEFAULT && !ec.search.score_norm && !ec.search.no_greedy);
    cr_expect(ec.text.cer && ec.text.wer, "ESPnetASRModel reports both by default");
    cr_expect_str_eq(ec.text.space, "<space>");
    cr_expect_str_eq(ec.text.blank, "<blank>");
    /* asr_transducer task: its BeamSearchTransducer(beam_size=2, search_type="maes", nstep, score_norm=False) */
    cr_assert_eq(tr_err_calc_from_cfg(&ec, &tl, 1, NULL, &err), 0);
    cr_expect(ec.beam == 2 && ec.search.search_type == TS_MAES && ec.search.nstep == 2 && !ec.search.score_norm &&
              ec.search.no_greedy && ec.text.kind == ERR_TRANSDUCER_BODY);
    cr_expect(!ec.text.cer && !ec.text.wer, "ESPnetASRTransducerModel reports neither by default");
    int64_t nstep = 3;
    int yes = 1, no = 0;
    model_conf_cfg mc = {.validation_nstep = &nstep, .report_cer = &yes, .report_wer = &no, .sym_space = "_"};
    cr_assert_eq(tr_err_calc_from_cfg(&ec, &tl, 1, &mc, &err), 0);
    cr_expect(ec.search.nstep == 3 && ec.text.cer && !ec.text.wer);
    cr_expect_str_eq(ec.text.space, "_");
    /* maes needs beam_size + expansion_beta (4) labels, as ESPnet2 asserts: refused at the start */
    token_list small = {.tokens = toks, .n = 3};
    cr_expect_neq(tr_err_calc_from_cfg(&ec, &small, 1, &mc, &err), 0);
    cr_expect(strstr(err.msg, "report_cer") != NULL, "%s", err.msg);
}
