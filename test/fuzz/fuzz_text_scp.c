/* libFuzzer target for the `<utt_id> <text>` list reader (hyp.scp / ref.scp of the scoring stage):
 * bytes -> text_scp_read, then each text through the metrics' whisper_basic cleaner. An accepted
 * list finds every entry by its id; a cleaned text has no whitespace run left. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode/text_cleaner.h"
#include "core/formats/text_scp.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("text_scp");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("ref.scp", data, size);
    text_scp s;
    esp_err err;
    if (text_scp_read(path, &s, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        return 0;
    }
    int kind = TEXT_CLEANER_WHISPER_BASIC;
    for (size_t i = 0; i < s.n; i++) {
        if (!s.items[i].id[0] || text_scp_find(&s, s.items[i].id) != &s.items[i]) abort();
        char *clean = text_clean(&kind, 1, s.items[i].text);
        if (clean && (strstr(clean, "  ") || strpbrk(clean, "\t\n\r\v\f"))) abort();
        free(clean);
    }
    text_scp_free(&s);
    return 0;
}
