/* Model paths as inference configs; see model_source.h. */
#include "lib/model_source.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/base/tmpdir.h"
#include "core/formats/torch_zip.h"
#include "core/formats/zip_unpack.h"
#include "core/nn/model_files.h"

/* The best weights of an experiment folder, as ESPnet users name them (model_file_resolve). */
static int exp_weights(const char *dir, char **out, esp_err *err)
{
    static const char *const names[] = {"valid.loss.ave.pth", "valid.acc.ave.pth", "last.ckpt", "latest.pth"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char *p = path_join(dir, names[i]);
        esp_err ignored;
        int rc = model_file_resolve(p, NULL, out, &ignored);
        free(p);
        if (rc == 0) return 0;
    }
    return esp_fail(err, "%s: no model weights (looked for valid.loss.ave, valid.acc.ave, last and latest as "
                    ".safetensors, checkpoint folder or .pth; run train, stage 5, to the end)", dir);
}

/* A pack folder's root: dir itself, or the one folder a zip of it holds; NULL when neither is. */
static char *pack_root(const char *dir)
{
    char *conf = path_join(dir, "conf/inference.yaml");
    int here = path_exists(conf);
    free(conf);
    if (here) return xstrdup(dir);
    DIR *d = opendir(dir);
    char *found = NULL;
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        n++;
        char *sub = path_join(dir, e->d_name), *c = path_join(sub, "conf/inference.yaml");
        if (path_exists(c) && !found) found = xstrdup(sub);
        free(sub), free(c);
    }
    if (d) closedir(d);
    if (n != 1) free(found), found = NULL;
    return found;
}

static int open_pack(model_source *ms, const char *root, const char *shown, esp_err *err)
{
    char *conf = path_join(root, "conf/inference.yaml");
    /* A pack may come from anywhere: its config's resolvers do not read this machine. */
    config_load_opts lo = {.foreign = 1};
    int rc = config_load(CONFIG_INFERENCE, conf, &lo, &ms->cfg, err);
    free(conf);
    if (rc != 0) return -1;
    ms->icfg = ms->cfg->typed;
    ms->name = ms->cfg->path;
    if (!ms->icfg->model)
        return esp_fail(err, "%s: model: missing (a pack's conf/inference.yaml names its files there)", shown);
    return 0;
}

/* own_model's config and weights. */
static void set_own(model_source *ms, const char *name, char *config, char *weights)
{
    ms->strings[0] = config, ms->strings[1] = weights;
    ms->own_model = (infer_model_cfg){.asr_train_config = config, .asr_model_file = weights};
    ms->own = (inference_cfg){.model = &ms->own_model};
    ms->icfg = &ms->own;
    ms->name = name;
}

static int open_zip(model_source *ms, const char *path, esp_err *err)
{
    int espnet2 = zip_has_entry(path, "meta.yaml", err);
    if (espnet2 < 0) return -1;
    if (espnet2) { /* model_files_locate unpacks it */
        set_own(ms, path, xstrdup(path), xstrdup(path));
        return 0;
    }
    if (!(ms->unpacked = tmpdir_make("pack_zip", err))) return -1;
    if (zip_unpack(path, ms->unpacked, ZIP_UNPACK_MAX_BYTES, err) != 0) return -1;
    char *root = pack_root(ms->unpacked);
    if (!root)
        return esp_fail(err, "%s: neither a packed model folder (conf/inference.yaml, at the top or in one folder) "
                        "nor an ESPnet2 packed model (meta.yaml at the top)", path);
    int rc = open_pack(ms, root, path, err);
    free(root);
    return rc;
}

int model_source_open(model_source *ms, const char *path, esp_err *err)
{
    memset(ms, 0, sizeof *ms);
    if (!path_exists(path)) return esp_fail(err, "%s: no such model (give a pack folder or zip, an ESPnet2 packed "
                                            "zip, or an experiment folder)", path);
    if (!is_dir(path)) {
        if (pt_is_zip_file(path)) return open_zip(ms, path, err);
        return esp_fail(err, "%s: not a model (give a pack folder or zip, an ESPnet2 packed zip, or an experiment "
                        "folder)", path);
    }
    char *conf = path_join(path, "conf/inference.yaml"), *cfg = path_join(path, "config.yaml");
    int rc;
    if (path_exists(conf)) {
        rc = open_pack(ms, path, path, err);
        free(cfg);
    } else if (path_exists(cfg)) {
        char *w;
        rc = exp_weights(path, &w, err);
        if (rc == 0) set_own(ms, path, cfg, w);
        else free(cfg);
    } else {
        rc = esp_fail(err, "%s: neither a pack folder (conf/inference.yaml) nor an experiment folder (config.yaml)",
                      path);
        free(cfg);
    }
    free(conf);
    return rc;
}

int model_source_add_lm(model_source *ms, const char *path, esp_err *err)
{
    char *lm_conf = path_join(path, "conf/lm_config.yaml"), *cfg = path_join(path, "config.yaml");
    char *config = NULL, *weights = NULL;
    int rc = 0;
    if (path_exists(lm_conf)) { /* a pack with its LM */
        config = lm_conf, lm_conf = NULL;
        weights = path_join(path, "lm/model.safetensors");
    } else if (is_dir(path) && path_exists(cfg)) {
        rc = exp_weights(path, &weights, err);
        if (rc == 0) config = cfg, cfg = NULL;
    } else {
        rc = esp_fail(err, "%s: not a language model (give the LM's experiment folder, with config.yaml, or a pack "
                      "holding one: conf/lm_config.yaml)", path);
    }
    free(lm_conf), free(cfg);
    if (rc != 0) return -1;
    /* The block is the pack config's or own_model: the LM's paths go into whichever it is. */
    infer_model_cfg *mc = (infer_model_cfg *)ms->icfg->model;
    if (!ms->strings[2]) ms->lm_orig[0] = mc->lm_train_config, ms->lm_orig[1] = mc->lm_file;
    free(ms->strings[2]), free(ms->strings[3]);
    ms->strings[2] = config, ms->strings[3] = weights;
    mc->lm_train_config = config, mc->lm_file = weights;
    return 0;
}

void model_source_free(model_source *ms)
{
    /* A pack config's model block points at strings[2..3] after add_lm: its own values go back. */
    if (ms->cfg && ms->strings[2]) {
        infer_model_cfg *mc = ((inference_cfg *)ms->cfg->typed)->model;
        mc->lm_train_config = ms->lm_orig[0], mc->lm_file = ms->lm_orig[1];
    }
    config_free(ms->cfg);
    for (int i = 0; i < 4; i++) free(ms->strings[i]);
    tmpdir_remove(ms->unpacked);
    memset(ms, 0, sizeof *ms);
}
