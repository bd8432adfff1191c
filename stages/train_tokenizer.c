/* Stage 2 train_tokenizer: the character token list from the training transcripts, written as
 * ${tokenizer.save_path}/tokens.txt in ESPnet2's layout. */
#include "stages/stages.h"
#include "core/base/fsio.h"
#include "core/formats/manifest.h"
#include "core/data/tokenizer.h"

#include <stdlib.h>
#include <string.h>

int stage_train_tokenizer(const stage_ctx *ctx, esp_err *err)
{
    const training_cfg *cfg = training_of(ctx->configs);
    if (!cfg) return esp_fail(err, "train_tokenizer: needs a training config (pass --training_config)");
    const char *file = ctx->configs->training->path;
    const tokenizer_cfg *tok = cfg->tokenizer;
    if (!tok)
        return esp_fail(err, "%s: tokenizer: missing (add tokenizer: with model_type: char and save_path)", file);
    if (!tok->save_path) return esp_fail(err, "%s: tokenizer.save_path: missing (set where tokens.txt goes)", file);
    /* model_type left out means char, the only type so far. */
    if (tok->model_type && strcmp(tok->model_type, "char") != 0)
        return esp_fail(err, "%s: tokenizer.model_type: %s is not supported yet (use char)", file, tok->model_type);
    if (!tok->text && !cfg->data_dir)
        return esp_fail(err, "%s: tokenizer.text: missing, and no data_dir to find manifest/train.tsv in", file);

    char *text_path = tok->text ? xstrdup(tok->text) : path_join(cfg->data_dir, "manifest/train.tsv");
    manifest m;
    if (manifest_read_tsv(text_path, &m, err) != 0) {
        free(text_path);
        return -1;
    }
    const char **texts = xmalloc((m.n ? m.n : 1) * sizeof *texts);
    for (size_t i = 0; i < m.n; i++) texts[i] = m.items[i].text;
    token_list tl;
    char_token_list_build(texts, m.n, &tl);
    free(texts);

    char *out_path = path_join(tok->save_path, "tokens.txt");
    int rc = mkdir_p(tok->save_path, err);
    if (rc == 0) rc = token_list_write(out_path, &tl, err);
    if (rc == 0)
        log_info("train_tokenizer: wrote %s (%zu tokens from %zu utterances in %s)", out_path, tl.n, m.n, text_path);
    free(out_path);
    free(text_path);
    token_list_free(&tl);
    manifest_free(&m);
    return rc;
}
