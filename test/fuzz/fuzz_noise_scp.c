/* libFuzzer target for the rir_scp / noise_scp list reader (dataset.preprocessor): bytes ->
 * nr_scp_read. An accepted list has at least one path, each non-empty without surrounding
 * whitespace; every error names the file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/noise_rir.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("noise_scp");
    return 0;
}

static int edge_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("noise.scp", data, size);
    char **paths;
    size_t n;
    esp_err err;
    if (nr_scp_read(path, &paths, &n, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        return 0;
    }
    if (n == 0) abort();
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(paths[i]);
        if (l == 0 || edge_space(paths[i][0]) || edge_space(paths[i][l - 1]) || strchr(paths[i], '\n')) abort();
    }
    nr_scp_free(paths, n);
    return 0;
}
