/* libFuzzer target for the dataset manifest reader (<split>.tsv: utt \t wav \t text): bytes ->
 * manifest_read_tsv. An accepted manifest has unique non-empty ids and wav paths, and comes back
 * the same through manifest_write_tsv + manifest_read_tsv. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/manifest.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("manifest");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("train.tsv", data, size);
    manifest m;
    esp_err err;
    if (manifest_read_tsv(path, &m, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        return 0;
    }
    for (size_t i = 0; i < m.n; i++)
        if (!m.items[i].utt[0] || !m.items[i].wav[0] || m.items[i].spk) abort();
    const char *again = fuzz_path("again.tsv");
    if (manifest_write_tsv(again, &m, &err) != 0) abort(); /* what we read, we can write */
    manifest b;
    if (manifest_read_tsv(again, &b, &err) != 0 || b.n != m.n) abort();
    for (size_t i = 0; i < m.n; i++)
        if (strcmp(m.items[i].utt, b.items[i].utt) || strcmp(m.items[i].wav, b.items[i].wav) ||
            strcmp(m.items[i].text, b.items[i].text))
            abort();
    manifest_free(&b);
    manifest_free(&m);
    return 0;
}
