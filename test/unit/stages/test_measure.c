/* Stage 7 (measure, alias score) through the binary on a temporary recipe folder with
 * hand-made hyp.scp/ref.scp: the files it writes and their numbers, and its user errors. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test/unit/test_util.h"

static char dir[64];

static void put(const char *rel, const char *text) { test_write_text_mkdirs(test_path(dir, rel), text); }

/* A file under the temporary folder; "" when missing (the assertion after it says so). */
static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

static int exists(const char *rel) { return test_exists(test_path(dir, rel)); }

/* Runs the binary from the repository root; stdout and stderr go to <dir>/out and <dir>/err. */
static int run(const char *args)
{
    return test_sh("cd '%s' && '%s' -q --metrics_config %s/conf/metrics.yaml %s >%s/out 2>%s/err", test_root_dir(),
                   test_bin_path(), dir, args, dir, dir);
}

#define INF "exp/asr/inference"

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "measure");
    put("conf/metrics.yaml", "recipe_dir: ${config_path:..}\n"
                             "exp_tag: asr\n"
                             "test_sets: [test_clean, test_other]\n"
                             "metrics:\n"
                             "  - _target_: espnet3.systems.asr.metrics.wer.WER\n"
                             "  - _target_: espnet3.systems.asr.metrics.cer.CER\n");
    put(INF "/test_clean/ref.scp", "u1 THE CAT SAT\nu2 A B C D\n");
    put(INF "/test_clean/hyp.scp", "u2 A X C\nu1 THE  CAT SAT\n"); /* another order, a double space */
    put(INF "/test_other/ref.scp", "u3 HELLO WORLD\n");
    put(INF "/test_other/hyp.scp", "u3 hello word wide\n");
}

static void teardown(void) { test_tmpdir_remove(dir); }

static json_t *metric(json_t *root, const char *target, const char *test)
{
    json_t *t = json_object_get(json_object_get(root, target), test);
    cr_assert_not_null(t, "metrics.json has no %s/%s", target, test);
    return t;
}

static long count_of(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_integer(v), "%s is not an integer", key);
    return (long)json_integer_value(v);
}

TestSuite(measure, .init = setup, .fini = teardown);

