/* SentencePiece tokenizers (ESPnet's token_type bpe: models of type bpe or unigram): training into
 * ${tokenizer.save_path}, ESPnet's tokens.txt of a model, and text <-> ids through a loaded model.
 * See tokenizer.h; the library sits behind spm_shim.h. */
#include "core/data/tokenizer_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/data/spm_shim.h"

/* ESPnet2's asr.sh (bpe_input_sentence_size) and ESPnet3's train_sentencepiece. */
#define SPM_INPUT_SENTENCE_SIZE 100000000LL
/* ESPnet's token lists drop the first three pieces of the model's vocabulary: <unk>, <s>, </s>. */
#define SPM_META_PIECES 3

/* ESPnet's token list of a model: <blank>, <unk>, the pieces after the first three, <sos/eos>. */
static void list_of_model(const spm_model *m, token_list *out)
{
    int np = spm_piece_count(m);
    size_t keep = np > SPM_META_PIECES ? (size_t)(np - SPM_META_PIECES) : 0;
    memset(out, 0, sizeof *out);
    out->n = keep + 3;
    out->tokens = xmalloc(out->n * sizeof *out->tokens);
    out->tokens[0] = xstrdup(TOKEN_BLANK);
    out->tokens[1] = xstrdup(TOKEN_UNK);
    for (size_t i = 0; i < keep; i++) out->tokens[2 + i] = xstrdup(spm_piece(m, (int)i + SPM_META_PIECES));
    out->tokens[keep + 2] = xstrdup(TOKEN_SOS_EOS);
}

/* Moves the trained files into place; tokens.txt (already written to its temp name) last. */
static int publish(const char *tmp_prefix, const char *save_path, const char *type, atomic_file *tokens,
                   esp_err *err)
{
    const char *exts[2] = {"vocab", "model"};
    for (int i = 0; i < 2; i++) {
        char *from = xasprintf("%s.%s", tmp_prefix, exts[i]);
        char *to = xasprintf("%s/%s.%s", save_path, type, exts[i]);
        int rc = rename(from, to);
        if (rc != 0) esp_fail(err, "%s: cannot rename %s into place: %s", to, from, strerror(errno));
        free(from);
        free(to);
        if (rc != 0) return -1;
    }
    return atomic_commit(tokens, err);
}

static void remove_tmp(const char *tmp_prefix)
{
    const char *exts[2] = {"vocab", "model"};
    for (int i = 0; i < 2; i++) {
        char *p = xasprintf("%s.%s", tmp_prefix, exts[i]);
        unlink(p);
        free(p);
    }
}

int spm_train_tokenizer(const spm_train_cfg *c, const char *const *texts, size_t n_texts, const char *save_path,
                        const char *text_file, esp_err *err)
{
    if (mkdir_p(save_path, err) != 0) return -1;
    char *prefix = xasprintf("%s/.%s.tmp.%ld", save_path, c->model_type, (long)getpid());
    char *model_path = xasprintf("%s.model", prefix), *vocab_path = xasprintf("%s.vocab", prefix);
    spm_train_opts o = {
        .sentences = texts,
        .n_sentences = n_texts,
        .model_path = model_path,
        .vocab_path = vocab_path,
        .model_type = c->model_type,
        .vocab_size = c->vocab_size,
        .character_coverage = c->character_coverage,
        .user_defined_symbols = c->user_defined_symbols,
        .n_user_defined_symbols = c->n_user_defined_symbols,
        .input_sentence_size = SPM_INPUT_SENTENCE_SIZE,
    };
    char msg[1024] = "";
    int rc = -1;
    spm_model *m = NULL;
    int trained = spm_train(&o, msg, sizeof msg);
    if (trained == -2) {
        esp_fail(err, "%s (check the disk and the permissions of tokenizer.save_path)", msg);
        goto out;
    }
    if (trained != 0) {
        esp_fail(err, "%s: SentencePiece cannot train a %s model of tokenizer.vocab_size %ld: %s (change "
                      "tokenizer.vocab_size or character_coverage, or train on more text)",
                 text_file, c->model_type, c->vocab_size, msg);
        goto out;
    }
    m = spm_load(model_path, msg, sizeof msg);
    if (!m) {
        esp_fail(err, "%s: the model SentencePiece just trained does not load: %s", model_path, msg);
        goto out;
    }
    token_list tl;
    list_of_model(m, &tl);
    char *tokens_path = path_join(save_path, "tokens.txt");
    atomic_file af;
    if (atomic_open(&af, tokens_path, err) == 0) {
        for (size_t i = 0; i < tl.n; i++) fprintf(af.fp, "%s\n", tl.tokens[i]);
        rc = publish(prefix, save_path, c->model_type, &af, err);
        atomic_abort(&af);
    }
    free(tokens_path);
    token_list_free(&tl);
out:
    if (m) spm_free(m);
    remove_tmp(prefix);
    free(prefix);
    free(model_path);
    free(vocab_path);
    return rc;
}

int spm_attach(token_list *tl, const char *model_path, esp_err *err)
{
    if (!path_exists(model_path))
        return esp_fail(err, "%s: no SentencePiece model (run train_tokenizer, stage 2, or check "
                             "tokenizer.save_path / bpemodel)", model_path);
    char msg[1024] = "";
    spm_model *m = spm_load(model_path, msg, sizeof msg);
    if (!m)
        return esp_fail(err, "%s: cannot load the SentencePiece model: %s (retrain it with train_tokenizer, "
                             "stage 2)", model_path, msg);
    int np = spm_piece_count(m);
    long *map = xmalloc((np > 0 ? (size_t)np : 1) * sizeof *map);
    for (int i = 0; i < np; i++) map[i] = token_list_find(tl, spm_piece(m, i));
    if (tl->spm) spm_free(tl->spm);
    free(tl->piece_token);
    tl->spm = m;
    tl->piece_token = map;
    return 0;
}

int spm_to_ids(const token_list *tl, const char *text, long **ids, size_t *n_ids, esp_err *err)
{
    char **pieces;
    int *pids;
    unsigned char *unknown;
    size_t n;
    char msg[1024] = "";
    if (spm_encode(tl->spm, text, &pieces, &pids, &unknown, &n, msg, sizeof msg) != 0)
        return esp_fail(err, "SentencePiece cannot encode '%s': %s", text, msg);
    long unk = token_list_find(tl, TOKEN_UNK);
    long *out = xmalloc((n ? n : 1) * sizeof *out);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        /* TokenIDConverter looks the piece's string up: a known piece by its id, an unknown one
         * (its string is the text it covers) by that text. */
        long id = unknown[i] ? token_list_find(tl, pieces[i]) : tl->piece_token[pids[i]];
        if (id < 0) id = unk;
        if (id < 0) rc = esp_fail(err, "piece '%s' is not in the token list, which has no %s", pieces[i], TOKEN_UNK);
        out[i] = id;
    }
    spm_pieces_free(pieces, pids, unknown, n);
    if (rc != 0) {
        free(out);
        return -1;
    }
    *ids = out;
    *n_ids = n;
    return 0;
}

char *spm_ids_to_text(const token_list *tl, const int *ids, size_t n, long blank)
{
    const char **pieces = xmalloc((n ? n : 1) * sizeof *pieces);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] != blank) pieces[k++] = tl->tokens[ids[i]];
    char *text = spm_decode_pieces(tl->spm, pieces, k);
    free(pieces);
    return text;
}
