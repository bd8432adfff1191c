/* The streaming contextual block encoder (core/nn/encoder_stream.h) against the real ESPnet
 * (fixtures by scripts/make_contextual_stream_fixtures.py: ESPnet2's
 * ContextualBlock{Transformer,Conformer}Encoder.forward_infer fed one utterance in chunks): the frames each
 * push returns and their values within a relative 1e-5, in blocks across pushes (with and without
 * the context vectors' positional encoding, the linear input layer, the Conformer layer with
 * BatchNorm's running statistics) and over a whole utterance that fits a block. Also: a reset stream decodes the same again, and other encoders are refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/formats/npz.h"
#include "core/nn/encoder_stream.h"
#include "core/nn/model.h"
#include "test/unit/nn/nn_fixture.h"
#include "test/unit/test_util.h"

#define TOL 1e-5 /* float32 against float32: ESPnet's frames agree to about 4e-7 */

static model_dims case_dims(const char *name)
{
    model_dims m = {.idim = 20, .d = 16, .heads = 2, .ff = 24, .blocks = 2, .vocab = 9, .encoder = ENC_CONTEXTUAL,
                    .input_layer = IN_CONV2D, .block_size = 8, .hop_size = 4, .look_ahead = 2, .ctx_pos_enc = 1};
    if (!strcmp(name, "no_ctx_pe")) m.blocks = 3, m.block_size = 6, m.hop_size = 3, m.look_ahead = 3, m.ctx_pos_enc = 0;
    if (!strcmp(name, "whole")) m.block_size = 40, m.hop_size = 16, m.look_ahead = 16;
    if (!strcmp(name, "linear")) {
        m.idim = 12, m.heads = 4, m.blocks = 1, m.input_layer = IN_LINEAR;
        m.block_size = 10, m.hop_size = 5, m.look_ahead = 0;
    }
    if (!strcmp(name, "conformer")) m.ctx_conformer = 1, m.use_cnn = 1, m.macaron = 1, m.cnn_kernel = 5;
    if (!strcmp(name, "conformer_whole")) {
        m.ctx_conformer = 1, m.use_cnn = 1, m.cnn_kernel = 3;
        m.block_size = 40, m.hop_size = 16, m.look_ahead = 16;
    }
    m.f2 = input_layer_out_bins(m.input_layer, m.idim);
    return m;
}

/* Pushes the fixture's chunks; checks the frames per push and returns the worst relative error. */
static double stream_once(enc_stream *s, backend *be, const npz_file *f, const model_dims *d, const char *name)
{
    const npy_array *fa = fx_get(f, "in.feats");
    float *feats = fx_floats(fa), *chunks = fx_floats(fx_get(f, "in.chunks")), *counts = fx_floats(fx_get(f, "out.counts"));
    float *ref = fx_floats(fx_get(f, "out.enc"));
    size_t npush = fx_get(f, "in.chunks")->count, at = 0, got = 0;
    size_t total = fx_get(f, "out.enc")->count / (size_t)d->d;
    float *ours = calloc(total * d->d + 1, sizeof *ours);
    for (size_t i = 0; i < npush; i++) {
        const float *out;
        int n = enc_stream_push(s, feats + at * d->idim, (int)chunks[i], i + 1 == npush, &out);
        at += (size_t)chunks[i];
        cr_assert_eq(n, (int)counts[i], "%s push %zu: %d frames, ESPnet %d", name, i, n, (int)counts[i]);
        cr_assert_leq(got + n, total);
        if (n) be->copy(be, ours + got * d->d, out, (size_t)n * d->d * sizeof(float), BACKEND_DEVICE_TO_HOST);
        got += n;
    }
    cr_assert_eq(got, total);
    double e = fx_rel_err(ours, ref, total * d->d);
    free(feats), free(chunks), free(counts), free(ref), free(ours);
    return e;
}

static void check_case(const char *name)
{
    model_dims dims = case_dims(name);
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/contextual_stream/%s.npz", test_root_dir(), name);
    esp_err err;
    npz_file f;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    asr_model m;
    asr_model_init_inference(&m, be, &dims);
    fx_load_state(&m, &f);
    enc_stream *s = enc_stream_open(&m, &err);
    cr_assert_not_null(s, "%s", err.msg);
    double e = stream_once(s, be, &f, &dims, name);
    cr_log_info("%s: streamed encoder output rel err %.3g", name, e);
    cr_expect_lt(e, TOL, "%s: rel err %g", name, e);
    /* A final push leaves the stream ready for the next utterance; a reset drops one midway. */
    const float *out;
    float *feats = fx_floats(fx_get(&f, "in.feats"));
    enc_stream_push(s, feats, 40, 0, &out);
    free(feats);
    enc_stream_reset(s);
    double again = stream_once(s, be, &f, &dims, name);
    cr_expect_lt(again, TOL, "%s after a reset: rel err %g", name, again);
    enc_stream_close(s);
    asr_model_free(&m);
    backend_close(be);
    npz_free(&f);
}

Test(contextual_stream, blocks_across_pushes_match_espnet) { check_case("chunks"); }
Test(contextual_stream, context_without_positions_matches_espnet) { check_case("no_ctx_pe"); }
Test(contextual_stream, one_block_utterance_matches_espnet) { check_case("whole"); }
Test(contextual_stream, linear_input_layer_matches_espnet) { check_case("linear"); }
Test(contextual_stream, conformer_blocks_across_pushes_match_espnet) { check_case("conformer"); }
Test(contextual_stream, conformer_one_block_utterance_matches_espnet) { check_case("conformer_whole"); }

Test(contextual_stream, other_encoders_are_refused)
{
    model_dims dims = {.idim = 20, .d = 16, .heads = 2, .ff = 24, .blocks = 1, .vocab = 9, .encoder = ENC_TRANSFORMER,
                       .input_layer = IN_CONV2D};
    dims.f2 = input_layer_out_bins(dims.input_layer, dims.idim);
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    asr_model m;
    asr_model_init_inference(&m, be, &dims);
    cr_assert_null(enc_stream_open(&m, &err));
    cr_assert(strstr(err.msg, "contextual_block_transformer"), "%s", err.msg);
    asr_model_free(&m);
    backend_close(be);
}
