/* libFuzzer target for unpacking ESPnet2 packed-model zips (core/formats/zip_unpack.h): bytes ->
 * zip_unpack into a folder of the scratch area, with the program's own caps (the ratio and entry
 * bounds keep what a small input may unpack small). Every error names the file; nothing is written
 * outside the destination (a file "escaped" beside it would be one). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/base/fsio.h"
#include "core/formats/zip_unpack.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("zip_unpack");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_clear();
    const char *path = fuzz_write("model.zip", data, size);
    char *dest = xstrdup(fuzz_path("out/pack"));
    esp_err err;
    if (zip_unpack(path, dest, ZIP_UNPACK_MAX_BYTES, &err) != 0 && !strstr(err.msg, path)) abort();
    struct stat st;
    if (stat(fuzz_path("out/escaped"), &st) == 0 || stat(fuzz_path("escaped"), &st) == 0) abort();
    free(dest);
    return 0;
}
