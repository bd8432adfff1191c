/* libFuzzer target for the Kaldi data dir reader: the input is wav.scp, FUZZ_SEP, text, and
 * optionally FUZZ_SEP and utt2spk (absent: no utt2spk file), FUZZ_SEP and segments (absent: none)
 * -> manifest_read_kaldi_dir. An accepted dir has unique non-empty ids, segments with
 * 0 <= start < end, and (without segments) comes back the same through manifest_write_kaldi_dir. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/formats/manifest.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("kaldi_dir");
    return 0;
}

static int same(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"data/wav.scp", "data/text", "data/utt2spk", "data/segments"};
    const uint8_t *p = data, *end = data + size;
    fuzz_clear();
    esp_err err;
    if (mkdir_p(fuzz_path("data"), &err) != 0) abort();
    for (int i = 0; i < 4; i++) {
        size_t len;
        const uint8_t *part = fuzz_next_part(&p, end, &len);
        if (part) fuzz_write(names[i], part, len);
        else if (i < 2) fuzz_write(names[i], "", 0);
    }
    const char *dir = fuzz_path("data");
    manifest m;
    if (manifest_read_kaldi_dir(dir, &m, &err) != 0) {
        if (!strstr(err.msg, dir)) abort(); /* every error names the file */
        return 0;
    }
    int spans = 0;
    for (size_t i = 0; i < m.n; i++) {
        if (!m.items[i].utt[0]) abort();
        if (m.items[i].end != 0 && !(m.items[i].start >= 0 && m.items[i].start < m.items[i].end)) abort();
        spans |= m.items[i].end != 0;
    }
    int have_spk = m.n && m.items[0].spk && !spans;
    if (have_spk && manifest_write_kaldi_dir(fuzz_path("again"), &m, &err) == 0) {
        manifest b;
        if (manifest_read_kaldi_dir(fuzz_path("again"), &b, &err) != 0 || b.n != m.n) abort();
        manifest_sort(&m);
        for (size_t i = 0; i < m.n; i++)
            if (!same(m.items[i].utt, b.items[i].utt) || !same(m.items[i].wav, b.items[i].wav) ||
                !same(m.items[i].text, b.items[i].text) || !same(m.items[i].spk, b.items[i].spk))
                abort();
        manifest_free(&b);
    }
    manifest_free(&m);
    return 0;
}
