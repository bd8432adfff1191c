/* Integration: the tiny recipe with a SentencePiece tokenizer (mini_an4's tokenizer block:
 * model_type bpe, vocab_size 30, save_path ${data_dir}/bpe_30) through stages 1-6 of the binary.
 * hyp.scp must hold SentencePiece's detokenization of the decoded pieces: the same run decoded
 * with model.token_type=char (the raw token strings, joined) and DecodePieces in Python's
 * sentencepiece must give it, and so must model.bpemodel named in the inference config. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

static char workdir[256];

static void setup(void) { test_tmpdir_make(workdir, sizeof workdir, "tokrecipe"); }
static void teardown(void) { test_tmpdir_remove(workdir); }

/* No Criterion .timeout (it leaks in Criterion 2.4.1's runner under ASan): `timeout` bounds each run. */
TestSuite(tokenizer_recipe, .init = setup, .fini = teardown);

#define TOKENIZER "tokenizer.model_type=bpe tokenizer.vocab_size=30 'tokenizer.save_path=${data_dir}/bpe_30'"

/* Runs the binary from the repository root with the tiny configs on workdir; returns the status. */
static int run(const char *args, const char *log)
{
    return test_sh("cd '%s' && timeout 300 '%s' %s data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats "
                   "exp_dir=%s/exp >%s/%s.out 2>%s/%s.err",
                   test_root_dir(), test_bin_path(), args, workdir, workdir, workdir, workdir, workdir, log, workdir,
                   log);
}

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(workdir, rel)); }

static const char *python_check =
    "import re, sentencepiece as spm\n"
    "sp = spm.SentencePieceProcessor()\n"
    "sp.load('data/bpe_30/bpe.model')\n"
    "def scp(name):\n"
    "    return dict((l.split(' ', 1) + [''])[:2] for l in open(name, encoding='utf-8').read().split('\\n') if l)\n"
    "bpe, raw, named = scp('exp/inference/test/hyp.scp'), scp('inf_char/test/hyp.scp'), scp('inf_named/test/hyp.scp')\n"
    "assert bpe.keys() == raw.keys() == named.keys() and len(bpe) == 6, (bpe, raw)\n"
    "spaces = 0\n"
    "for utt, text in bpe.items():\n"
    "    pieces = re.findall(r'<unk>|<sos/eos>|.', raw[utt])  # every piece of bpe_30 is one character\n"
    "    assert text == sp.decode_pieces(pieces), (utt, text, raw[utt])\n"
    "    assert '\\u2581' not in text and named[utt] == text, (utt, text, named[utt])\n"
    "    spaces += ' ' in text\n"
    "print(f'{len(bpe)} hyps equal DecodePieces of their pieces; {spaces} hold a space')\n";

