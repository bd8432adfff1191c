/* libFuzzer target for the token list reader (tokens.txt): bytes -> token_list_read. An accepted
 * list holds distinct non-empty tokens, finds each at its line, and tokenizes a text with them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/tokenizer.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("tokens");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("tokens.txt", data, size);
    token_list tl;
    esp_err err;
    if (token_list_read(path, &tl, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        return 0;
    }
    if (tl.n == 0) abort();
    for (size_t i = 0; i < tl.n; i++)
        if (!tl.tokens[i][0] || token_list_find(&tl, tl.tokens[i]) != (long)i) abort();
    long *ids;
    size_t n;
    if (char_tokenize(&tl, "hello w\xc3\xb6rld \xff", &ids, &n, &err) == 0) {
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || (size_t)ids[i] >= tl.n) abort();
        free(ids);
    }
    token_list_free(&tl);
    return 0;
}
