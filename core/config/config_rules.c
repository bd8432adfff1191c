/* The rules between keys of the configs (core/config/config_values.h's config_check_values), checked
 * on the validated tree when a config loads, each error at the value's file:line:col: the batch
 * type and its size, the frontend's window and band, the encoder's input layer and sizes, the
 * optimizer's torch arguments, the scheduler's warmup, data_aug_num against data_aug_effects,
 * speed_perturb_factors, the long-form windows; and Lightning's max_epochs, written into the tree.
 * Ranges of single numbers and declared defaults are core/config/config_values.c's. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_schema.h"
#include "core/config/config_values_internal.h"

/* The number under key in map m, or 0 when it is not there. */
static int num_in(const ynode *m, const char *key, double *v, const ynode **node)
{
    const ynode *n = m ? yt_map_get(m, key) : NULL;
    if (node) *node = n;
    return n && yt_as_float(n, v);
}

static char *key_path(const char *map_path, const char *key) { return xasprintf("%s.%s", map_path, key); }

/* A fail for the value under key in the map at map_path. */
static int fail_key(esp_err *err, const ynode *n, const char *map_path, const char *key, const char *what)
{
    char *p = key_path(map_path, key);
    int rc = config_fail_node(err, n, p, "%s", what);
    free(p);
    return rc;
}

/* The samplers of core/data/sampler.c: numel and length fill batches up to batch_bins feature
 * values, sorted and unsorted split into batches of batch_size utterances; all read shape files. */
static int check_batches(const ynode *root, const char *split, esp_err *err)
{
    char path[96], what[400];
    snprintf(path, sizeof path, "dataloader.%s.iter_factory.batches", split);
    const ynode *b = yt_get_path(root, path);
    if (!b || b->kind != YN_MAP) return 0;
    const ynode *type = yt_map_get(b, "type");
    const char *t = type ? type->str : "numel";
    int bins = !strcmp(t, "numel") || !strcmp(t, "length");
    const char *need = bins ? "batch_bins" : "batch_size";
    if (!yt_map_get(b, need)) {
        snprintf(what, sizeof what, "%s batches%s need %s (%s)", t, type ? "" : " (the default type)", need,
                 bins ? "feature values per batch, e.g. 1000000; or type sorted with batch_size"
                      : "utterances per batch, e.g. 16; or type numel with batch_bins");
        return type ? fail_key(err, type, path, "type", what) : config_fail_node(err, b, path, "%s", what);
    }
    const ynode *sf = yt_map_get(b, "shape_files");
    snprintf(what, sizeof what, "list the shape files that stage 3 writes, e.g. ${stats_dir}/%s/feats_shape", split);
    if (!sf) return config_fail_node(err, b, path, "shape_files is missing (%s)", what);
    if (sf->n == 0) {
        char *p = key_path(path, "shape_files");
        config_fail_node(err, sf, p, "the list is empty (%s)", what);
        free(p);
        return -1;
    }
    return 0;
}

/* What core/data/frontend.c checks when stage 3 starts, with ESPnet2's defaults for left-out keys. */
static int check_frontend(const ynode *root, esp_err *err)
{
    const char *P = "model.frontend_conf";
    const ynode *fc = yt_get_path(root, P), *n;
    if (!fc || fc->kind != YN_MAP) return 0;
    double fs = 16000, n_fft = 512, win, fmin = 0, fmax, n_mels;
    char what[200];
    num_in(fc, "fs", &fs, NULL);
    num_in(fc, "n_fft", &n_fft, NULL);
    num_in(fc, "fmin", &fmin, NULL);
    if (num_in(fc, "win_length", &win, &n) && win > n_fft) {
        snprintf(what, sizeof what, "%g is above n_fft = %g (the window must fit in the FFT frame; leave it out for n_fft)",
                 win, n_fft);
        return fail_key(err, n, P, "win_length", what);
    }
    if (num_in(fc, "fmax", &fmax, &n) && (fmax <= fmin || fmax > fs / 2)) {
        snprintf(what, sizeof what, "%g is not in (fmin = %g, fs/2 = %g] (leave it out for fs/2)", fmax, fmin, fs / 2);
        return fail_key(err, n, P, "fmax", what);
    }
    if (num_in(fc, "fmin", &fmin, &n) && fmin >= fs / 2) {
        snprintf(what, sizeof what, "%g is not below fs/2 = %g (leave it out for 0)", fmin, fs / 2);
        return fail_key(err, n, P, "fmin", what);
    }
    (void)n_mels; /* its least value depends on the input layer: check_input_layer */
    return 0;
}

