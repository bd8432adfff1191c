/* libFuzzer target for an ESPnet2 config.yaml (the asr_train_config of a model trained by ESPnet,
 * or the one inside a packed model zip): the input is config.yaml, optionally
 * followed by FUZZ_SEP and a token list file beside it (tokens.txt). It is rewritten into
 * espnet3's form (core/nn/espnet2_config.h) and checked as a training config (config_load_tree).
 * A refusal must say why; nothing is left in the private folder of a refused config. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/base/tmpdir.h"
#include "core/config/config.h"
#include "core/nn/espnet2_config.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("espnet2_config");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_clear();
    const uint8_t *p = data, *end = data + size;
    size_t len;
    const uint8_t *cfg = fuzz_next_part(&p, end, &len);
    const char *path = fuzz_write("config.yaml", cfg, len);
    const uint8_t *tokens = fuzz_next_part(&p, end, &len);
    if (tokens) fuzz_write("tokens.txt", tokens, len);
    char *dir = NULL;
    ynode *tree = NULL;
    esp_err err = {{0}};
    espnet2_tokens_origin origin;
    int rc = espnet2_config_convert(path, (size & 1) ? "model.zip(exp/asr_train/config.yaml)" : NULL, &dir, &tree,
                                    &origin, &err);
    if (rc < 0) {
        if (!err.msg[0] || dir || tree || origin.file || origin.marks) abort();
        return 0;
    }
    if (rc == 0) {
        if (dir || tree || origin.file || origin.marks) abort();
        return 0;
    }
    /* the copied list's origin: a file, or one place per inline item */
    if (!origin.file == !origin.marks) abort();
    espnet2_tokens_origin_free(&origin);
    esp_config *out = NULL;
    err.msg[0] = '\0';
    if (config_load_tree(CONFIG_TRAINING, tree, path, 1, &out, &err) == 0)
        config_free(out);
    else if (!err.msg[0])
        abort();
    tmpdir_remove(dir);
    return 0;
}
