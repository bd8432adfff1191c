/* The ESPnet2 side of the pack (stages/pack_espnet.h). */
#include "stages/pack_espnet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/frontend.h"
#include "core/formats/npz.h"
#include "core/formats/torch_zip.h"
#include "core/nn/body_conf.h"
#include "core/nn/model_params.h"

#define ESP_CONFIG "exp/asr_train/config.yaml"
#define ESP_MODEL "exp/asr_train/valid.loss.ave.pth"
#define ESP_STATS "exp/asr_stats/train/feats_stats.npz"

static const char *base_name(const char *p) { return strrchr(p, '/') ? strrchr(p, '/') + 1 : p; }

static ynode *scalar(const char *s) { return yt_scalar(s, 0, (ymark){0}); }

static void put(ynode *map, const char *key, ynode *v) { yt_map_set(map, key, (ymark){0}, v); }

/* A mapping value that ESPnet passes as **kwargs: an empty one when the config has none. */
static void ensure_map(ynode *cfg, const char *key)
{
    ynode *v = yt_map_get(cfg, key);
    if (!v || v->kind != YN_MAP) put(cfg, key, yt_map((ymark){0}));
}

/* The asr_transducer task's config (ASRTransducerTask.build_model_from_file): its model keys (no
 * encoder choice, no CTC or pre/post-encoder blocks: the Encoder is body_conf's, the CTC head
 * model_conf's), the decoder's default (rnn) explicit. */
static void body_config(ynode *cfg, const ynode *m)
{
    static const char *const keys[] = {"frontend", "frontend_conf", "specaug", "specaug_conf", "normalize",
                                       "normalize_conf", "encoder_conf", "decoder", "decoder_conf",
                                       "joint_network_conf", "model_conf"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const ynode *v = m ? yt_map_get(m, keys[i]) : NULL;
        put(cfg, keys[i], v ? yt_copy(v) : scalar("null"));
    }
    if (yt_is_null(yt_map_get(cfg, "decoder"))) put(cfg, "decoder", scalar("rnn"));
    if (yt_is_null(yt_map_get(cfg, "frontend"))) put(cfg, "frontend", scalar("default"));
    static const char *const maps[] = {"frontend_conf", "specaug_conf", "normalize_conf", "encoder_conf",
                                       "decoder_conf", "joint_network_conf", "model_conf"};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++) ensure_map(cfg, maps[i]);
}

/* The ASR task's (ESPnetASRModel's) keys: the encoder, frontend and decoder made explicit, the
 * pre/post-encoder and CTC blocks as kwargs, ctc_weight where a branch is dropped. */
static void espnet_asr_keys(ynode *cfg, int has_decoder, int has_ctc)
{
    if (yt_is_null(yt_map_get(cfg, "encoder"))) put(cfg, "encoder", scalar("transformer"));
    if (yt_is_null(yt_map_get(cfg, "frontend"))) put(cfg, "frontend", scalar("default"));
    static const char *const maps[] = {"frontend_conf", "specaug_conf", "normalize_conf", "encoder_conf",
                                       "decoder_conf", "joint_net_conf", "ctc_conf", "model_conf", "preencoder_conf",
                                       "postencoder_conf"};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++) ensure_map(cfg, maps[i]);
    /* normalize_before (true; the recipes' base config writes it) is the one key stage 5 accepts for the
     * E-Branchformer that EBranchformerEncoder does not take: ESPnet would raise a TypeError building it. */
    const ynode *enc = yt_map_get(cfg, "encoder");
    if (enc && enc->kind == YN_SCALAR && !strcmp(enc->str, "e_branchformer"))
        yt_map_remove(yt_map_get(cfg, "encoder_conf"), "normalize_before");
    ynode *mc = yt_map_get(cfg, "model_conf");
    if (!has_decoder) { /* ESPnetASRModel drops its decoder at ctc_weight 1.0 */
        put(cfg, "decoder", scalar("null"));
        put(mc, "ctc_weight", scalar("1.0"));
    } else if (yt_is_null(yt_map_get(cfg, "decoder"))) {
        put(cfg, "decoder", scalar("transformer"));
    }
    if (!has_ctc) put(mc, "ctc_weight", scalar("0.0"));
}

/* The ESPnet2 training config: the model block's ESPnet keys, ESPnet's defaults made explicit
 * where ours differ (encoder, frontend), the token list inline, the pack's relative paths. */
