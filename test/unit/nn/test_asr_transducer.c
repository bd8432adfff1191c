/* ESPnet2's asr_transducer task against the real ESPnet2 (fixtures by
 * scripts/make_asr_transducer_fixtures.py): ESPnetASRTransducerModel with its Encoder (ConvInput,
 * two conformer blocks of body_conf, norm_blocks), a 2-layer LSTM RNNDecoder, the JointNetwork and
 * the auxiliary CTC (ctc_lin), transducer_weight 0.8, auxiliary_ctc_weight 0.3, a padded batch of 2
 * whose second utterance is shorter than the encoder output. The Encoder's output (eval mode, the
 * BatchNorms' running statistics), the loss, its parts and every parameter gradient (training mode)
 * on the CPU backend and on ref64; every tensor of ESPnet's state dict is one of ours by name. The
 * same model with the StatelessDecoder (pack stateless_loss: the RNN model's weights but its LSTMs,
 * the same batch): its loss and every gradient; and a model of two ebranchformer blocks with that
 * decoder (packs ebranchformer_*) and one of two branchformer blocks (branchformer_*): their Encoder
 * output, loss and every gradient; the RNNDecoder with rnn_type gru and embed_size 8 apart from
 * hidden_size 12 (packs gru_weights: its decoder.*, gru_loss): the losses and the decoder's and the
 * joint network's gradients. The RNNDecoder model with model_conf fastemit_lambda 0.5,
 * auxiliary_lm_loss_weight 0.4 and auxiliary_lm_loss_smoothing 0.1 (packs aux_*: lm_lin besides the
 * weights; warp-transducer's FastEmit by scripts/rnnt_loss_standin.py's PyTorch reference): its
 * loss, loss_aux_lm and every gradient, lm_lin's by name both ways. main_conf.blockdrop_rate: the
 * mixed model's training step with ESPnet2's draws fixed (pack blockdrop_loss, blocks 1 and 2 of 5
 * skipped) against ours on a seed whose draws skip the same blocks; its eval forward runs every
 * block; the draws' schedule over seeds; and a one-group model with blockdrop_rate (on
 * encoder_body.c, whose draws there skip no block) gives the conformer model's loss and gradients. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/config/config.h"
#include "core/formats/torch_zip.h"
#include "core/nn/decoder_conf.h"
#include "core/nn/encoder.h"
#include "core/nn/model.h"
#include "core/nn/model_files.h"
#include "test/unit/nn/fx_asr_transducer.h"
#include "test/unit/nn/fx_pack.h"
#include "test/unit/test_util.h"

enum { IDIM = 20, D = 16, VOCAB = 12, B = 2, STRIDE = 7 };

/* The fixture's models: conformer blocks with the RNNDecoder, the same with the StatelessDecoder
 * (embed_size 12) instead, ebranchformer blocks (depth_conv_kernel_size 5) and branchformer blocks
 * with the StatelessDecoder, conformer blocks with a GRU RNNDecoder (embed_size 8), the RNNDecoder
 * model with FastEmit and the auxiliary LM loss, and the mixed, pointwise-conv1d and shrinking-conv1d
 * Encoders. */
typedef enum variant {
    V_RNN = 0, V_STATELESS, V_EBRANCHFORMER, V_BRANCHFORMER, V_GRU, V_AUX, V_MIXED, V_POINTWISE, V_SHRINK,
    V_WIDEN, V_CONVFIRST, V_NORMS_RMS, V_NORMS_BASIC, V_NORMS_SCALE,
    V_BLOCKDROP, /* the mixed model with blockdrop_rate BLOCKDROP (pack blockdrop_loss) */
    V_ONEGROUP,  /* V_RNN as one group of body_conf (n_groups 1) with blockdrop_rate BLOCKDROP */
    V_CHUNK,     /* the mixed model with dynamic_chunk_training (pack chunk_loss) */
    V_CAUSAL,    /* the same model decoding: causal convolutions, no chunk draw */
    V_SIMPLIFIED, /* the mixed model with main_conf simplified_att_score (packs simplified_*) */
    V_SIMPLIFIED_CHUNK, /* that model with dynamic_chunk_training (pack simplified_chunk_loss) */
    V_SIMPLIFIED_CAUSAL /* and decoding */
} variant;

/* The variants whose training draws a chunk (the fixture's CHUNK_CONF). */
static int chunked(variant v) { return v == V_CHUNK || v == V_SIMPLIFIED_CHUNK; }

#define BLOCKDROP 0.8f /* the fixture's BLOCKDROP_RATE */

static model_dims fixture_dims(variant v)
{
    if (v == V_MIXED || v == V_BLOCKDROP) return fx_mixed_dims();
    if (v == V_CHUNK || v == V_CAUSAL || v >= V_SIMPLIFIED) {
        model_dims d = fx_mixed_dims();
        d.causal = v != V_SIMPLIFIED;
        d.simplified_att = v >= V_SIMPLIFIED;
        return d;
    }
    if (v == V_ONEGROUP) {
        model_dims d = fixture_dims(V_RNN);
        d.n_groups = 1;
        d.group[0] = (struct model_group){2, ENC_CONFORMER, 2, 24, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {0}, {0}, 0};
        return d;
    }
    if (v == V_POINTWISE) return fx_pointwise_dims();
    if (v == V_SHRINK) return fx_shrink_dims();
    if (v == V_WIDEN) return fx_widen_dims();
    if (v == V_CONVFIRST) return fx_convfirst_dims();
    if (v >= V_NORMS_RMS && v <= V_NORMS_SCALE) return fx_norms_dims(v == V_NORMS_RMS ? NORM_RMS : v == V_NORMS_BASIC ? NORM_BASIC : NORM_SCALE);
    model_dims d = {.idim = IDIM, .d = D, .heads = 2, .ff = 24, .blocks = 2, .vocab = VOCAB,
                    .encoder = ENC_CONFORMER, .macaron = 1, .rel_pos = 1, .use_cnn = 1, .cnn_kernel = 3,
                    .act = ACT_SWISH, .input_layer = IN_CONV2D,
                    .tr_layers = v == V_RNN || v == V_GRU || v == V_AUX ? 2 : 0,
                    .tr_stateless = v != V_RNN && v != V_GRU && v != V_AUX, .tr_hidden = 12, .tr_joint = 10, .body = 1,
                    .tr_gru = v == V_GRU, .tr_embed = v == V_GRU ? 8 : 0, .tr_lm_lin = v == V_AUX};
    if (v == V_EBRANCHFORMER || v == V_BRANCHFORMER)
        d.encoder = ENC_EBRANCHFORMER, d.use_cnn = 0, d.use_ffn = v == V_EBRANCHFORMER, d.cgmlp_units = 24,
        d.cgmlp_kernel = 3, d.merge_kernel = v == V_EBRANCHFORMER ? 5 : 0, d.gate_act = ACT_IDENTITY;
    d.f2 = input_layer_out_bins(IN_CONV2D, IDIM);
    return d;
}

/* Every ESPnet2 tensor into the model by name, and every one of ours from ESPnet2 (the stateless
 * model of the RNN model's weights: all but the RNNDecoder's LSTMs, decoder.rnn.*; the GRU model of
 * them with its decoder.* from gw). */
