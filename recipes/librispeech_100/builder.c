/* librispeech_100's dataset builder: ESPnet3's egs3/librispeech_100/asr reads a local LibriSpeech
 * copy as it is; here create_dataset checks that dataset_dir (or its LibriSpeech/ folder) holds
 * the five splits the recipe uses, naming every one that is missing, and writes one manifest per
 * split, ${data_dir}/manifest/<split>.tsv (train-clean-100, dev-clean, dev-other, test-clean,
 * test-other), that the dataset: block's `split:` entries read. */
#include "recipes/registry.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/formats/corpus.h"
#include "core/formats/manifest.h"

static const char *const splits[] = {"train-clean-100", "dev-clean", "dev-other", "test-clean", "test-other"};
#define N_SPLITS (sizeof splits / sizeof splits[0])

int librispeech_100_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err)
{
    if (!cfg->dataset_dir)
        return esp_fail(err, "create_dataset.dataset_dir: missing (the folder that holds your LibriSpeech copy)");
    char *root = corpus_librispeech_root(cfg->dataset_dir);
    if (!root)
        return esp_fail(err, "%s: no LibriSpeech copy here (unpack train-clean-100, dev-clean, dev-other, test-clean "
                        "and test-other from openslr.org/12 so that %s/LibriSpeech/<split>/ exists, or set dataset_dir)",
                        cfg->dataset_dir, cfg->dataset_dir);
    char missing[512] = "";
    size_t used = 0, n_missing = 0;
    for (size_t i = 0; i < N_SPLITS; i++) {
        char *p = path_join(root, splits[i]);
        if (!is_dir(p) && used < sizeof missing)
            used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s", n_missing++ ? ", " : "", splits[i]);
        free(p);
    }
    int rc = 0;
    if (n_missing)
        rc = esp_fail(err, "%s: LibriSpeech is incomplete: missing %s (the recipe needs train-clean-100, dev-clean, "
                      "dev-other, test-clean and test-other; unpack them from openslr.org/12)", root, missing);
    /* Read every split before writing any, so a bad tree leaves no manifests half made. */
    manifest m[N_SPLITS] = {{0}};
    for (size_t i = 0; i < N_SPLITS && rc == 0; i++) {
        rc = corpus_read_librispeech(root, splits[i], &m[i], err);
        for (size_t k = 0; rc == 0 && k < m[i].n; k++) {
            char *abs = path_absolute(m[i].items[k].wav);
            free(m[i].items[k].wav);
            m[i].items[k].wav = abs;
        }
    }
    char *dir = path_join(data_dir, "manifest");
    if (rc == 0) rc = mkdir_p(dir, err);
    for (size_t i = 0; i < N_SPLITS && rc == 0; i++) {
        char *name = xasprintf("%s.tsv", splits[i]);
        char *path = path_join(dir, name);
        rc = manifest_write_tsv(path, &m[i], err);
        if (rc == 0) log_info("create_dataset: %s: %zu utterances -> %s", splits[i], m[i].n, path);
        free(name);
        free(path);
    }
    for (size_t i = 0; i < N_SPLITS; i++) manifest_free(&m[i]);
    free(dir);
    free(root);
    return rc;
}
