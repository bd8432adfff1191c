/* SentencePiece tokenizers (bpe, unigram) as ESPnet3 trains and uses them: the files of
 * ${tokenizer.save_path}, tokens.txt in ESPnet's order, agreement with Python's sentencepiece on
 * held-out text (pieces -> ids as TokenIDConverter, ids -> text as tokens2text), round trips,
 * <unk> and its warning, user_defined_symbols, and the errors (bad model file, a vocab_size the
 * text cannot support, nothing half written). Training text: test/fixtures/tokenizer/. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/tokenizer.h"
#include "core/decode/ctc_decode.h"
#include "test/unit/test_util.h"

static char tmpdir[64];

static void setup(void)
{
    test_tmpdir_make(tmpdir, sizeof tmpdir, "tokspm");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmpdir); }

TestSuite(tokenizer_spm, .init = setup, .fini = teardown);

/* Lines of a file (no empty last line); *n gets the count. Free with free_lines. */
static char **read_lines(const char *path, size_t *n)
{
    char *buf = test_slurp(path);
    char **lines = NULL;
    *n = 0;
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        lines = realloc(lines, (*n + 1) * sizeof *lines);
        lines[(*n)++] = strdup(l);
    }
    free(buf);
    return lines;
}

static void free_lines(char **lines, size_t n)
{
    for (size_t i = 0; i < n; i++) free(lines[i]);
    free(lines);
}

static const char *fixture(const char *name)
{
    static char buf[2][PATH_MAX];
    static int k;
    char rel[256];
    snprintf(rel, sizeof rel, "test/fixtures/tokenizer/%s", name);
    cr_assert_not_null(realpath(test_path(test_root_dir(), rel), buf[k ^= 1]), "no fixture %s", rel);
    return buf[k];
}

/* Trains a model on train.txt into <tmpdir>/<dir>; returns 0 or -1 with err. */
static int train(const char *type, long vocab, const char *const *uds, size_t n_uds, const char *dir, esp_err *err)
{
    size_t n;
    char **lines = read_lines(fixture("train.txt"), &n);
    spm_train_cfg c = {.model_type = type, .vocab_size = vocab, .character_coverage = 1.0,
                       .user_defined_symbols = uds, .n_user_defined_symbols = n_uds};
    int rc = spm_train_tokenizer(&c, (const char *const *)lines, n, test_path(tmpdir, dir), "train.txt", err);
    free_lines(lines, n);
    return rc;
}

/* tokens.txt of dir with the model attached as the decode side does. */
static void open_list(const char *dir, const char *type, token_list *tl)
{
    esp_err err;
    char rel[128];
    snprintf(rel, sizeof rel, "%s/tokens.txt", dir);
    cr_assert_eq(token_list_read(test_path(tmpdir, rel), tl, &err), 0, "%s", err.msg);
    snprintf(rel, sizeof rel, "%s/%s.model", dir, type);
    cr_assert_eq(token_list_set_type(tl, TOKEN_TYPE_BPE, test_path(tmpdir, rel), &err), 0, "%s", err.msg);
}

/* "<ids>\t<text>" of each held-out line through our tokenizer, as the Python check writes them. */
static char *ours_on_heldout(const token_list *tl)
{
    size_t n;
    char **lines = read_lines(fixture("heldout.txt"), &n);
    char *out = calloc(1, 1);
    for (size_t i = 0; i < n; i++) {
        long *ids;
        size_t k;
        esp_err err;
        cr_assert_eq(text_to_ids(tl, lines[i], &ids, &k, NULL, &err), 0, "%s", err.msg);
        int *iids = malloc((k ? k : 1) * sizeof *iids);
        size_t len = strlen(out);
        for (size_t j = 0; j < k; j++) {
            iids[j] = (int)ids[j];
            out = realloc(out, len + 24);
            len += (size_t)sprintf(out + len, "%s%ld", j ? " " : "", ids[j]);
        }
        char *text = ids_to_text(tl, iids, k);
        out = realloc(out, len + strlen(text) + 3);
        sprintf(out + len, "\t%s\n", text);
        free(text);
        free(iids);
        free(ids);
    }
    free_lines(lines, n);
    return out;
}

/* Python's sentencepiece loads <dir>/<type>.model; tokens.txt is ESPnet's list of it; the model
 * ESPnet3's train_sentencepiece trains on the same text has the same vocabulary (pieces and
 * scores, byte for byte); the held-out lines as ESPnet maps them (EncodeAsPieces,
 * TokenIDConverter with <unk>, DecodePieces of the token strings) go to <dir>/py.txt. */