static void load_weights(asr_model *m, const pack *w, const pack *gw, variant v)
{
    float *host = calloc(m->table.state_total, sizeof *host);
    size_t used = 0;
    for (size_t i = 0; i < w->n + (v == V_GRU ? gw->n : 0); i++) {
        const pack *src = i < w->n ? w : gw;
        size_t k = i < w->n ? i : i - w->n;
        if (v == V_STATELESS && !strncmp(w->names[i], "decoder.rnn.", 12)) continue;
        if (v == V_GRU && src == w && !strncmp(w->names[i], "decoder.", 8)) continue;
        const param_info *p = param_find(&m->table, src->names[k]);
        cr_assert_not_null(p, "ESPnet2's %s is not a tensor of espnet3's model", src->names[k]);
        cr_assert_eq(src->count[k], p->count, "%s", p->name);
        memcpy(host + p->offset, src->data + src->off[k], p->count * sizeof(float));
        used++;
    }
    cr_assert_eq(used, m->table.n, "the fixture has %zu tensors, espnet3's model %zu", used, m->table.n);
    asr_model_state_from_host(m, host);
    free(host);
}

typedef struct fixture {
    backend *be;
    asr_model m;
    pack w, c, o; /* weights, inputs (loss), outputs (the variant's loss pack) */
    pack gw;      /* V_GRU: its decoder's weights */
    float *feats; /* device */
    int T, lens[B], ylens[B], labels[B * STRIDE];
} fixture;

static void setup(fixture *f, backend_kind kind, variant v)
{
    static const char *const weights[] = {"weights", "weights", "ebranchformer_weights", "branchformer_weights",
                                          "weights", "aux_weights", "mixed_weights", "pointwise_weights",
                                          "shrink_weights", "widen_weights", "convfirst_weights", "norms_rms_weights",
                                          "norms_basic_weights", "norms_scale_weights", "mixed_weights", "weights",
                                          "mixed_weights", "mixed_weights", "simplified_weights",
                                          "simplified_weights", "simplified_weights"};
    static const char *const outputs[] = {"loss", "stateless_loss", "ebranchformer_loss", "branchformer_loss",
                                          "gru_loss", "aux_loss", "mixed_loss", "pointwise_loss", "shrink_loss",
                                          "widen_loss", "convfirst_loss", "norms_rms_loss", "norms_basic_loss",
                                          "norms_scale_loss", "blockdrop_loss", "loss", "chunk_loss", "chunk_loss",
                                          "simplified_loss", "simplified_chunk_loss", "simplified_chunk_loss"};
    esp_err err;
    cr_assert((f->be = backend_open(kind, 0, 1, &err)) != NULL, "%s", err.msg);
    f->w = load_pack("asr_transducer", weights[v]), f->c = load_pack("asr_transducer", "loss");
    f->o = load_pack("asr_transducer", outputs[v]);
    f->gw = v == V_GRU ? load_pack("asr_transducer", "gru_weights") : (pack){0};
    model_dims d = fixture_dims(v);
    model_rates rates = {.ctc_weight = 0.3f, .tr_weight = 0.8f};
    if (v == V_AUX) rates.tr_fastemit = 0.5f, rates.tr_lm_weight = 0.4f, rates.tr_lm_smoothing = 0.1f;
    if (v == V_BLOCKDROP || v == V_ONEGROUP) rates.blockdrop = BLOCKDROP;
    if (chunked(v)) /* the fixture's CHUNK_CONF, short_chunk_threshold's default */
        rates.chunk_training = 1, rates.chunk_short = 25, rates.chunk_left = 1, rates.chunk_threshold = 0.75f;
    asr_model_init(&f->m, f->be, &d, &rates);
    load_weights(&f->m, &f->w, &f->gw, v);
    size_t nf, n, ny;
    const float *x = pack_must(&f->c, "in.feats", &nf), *l = pack_must(&f->c, "in.lens", &n);
    const float *y = pack_must(&f->c, "in.ys", &ny), *yl = pack_must(&f->c, "in.ylens", &n);
    cr_assert_eq(ny, (size_t)B * STRIDE);
    f->T = (int)(nf / B / IDIM);
    for (int i = 0; i < B; i++) f->lens[i] = (int)l[i], f->ylens[i] = (int)yl[i];
    for (int i = 0; i < B * STRIDE; i++) f->labels[i] = (int)y[i];
    f->feats = f->be->alloc(f->be, nf * sizeof(float));
    f->be->copy(f->be, f->feats, x, nf * sizeof(float), BACKEND_HOST_TO_DEVICE);
}

static void teardown(fixture *f)
{
    f->be->free(f->be, f->feats);
    pack_free(&f->w), pack_free(&f->c), pack_free(&f->o);
    if (f->gw.n) pack_free(&f->gw);
    asr_model_free(&f->m);
    backend_close(f->be);
}

static uint64_t seed_chunking(const fixture *f);

/* The Encoder's output and lengths (ESPnet2's: min(input frames, T2), padded frames counted); with
 * blockdrop_rate, eval mode runs every block: the mixed model's output. With dynamic chunk
 * training, validation's eval-mode forward draws a chunk as ESPnet2's Encoder.forward does
 * (out.enc_chunk, on a seed drawing the fixture's chunk), decoding (V_CAUSAL) does not (out.enc). */
