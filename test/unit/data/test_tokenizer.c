/* Character token lists: ESPnet2's tokens.txt layout, reading back, tokenizing, and stage 2. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
    f->tokenizer.character_coverage = 1.0; /* the declared default a loaded config carries */
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

/* A manifest at <tmpdir>/data/manifest/train.tsv with these texts; returns data_dir (caller frees). */
static char *write_manifest(const char *const *texts, size_t n)
{
    char *data_dir = tmp_path("data");
    char *train = tmp_path("data/manifest/train.tsv");
    char body[4096] = "";
    size_t used = 0;
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(body + used, sizeof body - used, "u%zu\t/w%zu.wav\t%s\n", i, i, texts[i]);
    test_write_text_mkdirs(train, body);
    free(train);
    return data_dir;
}

Test(tokenizer, stage_trains_bpe_into_save_path_as_espnet3, .init = setup, .fini = teardown)
{
    const char *texts[] = {"THE CAT SAT ON THE MAT", "THE DOG SAT ON THE LOG", "A CAT AND A DOG"};
    fake_configs f;
    fake_init(&f);
    esp_err err;
    f.training.data_dir = write_manifest(texts, 3);
    f.tokenizer.model_type = "bpe";
    f.tokenizer.vocab_size = 20;
    f.tokenizer.save_path = tmp_path("data/bpe_20");
    cr_assert_eq(stage_train_tokenizer(&f.ctx, &err), 0, "%s", err.msg);
    const char *names[] = {"bpe.model", "bpe.vocab", "tokens.txt"};
    for (int i = 0; i < 3; i++) cr_expect(test_exists(test_path(f.tokenizer.save_path, names[i])), "%s", names[i]);
    token_list tl;
    cr_assert_eq(token_list_read(test_path(f.tokenizer.save_path, "tokens.txt"), &tl, &err), 0, "%s", err.msg);
    cr_expect_eq(tl.n, 20);
    token_list_free(&tl);

    /* The labels side: the training config's tokenizer block names the model. */
    tokenizer_spec ts;
    cr_assert_eq(tokenizer_spec_resolve(&ts, &f.tokenizer, NULL, NULL, "train.yaml", &err), 0, "%s", err.msg);
    cr_expect_eq(ts.type, TOKEN_TYPE_BPE);
    cr_expect_str_eq(ts.model_path, test_path(f.tokenizer.save_path, "bpe.model"));
    cr_expect_str_eq(ts.tokens_path, test_path(f.tokenizer.save_path, "tokens.txt"));
    tokenizer_spec_free(&ts);
    free(f.tokenizer.save_path);
    free(f.training.data_dir);
}