Test(measure, scores_test_sets_and_writes_every_file)
{
    cr_assert_eq(run("--stages measure"), 0, "measure failed:\n%s", slurp("err"));
    char *out = slurp("out");
    /* WER test_clean: u1 3 correct; u2 "A B C D" vs "A X C": 2 correct, 1 sub, 1 del -> 2/7. */
    cr_expect(strstr(out, "## Results\n\n### WER\n\n|dataset|Snt|Wrd|Corr|Sub|Del|Ins|Err|S.Err|\n") != NULL, "%s", out);
    cr_expect(strstr(out, "|test_clean|2|7|71.4|14.3|14.3|0.0|28.6|50.0|\n") != NULL, "%s", out);
    cr_expect(strstr(out, "|test_other|1|2|50.0|50.0|0.0|50.0|100.0|100.0|\n") != NULL, "%s", out);
    /* CER test_clean: 11 + 7 characters with spaces; u2 loses "<space> d" and has b -> x. */
    cr_expect(strstr(out, "### CER\n") != NULL, "%s", out);
    cr_expect(strstr(out, "|test_clean|2|18|83.3|5.6|11.1|0.0|16.7|50.0|\n") != NULL, "%s", out);
    char *md = slurp(INF "/RESULTS.md");
    cr_expect_str_eq(md, out, "RESULTS.md is what was printed");

    json_error_t jerr;
    char path[256];
    snprintf(path, sizeof path, "%s/" INF "/metrics.json", dir);
    json_t *root = json_load_file(path, 0, &jerr);
    cr_assert_not_null(root, "metrics.json: %s", jerr.text);
    json_t *w = metric(root, "espnet3.systems.asr.metrics.wer.WER", "test_clean");
    cr_expect_float_eq(json_real_value(json_object_get(w, "WER")), 28.57, 1e-9);
    cr_expect_eq(count_of(w, "WER_errors"), 2);
    cr_expect_eq(count_of(w, "WER_ref_len"), 7);
    cr_expect_eq(count_of(w, "WER_sub"), 1);
    cr_expect_eq(count_of(w, "WER_del"), 1);
    cr_expect_eq(count_of(w, "WER_ins"), 0);
    cr_expect_eq(count_of(w, "WER_hit"), 5);
    json_t *c = metric(root, "espnet3.systems.asr.metrics.cer.CER", "test_clean");
    cr_expect_float_eq(json_real_value(json_object_get(c, "CER")), 16.67, 1e-9);
    cr_expect_eq(count_of(c, "CER_ref_len"), 18);
    cr_expect_eq(count_of(c, "CER_errors"), 3);
    json_t *o = metric(root, "espnet3.systems.asr.metrics.wer.WER", "test_other");
    cr_expect_float_eq(json_real_value(json_object_get(o, "WER")), 100.0, 1e-9);
    json_t *oc = metric(root, "espnet3.systems.asr.metrics.cer.CER", "test_other");
    cr_expect_eq(count_of(oc, "CER_hit") + count_of(oc, "CER_sub") + count_of(oc, "CER_del"), 11);
    json_decref(root);

    char *wa = slurp(INF "/test_clean/wer_alignment");
    cr_expect(strstr(wa, "id: (u1)\nScores: (#C #S #D #I) 3 0 0 0\n") == wa, "utterances in ref.scp order:\n%s", wa);
    cr_expect(strstr(wa, "id: (u2)\nScores: (#C #S #D #I) 2 1 1 0\nREF:  a B c D \nHYP:  a X c * \nEval:   S   D \n\n"),
              "%s", wa);
    char *ca = slurp(INF "/test_clean/cer_alignment");
    cr_expect(strstr(ca, "REF:  a <space> B <space> c <SPACE> D \n") != NULL, "%s", ca);
    char *res = slurp(INF "/test_clean/score_wer/result.txt");
    cr_expect(strstr(res, "| Sum/Avg |     2         7 |    71.4    14.3    14.3     0.0    28.6    50.0 |") != NULL,
              "%s", res);
    cr_expect(strstr(res, "| Sum     |     2         7 |       5       1       1       0       2       1 |") != NULL,
              "%s", res);
    cr_expect(exists(INF "/test_other/score_cer/result.txt"));
    cr_expect(exists(INF "/measure.log"));
    free(out);
    free(md);
    free(wa);
    free(ca);
    free(res);

    /* The alias and the stage number run the same stage. */
    cr_expect_eq(run("--stages score"), 0, "%s", slurp("err"));
    cr_expect_eq(run("--stage 7 --stop_stage 7"), 0, "%s", slurp("err"));
    cr_expect(exists(INF "/measure1.log"));
}

static void expect_one_error_line(const char *must_contain_a, const char *must_contain_b)
{
    char *err = slurp("err");
    cr_expect(strncmp(err, "espnet3: error: ", 16) == 0, "%s", err);
    cr_expect(strchr(err, '\n') == err + strlen(err) - 1, "one line expected:\n%s", err);
    cr_expect(strstr(err, must_contain_a) != NULL, "'%s' missing in: %s", must_contain_a, err);
    cr_expect(strstr(err, must_contain_b) != NULL, "'%s' missing in: %s", must_contain_b, err);
    free(err);
    cr_expect(!exists(INF "/metrics.json"), "nothing is written on an error");
    cr_expect(!exists(INF "/test_clean/wer_alignment"), "nothing is written on an error");
}

Test(measure, missing_hypotheses_point_to_stage_6)
{
    cr_assert_eq(remove(test_path(dir, INF "/test_other/hyp.scp")), 0);
    cr_expect_eq(run("--stages measure"), 1);
    expect_one_error_line(INF "/test_other/hyp.scp: no hypotheses for test set test_other", "run stage 6");
}

Test(measure, utterance_without_hypothesis_is_named)
{
    put(INF "/test_clean/hyp.scp", "u1 THE CAT SAT\n");
    cr_expect_eq(run("--stages measure"), 1);
    expect_one_error_line(INF "/test_clean/ref.scp:2: utterance u2 has no hypothesis", "hyp.scp");
}

Test(measure, hypothesis_without_reference_is_named)
{
    put(INF "/test_other/hyp.scp", "u3 HELLO\nu9 EXTRA\n");
    cr_expect_eq(run("--stages measure"), 1);
    expect_one_error_line(INF "/test_other/hyp.scp:2: utterance u9 is not in", "same utterances");
}

Test(measure, duplicate_utterance_is_an_error)
{
    put(INF "/test_clean/ref.scp", "u1 THE CAT SAT\nu2 A B C D\nu1 AGAIN\n");
    cr_expect_eq(run("--stages measure"), 1);
    expect_one_error_line(INF "/test_clean/ref.scp:3: utterance id u1 appears again", "first on line 1");
}

