/* src.tokenizer.gather_training_text of ESPnet3's mini_an4 and librispeech_100 recipes in C, for our
 * built-in copies of them (which have no src/ folder): mini_an4's reads the third column of the
 * `utt_id <TAB> wav <TAB> text` manifest at manifest_path; librispeech_100's the transcripts of a
 * LibriSpeech split, here the manifest our builder wrote for it. */
#include "recipes/registry.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/manifest.h"

int recipes_gather_training_text(const char *kwargs_json, const char *data_dir, char ***texts, size_t *n_texts,
                                 esp_err *err)
{
    *texts = NULL, *n_texts = 0;
    json_error_t je;
    json_t *kw = json_loads(kwargs_json ? kwargs_json : "{}", 0, &je);
    const char *given = json_string_value(json_object_get(kw, "manifest_path"));
    const char *split = json_string_value(json_object_get(kw, "split"));
    char *path = given ? xstrdup(given) : split && data_dir && !strchr(split, '/') ? xasprintf("%s/manifest/%s.tsv", data_dir, split) : NULL;
    int rc;
    manifest m = {0};
    if (!path) rc = esp_fail(err, "tokenizer.text_builder: neither manifest_path nor split (with data_dir) is set "
                             "(src.tokenizer.gather_training_text reads the transcripts of that manifest or split)");
    else rc = manifest_read_tsv(path, &m, err);
    if (rc == 0 && m.n == 0) rc = esp_fail(err, "%s: no text found in the manifest", path);
    if (rc == 0) {
        *texts = xmalloc(m.n * sizeof **texts);
        for (size_t i = 0; i < m.n; i++) (*texts)[i] = xstrdup(m.items[i].text);
        *n_texts = m.n;
    }
    manifest_free(&m);
    free(path);
    json_decref(kw);
    return rc;
}