static const char *python_check =
    "import sentencepiece as spm\n"
    "d, t, heldout, train, vocab_size, uds = '%s', '%s', '%s', '%s', %ld, [%s]\n"
    "spm.SentencePieceTrainer.Train(input=train, model_prefix=f'{d}/py', model_type=t, vocab_size=vocab_size,\n"
    "                               character_coverage=1.0, user_defined_symbols=uds,\n"
    "                               input_sentence_size=100000000, minloglevel=2)\n"
    "assert open(f'{d}/py.vocab', 'rb').read() == open(f'{d}/{t}.vocab', 'rb').read(), 'not the vocab of ESPnet3'\n"
    "sp = spm.SentencePieceProcessor()\n"
    "sp.load(f'{d}/{t}.model')\n"
    "toks = open(f'{d}/tokens.txt', encoding='utf-8').read().split('\\n')[:-1]\n"
    "vocab = [l.split('\\t')[0] for l in open(f'{d}/{t}.vocab', encoding='utf-8')]\n"
    "assert vocab == [sp.id_to_piece(i) for i in range(sp.get_piece_size())], 'vocab != model'\n"
    "assert toks == ['<blank>', '<unk>'] + vocab[3:] + ['<sos/eos>'], f'tokens.txt order: {toks}'\n"
    "t2i = {p: i for i, p in enumerate(toks)}\n"
    "with open(f'{d}/py.txt', 'w', encoding='utf-8') as out:\n"
    "    for line in open(heldout, encoding='utf-8'):\n"
    "        ids = [t2i.get(p, 1) for p in sp.encode_as_pieces(line.rstrip('\\n'))]\n"
    "        text = sp.decode_pieces([toks[i] for i in ids])\n"
    "        out.write(' '.join(map(str, ids)) + '\\t' + text + '\\n')\n";

/* uds: the user_defined_symbols as a Python list's items ("'<a>', '<b>'"). */
static void check_with_python(const char *dir, const char *type, long vocab_size, const char *uds)
{
    char code[4096];
    snprintf(code, sizeof code, python_check, dir, type, fixture("heldout.txt"), fixture("train.txt"), vocab_size, uds);
    cr_assert_eq(test_run_python(tmpdir, code), 0, "python's sentencepiece disagrees (see above)");
    token_list tl;
    open_list(dir, type, &tl);
    char *ours = ours_on_heldout(&tl);
    char rel[128];
    snprintf(rel, sizeof rel, "%s/py.txt", dir);
    char *py = test_slurp(test_path(tmpdir, rel));
    cr_expect_str_eq(ours, py);
    free(ours);
    free(py);
    token_list_free(&tl);
}

/* The names in dir, sorted, joined with ' '. */
static char *listing(const char *dir)
{
    char *names[16];
    size_t n = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    for (struct dirent *e; (e = readdir(d)) && n < 16;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) names[n++] = strdup(e->d_name);
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1], names[j - 1] = t;
        }
    char *out = calloc(1, 1);
    for (size_t i = 0; i < n; i++) {
        out = realloc(out, strlen(out) + strlen(names[i]) + 2);
        if (i) strcat(out, " ");
        strcat(out, names[i]);
        free(names[i]);
    }
    return out;
}

Test(tokenizer_spm, bpe_30_writes_espnet3_files_and_python_agrees_on_heldout_text)
{
    esp_err err;
    cr_assert_eq(train("bpe", 30, NULL, 0, "bpe_30", &err), 0, "%s", err.msg);
    char *files = listing(test_path(tmpdir, "bpe_30"));
    cr_expect_str_eq(files, "bpe.model bpe.vocab tokens.txt");
    free(files);
    token_list tl;
    open_list("bpe_30", "bpe", &tl);
    cr_assert_eq(tl.n, 30); /* vocab_size pieces - <unk> <s> </s> + <blank> <unk> <sos/eos> */
    cr_expect_str_eq(tl.tokens[0], "<blank>");
    cr_expect_str_eq(tl.tokens[1], "<unk>");
    cr_expect_str_eq(tl.tokens[29], "<sos/eos>");
    token_list_free(&tl);
    check_with_python("bpe_30", "bpe", 30, "");
}

