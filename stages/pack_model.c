/* Stage 8 pack_model without a publication config (with one: stages/publish.c, ESPnet3's Hugging Face
 * folder): a self-contained model directory ${exp_dir}/model_pack/ that decodes on its
 * own (espnet3 --inference_config <pack>/conf/inference.yaml --stages infer):
 *
 *   model.safetensors          the weights the inference config names (asr_model_file)
 *   conf/config.yaml           the training config, its token list and stats paths pointing inside
 *   conf/inference.yaml        the inference config, model paths pointing inside, data_dir absolute
 *   tokens/tokens.txt          the token list
 *   stats/feats_stats.npz      the global_mvn statistics (when the model normalizes with them)
 *   metrics/                   metrics.csv of training, metrics.json / result.txt of scoring (if any)
 *   espnet/                    the same model for ESPnet2 (stages/pack_espnet.h): config.yaml,
 *                              a .pth state dict, stats, bpe model, meta.yaml
 *   lm/model.safetensors       with shallow fusion (model.lm_weight > 0): the LM's weights (lm_file),
 *   conf/lm_config.yaml        its training config, the token list pointing inside
 *   README.md                  what this is and how to decode with it
 *
 * Paths inside are ${config_path:...} interpolations, so the pack can be moved or copied anywhere.
 * Everything is written to model_pack/.staging first and moved into place only when complete;
 * the stage's own pack_model.log and inference.yaml (the config it was run with) sit beside. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/dataset_src.h"
#include "core/base/fsio.h"
#include "core/nn/body_conf.h"
#include "core/nn/model_files.h"
#include "core/formats/safetensors.h"
#include "core/formats/torch_zip.h"
#include "stages/pack_espnet.h"
#include "stages/stages.h"

static const char *const pack_entries[] = {"model.safetensors", "conf", "tokens", "stats", "metrics", "espnet",
                                           "lm", "README.md"};

static int copy_file(const char *src, const char *dst, esp_err *err)
{
    size_t len;
    char *data = read_file(src, READ_MODEL, &len, err);
    if (!data) return -1;
    int rc = atomic_write_file(dst, data, len, err);
    free(data);
    return rc;
}

/* Sets a dotted key of a config tree to an (unresolved) scalar, making maps on the way. */
static void set_key(ynode *root, const char *dotted, const char *value)
{
    char *path = xstrdup(dotted);
    ynode *map = root;
    char *key = path;
    for (char *dot; (dot = strchr(key, '.')); key = dot + 1) {
        *dot = '\0';
        ynode *next = yt_map_get(map, key);
        if (!next || next->kind != YN_MAP) {
            next = yt_map(map->mark);
            yt_map_set(map, key, map->mark, next);
        }
        map = next;
    }
    yt_map_set(map, key, map->mark, yt_scalar(value, 0, map->mark));
    free(path);
}

/* Writes tree (freed) to dir/name under a header. */
static int write_tree(ynode *tree, const char *dir, const char *name, const char *header, esp_err *err)
{
    size_t len;
    char *text = yt_emit_config(tree, &len);
    char *all = xasprintf("%s%s", header, text), *path = xasprintf("%s/%s", dir, name);
    int rc = atomic_write_file(path, all, strlen(all), err);
    free(path);
    free(all);
    free(text);
    yt_free(tree);
    return rc;
}

/* A copy of a training config's tree whose exp_dir is the pack's exp_dir (a config_path
 * interpolation) and whose token list is the pack's. */
static ynode *packed_training(const esp_config *cfg, const char *exp_dir)
{
    ynode *t = yt_copy(cfg->tree);
    set_key(t, "exp_dir", exp_dir);
    set_key(t, "tokenizer.save_path", "${config_path:../tokens}");
    return t;
}