static ynode *espnet_config(const model_files *mf, const token_list *tl, int has_decoder, int has_ctc)
{
    const ynode *m = yt_get_path(mf->train_cfg->tree, "model");
    ynode *cfg = yt_map((ymark){0});
    static const char *const keys[] = {"frontend", "frontend_conf", "specaug", "specaug_conf", "normalize",
                                       "normalize_conf", "encoder", "encoder_conf", "decoder", "decoder_conf",
                                       "joint_net_conf", "ctc_conf", "model_conf"};
    int body = body_in_cfg(model_files_training(mf)->model);
    if (body) body_config(cfg, m);
    for (size_t i = 0; i < sizeof keys / sizeof *keys && !body; i++) {
        const ynode *v = m ? yt_map_get(m, keys[i]) : NULL;
        put(cfg, keys[i], v ? yt_copy(v) : scalar("null"));
    }
    if (!body) espnet_asr_keys(cfg, has_decoder, has_ctc);
    if (mf->stats) put(yt_map_get(cfg, "normalize_conf"), "stats_file", scalar(ESP_STATS));
    ynode *toks = yt_seq((ymark){0});
    for (size_t i = 0; i < tl->n; i++) yt_seq_push(toks, yt_scalar(tl->tokens[i], 1, (ymark){0}));
    put(cfg, "token_list", toks);
    const char *tt = mf->token_type == TOKEN_TYPE_BPE ? "bpe" : mf->token_type == TOKEN_TYPE_WORD ? "word" : "char";
    put(cfg, "token_type", scalar(tt));
    char *bpe = mf->bpemodel ? xasprintf("data/token_list/%s", base_name(mf->bpemodel)) : NULL;
    put(cfg, "bpemodel", bpe ? yt_scalar(bpe, 1, (ymark){0}) : scalar("null"));
    free(bpe);
    static const char *const nulls[] = {"input_size", "init", "preencoder", "postencoder", "non_linguistic_symbols",
                                        "cleaner", "g2p"};
    for (size_t i = 0; i < sizeof nulls / sizeof *nulls; i++)
        if (!body || !strstr(nulls[i], "encoder")) put(cfg, nulls[i], scalar("null")); /* none in its task */
    if (!body) put(cfg, "model", scalar("espnet"));
    put(cfg, "use_preprocessor", scalar("true"));
    return cfg;
}

/* The state dict ESPnet's model holds: ours, plus the frontend's mel matrix and GlobalMVN's
 * buffers (float64, computed from the statistics as GlobalMVN does), so that
 * load_state_dict(strict=True) finds every key. */
static int write_state_dict(const char *path, const model_files *mf, const st_file *w, esp_err *err)
{
    const training_cfg *t = model_files_training(mf);
    /* espnet3's older encoder.embed.out.* become ESPnet's out.0.* unless the model's own name is the
     * plain one (input_layer conv2d8, the contextual block encoders' Conv2dSubsamplingWOPosEnc). */
    model_dims d = {0};
    esp_err why;
    int plain_out = !body_in_cfg(t->model) && encoder_dims_from_cfg(&d, t->model, &why) == 0 &&
                    strcmp(input_layer_out_name(d.input_layer, d.encoder), EMBED_OUT_SEQ) != 0;
    st_tensor *ts = xcalloc(w->n + 3, sizeof *ts);
    char **names = xcalloc(w->n + 1, sizeof *names);
    size_t n = 0;
    for (size_t i = 0; i < w->n; i++) {
        const char *nm = w->tensors[i].name;
        if (!strncmp(nm, "model.", 6)) nm += 6;
        /* an ESPnet checkpoint's own frontend / normalize buffers: written below from ours */
        if (!strncmp(nm, "frontend.", 9) || !strncmp(nm, "normalize.", 10)) continue;
        ts[n] = w->tensors[i];
        char cur[128];
        names[i] = xstrdup(!plain_out && param_current_name(nm, cur, sizeof cur) ? cur : nm);
        ts[n++].name = names[i];
    }
    frontend_opts fo;
    frontend_opts_from_cfg(t->model ? t->model->frontend_conf : NULL, &fo);
    float *mel = frontend_mel_matrix(&fo); /* n_mels x bins; ESPnet's melmat is its transpose */
    int bins = fo.n_fft / 2 + 1;
    float *melmat = xmalloc((size_t)bins * fo.n_mels * sizeof *melmat);
    for (int b = 0; b < bins; b++)
        for (int k = 0; k < fo.n_mels; k++) melmat[(size_t)b * fo.n_mels + k] = mel[(size_t)k * bins + b];
    ts[n++] = (st_tensor){.name = "frontend.logmel.melmat", .dtype = ST_F32, .ndim = 2, .shape = {bins, fo.n_mels},
                          .data = melmat};
    double *mean = NULL, *std = NULL;
    int rc = 0;
    if (mf->stats) {
        npz_file z;
        double *sum = NULL, *sq = NULL, *cnt = NULL;
        size_t ns = 0, nq = 0, nc = 0;
        rc = npz_read(mf->stats, &z, err);
        if (rc == 0) {
            if (npz_get_doubles(&z, mf->stats, "count", &cnt, &nc, err) != 0 ||
                npz_get_doubles(&z, mf->stats, "sum", &sum, &ns, err) != 0 ||
                npz_get_doubles(&z, mf->stats, "sum_square", &sq, &nq, err) != 0)
                rc = -1;
            else if (nc != 1 || ns != nq || ns == 0)
                rc = esp_fail(err, "%s: count, sum and sum_square do not fit together", mf->stats);
            npz_free(&z);
        }
        if (rc == 0) {
            mean = xmalloc(ns * sizeof *mean), std = xmalloc(ns * sizeof *std);
            for (size_t i = 0; i < ns; i++) { /* numpy's float64 ops in GlobalMVN.__init__, in that order */
                mean[i] = sum[i] / cnt[0];
                double var = sq[i] / cnt[0] - mean[i] * mean[i];
                std[i] = sqrt(var > 1e-20 ? var : 1e-20);
            }
            const int64_t dim = (int64_t)ns;
            ts[n++] = (st_tensor){.name = "normalize.mean", .dtype = ST_F64, .ndim = 1, .shape = {dim}, .data = mean};
            ts[n++] = (st_tensor){.name = "normalize.std", .dtype = ST_F64, .ndim = 1, .shape = {dim}, .data = std};
        }
        free(sum), free(sq), free(cnt);
    }
    if (rc == 0) rc = pt_write(path, ts, n, err);
    for (size_t i = 0; i < w->n; i++) free(names[i]);
    free(names), free(ts), free(mel), free(melmat), free(mean), free(std);
    return rc;
}