Test(measure, only_the_listed_metrics)
{
    put("conf/metrics.yaml", "recipe_dir: ${config_path:..}\nexp_tag: asr\ntest_sets: [test_other]\n"
                             "metrics:\n  - _target_: espnet3.systems.asr.metrics.cer.CER\n");
    cr_assert_eq(run("--stages measure"), 0, "%s", slurp("err"));
    char *out = slurp("out");
    cr_expect(strstr(out, "### WER") == NULL, "%s", out);
    cr_expect(strstr(out, "### CER") != NULL, "%s", out);
    cr_expect(!exists(INF "/test_other/wer_alignment"));
    cr_expect(exists(INF "/test_other/cer_alignment"));
    free(out);
}

/* ESPnet3's measure.yaml entries: `metric:` with `inputs` (names, or alias: file) and `apply_to`;
 * its older decode_dir names the folder. */
Test(measure, espnet3_metric_entries_with_inputs_and_apply_to)
{
    put("conf/metrics.yaml", "recipe_dir: ${config_path:..}\nexp_tag: asr\n"
                             "decode_dir: ${recipe_dir}/exp/asr/decode\n"
                             "dataset:\n  _target_: espnet3.components.data_organizer.DataOrganizer\n"
                             "  test:\n    - name: test_clean\n      dataset:\n"
                             "        _target_: src.dataset.LibriSpeechDataset\n        data_dir: /x\n"
                             "        split: test_clean\n"
                             "    - name: test_other\n"
                             "metrics:\n"
                             "  - metric:\n      _target_: espnet3.systems.asr.metrics.wer.WER\n      clean_types:\n"
                             "    inputs: {ref: text, hyp: hyp_att}\n"
                             "    apply_to: [test_clean, test_gone]\n"
                             "  - metric:\n      _target_: espnet3.systems.asr.metrics.cer.CER\n"
                             "    inputs: [ref, hyp]\n");
    put("exp/asr/decode/test_clean/text.scp", "u1 THE CAT SAT\n");
    put("exp/asr/decode/test_clean/hyp_att.scp", "u1 THE CAT\n");
    put("exp/asr/decode/test_clean/ref.scp", "u1 AB\n");
    put("exp/asr/decode/test_clean/hyp.scp", "u1 AB\n");
    put("exp/asr/decode/test_other/ref.scp", "u3 AB\n");
    put("exp/asr/decode/test_other/hyp.scp", "u3 AC\n");
    cr_assert_eq(run("--stages measure"), 0, "%s", slurp("err"));
    char *json = slurp("exp/asr/decode/metrics.json");
    json_error_t jerr;
    json_t *root = json_loads(json, 0, &jerr);
    cr_assert_not_null(root, "%s", json);
    /* WER from text.scp / hyp_att.scp, on test_clean only: 1 deletion of 3 words. */
    cr_expect_eq(count_of(metric(root, "espnet3.systems.asr.metrics.wer.WER", "test_clean"), "WER_del"), 1);
    cr_expect_null(json_object_get(json_object_get(root, "espnet3.systems.asr.metrics.wer.WER"), "test_other"));
    /* CER on both sets from ref.scp / hyp.scp. */
    cr_expect_eq(count_of(metric(root, "espnet3.systems.asr.metrics.cer.CER", "test_clean"), "CER_errors"), 0);
    cr_expect_eq(count_of(metric(root, "espnet3.systems.asr.metrics.cer.CER", "test_other"), "CER_sub"), 1);
    cr_expect(!exists(INF "/metrics.json"), "decode_dir, not the template's inference_dir");
    json_decref(root);
    free(json);
    cr_assert_eq(test_sh("cd '%s' && '%s' --metrics_config %s/conf/metrics.yaml --stages measure >/dev/null 2>%s/err",
                         test_root_dir(), test_bin_path(), dir, dir), 0);
    char *err = slurp("err");
    cr_expect(strstr(err, "metrics[0].apply_to: test_gone is not a test set being scored") != NULL, "%s", err);
    free(err);
}