static void check_encoder(backend_kind kind, variant v)
{
    fixture f;
    setup(&f, kind, v);
    if (v == V_BLOCKDROP) pack_free(&f.o), f.o = load_pack("asr_transducer", "mixed_loss");
    asr_model_forward(&f.m, f.feats, f.lens, B, f.T, 0, chunked(v) ? seed_chunking(&f) : 0);
    size_t n;
    const float *hl = pack_must(&f.o, "out.hlens", &n), *ref = pack_must(&f.o, chunked(v) ? "out.enc_chunk" : "out.enc", &n);
    cr_assert(f.m.hlens[0] == (int)hl[0] && f.m.hlens[1] == (int)hl[1], "lengths %d %d vs ESPnet %g %g",
              f.m.hlens[0], f.m.hlens[1], hl[0], hl[1]);
    cr_assert_eq(n, (size_t)B * f.m.T2 * f.m.dims.d);
    float *enc = malloc(n * sizeof *enc);
    f.be->synchronize(f.be);
    f.be->copy(f.be, enc, f.m.lnf, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    double e = pack_rel_err(enc, ref, n, 1.0);
    cr_expect_lt(e, 1e-5, "the Encoder's output differs from ESPnet2's: %g", e);
    cr_log_info("%s: Encoder output rel err %.2g", f.be->name, e);
    free(enc);
    teardown(&f);
}

/* The first seed whose blockdrop draws skip the blocks the pack's out.dropped names (0: none). */
static uint64_t seed_dropping(const fixture *f)
{
    size_t n;
    const float *want = pack_must(&f->o, "out.dropped", &n);
    for (uint64_t seed = 1; seed < 100000; seed++) {
        int l = 0;
        while (l < (int)n && body_block_dropped(seed, BLOCKDROP, l, (int)n) == (want[l] != 0)) l++;
        if (l == (int)n) return seed;
    }
    cr_assert_fail("no seed skips the fixture's blocks");
    return 0;
}

/* The first seed whose chunk draw for the fixture's 15 frames is its out.chunk. */
static uint64_t seed_chunking(const fixture *f)
{
    int want = (int)pack_must(&f->o, "out.chunk", NULL)[0];
    for (uint64_t seed = 1; seed < 100000; seed++)
        if (body_chunk_size(seed, 15, f->m.rates.chunk_threshold, f->m.rates.chunk_short) == want) return seed;
    cr_assert_fail("no seed draws the fixture's chunk");
    return 0;
}

static void check_loss(backend_kind kind, double tol, variant v)
{
    fixture f;
    setup(&f, kind, v);
    asr_model_zero_grad(&f.m);
    uint64_t seed = v == V_BLOCKDROP ? seed_dropping(&f) : chunked(v) ? seed_chunking(&f) : 0;
    asr_model_forward(&f.m, f.feats, f.lens, B, f.T, 1, seed);
    cr_assert(!chunked(v) || (f.m.chunk == 5 && f.m.left_chunks == 1), "chunk %d", f.m.chunk);
    double loss = asr_model_loss(&f.m, f.labels, f.ylens, STRIDE, NULL);
    double ref = pack_must(&f.o, "out.loss", NULL)[0], ref_tr = pack_must(&f.o, "out.loss_transducer", NULL)[0];
    double ref_ctc = pack_must(&f.o, "out.loss_aux_ctc", NULL)[0];
    cr_expect_lt(fabs(f.m.loss_transducer - ref_tr) / ref_tr, tol, "loss_transducer %.8f vs ESPnet %.8f",
                 f.m.loss_transducer, ref_tr);
    cr_expect_lt(fabs(f.m.loss_ctc - ref_ctc) / ref_ctc, tol, "loss_aux_ctc %.8f vs %.8f", f.m.loss_ctc, ref_ctc);
    cr_expect_lt(fabs(loss - ref) / ref, tol, "loss %.8f vs ESPnet %.8f", loss, ref);
    if (v == V_AUX) {
        double ref_lm = pack_must(&f.o, "out.loss_aux_lm", NULL)[0];
        cr_expect_lt(fabs(f.m.loss_aux_lm - ref_lm) / ref_lm, tol, "loss_aux_lm %.8f vs ESPnet %.8f", f.m.loss_aux_lm,
                     ref_lm);
        cr_log_info("%s (aux): loss_aux_lm %.7f (ESPnet %.7f)", f.be->name, f.m.loss_aux_lm, ref_lm);
    } else {
        cr_expect(isnan(f.m.loss_aux_lm), "no lm_lin, no auxiliary LM loss");
    }
    asr_model_backward(&f.m, 1.0f);
    float *g = malloc(f.m.table.total * sizeof *g);
    f.be->synchronize(f.be);
    f.be->copy(f.be, g, f.m.grads, f.m.table.total * sizeof(float), BACKEND_DEVICE_TO_HOST);
    double worst = 0;
    size_t n_grads = 0;
    for (size_t i = 0; i < f.o.n; i++) n_grads += !strncmp(f.o.names[i], "grad.", 5);
    for (size_t i = 0; i < f.m.table.n; i++) {
        const param_info *p = &f.m.table.items[i];
        if (p->offset >= f.m.table.total) continue; /* BatchNorm's buffers */
        /* the GRU pack holds the decoder's and the joint network's */
        if (v == V_GRU && strncmp(p->name, "decoder.", 8) && strncmp(p->name, "joint_network.", 14)) continue;
        n_grads--;
        char name[160];
        snprintf(name, sizeof name, "grad.%.127s", p->name);
        size_t n;
        const float *ref_g = pack_must(&f.o, name, &n);
        cr_assert_eq(n, p->count, "%s", p->name);
        /* Softmax ignores linear_k's bias, training-mode BatchNorm the depthwise conv's (a per-channel
         * constant): rounding noise on both sides. So in the pointwise model: out_pos' bias (the same
         * vector added to every position's encoding shifts a query's scores alike), and the conv1d
         * with BatchNorm's bias and its input's (block 0's norm_final) bias; the same in the shrink and
         * widen models, and out_pos' in the convfirst model. With scale_norm, norm_blocks (a ScaleNorm)
         * undoes the last block's norm_final scale. With simplified_att_score, linear_pos' bias adds
         * one constant to each head's scores. */
        if (strstr(p->name, "linear_k.bias") || strstr(p->name, "depthwise_conv.bias") ||
            (v >= V_SIMPLIFIED && strstr(p->name, "linear_pos.bias")) ||
            (v == V_NORMS_SCALE && strstr(p->name, "blocks.4.norm_final.scale")) ||
            (v >= V_POINTWISE && v <= V_CONVFIRST && (strstr(p->name, "out_pos.bias") || strstr(p->name, "blocks.1.conv.bias") ||
                                  strstr(p->name, "blocks.0.norm_final.bias")))) {
            cr_expect_lt(test_max_abs(g + p->offset, n), 1e-4, "%s", p->name);
            cr_expect_lt(test_max_abs(ref_g, n), 1e-4, "ESPnet's %s", p->name);
            continue;
        }
        double e = pack_rel_err(g + p->offset, ref_g, n, 1.0);
        worst = fmax(worst, e);
        cr_expect_lt(e, 1e-4, "gradient of %s differs: %g", p->name, e);
    }
    cr_assert_eq(n_grads, 0, "ESPnet2 has parameters espnet3's model lacks");
    static const char *const what[] = {"", " (stateless)", " (ebranchformer)", " (branchformer)", " (gru)",
                                       " (FastEmit, auxiliary LM loss)", " (mixed blocks)",
                                       " (pointwise conv1d blocks)", " (conv1d blocks that shrink the frames)",
                                       " (conv1d blocks that change the size)", " (a conv1d block first)",
                                       " (rms_norm, scale_norm gating units)", " (basic_norm, rms_norm gating units)",
                                       " (scale_norm, basic_norm gating units)",
                                       " (blockdrop_rate, blocks 1 and 2 skipped)", " (one group, blockdrop_rate)",
                                       " (dynamic chunk training: chunk 5 of 15, one left chunk)", "",
                                       " (simplified_att_score)", " (simplified_att_score, dynamic chunk training)", ""};
    cr_log_info("%s%s: loss %.7f (ESPnet %.7f), worst gradient rel err %.2g", f.be->name, what[v], loss, ref, worst);
    free(g);
    teardown(&f);
}

Test(asr_transducer, encoder_output_matches_espnet_cpu) { check_encoder(BACKEND_CPU, V_RNN); }
Test(asr_transducer, encoder_output_matches_espnet_ref64) { check_encoder(BACKEND_REF64, V_RNN); }
Test(asr_transducer, loss_and_every_gradient_match_espnet_cpu) { check_loss(BACKEND_CPU, 1e-5, V_RNN); }
Test(asr_transducer, loss_and_every_gradient_match_espnet_ref64) { check_loss(BACKEND_REF64, 1e-5, V_RNN); }
Test(asr_transducer, stateless_decoder_loss_and_every_gradient_match_espnet_cpu)
{
    check_loss(BACKEND_CPU, 1e-5, V_STATELESS);
}
Test(asr_transducer, stateless_decoder_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_STATELESS);
}
Test(asr_transducer, ebranchformer_encoder_output_matches_espnet_cpu) { check_encoder(BACKEND_CPU, V_EBRANCHFORMER); }
Test(asr_transducer, ebranchformer_encoder_output_matches_espnet_ref64)
{
    check_encoder(BACKEND_REF64, V_EBRANCHFORMER);
}
Test(asr_transducer, ebranchformer_loss_and_every_gradient_match_espnet_cpu)
{
    check_loss(BACKEND_CPU, 1e-5, V_EBRANCHFORMER);
}
Test(asr_transducer, ebranchformer_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_EBRANCHFORMER);
}
Test(asr_transducer, branchformer_encoder_output_matches_espnet_cpu) { check_encoder(BACKEND_CPU, V_BRANCHFORMER); }
Test(asr_transducer, branchformer_encoder_output_matches_espnet_ref64) { check_encoder(BACKEND_REF64, V_BRANCHFORMER); }
Test(asr_transducer, branchformer_loss_and_every_gradient_match_espnet_cpu)
{
    check_loss(BACKEND_CPU, 1e-5, V_BRANCHFORMER);
}
Test(asr_transducer, branchformer_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_BRANCHFORMER);
}
/* RNNDecoder rnn_type gru, embed_size 8 -> hidden_size 12: torch.nn.GRU layers decoder.rnn.<l>. */
Test(asr_transducer, gru_decoder_loss_and_gradients_match_espnet_cpu) { check_loss(BACKEND_CPU, 1e-5, V_GRU); }
Test(asr_transducer, gru_decoder_loss_and_gradients_match_espnet_ref64) { check_loss(BACKEND_REF64, 1e-5, V_GRU); }