Test(tokenizer_recipe, bpe_30_through_stages_1_to_6_gives_detokenized_hyps)
{
    test_skip_under_sanitizer("15 epochs end to end; SentencePiece's training, encoding and decoding run under "
                              "ASan in tokenizer_spm/* and tokenizer/*, stages 1-6 in recipe/*");
    cr_assert_eq(run("--config recipes/espeak_fortunes/conf/training_tiny.yaml --inference_config "
                     "recipes/espeak_fortunes/conf/inference_tiny.yaml --stage 1 --stop_stage 6 " TOKENIZER
                     " trainer.max_epochs=15 optimizer.lr=0.005",
                     "run"),
                 0, "%s", slurp("run.err"));
    char *tokens = slurp("data/bpe_30/tokens.txt");
    cr_expect(!strncmp(tokens, "<blank>\n<unk>\n", 14), "%s", tokens);
    size_t lines = 0;
    for (const char *p = tokens; *p; p++) lines += *p == '\n';
    cr_expect_eq(lines, 30);
    cr_expect(strstr(tokens, "\n<sos/eos>\n") && !strcmp(strstr(tokens, "\n<sos/eos>\n"), "\n<sos/eos>\n"));
    free(tokens);
    cr_expect(test_exists(test_path(workdir, "data/bpe_30/bpe.model")));
    cr_expect(test_exists(test_path(workdir, "data/bpe_30/bpe.vocab")));
    char *config = slurp("exp/config.yaml");
    cr_expect(strstr(config, "model_type: bpe"), "%s", config);
    free(config);

    /* The same model decoded with the raw token strings, and with the model named by bpemodel. */
    const char *inf = "--inference_config recipes/espeak_fortunes/conf/inference_tiny.yaml --stages infer";
    char args[1024];
    snprintf(args, sizeof args, "%s model.token_type=char inference_dir=%s/inf_char", inf, workdir);
    cr_assert_eq(run(args, "char"), 0, "%s", slurp("char.err"));
    snprintf(args, sizeof args, "%s model.token_type=bpe model.bpemodel=%s/data/bpe_30/bpe.model inference_dir=%s/inf_named",
             inf, workdir, workdir);
    cr_assert_eq(run(args, "named"), 0, "%s", slurp("named.err"));
    cr_assert_eq(test_run_python(workdir, python_check), 0, "hyp.scp is not SentencePiece's detokenization");

    /* Decoding again into the same inference_dir with another token_type redoes the shards: the
     * finished ones hold text of the other detokenization. */
    char *before = slurp("exp/inference/test/hyp.scp");
    snprintf(args, sizeof args, "%s model.token_type=char", inf);
    cr_assert_eq(run(args, "char_again"), 0, "%s", slurp("char_again.err"));
    char *again = slurp("exp/inference/test/hyp.scp"), *raw = slurp("inf_char/test/hyp.scp");
    cr_assert_str_eq(again, raw, "finished shards of the bpe decoding were reused for token_type char");
    free(again), free(raw);

    /* The packed model carries its SentencePiece model and decodes from the pack alone. */
    cr_assert_eq(run("--inference_config recipes/espeak_fortunes/conf/inference_tiny.yaml --stages pack_model", "pack"),
                 0, "%s", slurp("pack.err"));
    cr_assert(test_exists(test_path(workdir, "exp/model_pack/tokens/bpe.model")));
    cr_assert_eq(test_sh("mv '%s/exp/model_pack' '%s/pack' && mv '%s/data' '%s/data_gone'", workdir, workdir, workdir,
                         workdir), 0);
    cr_assert_eq(test_sh("cd '%s' && timeout 300 '%s' --inference_config '%s/pack/conf/inference.yaml' --stages infer "
                         "data_dir=%s/data_gone 'inference_dir=%s/inf_pack' >%s/packed.out 2>%s/packed.err",
                         workdir, test_bin_path(), workdir, workdir, workdir, workdir, workdir),
                 0, "%s", slurp("packed.err"));
    char *from_pack = slurp("inf_pack/test/hyp.scp");
    cr_assert_str_eq(from_pack, before, "decoding from the pack gives other hypotheses");
    free(from_pack), free(before);
}

Test(tokenizer_recipe, a_vocab_size_the_text_cannot_support_is_one_error_line_naming_the_text)
{
    cr_assert_eq(run("--config recipes/espeak_fortunes/conf/training_tiny.yaml --stage 1 --stop_stage 2 " TOKENIZER,
                     "ok"),
                 0, "%s", slurp("ok.err"));
    char *before = slurp("data/bpe_30/tokens.txt");
    cr_assert_eq(run("--config recipes/espeak_fortunes/conf/training_tiny.yaml --stages train_tokenizer " TOKENIZER
                     " tokenizer.vocab_size=5000",
                     "big"),
                 1);
    char *err = slurp("big.err");
    char want[512];
    snprintf(want, sizeof want,
             "\nespnet3: error: %s/data/manifest/train.tsv: SentencePiece cannot train a bpe model of "
             "tokenizer.vocab_size 5000: Vocabulary size too high (5000). Please set it to a value <= ",
             workdir);
    const char *at = strstr(err, want);
    cr_expect(at, "%s", err);
    if (at) cr_expect_str_eq(strchr(at + 1, '\n'), "\n", "one line, last: %s", err);
    char *after = slurp("data/bpe_30/tokens.txt");
    cr_expect_str_eq(after, before);
    cr_expect_eq(test_sh("ls -a '%s/data/bpe_30' | grep -q tmp", workdir), 1, "a temp file was left");
    free(err);
    free(before);
    free(after);
}
