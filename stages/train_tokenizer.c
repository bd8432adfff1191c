/* Stage 2 train_tokenizer: the tokenizer of tokenizer.model_type from the training transcripts,
 * written to ${tokenizer.save_path} in ESPnet's layout: tokens.txt for char and word (ESPnet2's
 * token lists), and <model_type>.model, <model_type>.vocab and tokens.txt for bpe and unigram
 * (a SentencePiece model, as ESPnet3's train_sentencepiece). */
#include "stages/stages.h"

#include "core/config/config_python.h"
#include "core/data/py_export.h"
#include "recipes/registry.h"
#include "core/base/fsio.h"
#include "core/formats/manifest.h"
#include "core/data/dataset_src.h"
#include "core/data/tokenizer.h"

#include <stdlib.h>
#include <string.h>

/* Writes tokens.txt of a char or word list. */
static int write_list(const tokenizer_cfg *tok, const char *type, const char *const *texts, size_t n, esp_err *err)
{
    token_list tl;
    if (!strcmp(type, "word")) word_token_list_build(texts, n, (long)tok->vocab_size, &tl);
    else char_token_list_build(texts, n, &tl);
    char *out_path = path_join(tok->save_path, "tokens.txt");
    int rc = mkdir_p(tok->save_path, err);
    if (rc == 0) rc = token_list_write(out_path, &tl, err);
    free(out_path);
    token_list_free(&tl);
    return rc;
}

/* Checks what the model type needs from the tokenizer block; warns about keys it does not use. */
static int check_keys(const tokenizer_cfg *tok, const char *type, const char *file, esp_err *err)
{
    int spm = !strcmp(type, "bpe") || !strcmp(type, "unigram");
    if (!spm && strcmp(type, "char") && strcmp(type, "word"))
        return esp_fail(err, "%s: tokenizer.model_type: %s is not supported (use char, word, bpe or unigram)", file,
                        type);
    if (spm && tok->vocab_size <= 0)
        return esp_fail(err, "%s: tokenizer.vocab_size: missing (a %s model needs its number of pieces, e.g. 30)",
                        file, type);
    if (!strcmp(type, "word") && tok->vocab_size > 0 && tok->vocab_size < 3)
        return esp_fail(err, "%s: tokenizer.vocab_size: %lld is too small (a word list holds <blank>, <unk> and "
                             "<sos/eos>; use 0 for every word)", file, (long long)tok->vocab_size);
    if (!spm && tok->n_user_defined_symbols)
        log_warn("%s: tokenizer.user_defined_symbols: used by bpe and unigram models only; ignored for %s", file,
                 type);
    return 0;
}

int stage_train_tokenizer(const stage_ctx *ctx, esp_err *err)
{
    const training_cfg *cfg = training_of(ctx->configs);
    if (!cfg) return esp_fail(err, "train_tokenizer: needs a training config (pass --training_config)");
    const char *file = ctx->configs->training->path;
    const tokenizer_cfg *tok = cfg->tokenizer;
    if (!tok)
        return esp_fail(err, "%s: tokenizer: missing (add tokenizer: with model_type: char and save_path)", file);
    if (!tok->save_path) return esp_fail(err, "%s: tokenizer.save_path: missing (set where tokens.txt goes)", file);
    const char *type = tok->model_type ? tok->model_type : "char";
    if (check_keys(tok, type, file, err) != 0) return -1;
    if (!tok->text && !cfg->data_dir && !(tok->text_builder && tok->text_builder->func))
        return esp_fail(err, "%s: tokenizer.text: missing, and no data_dir to find manifest/train.tsv in", file);

    /* The training text: text_builder.func's strings (ESPnet3's: the recipe's Python), else
     * tokenizer.text, else the train split (dataset.train's sources when given). */
    char *text_path = NULL;
    manifest m = {0};
    char **built = NULL;
    size_t n_built = 0;
    int read_rc;
    if (tok->text_builder && tok->text_builder->func) {
        const ynode *node = yt_get_path(ctx->configs->training->tree, "tokenizer.text_builder.func");
        char mark[512];
        char *where = xasprintf("%s: tokenizer.text_builder.func", ymark_str(node ? node->mark : (ymark){0}, mark, sizeof mark));
        py_env env = {.python = cfg->python, .recipe_dir = config_python_recipe_dir(ctx->configs->training->tree)};
        /* The recipe's Python; a built-in recipe's C copy of it when its folder has none. */
        const text_builder *in_c = config_function_in_recipe(tok->text_builder->func, env.recipe_dir)
                                       ? NULL : text_builder_find(tok->text_builder->func);
        if (in_c) read_rc = in_c->build(tok->text_builder->kwargs_json, cfg->data_dir, &built, &n_built, err);
        else read_rc = py_call(&env, tok->text_builder->func, tok->text_builder->kwargs_json, where, &built, &n_built, err);
        free(where);
        if (read_rc == 0) {
            for (size_t i = 0; i < n_built; i++) {
                char *id = xasprintf("%zu", i);
                manifest_add(&m, id, "", built[i], NULL);
                free(id);
                free(built[i]);
            }
            free(built);
            text_path = xstrdup(tok->text_builder->func);
        }
    } else {
        read_rc = tok->text ? manifest_read_tsv(tok->text, &m, err) : dataset_split_load_original(cfg, "train", &m, &text_path, err);
    }
    if (read_rc != 0) {
        free(text_path);
        return -1;
    }
    if (!text_path) text_path = xstrdup(tok->text);
    const char **texts = xmalloc((m.n ? m.n : 1) * sizeof *texts);
    size_t with_text = 0;
    for (size_t i = 0; i < m.n; i++) {
        texts[i] = m.items[i].text;
        with_text += texts[i][strspn(texts[i], " \t")] != '\0';
    }
    int rc, spm = strcmp(type, "char") && strcmp(type, "word");
    if (!with_text) {
        rc = esp_fail(err, "%s: no transcript text to train the tokenizer on (%zu utterances, every text empty; run "
                           "create_dataset, stage 1, or point tokenizer.text at a manifest with text)",
                      text_path, m.n);
    } else if (!spm) {
        rc = write_list(tok, type, texts, m.n, err);
    } else {
        spm_train_cfg sc = {.model_type = type,
                            .vocab_size = (long)tok->vocab_size,
                            .character_coverage = tok->character_coverage,
                            .user_defined_symbols = (const char *const *)tok->user_defined_symbols,
                            .n_user_defined_symbols = tok->n_user_defined_symbols};
        rc = spm_train_tokenizer(&sc, texts, m.n, tok->save_path, text_path, err);
    }
    if (rc == 0)
        log_info("train_tokenizer: wrote %s/tokens.txt%s%s%s (%s, from %zu utterances in %s)", tok->save_path,
                 spm ? ", " : "", spm ? type : "", spm ? ".model and .vocab" : "", type, m.n, text_path);
    free(texts);
    free(text_path);
    manifest_free(&m);
    return rc;
}
