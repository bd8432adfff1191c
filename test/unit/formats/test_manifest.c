/* Hostile and damaged manifests and Kaldi data dirs (test/fuzz/fuzz_manifest.c,
 * fuzz_kaldi_dir.c; issue 16): each is one error line naming the file, the line and the
 * utterance where there is one, never an entry the writer would refuse or a silently shorter list. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "core/formats/manifest.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "manifest_hostile"); }
static void teardown(void) { test_tmpdir_remove(dir); }
TestSuite(manifest_hostile, .init = setup, .fini = teardown);

static const char *write_bytes(const char *name, const char *bytes, size_t len)
{
    const char *path = test_path(dir, name);
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    fwrite(bytes, 1, len, fp);
    fclose(fp);
    return path;
}

static void expect_tsv_error(const char *bytes, size_t len, const char *want)
{
    const char *path = write_bytes("x.tsv", bytes, len);
    manifest m;
    esp_err err = {{0}};
    cr_assert_neq(manifest_read_tsv(path, &m, &err), 0, "read %s", path);
    cr_assert(strstr(err.msg, path), "the error names the file: %s", err.msg);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
}

#define TSV_ERROR(lit, want) expect_tsv_error(lit, sizeof lit - 1, want)

/* The fuzzer's first find: an id with a space was read, then manifest_write_tsv (and the Kaldi
 * files, where the space ends the id) refused it. */
Test(manifest_hostile, tsv_utterance_id_with_whitespace_is_an_error)
{
    TSV_ERROR("s\xfass\xfasp \t p \t", "x.tsv:1: utterance id 's\xfass\xfasp ' holds whitespace");
    TSV_ERROR("u1\ta.wav\tA\nu 2\tb.wav\tB\n", "x.tsv:2: utterance id 'u 2' holds whitespace");
    TSV_ERROR("u1\ta.wav\tA\rB\n", "x.tsv:1: utterance u1: a carriage return inside the line");
}

Test(manifest_hostile, empty_tsv_is_an_error)
{
    TSV_ERROR("", "x.tsv: no utterances (an empty manifest");
    TSV_ERROR("\n\r\n\n", "x.tsv: no utterances");
}

/* A NUL byte ended the text there: the utterances after it were dropped without a word. */
Test(manifest_hostile, tsv_with_a_nul_byte_is_an_error)
{
    TSV_ERROR("u1\ta.wav\tA\nu2\tb.wav\tB\0\nu3\tc.wav\tC\n", "x.tsv:2: holds a NUL byte");
}

Test(manifest_hostile, tsv_duplicate_names_both_lines)
{
    TSV_ERROR("u1\ta.wav\tA\nu2\tb.wav\tB\nu1\tc.wav\tC\n", "x.tsv:3: utterance id u1 appears again (first on line 1)");
}

static void write_dir(const char *wav, const char *text, const char *spk)
{
    test_write_text(test_path(dir, "data/wav.scp"), wav);
    test_write_text(test_path(dir, "data/text"), text);
    if (spk) test_write_text(test_path(dir, "data/utt2spk"), spk);
    else remove(test_path(dir, "data/utt2spk"));
}

static void expect_dir_error(const char *want)
{
    manifest m;
    esp_err err = {{0}};
    cr_assert_neq(manifest_read_kaldi_dir(test_path(dir, "data"), &m, &err), 0);
    cr_assert(strstr(err.msg, test_path(dir, "data")), "the error names the file: %s", err.msg);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
}

Test(manifest_hostile, kaldi_dir_errors_name_file_line_and_utterance)
{
    test_write_text_mkdirs(test_path(dir, "data/x"), "");
    write_dir("", "", NULL);
    expect_dir_error("data/wav.scp: no utterances");
    /* A second transcript (or speaker) for an utterance was taken or dropped at random. */
    write_dir("u1 a.wav\nu2 b.wav\n", "u1 A\nu2 B\nu1 C\n", NULL);
    expect_dir_error("data/text:3: utterance u1 appears again (first on line 1)");
    write_dir("u1 a.wav\nu2 b.wav\n", "u1 A\nu2 B\n", "u2 s\nu1 s\nu2 t\n");
    expect_dir_error("data/utt2spk:3: utterance u2 appears again (first on line 1)");
    write_dir("u1 a.wav\nu2 b.wav\nu1 c.wav\n", "u1 A\nu2 B\n", NULL);
    expect_dir_error("data/wav.scp:3: utterance u1 appears again (first on line 1)");
    /* An utterance without audio reached the data loader as the path "". */
    write_dir("u1 a.wav\nu2\n", "u1 A\nu2 B\n", NULL);
    expect_dir_error("data/wav.scp:2: utterance u2 has no audio path");
    write_dir("u1 a.wav\nu2 b.wav\n", "u1 A\n", NULL);
    expect_dir_error("data/text: no transcript for utterance u2");
}

Test(manifest_hostile, kaldi_file_with_a_nul_byte_is_an_error)
{
    test_write_text_mkdirs(test_path(dir, "data/text"), "u1 A\n");
    write_bytes("data/wav.scp", "u1 a.wav\n\0u2 b.wav\n", 19);
    expect_dir_error("data/wav.scp:2: holds a NUL byte");
}