Test(tokenizer_spm, unigram_writes_unigram_model_and_python_agrees_on_heldout_text)
{
    esp_err err;
    cr_assert_eq(train("unigram", 40, NULL, 0, "unigram_40", &err), 0, "%s", err.msg);
    char *files = listing(test_path(tmpdir, "unigram_40"));
    cr_expect_str_eq(files, "tokens.txt unigram.model unigram.vocab");
    free(files);
    check_with_python("unigram_40", "unigram", 40, "");
}

Test(tokenizer_spm, encode_decode_round_trip_on_the_training_text)
{
    esp_err err;
    cr_assert_eq(train("bpe", 30, NULL, 0, "bpe_30", &err), 0, "%s", err.msg);
    token_list tl;
    open_list("bpe_30", "bpe", &tl);
    size_t n;
    char **lines = read_lines(fixture("train.txt"), &n);
    for (size_t i = 0; i < n; i++) {
        long *ids;
        size_t k, unk = 99;
        cr_assert_eq(text_to_ids(&tl, lines[i], &ids, &k, &unk, &err), 0, "%s", err.msg);
        cr_expect_eq(unk, 0, "line %zu", i);
        int *iids = malloc(k * sizeof *iids);
        for (size_t j = 0; j < k; j++) iids[j] = (int)ids[j];
        char *text = ids_to_text(&tl, iids, k);
        cr_expect_str_eq(text, lines[i]);
        /* The decoder's path: token_ids_to_text through an err_calc over the same list. */
        err_calc ec;
        err_calc_init(&ec, &tl);
        char *dec = token_ids_to_text(&ec, iids, k);
        cr_expect_str_eq(dec, lines[i]);
        free(dec);
        free(text);
        free(iids);
        free(ids);
    }
    free_lines(lines, n);
    token_list_free(&tl);
}

Test(tokenizer_spm, text_outside_the_vocabulary_maps_to_unk_with_one_counted_warning)
{
    esp_err err;
    cr_assert_eq(train("bpe", 30, NULL, 0, "bpe_30", &err), 0, "%s", err.msg);
    token_list tl;
    open_list("bpe_30", "bpe", &tl);
    long *ids;
    size_t k, unk;
    /* Q, X and Z never occur in train.txt; SentencePiece gives "Q" and "X" as one unknown piece. */
    cr_assert_eq(text_to_ids(&tl, "THE QUICK FOX AT ZOO", &ids, &k, &unk, &err), 0, "%s", err.msg);
    cr_expect_eq(unk, 3);
    size_t ones = 0;
    for (size_t j = 0; j < k; j++) ones += ids[j] == 1;
    cr_expect_eq(ones, 3);
    free(ids);

    FILE *log = tmpfile();
    log_set_file(log);
    const char *texts[] = {"THE CAT SAT", "A QUIET ZOO", "THE DOG"};
    cr_expect_eq(tokens_warn_unknown(&tl, texts, 3, "valid.tsv"), 2);
    cr_expect_eq(tokens_warn_unknown(&tl, texts, 1, "train.tsv"), 0); /* nothing unknown: silent */
    log_set_file(NULL);
    rewind(log);
    char buf[1024] = "";
    size_t got = fread(buf, 1, sizeof buf - 1, log);
    buf[got] = '\0';
    fclose(log);
    cr_expect(strstr(buf, "WARNING | valid.tsv: 1 of 3 transcripts have text outside the bpe token list: 2 tokens "
                          "become <unk> (first: \"A QUIET ZOO\")"),
              "%s", buf);
    cr_expect_null(strstr(buf, "train.tsv"), "%s", buf);
    cr_expect_eq((size_t)(strchr(buf, '\n') - buf) + 1, strlen(buf), "one line: %s", buf);
    token_list_free(&tl);
}

Test(tokenizer_spm, user_defined_symbols_come_first_and_stay_whole)
{
    esp_err err;
    const char *uds[] = {"<noise>", "<laugh>"};
    cr_assert_eq(train("bpe", 32, uds, 2, "bpe_uds", &err), 0, "%s", err.msg);
    token_list tl;
    open_list("bpe_uds", "bpe", &tl);
    cr_expect_str_eq(tl.tokens[2], "<noise>");
    cr_expect_str_eq(tl.tokens[3], "<laugh>");
    long *ids;
    size_t k;
    cr_assert_eq(text_to_ids(&tl, "THE CAT <noise> SAT <laugh>", &ids, &k, NULL, &err), 0, "%s", err.msg);
    size_t noise = 0, laugh = 0;
    for (size_t j = 0; j < k; j++) noise += ids[j] == 2, laugh += ids[j] == 3;
    cr_expect_eq(noise, 1);
    cr_expect_eq(laugh, 1);
    free(ids);
    token_list_free(&tl);
    check_with_python("bpe_uds", "bpe", 32, "'<noise>', '<laugh>'");
}

