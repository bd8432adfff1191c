/* libFuzzer target for the corpus tree readers (core/formats/corpus.c): the input is a LibriSpeech
 * chapter's 10-110.trans.txt, FUZZ_SEP, and AN4's an4_train.transcription, read from small trees
 * whose audio files exist for ids 10-110-0000..0003 and an1/an2-fash-b. Every error names the
 * file it is about; an accepted split has sorted, unique, non-empty ids with existing audio, the
 * chapter's speaker, and text without tabs or newlines. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/formats/corpus.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("corpus");
    return 0;
}

static void check_accepted(const manifest *m, const char *spk)
{
    for (size_t i = 0; i < m->n; i++) {
        const manifest_entry *e = &m->items[i];
        if (!e->utt[0] || !path_exists(e->wav) || strpbrk(e->text, "\t\n")) abort();
        if (spk && strcmp(e->spk, spk)) abort();
        if (i && strcmp(m->items[i - 1].utt, e->utt) >= 0) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    fuzz_clear();
    esp_err err;
    if (mkdir_p(fuzz_path("ls/dev/10/110"), &err) != 0 || mkdir_p(fuzz_path("an4/etc"), &err) != 0 ||
        mkdir_p(fuzz_path("an4/wav/an4_clstk/fash"), &err) != 0)
        abort();
    for (int u = 0; u < 4; u++) {
        char rel[64];
        snprintf(rel, sizeof rel, "ls/dev/10/110/10-110-%04d.flac", u);
        fuzz_write(rel, "", 0);
    }
    fuzz_write("an4/wav/an4_clstk/fash/an1-fash-b.sph", "", 0);
    fuzz_write("an4/wav/an4_clstk/fash/an2-fash-b.sph", "", 0);
    size_t len;
    const uint8_t *part = fuzz_next_part(&p, end, &len);
    fuzz_write("ls/dev/10/110/10-110.trans.txt", part ? part : (const uint8_t *)"", part ? len : 0);
    part = fuzz_next_part(&p, end, &len);
    fuzz_write("an4/etc/an4_train.transcription", part ? part : (const uint8_t *)"", part ? len : 0);

    manifest m;
    const char *root = fuzz_path("ls");
    if (corpus_read_librispeech(root, "dev", &m, &err) != 0) {
        if (!strstr(err.msg, root) || m.n) abort();
    } else {
        check_accepted(&m, "10-110");
        manifest_free(&m);
    }
    const char *an4 = fuzz_path("an4");
    if (corpus_read_an4(an4, "train", &m, &err) != 0) {
        if (!strstr(err.msg, an4) || m.n) abort();
    } else {
        check_accepted(&m, "fash");
        manifest_free(&m);
    }
    return 0;
}
