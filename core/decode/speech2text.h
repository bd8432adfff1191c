/* Speech2Text: a trained Transformer-CTC model as a decoder, in the spirit of ESPnet2's
 * espnet2.bin.asr_inference.Speech2Text. Opened once from the model's files (training config:
 * sizes, frontend, normalization stats, token list; weights) and plain options; then waveforms
 * (or audio files, or features) go in and the 1-best token ids and text come out.
 *
 * Each utterance runs through the encoder alone, at its own length: OpenBLAS rounds a GEMM row
 * differently for other row counts, so a padded batch would change the log-probs' last bits with
 * the batch it came in; one forward per utterance gives the same hypothesis in any batch (and is
 * faster on a CPU). beam_size 1 is greedy CTC (ctc_decode.h), more the CTC prefix beam search
 * (ctc_prefix_beam.h) with ESPnet's `penalty` as length bonus.
 *
 * The backend is the caller's: it is created before speech2text_open and destroyed after
 * speech2text_close. The log-probabilities are copied to the host before any search reads them,
 * so any backend (device memory included) works. One speech2text is used by one thread at a time. */
#ifndef ESPNET3_SPEECH2TEXT_H
#define ESPNET3_SPEECH2TEXT_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/compute/backend.h"
#include "core/data/tokenizer.h"
#include "core/nn/model_files.h"

typedef struct s2t_opts {
    int beam_size;   /* 1 (or less) = greedy CTC; more = CTC prefix beam search */
    double penalty;  /* beam search: added per output token (ESPnet's length bonus); 0 = none */
} s2t_opts;

/* The 1-best hypothesis of one utterance. */
typedef struct s2t_hyp {
    int *ids;        /* token ids, blanks removed and repeats merged */
    size_t n_ids;
    char *text;      /* the tokenizer's detokenization (ESPnet's tokens2text: char, word or bpe) */
    int frames;      /* feature frames of the utterance (samples / hop_length + 1) */
} s2t_hyp;

void s2t_hyp_free(s2t_hyp *h);

typedef struct speech2text speech2text;

/* Loads the token list, frontend and normalization named by mf's training config and the weights
 * mf->weights onto be (borrowed: it must outlive the speech2text). NULL with err on failure. */
speech2text *speech2text_open(backend *be, const model_files *mf, const s2t_opts *o, esp_err *err);
void speech2text_close(speech2text *s);

/* The token list the ids index (for callers that detokenize themselves). */
const token_list *speech2text_tokens(const speech2text *s);

/* Decodes T frames of normalized features (T x n_mels, host, row-major). */
void speech2text_decode_feats(speech2text *s, const float *feats, int T, s2t_hyp *out);
/* Decodes a waveform at the model's rate (model.frontend_conf.fs); one shorter than the STFT
 * needs is an error. */
int speech2text_decode_wav(speech2text *s, const float *wav, size_t n, s2t_hyp *out, esp_err *err);
/* Decodes n audio files in order into out[0..n). On an error (unreadable file, wrong rate, too
 * short) nothing is left in out and err names the file. */
int speech2text_decode_files(speech2text *s, const char *const *paths, int n, s2t_hyp *out, esp_err *err);

#endif