Test(tokenizer, word_lists_as_espnet2_tokenize_text, .init = setup, .fini = teardown)
{
    /* counts: THE 3, CAT 2, SAT 2, A 1, DOG 1; ties in order of first appearance */
    const char *texts[] = {"THE CAT  SAT", "\tTHE SAT CAT A", "THE DOG"};
    token_list tl;
    word_token_list_build(texts, 3, 0, &tl);
    const char *want[] = {"<blank>", "<unk>", "THE", "CAT", "SAT", "A", "DOG", "<sos/eos>"};
    cr_assert_eq(tl.n, 8);
    for (size_t i = 0; i < tl.n; i++) cr_expect_str_eq(tl.tokens[i], want[i], "token %zu", i);
    long *ids;
    size_t n, unk;
    esp_err err;
    cr_assert_eq(text_to_ids(&tl, " THE BIRD  SAT ", &ids, &n, &unk, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 3);
    cr_expect_eq(ids[0], 2);
    cr_expect_eq(ids[1], 1);
    cr_expect_eq(ids[2], 4);
    cr_expect_eq(unk, 1);
    int back[] = {0, 2, 1, 0, 4, 0};
    char *text = ids_to_text(&tl, back, 6);
    cr_expect_str_eq(text, "THE <unk> SAT");
    free(text);
    free(ids);
    token_list_free(&tl);
    word_token_list_build(texts, 3, 5, &tl); /* vocab_size 5: <blank> <unk> THE CAT <sos/eos> */
    cr_assert_eq(tl.n, 5);
    cr_expect_str_eq(tl.tokens[3], "CAT");
    cr_expect_str_eq(tl.tokens[4], "<sos/eos>");
    token_list_free(&tl);
}

Test(tokenizer, spec_follows_espnet_token_type_and_bpemodel_over_the_tokenizer_block)
{
    tokenizer_cfg tc = {.model_type = "unigram", .save_path = "data/unigram_50"};
    tokenizer_spec ts;
    esp_err err;
    cr_assert_eq(tokenizer_spec_resolve(&ts, &tc, NULL, NULL, "t.yaml", &err), 0, "%s", err.msg);
    cr_expect_eq(ts.type, TOKEN_TYPE_BPE);
    cr_expect_str_eq(ts.model_path, "data/unigram_50/unigram.model");
    tokenizer_spec_free(&ts);
    cr_assert_eq(tokenizer_spec_resolve(&ts, &tc, NULL, "other/bpe.model", "t.yaml", &err), 0, "%s", err.msg);
    cr_expect_str_eq(ts.model_path, "other/bpe.model");
    tokenizer_spec_free(&ts);
    cr_assert_eq(tokenizer_spec_resolve(&ts, &tc, "char", NULL, "t.yaml", &err), 0, "%s", err.msg);
    cr_expect_eq(ts.type, TOKEN_TYPE_CHAR);
    cr_expect_null(ts.model_path);
    tokenizer_spec_free(&ts);
    tc.model_type = "char";
    cr_assert_eq(tokenizer_spec_resolve(&ts, &tc, NULL, "m/bpe.model", "t.yaml", &err), 0, "%s", err.msg);
    cr_expect_eq(ts.type, TOKEN_TYPE_BPE); /* a bpemodel alone means bpe */
    tokenizer_spec_free(&ts);
    cr_assert_neq(tokenizer_spec_resolve(&ts, &tc, "bpe", NULL, "t.yaml", &err), 0);
    cr_expect(strstr(err.msg, "t.yaml: token_type bpe needs a SentencePiece model, and tokenizer.model_type is char"),
              "%s", err.msg);
    tc.model_type = "word";
    cr_assert_eq(tokenizer_spec_resolve(&ts, &tc, NULL, NULL, "t.yaml", &err), 0, "%s", err.msg);
    cr_expect_eq(ts.type, TOKEN_TYPE_WORD);
    tokenizer_spec_free(&ts);
}

Test(tokenizer, stage_errors_name_the_key_or_the_file, .init = setup, .fini = teardown)
{
    fake_configs f;
    fake_init(&f);
    esp_err err;
    f.tokenizer.model_type = "bpe";
    f.tokenizer.save_path = tmp_path("tok");
    f.training.data_dir = "unused";
    cr_assert_neq(stage_train_tokenizer(&f.ctx, &err), 0);
    cr_expect(strstr(err.msg, "train.yaml: tokenizer.vocab_size: missing (a bpe model needs its number of pieces"),
              "%s", err.msg);

    f.tokenizer.model_type = "char";
    char *save = f.tokenizer.save_path;
    f.tokenizer.save_path = NULL;
    cr_assert_neq(stage_train_tokenizer(&f.ctx, &err), 0);
    cr_expect(strstr(err.msg, "tokenizer.save_path: missing"), "%s", err.msg);

    f.tokenizer.save_path = save;
    f.training.data_dir = tmp_path("nodata");
    cr_assert_neq(stage_train_tokenizer(&f.ctx, &err), 0);
    cr_expect(strstr(err.msg, "manifest/train.tsv: no manifest (run create_dataset, stage 1, first)"), "%s", err.msg);
    free(f.training.data_dir);

    /* Transcripts without text: one line naming the manifest, and nothing written. */
    const char *empty[] = {"", " "};
    f.training.data_dir = write_manifest(empty, 2);
    f.tokenizer.model_type = "unigram";
    f.tokenizer.vocab_size = 30;
    cr_assert_neq(stage_train_tokenizer(&f.ctx, &err), 0);
    cr_expect(strstr(err.msg, "data/manifest/train.tsv: no transcript text to train the tokenizer on (2 "
                              "utterances, every text empty"),
              "%s", err.msg);
    cr_expect(!test_exists(save));
    free(save);
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

/* A 200,000-token list (an ESPnet word list of that size is real) reads in linear time: one hash
 * lookup per line, not a linear search (quadratic: over a minute; linear: well under a second even
 * under ASan, so the loose bound below cannot be hit by a slow machine, only by a quadratic read). */
Test(tokenizer, a_200k_token_list_reads_in_linear_time, .init = setup, .fini = teardown)
{
    enum { N = 200000 };
    char *path = tmp_path("big.txt");
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    for (int i = 0; i < N; i++) fprintf(fp, "w%d\n", i);
    fclose(fp);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    token_list tl;
    esp_err err;
    cr_assert_eq(token_list_read(path, &tl, &err), 0, "%s", err.msg);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    cr_expect_eq(tl.n, (size_t)N);
    cr_expect_eq(token_list_find(&tl, "w0"), 0);
    cr_expect_eq(token_list_find(&tl, "w199999"), N - 1);
    cr_expect_eq(token_list_find(&tl, "w200000"), -1);
    cr_expect_lt(s, 10.0, "reading %d tokens took %.1f s", N, s);
    token_list_free(&tl);
    fp = fopen(path, "a"); /* a repeat at the very end is still found, naming its line */
    fprintf(fp, "w123456\n");
    fclose(fp);
    cr_assert_neq(token_list_read(path, &tl, &err), 0);
    cr_expect(strstr(err.msg, "big.txt:200001: token w123456 appears more than once"), "%s", err.msg);
    free(path);
}
