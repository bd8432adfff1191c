/* libFuzzer target for espnet3 align's transcript (core/formats/align_text.h): bytes ->
 * align_text_read, Kaldi style and plain. An error names the file; an accepted transcript has
 * utterances, each with an id and a one-line text (plain: not blank, named <name>_NNNN in order). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/align_text.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("align_text");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("text", data, size);
    for (int kaldi = 0; kaldi < 2; kaldi++) {
        align_text t;
        esp_err err;
        if (align_text_read(path, kaldi, "rec", &t, &err) != 0) {
            if (!strstr(err.msg, path)) abort(); /* every error names the file */
            continue;
        }
        if (t.n == 0) abort();
        for (size_t i = 0; i < t.n; i++) {
            if (!t.ids[i][0] || strchr(t.texts[i], '\n') || t.lines[i] < 1) abort();
            if (!kaldi) {
                char want[32];
                snprintf(want, sizeof want, "rec_%04zu", i);
                if (strcmp(t.ids[i], want) || strspn(t.texts[i], " \t\r") == strlen(t.texts[i])) abort();
            }
        }
        align_text_free(&t);
    }
    return 0;
}