static const char *last_component(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A config that names the SentencePiece model (ESPnet's bpemodel key) names the pack's copy. */
static void set_bpemodel(ynode *t, const char *key, const model_files *mf)
{
    if (!mf->bpemodel || !yt_get_path(t, key)) return;
    char *v = xasprintf("${config_path:../tokens/%s}", last_component(mf->bpemodel));
    set_key(t, key, v);
    free(v);
}

/* A weights file into the pack as safetensors (a PyTorch checkpoint's tensors converted). */
static int pack_weights(const char *src, const char *dst, size_t *n_params, esp_err *err)
{
    st_file sf;
    if (model_weights_open(src, &sf, err) != 0) return -1;
    int rc = pt_is_zip_file(src) ? st_write(dst, sf.tensors, sf.n, NULL, 0, err) : copy_file(src, dst, err);
    for (size_t i = 0; n_params && i < sf.n; i++) *n_params += (size_t)st_numel(&sf.tensors[i]);
    st_close(&sf);
    return rc;
}

/* Shallow fusion's LM (lm: NULL without one): lm/model.safetensors and conf/lm_config.yaml, whose
 * tokenizer is the pack's token list (the LM must share the ASR model's, token for token). */
static int pack_lm(const char *staging, const model_files *lm, const model_files *mf, esp_err *err)
{
    if (!lm) return 0;
    size_t la, lb;
    char *a = read_file(mf->tokens, READ_LIST, &la, err), *b = a ? read_file(lm->tokens, READ_LIST, &lb, err) : NULL;
    int rc = a && b ? 0 : -1;
    if (rc == 0 && (la != lb || memcmp(a, b, la)))
        rc = esp_fail(err, "%s: the LM's token list is not the ASR model's %s (the pack holds one token list)",
                      lm->tokens, mf->tokens);
    free(a), free(b);
    char *dir = xasprintf("%s/lm", staging), *w = xasprintf("%s/model.safetensors", dir);
    if (rc == 0) rc = mkdir_p(dir, err);
    if (rc == 0) rc = pack_weights(lm->weights, w, NULL, err);
    if (rc == 0) {
        char *conf = xasprintf("%s/conf", staging);
        rc = write_tree(packed_training(lm->train_cfg, "${config_path:../lm}"), conf, "lm_config.yaml",
                        "# Training config of the packed model's language model (pack_model): the token list points\n"
                        "# into the pack; data and training paths are those of the original run.\n",
                        err);
        free(conf);
    }
    free(dir), free(w);
    return rc;
}

static int write_configs(const char *staging, const esp_config *inference, const model_files *mf,
                         const model_files *lm, esp_err *err)
{
    char *conf = xasprintf("%s/conf", staging);
    int rc = mkdir_p(conf, err);
    if (rc == 0) {
        ynode *t = packed_training(mf->train_cfg, "${config_path:..}");
        if (mf->stats) set_key(t, "model.normalize_conf.stats_file", "${config_path:../stats/feats_stats.npz}");
        if (yt_get_path(t, "model.token_list")) set_key(t, "model.token_list", "${config_path:../tokens/tokens.txt}");
        set_bpemodel(t, "bpemodel", mf);
        rc = write_tree(t, conf, "config.yaml",
                        "# Training config of the packed model (pack_model): token list and statistics point into\n"
                        "# the pack; data and training paths are those of the original run.\n",
                        err);
    }
    if (rc == 0) {
        const inference_cfg *ic = inference->typed;
        ynode *t = yt_copy(inference->tree);
        set_key(t, "exp_dir", "${config_path:..}");
        set_key(t, "inference_dir", "${config_path:../inference}");
        set_key(t, "model.asr_train_config", "${config_path:config.yaml}");
        set_key(t, "model.asr_model_file", "${config_path:../model.safetensors}");
        set_bpemodel(t, "model.bpemodel", mf);
        if (lm) {
            set_key(t, "model.lm_train_config", "${config_path:lm_config.yaml}");
            set_key(t, "model.lm_file", "${config_path:../lm/model.safetensors}");
        }
        /* The test data stay where they are: absolute paths work from wherever the pack goes. */
        if (ic->data_dir) {
            char *abs = path_absolute(ic->data_dir);
            set_key(t, "data_dir", abs);
            free(abs);
        }
        yt_map_remove(t, "recipe_dir");
        set_key(t, "recipe_dir", "${config_path:..}");
        rc = write_tree(t, conf, "inference.yaml",
                        "# Inference config of the packed model (pack_model). Decode with\n"
                        "#   espnet3 --inference_config <this file> --stages infer\n"
                        "# Outputs go to inference_dir (inside the pack unless overridden: inference_dir=...).\n",
                        err);
    }
    free(conf);
    return rc;
}

/* Training curves and scoring results, when they exist. */
static int copy_metrics(const char *staging, const inference_cfg *ic, size_t *n_copied, esp_err *err)
{
    char *dir = xasprintf("%s/metrics", staging);
    *n_copied = 0;
    int rc = 0;
    char *srcs[64], *dsts[64];
    size_t n = 0;
    srcs[n] = xasprintf("%s/metrics.csv", ic->exp_dir), dsts[n++] = xstrdup("train_metrics.csv");
    static const char *const scored[] = {"metrics.json", "result.txt", "results.md"};
    for (size_t k = 0; k < 3; k++) {
        srcs[n] = xasprintf("%s/%s", ic->inference_dir, scored[k]), dsts[n++] = xstrdup(scored[k]);
        const char *tests[16];
        unsigned n_tests = dataset_test_names(ic->dataset, ic->test_sets, ic->n_test_sets, tests, 16);
        for (unsigned i = 0; i < n_tests && n + 1 < 64; i++)
            srcs[n] = xasprintf("%s/%s/%s", ic->inference_dir, tests[i], scored[k]),
            dsts[n++] = xasprintf("%s.%s", tests[i], scored[k]);
    }
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && ic->exp_dir && path_exists(srcs[i]) && !is_dir(srcs[i])) {
            char *dst = xasprintf("%s/%s", dir, dsts[i]);
            rc = mkdir_p(dir, err);
            if (rc == 0) rc = copy_file(srcs[i], dst, err);
            if (rc == 0) (*n_copied)++;
            free(dst);
        }
        free(srcs[i]);
        free(dsts[i]);
    }
    free(dir);
    return rc;
}