Test(tokenizer_spm, a_vocab_size_the_text_cannot_support_is_one_line_and_leaves_the_old_files)
{
    esp_err err;
    cr_assert_eq(train("bpe", 30, NULL, 0, "bpe_30", &err), 0, "%s", err.msg);
    cr_assert_eq(test_sh("cp '%s/bpe_30/bpe.model' '%s/kept.model'", tmpdir, tmpdir), 0);
    char *tokens = test_slurp(test_path(tmpdir, "bpe_30/tokens.txt"));
    cr_assert_neq(train("bpe", 5000, NULL, 0, "bpe_30", &err), 0);
    cr_expect(strstr(err.msg, "train.txt: SentencePiece cannot train a bpe model of tokenizer.vocab_size 5000: "
                              "Vocabulary size too high (5000). Please set it to a value <= "),
              "%s", err.msg);
    cr_expect_null(strchr(err.msg, '\n'), "%s", err.msg);
    cr_expect_null(strstr(err.msg, ".cc("), "source location left in: %s", err.msg);
    /* Too small for the characters: SentencePiece's other vocab_size error. */
    cr_assert_neq(train("unigram", 10, NULL, 0, "bpe_30", &err), 0);
    cr_expect(strstr(err.msg, "Vocabulary size is smaller than required_chars"), "%s", err.msg);
    char *files = listing(test_path(tmpdir, "bpe_30"));
    cr_expect_str_eq(files, "bpe.model bpe.vocab tokens.txt"); /* no temp names left, no unigram.* */
    free(files);
    char *tokens2 = test_slurp(test_path(tmpdir, "bpe_30/tokens.txt"));
    cr_expect_str_eq(tokens2, tokens);
    cr_expect(test_same_file(test_path(tmpdir, "bpe_30/bpe.model"), test_path(tmpdir, "kept.model")));
    free(tokens);
    free(tokens2);
}

Test(tokenizer_spm, unreadable_or_missing_model_is_one_line_naming_the_file)
{
    token_list tl = {0};
    esp_err err;
    const char *bad = test_path(tmpdir, "bad.model");
    test_write_text(bad, "this is not a SentencePiece model\n");
    cr_assert_neq(token_list_set_type(&tl, TOKEN_TYPE_BPE, bad, &err), 0);
    cr_expect(strstr(err.msg, "bad.model: cannot load the SentencePiece model: "), "%s", err.msg);
    cr_expect_null(strchr(err.msg, '\n'), "%s", err.msg);
    cr_assert_neq(token_list_set_type(&tl, TOKEN_TYPE_BPE, test_path(tmpdir, "none.model"), &err), 0);
    cr_expect(strstr(err.msg, "none.model: no SentencePiece model (run train_tokenizer, stage 2"), "%s", err.msg);
    cr_expect_null(tl.spm);
    cr_expect_eq(tl.type, TOKEN_TYPE_CHAR);
}

Test(tokenizer_spm, training_again_writes_the_same_files)
{
    esp_err err;
    const char *types[] = {"bpe", "unigram"};
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(train(types[i], 40, NULL, 0, "a", &err), 0, "%s", err.msg);
        cr_assert_eq(train(types[i], 40, NULL, 0, "b", &err), 0, "%s", err.msg);
        const char *files[] = {"model", "vocab"};
        for (int f = 0; f < 2; f++) {
            char a[64], b[64];
            snprintf(a, sizeof a, "a/%s.%s", types[i], files[f]);
            snprintf(b, sizeof b, "b/%s.%s", types[i], files[f]);
            char pa[PATH_MAX];
            snprintf(pa, sizeof pa, "%s", test_path(tmpdir, a));
            cr_expect(test_same_file(pa, test_path(tmpdir, b)), "%s differs from %s", a, b);
        }
        cr_expect(test_same_file(test_path(tmpdir, "a/tokens.txt"), test_path(tmpdir, "b/tokens.txt")));
    }
}
