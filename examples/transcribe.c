/* libespnet3's example: transcribe audio files with a model, one line per file, then each word
 * with its times. Build: cc transcribe.c -lespnet3 (docs/library.md). */
#include <stdio.h>

#include "include/espnet3.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL FILE...\n", argv[0]);
        return 2;
    }
    if (espnet3_api_version() != ESPNET3_API_VERSION) {
        fprintf(stderr, "libespnet3 interface %d, built for %d\n", espnet3_api_version(), ESPNET3_API_VERSION);
        return 1;
    }
    espnet3_options *o = espnet3_options_new();
    espnet3_options_set(o, "beam", "4");
    espnet3_model *m = espnet3_open(argv[1], o);
    espnet3_options_free(o);
    if (!m) {
        fprintf(stderr, "error: %s\n", espnet3_last_error());
        return 1;
    }
    int rc = 0;
    for (int i = 2; i < argc; i++) {
        espnet3_result *r = espnet3_transcribe_file(m, argv[i]);
        if (!r) {
            fprintf(stderr, "error: %s\n", espnet3_last_error());
            rc = 1;
            continue;
        }
        printf("%s\t%s\n", argv[i], espnet3_result_text(r, 0));
        espnet3_item w;
        for (size_t k = 0; espnet3_result_word(r, 0, k, &w) == 0; k++)
            printf("  %6.2f %6.2f  %s\n", w.start, w.end, w.text);
        espnet3_result_free(r);
    }
    espnet3_close(m);
    return rc;
}