/* The asr_transducer Encoder's blocks in words. */
static const char *body_kind(const model_dims *d)
{
    if (d->n_groups > 1) return "mixed-block (conformer, (e)branchformer, conv1d)";
    return d->encoder == ENC_CONFORMER ? "Conformer" : d->use_ffn ? "E-Branchformer" : "Branchformer";
}

static int write_readme(const char *staging, const model_files *mf, const inference_cfg *ic, size_t n_params,
                        size_t n_metrics, esp_err *err)
{
    const training_cfg *t = model_files_training(mf);
    const encoder_conf_cfg *ec = t->model ? t->model->encoder_conf : NULL;
    model_dims bd = {0}; /* the asr_transducer task's sizes are its body_conf's */
    esp_err why;
    int body = body_in_cfg(t->model) && body_dims_from_cfg(&bd, t->model, &why) == 0;
    long long blocks = body ? bd.blocks : ec ? (long long)ec->num_blocks : 6LL;
    long long width = body ? bd.d : ec ? (long long)ec->output_size : 256LL;
    long long heads = body ? bd.heads : ec ? (long long)ec->attention_heads : 4LL;
    long long units = body ? bd.ff : ec ? (long long)ec->linear_units : 2048LL;
    char *text = xasprintf(
        "# Packed espnet3 model\n\n"
        "A %s%s ASR model (ESPnet2 parameter names, safetensors) with everything decoding needs.\n\n"
        "- weights: `model.safetensors` (%zu parameters; from `%s`)\n"
        "- encoder: num_blocks %lld, output_size %lld, attention_heads %lld, linear_units %lld%s\n"
        "- configs: `conf/config.yaml` (training), `conf/inference.yaml` (decoding: beam_size %lld)\n"
        "- token list: `tokens/tokens.txt`%s\n"
        "- metrics: %s\n"
        "- for ESPnet2: `espnet/` (an ESPnet2 packed model: `meta.yaml`, `exp/asr_train/config.yaml`,\n"
        "  `exp/asr_train/valid.loss.ave.pth`, statistics, bpe model; paths relative to `espnet/`)\n\n"
        "Decode the test sets the inference config lists (`test_sets`, manifests under `data_dir`):\n\n"
        "```sh\n"
        "espnet3 --inference_config model_pack/conf/inference.yaml --stages infer\n"
        "```\n\n"
        "Paths inside the pack are relative to its configs (`${config_path:...}`), so the directory can be\n"
        "moved or copied; `data_dir` is the absolute path of the original test data (override it with\n"
        "`data_dir=...`), and outputs go to `model_pack/inference/<test>/hyp.scp` unless `inference_dir=...`\n"
        "is given.\n\n"
        "With ESPnet2 (from inside `espnet/`; `zip -r model.zip .` there gives ESPnet's packed-model zip):\n\n"
        "```python\n"
        "from espnet2.bin.%s import Speech2Text\n"
        "s2t = Speech2Text(\"exp/asr_train/config.yaml\", \"exp/asr_train/valid.loss.ave.pth\")\n"
        "```\n",
        body                                             ? body_kind(&bd)
        : !t->model || !t->model->encoder                ? "Transformer"
        : !strcmp(t->model->encoder, "conformer")        ? "Conformer"
        : !strcmp(t->model->encoder, "e_branchformer")   ? "E-Branchformer"
        : !strcmp(t->model->encoder, "contextual_block_transformer") ? "contextual block Transformer"
        : !strcmp(t->model->encoder, "contextual_block_conformer") ? "contextual block Conformer"
                                                         : "Transformer",
        body ? "-transducer (ESPnet2's asr_transducer task)" : "-CTC", n_params, mf->weights, blocks, width, heads,
        units, bd.n_groups > 1 ? " (the largest of its blocks')" : "", ic->model ? (long long)ic->model->beam_size : 0LL,
        mf->stats ? "\n- feature statistics (global_mvn): `stats/feats_stats.npz`" : "",
        n_metrics ? "`metrics/` (training curves; scoring results when stage 7 ran)" : "none found",
        body ? "asr_transducer_inference" : "asr_inference");
    char *p = xasprintf("%s/README.md", staging);
    int rc = atomic_write_file(p, text, strlen(text), err);
    free(p);
    free(text);
    return rc;
}

