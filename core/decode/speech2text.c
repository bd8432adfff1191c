/* Speech2Text: model files -> decoder; waveform -> features -> encoder -> CTC search -> text.
 * See speech2text.h. */
#include "core/decode/speech2text.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/asr_data.h"
#include "core/decode/ctc_decode.h"
#include "core/decode/ctc_prefix_beam.h"
#include "core/nn/model.h"

struct speech2text {
    s2t_opts opts;
    backend *be;            /* borrowed */
    asr_data data;          /* no manifest: token list, frontend, normalization */
    asr_model model;
    int have_model;
    ctc_beam *beam;
    err_calc ec;
    /* Work buffers, grown to the longest utterance seen. */
    float *host_feats, *dev_feats, *host_logp;
    size_t feats_cap, dev_cap, logp_cap;
};

void s2t_hyp_free(s2t_hyp *h)
{
    if (!h) return;
    free(h->ids);
    free(h->text);
    memset(h, 0, sizeof *h);
}

speech2text *speech2text_open(backend *be, const model_files *mf, const s2t_opts *o, esp_err *err)
{
    const training_cfg *tc = model_files_training(mf);
    speech2text *s = xcalloc(1, sizeof *s);
    s->opts = *o;
    s->be = be;
    if (asr_data_open_files(&s->data, tc->model, NULL, mf->tokens, 0, err) != 0) goto fail;
    model_dims dims;
    if (model_dims_from_cfg(&dims, tc->model, s->data.fo.n_mels, (int)s->data.tokens.n, err) != 0) goto fail;
    /* A hybrid model's decoder weights load with the rest; CTC decoding does not use them. */
    if (dims.no_ctc) {
        esp_fail(err, "%s: model.model_conf.ctc_weight 0: the model has no CTC branch (ctc.ctc_lo), which CTC "
                      "decoding needs (decode with the joint CTC/attention beam search)",
                 mf->train_config_path);
        goto fail;
    }
    asr_model_init_inference(&s->model, be, &dims);
    s->have_model = 1;
    if (asr_model_load_weights(&s->model, mf->weights, err) != 0) goto fail;
    s->beam = ctc_beam_new();
    err_calc_init(&s->ec, &s->data.tokens);
    return s;
fail:
    speech2text_close(s);
    return NULL;
}

void speech2text_close(speech2text *s)
{
    if (!s) return;
    if (s->have_model) {
        s->be->free(s->be, s->dev_feats);
        asr_model_free(&s->model);
    }
    asr_data_close(&s->data);
    ctc_beam_free(s->beam);
    free(s->host_feats);
    free(s->host_logp);
    free(s);
}

const token_list *speech2text_tokens(const speech2text *s) { return &s->data.tokens; }

/* The encoder's log-probabilities of one utterance, copied to the host; returns their frame count. */
static int encode(speech2text *s, const float *feats, int T)
{
    backend *be = s->be;
    asr_model *m = &s->model;
    size_t nf = (size_t)T * (size_t)s->data.fo.n_mels;
    if (nf > s->dev_cap) {
        be->free(be, s->dev_feats);
        s->dev_feats = be->alloc(be, nf * sizeof(float));
        s->dev_cap = nf;
    }
    be->copy(be, s->dev_feats, feats, nf * sizeof(float), BACKEND_HOST_TO_DEVICE);
    asr_model_forward(m, s->dev_feats, &T, 1, T, 0, 0);
    int hlen = m->hlens[0]; /* host */
    size_t nl = (size_t)hlen * (size_t)m->dims.vocab;
    if (nl + 1 > s->logp_cap) {
        s->logp_cap = nl + 1;
        s->host_logp = xrealloc(s->host_logp, s->logp_cap * sizeof *s->host_logp);
    }
    /* m->logp is device memory: wait for the forward, copy, and wait for the copy before the
     * search reads it (a no-op on the synchronous CPU backend). */
    be->synchronize(be);
    be->copy(be, s->host_logp, m->logp, nl * sizeof(float), BACKEND_DEVICE_TO_HOST);
    be->synchronize(be);
    return hlen;
}

void speech2text_decode_feats(speech2text *s, const float *feats, int T, s2t_hyp *out)
{
    memset(out, 0, sizeof *out);
    int hlen = encode(s, feats, T);
    int V = s->model.dims.vocab;
    out->ids = xmalloc(((size_t)hlen + 1) * sizeof *out->ids);
    int nh;
    if (s->opts.beam_size <= 1) {
        nh = ctc_greedy_decode(out->ids, s->host_logp, hlen, V);
    } else {
        ctc_beam_opts bo = {.beam_size = s->opts.beam_size, .penalty = s->opts.penalty};
        nh = ctc_prefix_beam_search(s->beam, s->host_logp, hlen, V, &bo, out->ids, NULL);
    }
    out->n_ids = (size_t)nh;
    out->text = token_ids_to_text(&s->ec, out->ids, out->n_ids);
    out->frames = T;
}

int speech2text_decode_wav(speech2text *s, const float *wav, size_t n, s2t_hyp *out, esp_err *err)
{
    size_t min = frontend_min_samples(s->data.fe);
    if (n < min) return esp_fail(err, "%zu samples is shorter than the STFT needs (%zu)", n, min);
    size_t T = frontend_num_frames(s->data.fe, n), nf = T * (size_t)s->data.fo.n_mels;
    if (nf > s->feats_cap) {
        s->feats_cap = nf;
        s->host_feats = xrealloc(s->host_feats, nf * sizeof *s->host_feats);
    }
    asr_data_featurize(&s->data, s->host_feats, wav, n);
    speech2text_decode_feats(s, s->host_feats, (int)T, out);
    return 0;
}

int speech2text_decode_files(speech2text *s, const char *const *paths, int n, s2t_hyp *out, esp_err *err)
{
    for (int i = 0; i < n; i++) {
        float *wav = NULL;
        size_t ns;
        int rc = asr_data_read_wav(&s->data, paths[i], &wav, &ns, err);
        if (rc == 0) rc = speech2text_decode_wav(s, wav, ns, &out[i], err);
        free(wav);
        if (rc != 0) {
            while (i-- > 0) s2t_hyp_free(&out[i]);
            return -1;
        }
    }
    return 0;
}