/* ---- the config -------------------------------------------------------------------------- */

/* A training config whose model section is `model` (NULL, err set: it does not load). */
static esp_config *model_yaml(const char *dir, const char *model, esp_err *err)
{
    const char *p = test_path(dir, "training.yaml");
    char *text = xasprintf("model:\n%s", model);
    test_write_text(p, text);
    free(text);
    config_load_opts o = {0};
    esp_config *cfg;
    return config_load(CONFIG_TRAINING, p, &o, &cfg, err) != 0 ? NULL : cfg;
}

static int dims_of_yaml(const char *dir, const char *model, model_dims *d, esp_err *err)
{
    esp_config *cfg = model_yaml(dir, model, err);
    if (!cfg) return -1;
    int rc = model_dims_from_cfg(d, ((const training_cfg *)cfg->typed)->model, 80, 30, err);
    config_free(cfg);
    return rc;
}

/* ctc_times_in_cfg of a model section (-1: it does not load). */
static int times_of_yaml(const char *dir, const char *model)
{
    esp_err err;
    esp_config *cfg = model_yaml(dir, model, &err);
    if (!cfg) return -1;
    int rc = ctc_times_in_cfg(((const training_cfg *)cfg->typed)->model);
    config_free(cfg);
    return rc;
}

#define BODY "  encoder_conf:\n    body_conf:\n      - block_type: conformer\n        hidden_size: 8\n" \
             "        linear_size: 16\n        heads: 2\n        conv_mod_kernel_size: 3\n"

#define EBF "  encoder_conf:\n    body_conf:\n      - block_type: ebranchformer\n        hidden_size: 8\n" \
            "        heads: 2\n        conv_mod_kernel_size: 3\n"

#define C1D "  encoder_conf:\n    body_conf:\n      - block_type: conv1d\n"
#define C1D_NEXT "      - block_type: conv1d\n"

/* mini_an4's model section into the dims (ESPnet2's defaults for the rest); each key ESPnet2 takes
 * that espnet3 does not build, and the ASR task's keys under this task, refused with the key. */
