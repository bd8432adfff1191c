/* Stage 1 create_dataset: runs the builder named by create_dataset.func, which writes the audio
 * and the ${data_dir} manifests (and skips itself when already built). */
#include "stages/stages.h"
#include "recipes/registry.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

int stage_create_dataset(const stage_ctx *ctx, esp_err *err)
{
    const training_cfg *cfg = training_of(ctx->configs);
    if (!cfg) return esp_fail(err, "create_dataset: needs a training config (pass --training_config)");
    const char *file = ctx->configs->training->path;
    const create_dataset_cfg *cd = cfg->create_dataset;
    if (!cd)
        return esp_fail(err, "%s: create_dataset: missing (add a create_dataset: section with func: "
                        "espnet3.recipes.espeak_fortunes.create_dataset)", file);
    if (!cfg->data_dir) return esp_fail(err, "%s: data_dir: missing (set where the manifests go)", file);
    /* ESPnet3 without func: the recipe's own dataset builder (${recipe_dir}/dataset); here the builder
     * registered under the recipe folder's name. */
    char *by_dir = NULL;
    if (!cd->func && cd->recipe_dir) {
        char *abs = path_absolute(cd->recipe_dir);
        const char *base = strrchr(abs, '/');
        by_dir = xstrdup(base && base[1] ? base + 1 : abs);
        free(abs);
    }
    const char *func = cd->func ? cd->func : by_dir;
    if (!func || !dataset_builder_find(func)) {
        char *names = dataset_builder_names();
        int rc = cd->func ? esp_fail(err, "%s: create_dataset.func: unknown builder %s (supported: %s)", file,
                                     cd->func, names)
                 : by_dir ? esp_fail(err, "%s: create_dataset.func: missing, and no builder is named after the recipe "
                                     "folder %s (supported: %s)", file, by_dir, names)
                          : esp_fail(err, "%s: create_dataset.func: missing (supported: %s)", file, names);
        free(names);
        free(by_dir);
        return rc;
    }
    /* The builder writes audio to create_dataset.dataset_dir, else the top-level dataset_dir. */
    create_dataset_cfg args = *cd;
    if (!args.dataset_dir) args.dataset_dir = cfg->dataset_dir;
    int rc = dataset_builder_find(func)->build(&args, cfg->data_dir, err);
    free(by_dir);
    return rc;
}
