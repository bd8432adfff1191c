/* Which tokenizer a config names: ESPnet's token_type/bpemodel keys over the tokenizer block.
 * See tokenizer.h. */
#include "core/data/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

const char *token_type_name(token_type t)
{
    return t == TOKEN_TYPE_WORD ? "word" : t == TOKEN_TYPE_BPE ? "bpe" : "char";
}

/* ESPnet's token_type of a name (char, word, bpe) or of a tokenizer.model_type (unigram: bpe). */
static int type_of(const char *name, token_type *t)
{
    if (!name || !strcmp(name, "char")) *t = TOKEN_TYPE_CHAR;
    else if (!strcmp(name, "word")) *t = TOKEN_TYPE_WORD;
    else if (!strcmp(name, "bpe") || !strcmp(name, "unigram")) *t = TOKEN_TYPE_BPE;
    else return -1;
    return 0;
}

int tokenizer_spec_resolve(tokenizer_spec *s, const tokenizer_cfg *tc, const char *token_type_key,
                           const char *bpemodel, const char *cfg_file, esp_err *err)
{
    memset(s, 0, sizeof *s);
    if (!tc || !tc->save_path)
        return esp_fail(err, "%s: tokenizer.save_path: missing (the folder of tokens.txt)", cfg_file);
    const char *model_type = tc->model_type ? tc->model_type : "char";
    if (type_of(model_type, &s->type) != 0)
        return esp_fail(err, "%s: tokenizer.model_type: %s is not supported (use char, word, bpe or unigram)", cfg_file,
                        model_type);
    if (token_type_key && type_of(token_type_key, &s->type) != 0)
        return esp_fail(err, "%s: token_type: %s is not supported (use char, word or bpe)", cfg_file, token_type_key);
    if (!token_type_key && bpemodel) s->type = TOKEN_TYPE_BPE;
    s->tokens_path = path_join(tc->save_path, "tokens.txt");
    if (s->type != TOKEN_TYPE_BPE) return 0;
    if (bpemodel) s->model_path = xstrdup(bpemodel);
    else if (!strcmp(model_type, "bpe") || !strcmp(model_type, "unigram"))
        s->model_path = xasprintf("%s/%s.model", tc->save_path, model_type);
    else {
        tokenizer_spec_free(s);
        return esp_fail(err, "%s: token_type bpe needs a SentencePiece model, and tokenizer.model_type is %s (set "
                             "bpemodel)", cfg_file, model_type);
    }
    return 0;
}

void tokenizer_spec_free(tokenizer_spec *s)
{
    free(s->tokens_path);
    free(s->model_path);
    memset(s, 0, sizeof *s);
}
