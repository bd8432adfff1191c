/* Transcript normalization and the synthesizer-safety filter. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "recipes/espeak_fortunes/text_norm.h"

static void expect_norm(const char *in, const char *want)
{
    char *got = text_normalize(in);
    cr_expect_str_eq(got, want, "normalize(\"%s\")", in);
    free(got);
}

Test(text_norm, upper_cases_and_strips_punctuation)
{
    expect_norm("Hello, world!", "HELLO WORLD");
    expect_norm("well-known (really): yes; no.", "WELL KNOWN REALLY YES NO");
    expect_norm("\"Quoted\" speech?", "QUOTED SPEECH");
}

Test(text_norm, keeps_apostrophes_only_inside_words)
{
    expect_norm("Don't 'quote' me, dogs' bones", "DON'T QUOTE ME DOGS BONES");
    expect_norm("rock'n'roll", "ROCK'N'ROLL");
    expect_norm("don\xE2\x80\x99t", "DON'T"); /* U+2019 right single quotation mark */
    expect_norm("it '' is", "IT IS");
}

Test(text_norm, collapses_whitespace_and_drops_other_characters)
{
    expect_norm("  a \t b\n\n c  ", "A B C");
    expect_norm("abc123def", "ABC DEF");
    expect_norm("caf\xC3\xA9 au lait", "CAF AU LAIT");
    expect_norm("", "");
    expect_norm("!!! ... ---", "");
}

Test(text_norm, counts_words)
{
    cr_expect_eq(text_word_count(""), 0);
    cr_expect_eq(text_word_count("A"), 1);
    cr_expect_eq(text_word_count("DON'T QUOTE ME"), 3);
}

Test(text_norm, plain_prose_filter)
{
    cr_expect(text_is_plain_prose("Hello there, old friend."));
    cr_expect(text_is_plain_prose("Well-known (really): \"yes\"; isn't it?"));
    cr_expect_not(text_is_plain_prose("I have 3 cats."));
    cr_expect_not(text_is_plain_prose("salt & pepper"));
    cr_expect_not(text_is_plain_prose("mail me @ home"));
    cr_expect_not(text_is_plain_prose("50% off"));
    cr_expect_not(text_is_plain_prose("and/or"));
    cr_expect_not(text_is_plain_prose("caf\xC3\xA9"));
}