static int copy_to(const char *src, const char *root, const char *rel, esp_err *err)
{
    char *dst = xasprintf("%s/%s", root, rel), *dir = path_dirname(dst);
    size_t len;
    char *data = NULL;
    int rc = mkdir_p(dir, err);
    if (rc == 0) rc = (data = read_file(src, READ_MODEL, &len, err)) ? atomic_write_file(dst, data, len, err) : -1;
    free(data), free(dst), free(dir);
    return rc;
}

int pack_espnet(const char *root, const model_files *mf, const st_file *weights, esp_err *err)
{
    int has_decoder = 0, has_ctc = 0;
    for (size_t i = 0; i < weights->n; i++) {
        const char *nm = weights->tensors[i].name;
        if (!strncmp(nm, "model.", 6)) nm += 6;
        has_decoder |= !strncmp(nm, "decoder.", 8);
        has_ctc |= !strncmp(nm, "ctc.", 4);
    }
    token_list tl;
    if (token_list_read(mf->tokens, &tl, err) != 0) return -1;
    char *dir = xasprintf("%s/exp/asr_train", root);
    int rc = mkdir_p(dir, err);
    char *cfg_path = xasprintf("%s/" ESP_CONFIG, root), *pth = xasprintf("%s/" ESP_MODEL, root);
    if (rc == 0) {
        ynode *cfg = espnet_config(mf, &tl, has_decoder, has_ctc);
        size_t len;
        char *text = yt_emit(cfg, &len);
        char *all = xasprintf("# ESPnet2 training config of the packed espnet3 model (%s.build_model_from_file);\n"
                              "# paths are relative to the folder holding meta.yaml.\n%s",
                              body_in_cfg(model_files_training(mf)->model) ? "ASRTransducerTask" : "ASRTask", text);
        rc = atomic_write_file(cfg_path, all, strlen(all), err);
        free(all), free(text);
        yt_free(cfg);
    }
    if (rc == 0) rc = write_state_dict(pth, mf, weights, err);
    if (rc == 0 && mf->stats) rc = copy_to(mf->stats, root, ESP_STATS, err);
    if (rc == 0 && mf->bpemodel) {
        char *rel = xasprintf("data/token_list/%s", base_name(mf->bpemodel));
        rc = copy_to(mf->bpemodel, root, rel, err);
        free(rel);
    }
    if (rc == 0) { /* what espnet2.main_funcs.pack_funcs.pack writes */
        static const char meta[] = "files:\n  asr_model_file: " ESP_MODEL "\n"
                                   "yaml_files:\n  asr_train_config: " ESP_CONFIG "\n";
        char *p = xasprintf("%s/meta.yaml", root);
        rc = atomic_write_file(p, meta, sizeof meta - 1, err);
        free(p);
    }
    free(dir), free(cfg_path), free(pth);
    token_list_free(&tl);
    return rc;
}
