/* mini_an4's dataset builder, as ESPnet3's egs3/mini_an4/asr/dataset/builder.py: unpack the AN4
 * archive the recipe ships (downloads.tar.gz: downloads/an4 with its LICENSE, plus noise and room
 * impulse responses) into dataset_dir, read AN4's train and test transcriptions, hold the first
 * dev_size (1) sorted train utterances out as valid, and write ${data_dir}/manifest/{train,valid,test}.tsv.
 * The SPHERE files are read as they are (libsndfile), so no sph2pipe and no converted copies. */
#include "recipes/registry.h"
#include "recipes/mini_an4/keys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/proc.h"
#include "core/formats/corpus.h"
#include "core/formats/manifest.h"

/* Unpacks archive into dataset_dir (its downloads/ level dropped) unless dataset_dir/an4 is there. */
static int unpack(const char *archive, const char *dataset_dir, esp_err *err)
{
    char *an4 = path_join(dataset_dir, "an4/etc");
    int have = is_dir(an4);
    free(an4);
    if (have) return 0;
    if (!path_exists(archive))
        return esp_fail(err, "%s: the AN4 archive is missing (the recipe ships it as downloads.tar.gz; set "
                        "create_dataset.archive_path)", archive);
    char *tmp = xasprintf("%s.unpack.%d", dataset_dir, (int)getpid());
    remove_tree(tmp);
    int rc = mkdir_p(tmp, err);
    if (rc == 0) {
        char *argv[] = {"tar", "-xzf", (char *)archive, "-C", tmp, NULL};
        proc_buf out = {0}, etext = {0};
        int status = 0;
        int r = proc_run_capture(argv, &out, &etext, 2048, &status, err);
        if (r > 0) rc = esp_fail(err, "%s: cannot run tar to unpack it (install tar)", archive);
        else if (r < 0) rc = -1;
        else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            rc = esp_fail(err, "%s: tar could not unpack it: %s", archive, etext.data ? (char *)etext.data : "");
        free(out.data);
        free(etext.data);
    }
    /* The archive holds downloads/{an4,noise,rirs}: move them to dataset_dir. */
    char *inner = path_join(tmp, "downloads");
    const char *from = is_dir(inner) ? inner : tmp;
    char *probe = xasprintf("%s/an4/etc", from);
    if (rc == 0 && !is_dir(probe)) rc = esp_fail(err, "%s: no an4/etc inside (not ESPnet's AN4 archive?)", archive);
    free(probe);
    static const char *const parts[] = {"an4", "noise", "rirs"};
    if (rc == 0) rc = mkdir_p(dataset_dir, err);
    for (size_t i = 0; i < 3 && rc == 0; i++) {
        char *src = path_join(from, parts[i]), *dst = path_join(dataset_dir, parts[i]);
        if (is_dir(src) && !path_exists(dst) && rename(src, dst) != 0)
            rc = esp_fail(err, "%s: cannot move the unpacked %s here", dst, parts[i]);
        free(src);
        free(dst);
    }
    free(inner);
    remove_tree(tmp);
    free(tmp);
    return rc;
}

static void absolute_paths(manifest *m)
{
    for (size_t i = 0; i < m->n; i++) {
        char *abs = path_absolute(m->items[i].wav);
        free(m->items[i].wav);
        m->items[i].wav = abs;
    }
}

static int write_split(const char *data_dir, const char *name, const manifest *m, esp_err *err)
{
    char *dir = path_join(data_dir, "manifest");
    char *file = xasprintf("%s.tsv", name);
    char *path = path_join(dir, file);
    int rc = mkdir_p(dir, err);
    if (rc == 0) rc = manifest_write_tsv(path, m, err);
    if (rc == 0) log_info("create_dataset: %s: %zu utterances -> %s", name, m->n, path);
    free(dir);
    free(file);
    free(path);
    return rc;
}

int mini_an4_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err)
{
    if (!cfg->dataset_dir) return esp_fail(err, "create_dataset.dataset_dir: missing (where the archive is unpacked)");
    const mini_an4_cfg *k = cfg->keys;
    ESP_CHECK(k && k->dev_size >= 1); /* declared in keys.c: default 1, range >= 1 */
    const char *recipe = cfg->recipe_dir ? cfg->recipe_dir : ".";
    char *archive = k->archive_path ? xstrdup(k->archive_path) : path_join(recipe, "downloads.tar.gz");
    long dev = (long)k->dev_size;
    int rc = unpack(archive, cfg->dataset_dir, err);
    free(archive);
    if (rc != 0) return -1;
    char *an4 = path_join(cfg->dataset_dir, "an4");
    manifest train = {0}, test = {0};
    rc = corpus_read_an4(an4, "train", &train, err);
    if (rc == 0) rc = corpus_read_an4(an4, "test", &test, err);
    if (rc == 0 && train.n < (size_t)dev + 1)
        rc = esp_fail(err, "%s: %zu train utterances, too few to hold %ld out for valid (create_dataset.dev_size)",
                      an4, train.n, dev);
    if (rc == 0) {
        absolute_paths(&train);
        absolute_paths(&test);
        /* valid: the first dev_size sorted train utterances; train: the rest (ESPnet3's builder). */
        manifest valid = train, rest = train;
        valid.n = (size_t)dev;
        rest.items = train.items + dev;
        rest.n = train.n - (size_t)dev;
        rc = write_split(data_dir, "valid", &valid, err);
        if (rc == 0) rc = write_split(data_dir, "train", &rest, err);
        if (rc == 0) rc = write_split(data_dir, "test", &test, err);
    }
    manifest_free(&train);
    manifest_free(&test);
    free(an4);
    return rc;
}
