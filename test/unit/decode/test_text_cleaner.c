/* The metrics' whisper_basic text cleaner (core/decode/text_cleaner.h) against ESPnet2's
 * TextCleaner(["whisper_basic"]) (test/fixtures/text_cleaner/whisper_basic.jsonl, by
 * scripts/make_text_cleaner_fixtures.py: Python 3.11, Unicode 14, openai-whisper 20250625), input by
 * input; and invalid UTF-8, which Python would not have read. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode/text_cleaner.h"
#include "test/unit/test_util.h"

Test(text_cleaner, whisper_basic_matches_espnet)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/text_cleaner/whisper_basic.jsonl", test_root_dir());
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp, "%s", path);
    int kind = text_cleaner_of("whisper_basic"), n = 0;
    cr_assert_eq(kind, TEXT_CLEANER_WHISPER_BASIC);
    char line[4096];
    while (fgets(line, sizeof line, fp)) {
        json_error_t jerr;
        json_t *pair = json_loads(line, 0, &jerr);
        cr_assert(json_is_array(pair) && json_array_size(pair) == 2, "%s:%d: %s", path, n + 1, jerr.text);
        const char *in = json_string_value(json_array_get(pair, 0)), *want = json_string_value(json_array_get(pair, 1));
        char *got = text_clean(&kind, 1, in);
        cr_expect_str_eq(got, want, "input %d '%s': '%s', ESPnet's '%s'", n + 1, in, got, want);
        free(got);
        json_decref(pair);
        n++;
    }
    fclose(fp);
    cr_assert_geq(n, 20, "the fixture has %d cases", n);
    /* Applied twice it is idempotent here, as Python's would be on these. */
    char *once = text_clean(&kind, 1, "Hello, [x] World!"), *twice = text_clean((int[]){kind, kind}, 2, "Hello, [x] World!");
    cr_expect_str_eq(once, "hello world ");
    cr_expect_str_eq(twice, once);
    free(once), free(twice);
}

Test(text_cleaner, invalid_utf8_and_unknown_names)
{
    int kind = TEXT_CLEANER_WHISPER_BASIC;
    cr_expect_null(text_clean(&kind, 1, "caf\xe9"));
    cr_expect_null(text_clean(&kind, 1, "\xed\xa0\x80 (a lone surrogate)"));
    cr_expect_eq(text_cleaner_of("whisper_en"), -1);
    cr_expect_eq(text_cleaner_of("tacotron"), -1);
    char *none = text_clean(&kind, 0, "As Written, kept.");
    cr_expect_str_eq(none, "As Written, kept.", "no cleaners: the text as it was");
    free(none);
}