/* model.encoder_conf.input_layer against the encoder and the features (core/nn/model_embed.c). */
static int check_input_layer(const ynode *root, esp_err *err)
{
    const char *E = "model.encoder_conf";
    const ynode *enc = yt_get_path(root, E), *il = enc && enc->kind == YN_MAP ? yt_map_get(enc, "input_layer") : NULL;
    const ynode *kind = yt_get_path(root, "model.encoder"), *nm = yt_get_path(root, "model.frontend_conf.n_mels");
    const char *layer = il ? il->str : "conv2d";
    int conformer = kind && kind->kind == YN_SCALAR && !strcmp(kind->str, "conformer");
    int ebf = kind && kind->kind == YN_SCALAR && !strcmp(kind->str, "e_branchformer");
    const ynode *pe = enc && enc->kind == YN_MAP ? yt_map_get(enc, "pos_enc_layer_type") : NULL;
    int rel_pos = pe ? pe->kind == YN_SCALAR && !strcmp(pe->str, "rel_pos") : ebf; /* e_branchformer's default */
    double n_mels = 80, d = 256;
    if (nm) yt_as_float(nm, &n_mels);
    num_in(enc, "output_size", &d, NULL);
    char what[300];
    if (!strcmp(layer, "embed"))
        return fail_key(err, il, E, "input_layer",
                        "embed (nn.Embedding) takes token ids, but the ASR model's input is the frontend's log-mel "
                        "features (ESPnet's Embedding fails on them too): use conv2d, linear or null");
    if (!strcmp(layer, "conv1d2") && conformer)
        return fail_key(err, il, E, "input_layer",
                        "conv1d2 is a TransformerEncoder input layer; ConformerEncoder has none (ESPnet2 raises "
                        "'unknown input_layer'): use conv2d, conv2d2, conv2d6, conv2d8, linear or null");
    if (!strcmp(layer, "null") && conformer && n_mels != d) {
        snprintf(what, sizeof what, "null (the positional encoding alone) needs the feature dimension (n_mels = %g) "
                 "to equal output_size = %g", n_mels, d);
        return fail_key(err, il, E, "input_layer", what);
    }
    if (!strcmp(layer, "null") && ebf && rel_pos && n_mels != d) {
        snprintf(what, sizeof what, "null with n_mels = %g != output_size = %g is a plain Linear without the relative "
                 "positions rel_pos attention needs (ESPnet2 fails on it): use abs_pos, or n_mels = output_size",
                 n_mels, d);
        return fail_key(err, il, E, "input_layer", what);
    }
    int least = !strcmp(layer, "conv2d6") ? 11 : !strcmp(layer, "conv2d8") ? 15
              : !strcmp(layer, "conv2d") || !strcmp(layer, "conv2d2") ? 7 : 1;
    if (n_mels < least) {
        snprintf(what, sizeof what, "is below %d, the least the encoder's %s input layer can subsample (leave it out "
                 "for 80)", least, layer);
        return nm ? fail_key(err, nm, "model.frontend_conf", "n_mels", what) : fail_key(err, il, E, "input_layer", what);
    }
    return 0;
}