Test(measure, espnet3_metric_inputs_errors)
{
    static const struct {
        const char *entry, *says_a, *says_b;
    } cases[] = {
        {"    inputs: [hyp]\n", "metrics[0].inputs: no 'ref' (WER reads its references as 'ref'", "set ref_key"},
        {"    inputs: {ref: ref, hyp: hyp, lang: lid}\n", INF "/test_clean/lid.scp: missing for test set test_clean",
         "inputs name lid"},
        {"    inputs: [ref, [hyp]]\n", "metrics[0].inputs", "expected scp names"},
        {"    _target_: espnet3.systems.asr.metrics.cer.CER\n", "'_target_' is set both in metric: and beside it",
         "keep one"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[1024];
        snprintf(text, sizeof text, "recipe_dir: ${config_path:..}\nexp_tag: asr\ntest_sets: [test_clean]\n"
                 "metrics:\n  - metric:\n      _target_: espnet3.systems.asr.metrics.wer.WER\n%s", cases[i].entry);
        put("conf/metrics.yaml", text);
        cr_expect_eq(run("--stages measure"), 1, "case %zu", i);
        expect_one_error_line(cases[i].says_a, cases[i].says_b);
    }
}

/* clean_types [whisper_basic] (Whisper's BasicTextNormalizer, core/decode/text_cleaner.h) cleans both
 * sides before scoring: bracketed tags go, punctuation becomes space, case folds; whisper_en is
 * refused at its line; a text that is not UTF-8 is one error line naming its file and line. */
Test(measure, whisper_basic_cleans_both_sides)
{
    const char *head = "recipe_dir: ${config_path:..}\nexp_tag: asr\ntest_sets: [test_clean]\nmetrics:\n"
                       "  - metric:\n      _target_: espnet3.systems.asr.metrics.wer.WER\n";
    char text[1024];
    put(INF "/test_clean/ref.scp", "u1 [noise] Hello, World! (laughs)\nu2 Caf\xc3\xa9 ol\xc3\xa9\n");
    put(INF "/test_clean/hyp.scp", "u1 hello world\nu2 CAF\xc3\x89  ol\xc3\xa9.\n");
    snprintf(text, sizeof text, "%s", head);
    put("conf/metrics.yaml", text);
    cr_assert_eq(run("--stages measure"), 0, "%s", slurp("err"));
    char *out = slurp("out");
    cr_expect(strstr(out, "|test_clean|2|6|") != NULL, "as written: 6 reference words, errors:\n%s", out);
    cr_expect(strstr(out, "|0.0|0.0|0.0|0.0|") == NULL, "as written the texts differ:\n%s", out);
    free(out);
    snprintf(text, sizeof text, "%s      clean_types: [whisper_basic]\n", head);
    put("conf/metrics.yaml", text);
    cr_assert_eq(run("--stages measure"), 0, "%s", slurp("err"));
    out = slurp("out");
    cr_expect(strstr(out, "|test_clean|2|4|100.0|0.0|0.0|0.0|0.0|0.0|\n") != NULL, "cleaned: 4 words, all correct:\n%s",
              out);
    free(out);
    remove(test_path(dir, INF "/metrics.json")), remove(test_path(dir, INF "/test_clean/wer_alignment"));
    snprintf(text, sizeof text, "%s      clean_types: [whisper_basic, whisper_en]\n", head);
    put("conf/metrics.yaml", text);
    cr_expect_eq(run("--stages measure"), 1);
    expect_one_error_line("metrics.yaml:7:", "clean_types[1]: 'whisper_en' is not supported (supported: whisper_basic)");
    snprintf(text, sizeof text, "%s      clean_types: [whisper_basic]\n", head);
    put("conf/metrics.yaml", text);
    put(INF "/test_clean/hyp.scp", "u1 hello world\nu2 caf\xe9\n");
    cr_expect_eq(run("--stages measure"), 1);
    expect_one_error_line("test_clean/hyp.scp:2: utterance u2: the text is not valid UTF-8", "clean_types");
}

/* ESPnet3's --write_requirements: requirements.txt beside the stage log, here the build that ran it. */
Test(measure, write_requirements_puts_the_build_beside_the_log)
{
    cr_assert_eq(run("--stages measure"), 0, "%s", slurp("err"));
    cr_expect(!exists(INF "/requirements.txt"), "only when asked");
    cr_assert_eq(run("--stages measure --write_requirements"), 0, "%s", slurp("err"));
    char *req = slurp(INF "/requirements.txt");
    cr_expect(strncmp(req, "espnet3 ", 8) == 0 && strstr(req, "\nbackends: cpu") && strstr(req, "\nlibyaml "), "%s",
              req);
    free(req);
    cr_expect(exists(INF "/measure.log"));
}
