/* One-line user errors stay whole where it matters: a message longer than its buffer is shortened
 * in the middle, keeping its end (the hint), and a name cut to fit says so with "..." (issue 44:
 * a message was cut off at the end). */
#include <criterion/criterion.h>
#include <string.h>

#include "core/base/log.h"

Test(log, a_long_message_keeps_its_hint)
{
    char path[3001];
    memset(path, 'a', 3000);
    path[3000] = '\0';
    esp_err err;
    cr_assert_eq(esp_fail(&err, "%s/model.pth: cannot read: No such file or directory (check model.asr_model_file)", path), -1);
    size_t n = strlen(err.msg);
    cr_assert_lt(n, sizeof err.msg);
    cr_assert_gt(n, sizeof err.msg - 16, "the buffer is used: %zu bytes", n);
    cr_assert(!strncmp(err.msg, "aaaa", 4), "%s", err.msg);
    cr_assert(strstr(err.msg, "aaa [...] aaa"), "%s", err.msg);
    const char *end = "/model.pth: cannot read: No such file or directory (check model.asr_model_file)";
    cr_assert_str_eq(err.msg + n - strlen(end), end);
    /* a short one is as written */
    esp_fail(&err, "x.yaml:3:4: unknown key 'foo' (%s)", "see docs/config.md");
    cr_assert_str_eq(err.msg, "x.yaml:3:4: unknown key 'foo' (see docs/config.md)");
}

Test(log, the_middle_cut_never_splits_a_character)
{
    char text[4000] = "";
    for (int i = 0; i < 1300; i++) strcat(text, "\xc3\xa9"); /* é */
    esp_err err;
    esp_fail(&err, "%s (hint)", text);
    const char *mark = strstr(err.msg, " [...] ");
    cr_assert_not_null(mark);
    cr_assert_eq((unsigned char)mark[-1], 0xa9, "the head ends inside a character");
    cr_assert_eq((unsigned char)mark[7], 0xc3, "the tail starts inside a character");
    cr_assert_str_eq(err.msg + strlen(err.msg) - 7, " (hint)");
}

Test(log, a_shown_name_cut_to_fit_ends_in_dots)
{
    char buf[16];
    cr_assert_str_eq(esp_shown("short", buf, sizeof buf), "short");
    cr_assert_str_eq(esp_shown("a\nb", buf, sizeof buf), "a\\x0ab");
    cr_assert_str_eq(esp_shown("fifteen chars..", buf, sizeof buf), "fifteen chars..", "fits: not cut");
    cr_assert_str_eq(esp_shown("encoder.encoders.11.weight", buf, sizeof buf), "encoder.enco...");
    /* 8 x U+00E9 (16 bytes) do not fit: 6 whole ones and the dots */
    cr_assert_str_eq(esp_shown("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", buf, sizeof buf),
                     "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9...");
    /* ... nor "a" and 5 x U+20AC (3 bytes each): "a" and 3 whole ones, not 3 and a piece */
    cr_assert_str_eq(esp_shown("a\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", buf, sizeof buf),
                     "a\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac...");
}