/* What core/nn/model_params.c and core/data/specaug.c check when the model is built. */
static int check_model(const ynode *root, esp_err *err)
{
    const ynode *enc = yt_get_path(root, "model.encoder_conf"), *n;
    double d = 256, heads = 4;
    char what[200];
    int has_d = num_in(enc, "output_size", &d, &n), has_h = num_in(enc, "attention_heads", &heads, NULL);
    if ((has_d || has_h) && fmod(d, heads) != 0) {
        snprintf(what, sizeof what, "%g is not a multiple of attention_heads = %g (each head takes output_size / "
                 "attention_heads)", d, heads);
        return fail_key(err, has_d ? n : yt_map_get(enc, "attention_heads"), "model.encoder_conf", "output_size", what);
    }
    /* rnn and stateless are the asr_transducer task's RNNDecoder and StatelessDecoder
     * (core/nn/body_conf.h); the ASR task's RNN attention decoder is not built, and it has no
     * stateless one. */
    const ynode *dec = yt_get_path(root, "model.decoder");
    if (dec && dec->kind == YN_SCALAR && (!strcmp(dec->str, "rnn") || !strcmp(dec->str, "stateless")) &&
        !yt_get_path(root, "model.encoder_conf.body_conf")) {
        snprintf(what, sizeof what, "'%s' is not supported (supported: transformer, transducer, none) in the ASR task; "
                 "it is the asr_transducer task's decoder (an encoder_conf.body_conf)", dec->str);
        return fail_key(err, dec, "model", "decoder", what);
    }
    const char *S = "model.specaug_conf";
    const ynode *sc = yt_get_path(root, S);
    if (!sc || sc->kind != YN_MAP) return 0;
    static const char *const ranges[] = {"freq_mask_width_range", "time_mask_width_range", "time_mask_width_ratio_range"};
    for (int i = 0; i < 3; i++) {
        const ynode *r = yt_map_get(sc, ranges[i]);
        double lo, hi;
        if (r && r->n == 2 && yt_as_float(r->items[0], &lo) && yt_as_float(r->items[1], &hi) && !(lo < hi)) {
            snprintf(what, sizeof what, "[%g, %g] is not a range [lo, hi) with lo < hi (widths are drawn from it)", lo, hi);
            return fail_key(err, r, S, ranges[i], what);
        }
    }
    const ynode *both = yt_map_get(sc, "time_mask_width_ratio_range"), *on = yt_map_get(sc, "apply_time_mask");
    int apply = 1;
    if (both && yt_map_get(sc, "time_mask_width_range") && (!on || (yt_as_bool(on, &apply) && apply)))
        return fail_key(err, both, S, "time_mask_width_ratio_range",
                        "is set together with time_mask_width_range (keep one of the two)");
    return 0;
}

/* The keyword arguments of torch 2.11's optimizers that espnet3 builds. */
static const struct {
    const char *target, *cls, *keys;
} optimizer_keys[] = {
    {"torch.optim.Adam", "Adam",
     "lr, betas, eps, weight_decay, amsgrad, foreach, maximize, capturable, differentiable, fused, "
     "decoupled_weight_decay"},
    {"torch.optim.AdamW", "AdamW",
     "lr, betas, eps, weight_decay, amsgrad, maximize, foreach, capturable, differentiable, fused"},
    {"torch.optim.SGD", "SGD", "lr, momentum, dampening, weight_decay, nesterov, maximize, foreach, differentiable, fused"},
    {"torch.optim.Adadelta", "Adadelta", "lr, rho, eps, weight_decay, foreach, capturable, maximize, differentiable"},
};

/* Whether key is one of the ", "-separated names of list. */
static int in_key_list(const char *list, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = list; (p = strstr(p, key)); p += k)
        if ((p == list || p[-1] == ' ') && (p[k] == ',' || p[k] == '\0')) return 1;
    return 0;
}

/* torch's own checks of the optimizer's arguments, with its wording, at the argument's line; and
 * its implementation switches, accepted where they leave the single-tensor update's bits alone
 * (what scripts/make_sgd_adadelta_fixtures.py checks against torch 2.11 on the CPU):
 * - foreach (true, false, null): torch's _foreach ops run per tensor on the CPU: the same bits;
 *   espnet3 computes the single-tensor update for every value;
 * - fused: true runs torch's fused kernels, which round otherwise (SGD with momentum, Adam,
 *   AdamW): refused; false and null are the single-tensor path;
 * - capturable: true makes Adam/AdamW compute step and the bias corrections as float32 tensors
 *   (other bits): refused there; Adadelta's update never reads step, so there it changes nothing;
 * - differentiable: true fails in torch at the first step of a model's parameters (an in-place
 *   update of a leaf that requires grad), and changes Adam's path: refused. */
