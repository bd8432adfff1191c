/* Character token lists: ESPnet2's tokens.txt layout, reading back, tokenizing, and stage 2. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/data/tokenizer.h"
#include "stages/stages.h"
#include "test/unit/test_util.h"

static char tmpdir[64];

static void setup(void)
{
    test_tmpdir_make(tmpdir, sizeof tmpdir, "tok");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmpdir); }

static char *tmp_path(const char *name)
{
    return path_join(tmpdir, name);
}

/* A stage context around a hand-filled training config. */
typedef struct fake_configs {
    training_cfg training;
    tokenizer_cfg tokenizer;
    esp_config config;
    esp_configs configs;
    stage_ctx ctx;
} fake_configs;

static void fake_init(fake_configs *f)
{
    memset(f, 0, sizeof *f);
    f->training.tokenizer = &f->tokenizer;
    f->config.kind = CONFIG_TRAINING;
    f->config.path = "train.yaml";
    f->config.typed = &f->training;
    f->configs.training = &f->config;
    f->ctx.configs = &f->configs;
}

Test(tokenizer, orders_by_count_then_code_point)
{
    /* A:3, <space>:2, B:2, C:1; the tie between space (0x20) and B (0x42) goes to space. */
    const char *texts[] = {"AB A", "BA C"};
    token_list tl;
    char_token_list_build(texts, 2, &tl);
    const char *want[] = {"<blank>", "<unk>", "A", "<space>", "B", "C", "<sos/eos>"};
    cr_assert_eq(tl.n, 7);
    for (size_t i = 0; i < tl.n; i++) cr_expect_str_eq(tl.tokens[i], want[i], "token %zu", i);
    token_list_free(&tl);
}

Test(tokenizer, counts_utf8_characters_whole)
{
    const char *texts[] = {"\xC3\xA9\xC3\xA9x"}; /* e-acute twice, then x */
    token_list tl;
    char_token_list_build(texts, 1, &tl);
    cr_assert_eq(tl.n, 5);
    cr_expect_str_eq(tl.tokens[2], "\xC3\xA9");
    cr_expect_str_eq(tl.tokens[3], "x");
    token_list_free(&tl);
}

Test(tokenizer, write_read_round_trip_and_tokenize, .init = setup, .fini = teardown)
{
    const char *texts[] = {"HELLO WORLD"};
    token_list tl, back;
    char_token_list_build(texts, 1, &tl);
    char *path = tmp_path("tokens.txt");
    esp_err err;
    cr_assert_eq(token_list_write(path, &tl, &err), 0, "%s", err.msg);
    cr_assert_eq(token_list_read(path, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.n, tl.n);
    for (size_t i = 0; i < tl.n; i++) cr_expect_str_eq(back.tokens[i], tl.tokens[i]);

    long *ids;
    size_t n;
    cr_assert_eq(char_tokenize(&back, "LO Z", &ids, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 4);
    cr_expect_eq(ids[0], token_list_find(&back, "L"));
    cr_expect_eq(ids[1], token_list_find(&back, "O"));
    cr_expect_eq(ids[2], token_list_find(&back, "<space>"));
    cr_expect_eq(ids[3], 1); /* Z is unknown */
    free(ids);
    free(path);
    token_list_free(&tl);
    token_list_free(&back);
}

Test(tokenizer, read_rejects_duplicates_and_empty_lines, .init = setup, .fini = teardown)
{
    char *path = tmp_path("bad.txt");
    token_list tl;
    esp_err err;
    test_write_text(path, "<blank>\nA\nA\n");
    cr_assert_neq(token_list_read(path, &tl, &err), 0);
    cr_expect(strstr(err.msg, "bad.txt:3: token A appears more than once"), "%s", err.msg);
    test_write_text(path, "<blank>\n\nA\n");
    cr_assert_neq(token_list_read(path, &tl, &err), 0);
    cr_expect(strstr(err.msg, "bad.txt:2: empty line"), "%s", err.msg);
    free(path);
}

Test(tokenizer, stage_writes_espnet2_layout_from_manifest, .init = setup, .fini = teardown)
{
    char *data_dir = tmp_path("data");
    char *manifest_dir = tmp_path("data/manifest");
    esp_err err;
    cr_assert_eq(mkdir_p(manifest_dir, &err), 0, "%s", err.msg);
    char *train = tmp_path("data/manifest/train.tsv");
    test_write_text(train, "u1\t/a.wav\tCAB\nu2\t/b.wav\tA CAB\nu3\t/c.wav\tAB'\n");
    fake_configs f;
    fake_init(&f);
    f.training.data_dir = data_dir;
    f.tokenizer.model_type = "char";
    f.tokenizer.save_path = tmp_path("tok");
    cr_assert_eq(stage_train_tokenizer(&f.ctx, &err), 0, "%s", err.msg);
    char *out = tmp_path("tok/tokens.txt");
    char *got = test_slurp(out);
    /* A:4 B:3 C:2 '<space>':1 '\'':1 ; space (0x20) before apostrophe (0x27) */
    cr_expect_str_eq(got, "<blank>\n<unk>\nA\nB\nC\n<space>\n'\n<sos/eos>\n");
    free(got);
    free(out);
    free(f.tokenizer.save_path);
    free(train);
    free(manifest_dir);
    free(data_dir);
}

Test(tokenizer, stage_rejects_bpe_and_missing_keys, .init = setup, .fini = teardown)
{
    fake_configs f;
    fake_init(&f);
    esp_err err;
    f.tokenizer.model_type = "bpe";
    f.tokenizer.save_path = "unused";
    f.training.data_dir = "unused";
    cr_assert_neq(stage_train_tokenizer(&f.ctx, &err), 0);
    cr_expect(strstr(err.msg, "tokenizer.model_type: bpe is not supported yet (use char)"), "%s", err.msg);

    f.tokenizer.model_type = "char";
    f.tokenizer.save_path = NULL;
    cr_assert_neq(stage_train_tokenizer(&f.ctx, &err), 0);
    cr_expect(strstr(err.msg, "tokenizer.save_path: missing"), "%s", err.msg);

    f.tokenizer.save_path = tmp_path("tok");
    f.training.data_dir = tmp_path("nodata");
    cr_assert_neq(stage_train_tokenizer(&f.ctx, &err), 0);
    cr_expect(strstr(err.msg, "manifest/train.tsv: cannot read"), "%s", err.msg);
    free(f.tokenizer.save_path);
    free(f.training.data_dir);
}

/* A NUL byte ended the list there (issue 16): the tokens after it were dropped without a word,
 * and the model's output size no longer matched its token list. */
Test(tokenizer, read_rejects_a_nul_byte_naming_the_line, .init = setup, .fini = teardown)
{
    char *path = tmp_path("nul.txt");
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    fwrite("<blank>\n<unk>\nA\0B\nC\n", 1, 20, fp);
    fclose(fp);
    token_list tl;
    esp_err err;
    cr_assert_neq(token_list_read(path, &tl, &err), 0);
    cr_expect(strstr(err.msg, "nul.txt:3: holds a NUL byte (a token list is text"), "%s", err.msg);
    free(path);
}