/* Moves each finished entry of staging over the pack's old one. */
static int publish(const char *staging, const char *pack, esp_err *err)
{
    for (size_t i = 0; i < sizeof pack_entries / sizeof *pack_entries; i++) {
        char *from = xasprintf("%s/%s", staging, pack_entries[i]), *to = xasprintf("%s/%s", pack, pack_entries[i]);
        remove_tree(to);
        int rc = 0;
        if (path_exists(from) && rename(from, to) != 0)
            rc = esp_fail(err, "%s: cannot move into place as %s", from, to);
        free(from);
        free(to);
        if (rc != 0) return -1;
    }
    remove_tree(staging);
    return 0;
}

int stage_pack_model(const stage_ctx *ctx, esp_err *err)
{
    if (ctx->configs->publication) return stage_pack_model_publication(ctx, err); /* ESPnet3's folder */
    const esp_config *inf = ctx->configs->inference;
    const inference_cfg *ic = inf->typed;
    if (!ic->exp_dir) return esp_fail(err, "%s: exp_dir: missing (the pack goes to ${exp_dir}/model_pack)", inf->path);
    model_files mf, lmf = {0};
    if (model_files_locate(&mf, ic, inf->path, err) != 0) return -1;
    int fusion = ic->model && ic->model->lm_weight > 0;
    if (fusion && lm_files_locate(&lmf, ic, inf->path, err) != 0) {
        model_files_free(&mf);
        return -1;
    }
    char *pack = xasprintf("%s/model_pack", ic->exp_dir);
    char *staging = xasprintf("%s/.staging", pack);
    char *tok_dir = xasprintf("%s/tokens", staging), *stats_dir = xasprintf("%s/stats", staging);
    char *w = xasprintf("%s/model.safetensors", staging);
    char *tk = xasprintf("%s/tokens.txt", tok_dir), *st = xasprintf("%s/feats_stats.npz", stats_dir);
    size_t n_metrics = 0, n_params = 0;
    remove_tree(staging);
    int rc = mkdir_p(tok_dir, err);
    if (rc == 0) {
        st_file sf;
        int opened = (rc = model_weights_open(mf.weights, &sf, err)) == 0;
        if (rc == 0) { /* a PyTorch checkpoint's tensors go into the pack as safetensors */
            if (pt_is_zip_file(mf.weights)) rc = st_write(w, sf.tensors, sf.n, NULL, 0, err);
            else rc = copy_file(mf.weights, w, err);
        }
        if (rc == 0) {
            for (size_t i = 0; i < sf.n; i++) n_params += (size_t)st_numel(&sf.tensors[i]);
            char *esp = xasprintf("%s/espnet", staging);
            rc = pack_espnet(esp, &mf, &sf, err);
            free(esp);
        }
        if (opened) st_close(&sf);
    }
    if (rc == 0) rc = copy_file(mf.tokens, tk, err);
    /* A SentencePiece model goes beside tokens.txt under the name stage 2 gave it, so the packed
     * training config's tokenizer block finds it there. */
    char *bpe = mf.bpemodel ? xasprintf("%s/%s", tok_dir, last_component(mf.bpemodel)) : NULL;
    if (rc == 0 && bpe) rc = copy_file(mf.bpemodel, bpe, err);
    free(bpe);
    if (rc == 0 && mf.stats) rc = mkdir_p(stats_dir, err);
    if (rc == 0 && mf.stats) rc = copy_file(mf.stats, st, err);
    if (rc == 0) rc = write_configs(staging, inf, &mf, fusion ? &lmf : NULL, err);
    if (rc == 0) rc = pack_lm(staging, fusion ? &lmf : NULL, &mf, err); /* into conf/, made above */
    if (rc == 0) rc = copy_metrics(staging, ic, &n_metrics, err);
    if (rc == 0) rc = write_readme(staging, &mf, ic, n_params, n_metrics, err);
    if (rc == 0) rc = publish(staging, pack, err);
    if (rc == 0) log_info("pack_model: %s (model %s, %zu parameters)", pack, mf.weights, n_params);
    else remove_tree(staging);
    free(pack), free(staging), free(tok_dir), free(stats_dir), free(w), free(tk), free(st);
    model_files_free(&mf), model_files_free(&lmf);
    return rc;
}