static int check_optimizer(const ynode *root, esp_err *err)
{
    const char *O = "optimizer";
    const ynode *oc = yt_get_path(root, O), *t = oc && oc->kind == YN_MAP ? yt_map_get(oc, "_target_") : NULL, *n;
    if (!t || t->kind != YN_SCALAR) return 0;
    size_t i = 0, nk = sizeof optimizer_keys / sizeof *optimizer_keys;
    while (i < nk && strcmp(t->str, optimizer_keys[i].target) != 0) i++;
    if (i == nk) return 0; /* the _target_ check names what is built */
    const char *cls = optimizer_keys[i].cls;
    char what[400];
    for (size_t k = 0; k < oc->n; k++)
        if (strcmp(oc->keys[k], "_target_") != 0 && !in_key_list(optimizer_keys[i].keys, oc->keys[k])) {
            snprintf(what, sizeof what, "%s.__init__() got an unexpected keyword argument '%s' (torch's %s takes %s)",
                     cls, oc->keys[k], t->str, optimizer_keys[i].keys);
            return fail_key(err, oc->items[k], O, oc->keys[k], what);
        }
    int on = 0, adam = !strcmp(cls, "Adam") || !strcmp(cls, "AdamW");
    if ((n = yt_map_get(oc, "fused")) && yt_as_bool(n, &on) && on)
        return fail_key(err, n, O, "fused", "fused=True runs torch's fused kernel, which rounds otherwise than the "
                                            "single-tensor update espnet3 computes (write false, or leave it out)");
    if ((n = yt_map_get(oc, "differentiable")) && yt_as_bool(n, &on) && on)
        return fail_key(err, n, O, "differentiable",
                        "torch's step with differentiable=True fails on a model's parameters ('a leaf Variable that "
                        "requires grad is being used in an in-place operation.'): write false, or leave it out");
    if (adam && (n = yt_map_get(oc, "capturable")) && yt_as_bool(n, &on) && on)
        return fail_key(err, n, O, "capturable",
                        "capturable=True computes step and the bias corrections as float32 tensors, which rounds "
                        "otherwise than the single-tensor update espnet3 computes (and torch refuses it for CPU "
                        "parameters): write false, or leave it out");
    double momentum = 0, dampening = 0, rho;
    num_in(oc, "dampening", &dampening, NULL);
    if (num_in(oc, "momentum", &momentum, &n) && !(momentum >= 0)) {
        snprintf(what, sizeof what, "Invalid momentum value: %g (torch's SGD takes momentum >= 0)", momentum);
        return fail_key(err, n, O, "momentum", what);
    }
    if ((n = yt_map_get(oc, "nesterov")) && yt_as_bool(n, &on) && on && (momentum <= 0 || dampening != 0)) {
        snprintf(what, sizeof what, "Nesterov momentum requires a momentum and zero dampening (momentum %g, "
                 "dampening %g)", momentum, dampening);
        return fail_key(err, n, O, "nesterov", what);
    }
    if (num_in(oc, "rho", &rho, &n) && !(rho >= 0 && rho <= 1)) {
        snprintf(what, sizeof what, "Invalid rho value: %g (torch's Adadelta takes rho in [0, 1])", rho);
        return fail_key(err, n, O, "rho", what);
    }
    return 0;
}

/* Lightning's max_epochs: None becomes 1000 when max_steps is unset (-1), -1 (no limit) when it is
 * set; -1 means no limit. The result is written into the tree so that the trainer and the
 * resolved config.yaml hold the number Lightning would use. */
static void lightning_max_epochs(ynode *root)
{
    ynode *t = yt_get_path(root, "trainer");
    if (!t || t->kind != YN_MAP) return;
    const ynode *me = yt_map_get(t, "max_epochs"), *ms = yt_map_get(t, "max_steps");
    int64_t epochs = 0, steps = -1;
    if (ms) yt_as_int(ms, &steps);
    char where[512];
    if (!me) {
        yt_map_set(t, "max_epochs", t->mark, yt_scalar(steps == -1 ? "1000" : "-1", 0, t->mark));
        if (steps == -1)
            log_info("%s: trainer.max_epochs: not set: Lightning's default, 1000 epochs", ymark_str(t->mark, where, sizeof where));
        else
            log_info("%s: trainer.max_epochs: not set and trainer.max_steps is %lld: no epoch limit (Lightning); "
                     "training stops at max_steps", ymark_str(t->mark, where, sizeof where), (long long)steps);
    } else if (yt_as_int(me, &epochs) && epochs == -1) {
        log_info("%s: trainer.max_epochs: -1: no epoch limit (Lightning); training runs until %s",
                 ymark_str(me->mark, where, sizeof where),
                 steps == -1 ? "it is stopped (trainer.max_steps is not set)" : "trainer.max_steps");
    }
}