Test(asr_transducer, config_keys_into_dims_and_what_is_refused)
{
    char dir[256];
    test_tmpdir_make(dir, sizeof dir, "asr_transducer_cfg");
    model_dims d;
    esp_err err;
    cr_assert_eq(dims_of_yaml(dir, BODY "        num_blocks: 3\n  decoder_conf:\n    embed_size: 4\n    hidden_size: 4\n"
                                     "  joint_network_conf:\n    joint_space_size: 6\n  model_conf:\n"
                                     "    auxiliary_ctc_weight: 0.3\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.body && d.encoder == ENC_CONFORMER && d.macaron && d.rel_pos && d.use_cnn && d.act == ACT_SWISH);
    cr_assert(d.d == 8 && d.ff == 16 && d.heads == 2 && d.cnn_kernel == 3 && d.blocks == 3 &&
              d.input_layer == IN_CONV2D);
    cr_assert(d.tr_layers == 1 && d.tr_hidden == 4 && d.tr_joint == 6 && !d.no_ctc);
    cr_assert_eq(dims_of_yaml(dir, BODY, &d, &err), 0, "%s", err.msg);
    cr_assert(d.tr_hidden == 256 && d.tr_joint == 256 && d.no_ctc); /* RNNDecoder's, JointNetwork's defaults */
    cr_assert(!d.simplified_att);
    /* simplified_att_score: the same blocks, their attention without pos_bias_u / v */
    cr_assert_eq(dims_of_yaml(dir, BODY "    main_conf:\n      simplified_att_score: true\n", &d, &err), 0, "%s",
                 err.msg);
    cr_assert(d.simplified_att && d.rel_pos && d.body && d.d == 8 && d.heads == 2);
    cr_assert_eq(dims_of_yaml(dir, BODY "  decoder: stateless\n  decoder_conf:\n    embed_size: 6\n", &d, &err), 0,
                 "%s", err.msg);
    cr_assert(d.tr_stateless && d.tr_layers == 0 && d.tr_hidden == 6 && d.tr_joint == 256);
    cr_assert_eq(dims_of_yaml(dir, BODY "  decoder: stateless\n", &d, &err), 0, "%s", err.msg);
    cr_assert(d.tr_stateless && d.tr_hidden == 256); /* StatelessDecoder's embed_size */
    /* RNNDecoder with GRU layers and its own embedding width */
    cr_assert_eq(dims_of_yaml(dir, BODY "  decoder_conf:\n    rnn_type: gru\n    embed_size: 6\n    hidden_size: 4\n"
                                     "    num_layers: 2\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.tr_gru && d.tr_layers == 2 && d.tr_hidden == 4 && model_tr_embed(&d) == 6);
    /* lm_lin with auxiliary_lm_loss_weight > 0 alone (ESPnet2 builds it only then) */
    cr_assert(!d.tr_lm_lin);
    cr_assert_eq(dims_of_yaml(dir, BODY "  model_conf:\n    auxiliary_lm_loss_weight: 0.2\n    fastemit_lambda: 0.01\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.tr_lm_lin);
    cr_assert_eq(dims_of_yaml(dir, BODY "  model_conf:\n    auxiliary_lm_loss_weight: 0.0\n", &d, &err), 0, "%s",
                 err.msg);
    cr_assert(!d.tr_lm_lin);
    /* ebranchformer blocks: linear_size is the feed-forward's and the gating MLP's; conv_mod_act_type
     * is the Conformer's alone */
    cr_assert_eq(dims_of_yaml(dir, EBF "        linear_size: 16\n        num_blocks: 2\n    main_conf:\n"
                                   "      pos_wise_act_type: relu\n      conv_mod_act_type: swish\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.body && d.encoder == ENC_EBRANCHFORMER && d.macaron && d.use_ffn && d.rel_pos && !d.use_cnn);
    cr_assert(d.d == 8 && d.ff == 16 && d.cgmlp_units == 16 && d.cgmlp_kernel == 3 && d.merge_kernel == 3 &&
              d.blocks == 2 && d.act == ACT_RELU && d.gate_act == ACT_IDENTITY && !d.linear_after_conv);
    /* branchformer blocks: no feed-forward (pos_wise_dropout_rate unread) and no merge convolution */
    cr_assert_eq(dims_of_yaml(dir, "  encoder_conf:\n    body_conf:\n      - block_type: branchformer\n"
                                   "        hidden_size: 8\n        heads: 2\n        linear_size: 16\n"
                                   "        conv_mod_kernel_size: 5\n        pos_wise_dropout_rate: 0.3\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.encoder == ENC_EBRANCHFORMER && !d.use_ffn && d.merge_kernel == 0 && d.cgmlp_kernel == 5 &&
              d.cgmlp_units == 16);
    /* main_conf's norms with each block's eps and partial, get_normalization's defaults for the rest
     * (RMSNorm's eps 1e-5; layer_norm's 1e-12 is eps 0); the Conformer's convolution module keeps
     * its BatchNorm1d whatever conv_mod_norm_type says */
    cr_assert_eq(dims_of_yaml(dir, EBF "        linear_size: 16\n        norm_partial: 0.5\n        conv_mod_norm_eps: 0.001\n"
                                   "    main_conf:\n      norm_type: rms_norm\n      conv_mod_norm_type: basic_norm\n"
                                   "      after_norm_eps: 0.01\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.norm.kind == NORM_RMS && d.norm.p == 4 && d.norm.eps == 1e-5f);
    cr_assert(d.csgu_norm.kind == NORM_BASIC && d.csgu_norm.eps == 0.001f && d.csgu_norm.p == 0);
    cr_assert(d.after_norm.kind == NORM_RMS && d.after_norm.eps == 0.01f && d.after_norm.p == 0);
    cr_assert_eq(dims_of_yaml(dir, BODY "        norm_eps: 0.0001\n    main_conf:\n      conv_mod_norm_type: scale_norm\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.norm.kind == NORM_LAYER && d.norm.eps == 1e-4f && d.after_norm.kind == NORM_LAYER &&
              d.after_norm.eps == 0 && d.csgu_norm.kind == NORM_LAYER && d.use_cnn);
    /* blocks of different types and sizes (the fixture's MIXED): one group per run, the largest sizes */
    cr_assert_eq(dims_of_yaml(dir, "  encoder_conf:\n    body_conf:\n"
                                   "      - {block_type: conformer, hidden_size: 16, linear_size: 24, heads: 2, "
                                   "conv_mod_kernel_size: 3, num_blocks: 1}\n"
                                   "      - {block_type: conformer, hidden_size: 16, linear_size: 24, heads: 2, "
                                   "conv_mod_kernel_size: 3}\n"
                                   "      - {block_type: ebranchformer, hidden_size: 16, linear_size: 20, heads: 4, "
                                   "conv_mod_kernel_size: 5, depth_conv_kernel_size: 3, dropout_rate: 0.2, "
                                   "pos_wise_dropout_rate: 0.2}\n"
                                   "      - {block_type: branchformer, hidden_size: 16, linear_size: 12, heads: 1, "
                                   "conv_mod_kernel_size: 3, att_dropout_rate: 0.1}\n"
                                   "      - {block_type: conformer, hidden_size: 16, linear_size: 32, heads: 4, "
                                   "conv_mod_kernel_size: 5}\n",
                              &d, &err),
                 0, "%s", err.msg);
    model_dims want = fx_mixed_dims();
    cr_assert(d.blocks == 5 && d.n_groups == 4 && d.encoder == ENC_CONFORMER && d.heads == 4 && d.ff == 32 &&
              d.cgmlp_units == 20 && d.gate_act == ACT_IDENTITY);
    for (int g = 0; g < 4; g++)
        cr_assert(!memcmp(&d.group[g], &want.group[g], sizeof want.group[g]), "group %d", g);
    for (int l = 0; l < 5; l++) /* blocks 0-1, 2, 3, 4 */
        cr_assert_eq(model_block_group(&d, l), l < 2 ? 0 : l - 1, "block %d", l);
    /* the fixture's norms_rms model from its config: each group's norms, and norm_blocks' */
    cr_assert_eq(dims_of_yaml(dir, "  encoder_conf:\n    body_conf:\n"
                                   "      - {block_type: conformer, hidden_size: 16, linear_size: 24, heads: 2, "
                                   "conv_mod_kernel_size: 3, num_blocks: 2, norm_partial: 0.5, norm_eps: 0.0001}\n"
                                   "      - {block_type: ebranchformer, hidden_size: 16, linear_size: 20, heads: 4, "
                                   "conv_mod_kernel_size: 5, depth_conv_kernel_size: 3, conv_mod_norm_eps: 0.001}\n"
                                   "      - {block_type: branchformer, hidden_size: 16, linear_size: 12, heads: 1, "
                                   "conv_mod_kernel_size: 3}\n"
                                   "      - {block_type: conformer, hidden_size: 16, linear_size: 32, heads: 4, "
                                   "conv_mod_kernel_size: 5}\n"
                                   "    main_conf:\n      norm_type: rms_norm\n      conv_mod_norm_type: scale_norm\n"
                                   "      after_norm_partial: 0.25\n",
                              &d, &err),
                 0, "%s", err.msg);
    want = fx_norms_dims(NORM_RMS);
    for (int g = 0; g < 4; g++)
        cr_assert(!memcmp(&d.group[g], &want.group[g], sizeof want.group[g]), "norms_rms group %d", g);
    cr_assert(!memcmp(&d.after_norm, &want.after_norm, sizeof d.after_norm) &&
              !memcmp(&d.norm, &want.norm, sizeof d.norm));
    cr_assert_eq(dims_of_yaml(dir, "  encoder_conf:\n    body_conf:\n"
                                   "      - {block_type: conformer, hidden_size: 16, linear_size: 24, heads: 2, "
                                   "conv_mod_kernel_size: 3, num_blocks: 2}\n"
                                   "      - {block_type: ebranchformer, hidden_size: 16, linear_size: 20, heads: 4, "
                                   "conv_mod_kernel_size: 5, depth_conv_kernel_size: 3}\n"
                                   "      - {block_type: branchformer, hidden_size: 16, linear_size: 12, heads: 1, "
                                   "conv_mod_kernel_size: 3}\n"
                                   "      - {block_type: conformer, hidden_size: 16, linear_size: 32, heads: 4, "
                                   "conv_mod_kernel_size: 5}\n",
                              &d, &err),
                 0, "%s", err.msg);
    model_dims b3 = model_block_dims(&d, 3);
    cr_assert(b3.encoder == ENC_EBRANCHFORMER && b3.heads == 1 && b3.ff == 12 && !b3.use_ffn && !b3.merge_kernel);
    /* a conv1d block that keeps the frames and the size, with ESPnet2's defaults and without */
    cr_assert_eq(dims_of_yaml(dir, BODY C1D_NEXT "        output_size: 8\n        kernel_size: 1\n"
                                   C1D_NEXT "        output_size: 8\n        kernel_size: 1\n        groups: 2\n"
                                   "        dilation: 3\n        bias: false\n        batch_norm: true\n"
                                   "        relu: false\n        dropout_rate: 0.1\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.blocks == 3 && d.n_groups == 3 && d.group[0].encoder == ENC_CONFORMER);
    const struct model_group *c1 = &d.group[1], *c2 = &d.group[2];
    cr_assert(c1->encoder == ENC_CONV1D && c1->cnn_kernel == 1 && c1->c1_groups == 1 && c1->c1_dilation == 1 &&
              c1->c1_bias && !c1->c1_bn && c1->c1_relu);
    cr_assert(c2->encoder == ENC_CONV1D && c2->c1_groups == 2 && c2->c1_dilation == 3 && !c2->c1_bias && c2->c1_bn &&
              !c2->c1_relu);
    /* one that shrinks the frames: kernel_size, stride and dilation as given */
    cr_assert_eq(dims_of_yaml(dir, BODY C1D_NEXT "        output_size: 8\n        kernel_size: 3\n        stride: 2\n"
                                   "        dilation: 2\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.group[1].encoder == ENC_CONV1D && d.group[1].cnn_kernel == 3 && d.group[1].c1_stride == 2 &&
              d.group[1].c1_dilation == 2);
    /* one that changes the size: the blocks after it are of its output_size, so is the encoder's
     * output (after_norm, ctc_lin, lin_enc); the input layer's width and channels stay the first block's */
    cr_assert_eq(dims_of_yaml(dir, BODY C1D_NEXT "        output_size: 16\n        kernel_size: 3\n        stride: 2\n"
                                   "      - block_type: conformer\n        hidden_size: 16\n        linear_size: 16\n"
                                   "        conv_mod_kernel_size: 3\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.d == 16 && model_embed_dim(&d) == 8 && model_embed_ch(&d) == 8 && !d.embed_raw && d.n_groups == 3);
    cr_assert(d.group[0].d == 8 && d.group[1].d == 16 && d.group[2].d == 16 && model_block_in_dim(&d, 1) == 8 &&
              model_block_in_dim(&d, 2) == 16 && model_block_dims(&d, 1).d == 16 && model_max_width(&d) == 16);
    /* input_conf.conv_size: ConvInput's channels, then its Linear to the first block's hidden_size */
    cr_assert_eq(dims_of_yaml(dir, BODY "    input_conf:\n      conv_size: 16\n", &d, &err), 0, "%s", err.msg);
    cr_assert(d.d == 8 && model_embed_dim(&d) == 8 && model_embed_ch(&d) == 16 && !d.embed_raw);
    /* a conv1d block first: ConvInput without its Linear, of the block's output_size channels (or
     * conv_size) x 19 bins (80 features), the positional encoding's size and the block's input */
    cr_assert_eq(dims_of_yaml(dir, "  encoder_conf:\n    body_conf:\n" C1D_NEXT "        output_size: 8\n"
                                   "        kernel_size: 3\n      - block_type: conformer\n        hidden_size: 8\n"
                                   "        linear_size: 16\n        conv_mod_kernel_size: 3\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.embed_raw && model_embed_ch(&d) == 8 && model_embed_dim(&d) == 8 * 19 && d.d == 8 &&
              d.encoder == ENC_CONFORMER && d.group[0].encoder == ENC_CONV1D && model_block_in_dim(&d, 0) == 152);
    cr_assert_eq(dims_of_yaml(dir, "  encoder_conf:\n    input_conf:\n      conv_size: 4\n    body_conf:\n" C1D_NEXT
                                   "        output_size: 8\n        kernel_size: 3\n      - block_type: conformer\n"
                                   "        hidden_size: 8\n        linear_size: 16\n        conv_mod_kernel_size: 3\n",
                              &d, &err),
                 0, "%s", err.msg);
    cr_assert(d.embed_raw && model_embed_ch(&d) == 4 && model_embed_dim(&d) == 4 * 19);
    /* its CTC's frames are not the input layer's: no times (timestamps, long-form) from it */
#define AUX_CTC "  model_conf:\n    auxiliary_ctc_weight: 0.3\n"
    cr_assert_eq(times_of_yaml(dir, BODY C1D_NEXT "        output_size: 8\n        kernel_size: 1\n" AUX_CTC), 1);
    cr_assert_eq(times_of_yaml(dir, BODY C1D_NEXT "        output_size: 8\n        kernel_size: 3\n" AUX_CTC), 0);
    cr_assert_eq(times_of_yaml(dir, BODY C1D_NEXT "        output_size: 8\n        kernel_size: 1\n        stride: 2\n"
                                    AUX_CTC), 0);
#undef AUX_CTC
    static const struct {
        const char *yaml, *want;
    } bad[] = {
        /* what ESPnet2's validate_architecture rejects, with its reasons */
        {C1D "        kernel_size: 3\n", "body_conf[0]: a conv1d block needs output_size (ESPnet2: \"Missing "
                                          "'output_size' argument for Conv1d block (ID: 1)\")"},
        {C1D "        output_size: 4\n", "Missing 'kernel_size' argument for Conv1d block (ID: 1)"},
        {"  encoder_conf:\n    body_conf:\n      - block_type: conformer\n        hidden_size: 8\n"
         "        conv_mod_kernel_size: 3\n",
         "body_conf[0]: a conformer block needs linear_size (ESPnet2: \"Missing 'linear_size' argument for X-former "
         "block (ID: 1)\")"},
        {BODY "      - block_type: conformer\n        hidden_size: 4\n        linear_size: 16\n"
              "        conv_mod_kernel_size: 3\n",
         "body_conf[1]: its input size 4 differs from body_conf[0]'s output size 8 (ESPnet2: \"Output/Input "
         "mismatch between blocks 0 and 1 in the encoder body\")"},
        {BODY C1D_NEXT "        output_size: 16\n        kernel_size: 3\n      - block_type: conformer\n"
              "        hidden_size: 8\n        linear_size: 16\n        conv_mod_kernel_size: 3\n",
         "body_conf[2]: its input size 8 differs from body_conf[1]'s output size 16"},
        {BODY C1D_NEXT "        output_size: 6\n        kernel_size: 3\n        groups: 3\n",
         "body_conf[1].groups: 3 must divide the input size 8 and output_size 6 (torch's Conv1d)"},
        {BODY C1D_NEXT "        output_size: 6\n        kernel_size: 3\n        num_blocks: 2\n",
         "body_conf[1].num_blocks: repeated conv1d blocks need output_size 6 = their input size 8"},
        /* what ESPnet2 builds and espnet3 does not: an encoder of conv1d blocks alone; a ConvInput
         * whose output (conv_size x bins) is odd, which ESPnet2's RelPositionalEncoding fails on */
        {C1D "        output_size: 4\n        kernel_size: 3\n",
         "model.encoder_conf.body_conf: conv1d blocks alone are not built (add an X-former block after them)"},
        {C1D "        output_size: 4\n        kernel_size: 3\n" C1D_NEXT "        output_size: 4\n        kernel_size: 1\n",
         "model.encoder_conf.body_conf: conv1d blocks alone are not built"},
        {"  encoder_conf:\n    input_conf:\n      conv_size: 3\n    body_conf:\n" C1D_NEXT "        output_size: 8\n        kernel_size: 1\n"
         "      - block_type: conformer\n        hidden_size: 8\n        linear_size: 16\n"
         "        conv_mod_kernel_size: 3\n",
         "the input block's output size 57 (conv_size 3 x the frequency bins left) must be even"},
        {EBF "        linear_size: 16\n      - block_type: conformer\n        hidden_size: 8\n        linear_size: 16\n"
             "        conv_mod_kernel_size: 3\n    main_conf:\n      conv_mod_act_type: relu\n",
         "pos_wise_act_type swish and conv_mod_act_type relu differ"},
        {EBF "        linear_size: 15\n", "body_conf[0].linear_size: 15 must be even"},
        {EBF "        linear_size: 16\n        depth_conv_kernel_size: 4\n", "depth_conv_kernel_size: 4 must be odd"},
        {EBF "        linear_size: 16\n        conv_mod_norm_eps: 0\n", "conv_mod_norm_eps: 0 must be positive"},
        {EBF "        linear_size: 16\n        norm_partial: 0.01\n    main_conf:\n      norm_type: rms_norm\n",
         "norm_partial: 0.01 of 8 columns is none"},
        {BODY "  decoder: mega\n", "model.decoder: 'mega' is not supported"},
        {BODY "  decoder: stateless\n  decoder_conf:\n    hidden_size: 4\n",
         "rnn_type, num_layers, hidden_size and dropout_rate are RNNDecoder's"},
        {"  decoder: stateless\n", "model.decoder: 'stateless' is not supported (supported: transformer, transducer, "
                                  "none) in the ASR task"},
        {BODY "  decoder_conf:\n    rnn_type: rnn\n", "model.decoder_conf.rnn_type: 'rnn' is not supported"},
        {BODY "  decoder_conf:\n    embed_size: 0\n", "embed_size, hidden_size and num_layers must be positive"},
        {BODY "  model_conf:\n    fastemit_lambda: -0.1\n",
         "model.model_conf.fastemit_lambda: -0.1 must not be negative"},
        {BODY "  model_conf:\n    auxiliary_lm_loss_weight: -1\n", "auxiliary_lm_loss_weight -1 must not be negative"},
        {BODY "  model_conf:\n    auxiliary_lm_loss_weight: 0.3\n    auxiliary_lm_loss_smoothing: 1.5\n",
         "model.model_conf.auxiliary_lm_loss_smoothing: 1.5 is outside [0, 1]"},
        {BODY "  model_conf:\n    ctc_weight: 0.3\n", "ctc_weight, lsm_weight, length_normalized_loss and interctc_weight"},
        {BODY "    output_size: 8\n", "model.encoder_conf.output_size: a key of the ASR task's encoders"},
        {BODY "    main_conf:\n      conv_mod_act_type: relu\n", "pos_wise_act_type swish and conv_mod_act_type relu"},
        {BODY "    main_conf:\n      dynamic_chunk_training: true\n      short_chunk_size: 0\n",
         "main_conf.short_chunk_size: 0 with dynamic_chunk_training divides by zero in ESPnet2"},
        {BODY "  joint_net_conf:\n    joint_space_size: 4\n", "model.joint_net_conf: the ASR task's name"},
        {"  decoder: transducer\n  joint_network_conf:\n    joint_space_size: 4\n",
         "model.joint_network_conf: the asr_transducer task's"},
        {"  model_conf:\n    ctc_weight: 0.3\n    transducer_weight: 0.5\n", "model.model_conf (transducer_weight"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = dims_of_yaml(dir, bad[i].yaml, &d, &err);
        cr_assert_neq(rc, 0, "%s", bad[i].yaml);
        cr_assert(strstr(err.msg, bad[i].want), "%s\nlacks\n%s", err.msg, bad[i].want);
    }
    /* more runs of differing blocks than model_dims holds */
    char yaml[4096] = "  encoder_conf:\n    body_conf:\n";
    for (int i = 0; i <= MODEL_MAX_GROUPS; i++)
        snprintf(yaml + strlen(yaml), sizeof yaml - strlen(yaml),
                 "      - {block_type: conformer, hidden_size: 8, linear_size: %d, conv_mod_kernel_size: 3}\n",
                 16 + 2 * (i % 2));
    cr_assert_neq(dims_of_yaml(dir, yaml, &d, &err), 0);
    cr_assert(strstr(err.msg, "body_conf[16]: more than 16 runs of blocks that differ"), "%s", err.msg);
    test_tmpdir_remove(dir);
}

Test(asr_transducer, fastemit_and_aux_lm_loss_and_every_gradient_match_espnet_cpu)
{
    check_loss(BACKEND_CPU, 1e-5, V_AUX);
}
Test(asr_transducer, fastemit_and_aux_lm_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_AUX);
}

/* An Encoder whose blocks differ in type and sizes (packs mixed_*; core/nn/encoder_body.c). */
Test(asr_transducer, mixed_blocks_encoder_output_matches_espnet_cpu) { check_encoder(BACKEND_CPU, V_MIXED); }
Test(asr_transducer, mixed_blocks_encoder_output_matches_espnet_ref64) { check_encoder(BACKEND_REF64, V_MIXED); }
Test(asr_transducer, mixed_blocks_loss_and_every_gradient_match_espnet_cpu) { check_loss(BACKEND_CPU, 1e-5, V_MIXED); }
Test(asr_transducer, mixed_blocks_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_MIXED);
}

/* conv1d blocks of kernel 1 between X-former blocks (packs pointwise_*): BatchNorm1d, groups, no ReLU
 * or bias, and out_pos, whose gradient comes from the later blocks' attention. */
Test(asr_transducer, pointwise_conv1d_encoder_output_matches_espnet_cpu) { check_encoder(BACKEND_CPU, V_POINTWISE); }
Test(asr_transducer, pointwise_conv1d_encoder_output_matches_espnet_ref64)
{
    check_encoder(BACKEND_REF64, V_POINTWISE);
}
Test(asr_transducer, pointwise_conv1d_loss_and_every_gradient_match_espnet_cpu)
{
    check_loss(BACKEND_CPU, 1e-5, V_POINTWISE);
}
Test(asr_transducer, pointwise_conv1d_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_POINTWISE);
}

/* conv1d blocks that shrink the frames (packs shrink_*; ESPnet2 with its Encoder.forward patched to
 * return the last block's mask lengths): 15 -> 7 -> 6 frames, lengths [15, 12] -> [7, 6] -> [6, 6]. */
Test(asr_transducer, shrinking_conv1d_encoder_output_and_lengths_match_espnet_cpu_and_ref64)
{
    check_encoder(BACKEND_CPU, V_SHRINK), check_encoder(BACKEND_REF64, V_SHRINK);
}
Test(asr_transducer, shrinking_conv1d_loss_and_every_gradient_match_espnet_cpu_and_ref64)
{
    check_loss(BACKEND_CPU, 1e-5, V_SHRINK), check_loss(BACKEND_REF64, 1e-5, V_SHRINK);
}

/* main_conf's norm_type and conv_mod_norm_type other than layer_norm (packs norms_<kind>_*; MIXED's
 * blocks, so every norm site: the Conformer's, the (E-)Branchformer's and their gating units',
 * norm_blocks), with per-entry eps and partial keys: core/nn/norm_spec.h, the rownorm ops. */
Test(asr_transducer, rms_norm_encoder_output_loss_and_every_gradient_match_espnet)
{
    check_encoder(BACKEND_CPU, V_NORMS_RMS), check_encoder(BACKEND_REF64, V_NORMS_RMS);
    check_loss(BACKEND_CPU, 1e-5, V_NORMS_RMS), check_loss(BACKEND_REF64, 1e-5, V_NORMS_RMS);
}
Test(asr_transducer, basic_norm_encoder_output_loss_and_every_gradient_match_espnet)
{
    check_encoder(BACKEND_CPU, V_NORMS_BASIC), check_encoder(BACKEND_REF64, V_NORMS_BASIC);
    check_loss(BACKEND_CPU, 1e-5, V_NORMS_BASIC), check_loss(BACKEND_REF64, 1e-5, V_NORMS_BASIC);
}
Test(asr_transducer, scale_norm_encoder_output_loss_and_every_gradient_match_espnet)
{
    check_encoder(BACKEND_CPU, V_NORMS_SCALE), check_encoder(BACKEND_REF64, V_NORMS_SCALE);
    check_loss(BACKEND_CPU, 1e-5, V_NORMS_SCALE), check_loss(BACKEND_REF64, 1e-5, V_NORMS_SCALE);
}

/* A .pth of each norm model (BasicNorm's scalar eps, ScaleNorm's scalar scale, RMSNorm's scale
 * vector under ESPnet2's names and shapes) loads back into the same model bit for bit. */
Test(asr_transducer, norm_models_cross_a_pth_file)
{
    char dir[256];
    test_tmpdir_make(dir, sizeof dir, "asr_transducer_norm_pth");
    for (variant v = V_NORMS_RMS; v <= V_NORMS_SCALE; v++) {
        fixture f;
        setup(&f, BACKEND_CPU, v);
        const param_table *t = &f.m.table;
        float *state = calloc(t->state_total, sizeof *state), *back = calloc(t->state_total, sizeof *back);
        int64_t *counts = calloc(t->n, sizeof *counts);
        st_tensor *ts = calloc(t->n, sizeof *ts);
        asr_model_state_to_host(&f.m, state);
        model_state_tensors(t, state, counts, ts);
        for (size_t i = 0; i < t->n; i++) { /* the fixture's ESPnet2 tensors, shapes as torch's */
            size_t n;
            pack_must(&f.w, ts[i].name, &n);
            cr_assert_eq(n, t->items[i].count, "%s", ts[i].name);
            if (strstr(ts[i].name, ".eps") || (v == V_NORMS_SCALE && strstr(ts[i].name, ".scale")))
                cr_assert_eq(ts[i].ndim, 0, "%s is a scalar in ESPnet2", ts[i].name);
        }
        const char *path = test_path(dir, "m.pth");
        esp_err err;
        cr_assert_eq(pt_write(path, ts, t->n, &err), 0, "%s", err.msg);
        model_dims d = fixture_dims(v);
        asr_model m2;
        asr_model_init_inference(&m2, f.be, &d);
        cr_assert_eq(asr_model_load_weights(&m2, path, &err), 0, "%s", err.msg);
        asr_model_state_to_host(&m2, back);
        cr_assert(!memcmp(state, back, t->state_total * sizeof *state), "variant %d: the weights differ", (int)v);
        asr_model_free(&m2);
        free(state), free(back), free(counts), free(ts);
        teardown(&f);
    }
    test_tmpdir_remove(dir);
}

/* conv1d blocks that change the size (packs widen_*: 16 -> 24 -> 20, X-former blocks of each width
 * between them, ConvInput of conv_size 8; ESPnet2's Encoder.forward patched as for shrink_*). */
Test(asr_transducer, widening_conv1d_encoder_output_and_lengths_match_espnet_cpu_and_ref64)
{
    check_encoder(BACKEND_CPU, V_WIDEN), check_encoder(BACKEND_REF64, V_WIDEN);
}
Test(asr_transducer, widening_conv1d_loss_and_every_gradient_match_espnet_cpu_and_ref64)
{
    check_loss(BACKEND_CPU, 1e-5, V_WIDEN), check_loss(BACKEND_REF64, 1e-5, V_WIDEN);
}

/* A conv1d block first (packs convfirst_*: ConvInput without its Linear, 64 features into the
 * positional encoding and the conv1d block 64 -> 16). */
Test(asr_transducer, conv1d_first_encoder_output_and_lengths_match_espnet_cpu_and_ref64)
{
    check_encoder(BACKEND_CPU, V_CONVFIRST), check_encoder(BACKEND_REF64, V_CONVFIRST);
}
Test(asr_transducer, conv1d_first_loss_and_every_gradient_match_espnet_cpu_and_ref64)
{
    check_loss(BACKEND_CPU, 1e-5, V_CONVFIRST), check_loss(BACKEND_REF64, 1e-5, V_CONVFIRST);
}

/* main_conf.blockdrop_rate (MultiBlocks' stochastic depth; core/nn/encoder_body.c). */
Test(asr_transducer, blockdrop_loss_and_every_gradient_match_espnet_cpu) { check_loss(BACKEND_CPU, 1e-5, V_BLOCKDROP); }
Test(asr_transducer, blockdrop_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_BLOCKDROP);
}
Test(asr_transducer, blockdrop_eval_runs_every_block_cpu) { check_encoder(BACKEND_CPU, V_BLOCKDROP); }
Test(asr_transducer, blockdrop_one_group_runs_on_encoder_body_as_the_conformer_encoder_cpu)
{
    check_loss(BACKEND_CPU, 1e-5, V_ONEGROUP);
}

/* The draws vary with the batch's seed, with ESPnet2's schedule: block l of n skipped with
 * probability rate * l / n, the first never, the last never for rates up to 1. */
Test(asr_transducer, blockdrop_draws_vary_by_seed_with_espnets_schedule)
{
    enum { N = 5, SEEDS = 20000 };
    int count[N] = {0}, patterns[1 << N] = {0}, distinct = 0;
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        int p = 0;
        for (int l = 0; l < N; l++) {
            int d = body_block_dropped(seed, 0.8, l, N);
            count[l] += d, p |= d << l;
        }
        distinct += !patterns[p]++;
    }
    cr_expect_eq(count[0], 0, "the first block always runs");
    cr_expect_eq(count[N - 1], 0, "the last block always runs (rate 0.8)");
    for (int l = 1; l < N - 1; l++) {
        double f = (double)count[l] / SEEDS, want = 0.8 * l / N;
        cr_expect_lt(fabs(f - want), 0.015, "block %d skipped %.3f of the batches, want %.3f", l, f, want);
    }
    cr_expect_eq(distinct, 8, "every skip pattern of blocks 1-3 occurs: %d", distinct);
    cr_expect(body_block_dropped(7, 2.0, N - 1, N), "past 1 the last block may be skipped (its draw is 1)");
    for (uint64_t seed = 1; seed <= 100; seed++)
        cr_expect(!body_block_dropped(seed, 0.0, 3, N), "rate 0 skips nothing");
}

/* main_conf.dynamic_chunk_training (ESPnet2's Encoder.forward and make_chunk_mask, the blocks'
 * causal convolutions): pack chunk_loss, its chunk of 5 of the 15 frames with one left chunk. */
Test(asr_transducer, dynamic_chunk_loss_and_every_gradient_match_espnet_cpu) { check_loss(BACKEND_CPU, 1e-5, V_CHUNK); }
Test(asr_transducer, dynamic_chunk_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_CHUNK);
}
Test(asr_transducer, dynamic_chunk_validation_draws_a_chunk_as_espnet_cpu)
{
    check_encoder(BACKEND_CPU, V_CHUNK);
    /* the three outputs differ: the chunk mask and the causal convolutions each change the encoding */
    pack c = load_pack("asr_transducer", "chunk_loss"), m = load_pack("asr_transducer", "mixed_loss");
    size_t n;
    const float *chunked = pack_must(&c, "out.enc_chunk", &n), *causal = pack_must(&c, "out.enc", &n);
    cr_expect_gt(pack_rel_err(chunked, causal, n, 1.0), 1e-3);
    cr_expect_gt(pack_rel_err(causal, pack_must(&m, "out.enc", &n), n, 1.0), 1e-3);
    pack_free(&c), pack_free(&m);
}
Test(asr_transducer, dynamic_chunk_decoding_is_full_context_with_causal_convolutions_cpu)
{
    check_encoder(BACKEND_CPU, V_CAUSAL);
}

/* The chunk draw: torch.randint(1, T2)'s range, T2 past the threshold, draw % short + 1 below it,
 * varying with the batch's seed. */
Test(asr_transducer, dynamic_chunk_draw_varies_by_seed_with_espnets_rule)
{
    enum { T = 40, SEEDS = 4000 };
    int seen[T + 1] = {0};
    for (uint64_t seed = 1; seed <= SEEDS; seed++) {
        int c = body_chunk_size(seed, T, 0.75, 8);
        cr_assert(c == T || (c >= 1 && c <= 8), "chunk %d", c);
        seen[c]++;
    }
    /* draws 31-39 (9 of 39) take the whole utterance; 1-30 give 1-8 */
    cr_expect_lt(fabs((double)seen[T] / SEEDS - 9.0 / 39), 0.03, "whole-utterance share %d", seen[T]);
    for (int c = 1; c <= 8; c++) cr_expect_gt(seen[c], 0, "chunk %d never drawn", c);
    cr_expect_eq(body_chunk_size(3, 1, 0.75, 8), 1, "one frame: that frame");
}

/* main_conf.simplified_att_score (RelPositionMultiHeadedAttention's simplified score: linear_pos to
 * one scalar per head with a bias, no pos_bias_u / pos_bias_v): packs simplified_*, MIXED's
 * Encoder; with dynamic chunk training, its chunk mask (pack simplified_chunk_loss). */
Test(asr_transducer, simplified_att_score_encoder_output_matches_espnet_cpu_and_ref64)
{
    check_encoder(BACKEND_CPU, V_SIMPLIFIED), check_encoder(BACKEND_REF64, V_SIMPLIFIED);
}
Test(asr_transducer, simplified_att_score_loss_and_every_gradient_match_espnet_cpu)
{
    check_loss(BACKEND_CPU, 1e-5, V_SIMPLIFIED);
}
Test(asr_transducer, simplified_att_score_loss_and_every_gradient_match_espnet_ref64)
{
    check_loss(BACKEND_REF64, 1e-5, V_SIMPLIFIED);
}
Test(asr_transducer, simplified_att_score_dynamic_chunk_matches_espnet_cpu_and_ref64)
{
    check_loss(BACKEND_CPU, 1e-5, V_SIMPLIFIED_CHUNK), check_loss(BACKEND_REF64, 1e-5, V_SIMPLIFIED_CHUNK);
    check_encoder(BACKEND_CPU, V_SIMPLIFIED_CHUNK), check_encoder(BACKEND_CPU, V_SIMPLIFIED_CAUSAL);
}