/* The classes that divide by warmup_steps refuse 0 at its line (the others take 0: no warmup). */
static int check_scheduler_warmup(const ynode *root, esp_err *err)
{
    static const struct {
        const char *target, *name;
    } divide[] = {{"espnet2.schedulers.warmup_lr.WarmupLR", "WarmupLR"},
                  {"espnet2.schedulers.noam_lr.NoamLR", "NoamLR"},
                  {"espnet2.schedulers.warmup_step_lr.WarmupStepLR", "WarmupStepLR"},
                  {ESPNET2_PLATEAU, "WarmupReduceLROnPlateau"}};
    const ynode *t = yt_get_path(root, "scheduler._target_"), *w = yt_get_path(root, "scheduler.warmup_steps");
    double v;
    if (!t || t->kind != YN_SCALAR || !num_in(yt_get_path(root, "scheduler"), "warmup_steps", &v, NULL) || v >= 1)
        return 0;
    for (size_t i = 0; i < sizeof divide / sizeof *divide; i++)
        if (!strcmp(t->str, divide[i].target))
            return config_fail_node(err, w, "scheduler.warmup_steps", "must be >= 1, got %s (%s divides by it; leave "
                                    "it out for 25000)", w->str, divide[i].name);
    return 0;
}

/* The rules between dataset.preprocessor's keys that the typed view cannot carry to its readers'
 * messages: data_aug_num against data_aug_effects' length (effects are drawn without
 * replacement), and noise_db_range's order. */
static int check_preprocessor(const ynode *root, esp_err *err)
{
    const char *P = "dataset.preprocessor";
    const ynode *db = config_set_at(root, "dataset.preprocessor.noise_db_range");
    double lo, hi;
    if (db && config_db_range(db, "dataset.preprocessor.noise_db_range", &lo, &hi, err) != 0) return -1;
    const ynode *num = config_set_at(root, "dataset.preprocessor.data_aug_num");
    const ynode *eff = config_set_at(root, "dataset.preprocessor.data_aug_effects");
    if (!num || num->kind != YN_SEQ || num->n != 2) return 0; /* typed as a pair of integers at validation */
    int64_t a, b;
    yt_as_int(num->items[0], &a), yt_as_int(num->items[1], &b);
    char what[200];
    if (a > b) snprintf(what, sizeof what, "min %lld is above max %lld", (long long)a, (long long)b);
    else if (b < 1) snprintf(what, sizeof what, "max must be at least 1 (ESPnet asserts it)");
    else if (eff && eff->kind == YN_SEQ && eff->n && (size_t)b > eff->n)
        snprintf(what, sizeof what, "max %lld is more than the %zu entries of data_aug_effects (effects are drawn "
                 "without replacement)", (long long)b, eff->n);
    else return 0;
    return fail_key(err, num, P, "data_aug_num", what);
}

/* ESPnet2 asr.sh's speed copies: at most CFG_MAX_SPEED_FACTORS, each once (their range is a rule above). */
static int check_speed_perturb_factors(const ynode *root, esp_err *err)
{
    const ynode *f = config_set_at(root, "speed_perturb_factors");
    if (!f || f->kind != YN_SEQ) return 0;
    if (f->n == 0 || f->n > CFG_MAX_SPEED_FACTORS)
        return config_fail_node(err, f, "speed_perturb_factors", "expected a list of 1 to %d factors (e.g. [0.9, "
                                "1.0, 1.1])", CFG_MAX_SPEED_FACTORS);
    for (size_t i = 0; i < f->n; i++) {
        double v, w;
        yt_as_float(f->items[i], &v);
        for (size_t j = 0; j < i; j++)
            if (yt_as_float(f->items[j], &w) && w == v) {
                char p[64];
                snprintf(p, sizeof p, "speed_perturb_factors[%zu]", i);
                return config_fail_node(err, f->items[i], p, "factor %g is listed twice", v);
            }
    }
    return 0;
}

/* Neighbouring windows overlap by at most half a window, so each window owns a part of its own. A
 * key left out counts as its default; the error is at the overlap's line, or the window's when the
 * overlap is the default. */
static int check_longform(const ynode *root, esp_err *err)
{
    const ynode *lf = yt_map_get(root, "longform"), *wn, *on;
    double w, o;
    if (!lf || lf->kind != YN_MAP) return 0;
    if (!num_in(lf, "window", &w, &wn)) w = atof(config_default_value("longform.window"));
    if (!num_in(lf, "overlap", &o, &on)) o = atof(config_default_value("longform.overlap"));
    if (o <= w / 2) return 0;
    char what[160];
    snprintf(what, sizeof what, "an overlap of %g s is more than half the window of %g s (shorten longform.overlap "
             "or lengthen longform.window)", o, w);
    return on ? fail_key(err, on, "longform", "overlap", what) : fail_key(err, wn, "longform", "window", what);
}

/* ESPnet2's two Speech2Text classes name their transducer search's keys differently:
 * asr_inference's transducer_conf (espnet2/asr/transducer's BeamSearchTransducer) and
 * asr_transducer_inference's beam_search_config (espnet2/asr_transducer's, whose keys are the
 * former's but prefix_alpha, score_norm_during and nbest; its search_type has no nsc); each
 * class refuses the other's (a TypeError in ESPnet2). */
static int check_transducer_search(const ynode *root, esp_err *err)
{
    const ynode *m = yt_map_get(root, "model"), *t = m ? yt_map_get(m, "_target_") : NULL, *n;
    int body = t && t->kind == YN_SCALAR && !strcmp(t->str, TARGET_ASR_TRANSDUCER_S2T);
    const char *mine = body ? "beam_search_config" : "transducer_conf", *other = body ? "transducer_conf" : "beam_search_config";
    if (m && (n = yt_map_get(m, other)) != NULL) {
        char what[200];
        snprintf(what, sizeof what, "not a key of %s's Speech2Text (its search's keys are model.%s)",
                 body ? "asr_transducer_inference" : "asr_inference", mine);
        return fail_key(err, n, "model", other, what);
    }
    /* Speech2Text's streaming: the asr_transducer task's (asr_inference's BatchBeamSearchOnlineSim is not built) */
    static const char *const streaming[] = {"streaming", "decoding_window", "left_context"};
    for (size_t i = 0; m && !body && i < 3; i++)
        if ((n = yt_map_get(m, streaming[i])) != NULL) {
            int off = 0;
            if (i == 0 && (n->kind != YN_SCALAR || !yt_as_bool(n, &off) || off)) /* streaming: false changes nothing */
                return fail_key(err, n, "model", "streaming",
                                "asr_inference's streaming decoding (BatchBeamSearchOnlineSim) is not built; "
                                "asr_transducer_inference's is, and a contextual block model streams with "
                                "transcribe --stream");
            if (i > 0)
                return fail_key(err, n, "model", streaming[i],
                                "not a key of asr_inference's Speech2Text (asr_transducer_inference's streaming)");
        }
    const ynode *c = m ? yt_map_get(m, "beam_search_config") : NULL;
    if (!c || c->kind != YN_MAP) return 0;
    static const char *const theirs[] = {"prefix_alpha", "score_norm_during", "nbest"};
    for (size_t i = 0; i < 3; i++)
        if ((n = yt_map_get(c, theirs[i])) != NULL)
            return fail_key(err, n, "model.beam_search_config", theirs[i],
                            "not a key of espnet2/asr_transducer's BeamSearchTransducer (nbest is model.nbest)");
    return 0;
}

int config_check_values(config_kind kind, ynode *root, esp_err *err)
{
    if (config_check_aliases(kind, root, err) != 0) return -1;
    if (kind == CONFIG_INFERENCE) return check_longform(root, err) || check_transducer_search(root, err);
    if (kind != CONFIG_TRAINING) return 0;
    if (check_scheduler_warmup(root, err) != 0) return -1;
    if (check_batches(root, "train", err) != 0 || check_batches(root, "valid", err) != 0) return -1;
    if (check_frontend(root, err) != 0 || check_model(root, err) != 0 || check_input_layer(root, err) != 0 ||
        check_optimizer(root, err) != 0 ||
        check_preprocessor(root, err) != 0 || check_speed_perturb_factors(root, err) != 0)
        return -1;
    lightning_max_epochs(root);
    return 0;
}
