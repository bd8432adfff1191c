/* Speech2Text: a trained Transformer-CTC model as a decoder, in the spirit of ESPnet2's
 * espnet2.bin.asr_inference.Speech2Text. Opened once from the model's files (training config:
 * sizes, frontend, normalization stats, token list; weights) and plain options; then waveforms
 * (or audio files, or features) go in and the 1-best token ids and text come out.
 *
 * Batches (ESPnet3's inference batch_size; speech2text_decode_feats_batch and the file readers):
 * the encoder runs once over the batch padded to its longest utterance (the encoders' masks, as in
 * training), then every utterance's search: the joint CTC/attention search over all their
 * hypotheses at once (beam_search_run_batch: one decoder call per step for every running hypothesis
 * of every utterance, each utterance ending on its own end detection, CTC prefix scores per
 * utterance), the CTC-only searches and a transducer model's one utterance after another (each on
 * its rows of the batch's encoder output). The hypotheses are those of
 * decoding each utterance alone (tested on the fixture models, batches of mixed lengths): only
 * float rounding differs, since OpenBLAS (and cuBLAS) round a GEMM row differently at other row
 * counts, so the padded encoder's log-probs and the decoder's batched rows differ from an
 * utterance's own in their last bits, and scores with them (docs/decoding.md gives the largest
 * difference measured). A batch of one is the unbatched decoder.
 *
 * Out of memory: before a batch runs, its device memory is planned (the encoder's activations by
 * the model's own allocation code, core/nn/model_plan.h; the features; the joint search's decoder
 * caches at full length) and compared with what the backend has left (be->mem_available: the
 * device's free memory on cuda, a cap on the cpu); a batch that does not fit is decoded as two
 * halves, each split again while it does not fit, down to one utterance (which then runs and fails
 * as today if it cannot). Planning first, instead of catching the failed allocation, leaves no
 * half-grown buffers to unwind; ESPnet3 splits after CUDA's OutOfMemoryError.
 *
 * The search, by ctc_weight (ESPnet's Speech2Text weights: decoder 1 - ctc_weight, ctc ctc_weight,
 * length_bonus penalty):
 *   1.0 (CTC only): beam_size 1 is greedy CTC (ctc_decode.h), more the frame-synchronous CTC prefix
 *       beam search (ctc_prefix_beam.h) with `penalty` as length bonus; its n-best is its final beam.
 *       ESPnet runs its label-synchronous BeamSearch here instead (beam_search.h can, at about 50x
 *       the time): docs/decoding.md, "Where results can differ from ESPnet".
 *   below 1.0: ESPnet's joint CTC/attention BatchBeamSearch (beam_search.h), exactly, with the
 *       model's attention decoder as scorer (decoder_score_batch, core/nn/decoder_transformer.h):
 *       all running hypotheses in one decoder call per step. A model without an attention decoder
 *       (its training config: model.decoder transformer, model_conf.ctc_weight < 1) is an error at
 *       open, unless opts.attention stands in for it; so is ctc_weight above 0 for a model trained
 *       without a CTC branch (model_conf.ctc_weight 0).
 *
 * A model with a transducer decoder (model.decoder transducer) is decoded as ESPnet's Speech2Text
 * decodes it, whatever ctc_weight says: ESPnet2's BeamSearchTransducer on the encoder output
 * (core/decode/transducer_search.h) with beam_size and opts.transducer; its n-best cut to nbest.
 *
 * With lm_weight > 0 and an LM (opts.lm: the files of an LM task's model, core/nn/lm_conf.h) the
 * joint search adds it as ESPnet's Speech2Text does (scorer "lm", weight lm_weight; its token list
 * must be the ASR model's), its next-token log-probs from decoder_score_batch on the LM.
 *
 * The backend is the caller's: it is created before speech2text_open and destroyed after
 * speech2text_close. The log-probabilities are copied to the host before any search reads them,
 * so any backend (device memory included) works. One speech2text is used by one thread at a time. */
#ifndef ESPNET3_SPEECH2TEXT_H
#define ESPNET3_SPEECH2TEXT_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/compute/backend.h"
#include "core/decode/beam_search.h"
#include "core/decode/transducer_search.h"
#include "core/data/frontend.h"
#include "core/data/tokenizer.h"
#include "core/nn/model_files.h"

typedef struct s2t_opts {
    int beam_size;       /* 1 (or less) = greedy CTC when ctc_weight is 1; beam otherwise */
    double penalty;      /* ESPnet's length bonus per output token (eos included in the joint search); 0 = none */
    double ctc_weight;   /* 1.0: CTC only; [0, 1): joint search with the attention decoder */
    int nbest;           /* hypotheses kept per utterance (1 or less: the best only) */
    double maxlenratio;  /* joint search (ESPnet's meaning): 0 = maxlen T with end detection, > 0 ratio, < 0 fixed */
    double minlenratio;
    const bs_scorer *attention; /* NULL: the model's attention decoder; else used in its place (tests,
                                 * a decoder from elsewhere); borrowed */
    double lm_weight;    /* shallow fusion's weight (0: no LM); above 0 every ctc_weight runs the
                          * label-synchronous search (beam_search.h), 1.0 with scorers ctc and lm */
    const model_files *lm; /* the LM's files (lm_files_locate); borrowed, used by speech2text_open */
    int resample;        /* dataset.resample: audio at another rate is resampled to the model's fs */
    ts_opts transducer;  /* a transducer model's search (transducer_conf); nbest 0 (left zeroed): ESPnet's
                          * defaults, TS_OPTS_DEFAULT */
    /* asr_transducer_inference's streaming (core/decode/transducer_stream.h): each utterance decoded
     * chunk by chunk in pieces of decoding_window ms, left_context encoder frames of attention
     * context */
    int streaming, decoding_window, left_context;
    int timestamps;      /* 1: every hypothesis returned, the best and its alternatives, carries token
                          * times from a CTC forced alignment (Viterbi) of its ids against the
                          * utterance's CTC log-probabilities (core/decode/ctc_times.h); needs a CTC branch */
} s2t_opts;

/* Greedy CTC, 1-best: the options a caller that sets nothing else wants. */
#define S2T_OPTS_DEFAULT {.beam_size = 1, .ctc_weight = 1.0, .nbest = 1}

/* The hypotheses of one utterance, best first: this struct holds the best, alt the others. */
typedef struct s2t_hyp {
    int *ids;        /* token ids: no blanks (ESPnet drops id 0), no <sos>/<eos> */
    size_t n_ids;
    char *text;      /* the tokenizer's detokenization (ESPnet's tokens2text: char, word or bpe) */
    double score;    /* joint search: ESPnet's hyp.score; prefix beam: log p(prefix) + penalty * len;
                      * greedy: the log-probability of the best path */
    int frames;      /* feature frames of the utterance (samples / hop_length + 1) */
    int n_found;     /* hypotheses found, at most nbest: this one and alt[0 .. n_found - 1). 0: the joint
                      * search ended none (ESPnet returns an empty n-best): no ids, text "" */
    struct s2t_hyp *alt;
    double *tok_start, *tok_end; /* n_ids each, seconds from the start of the waveform that was decoded;
                                  * NULL unless opts.timestamps; NaN when no CTC path emits the ids
                                  * (more tokens than frames: the attention decoder's hypotheses can) */
    double *tok_score; /* the token's mean frame log-posterior along the path; NULL unless timestamps */
} s2t_hyp;

void s2t_hyp_free(s2t_hyp *h);

typedef struct speech2text speech2text;

/* Checks what opts ask of the model named by mf without loading it (ctc_weight below 1 needs an
 * attention decoder): for callers that want the error before any work. */
int speech2text_check(const model_files *mf, const s2t_opts *o, esp_err *err);

/* Loads the token list, frontend and normalization named by mf's training config and the weights
 * mf->weights onto be (borrowed: it must outlive the speech2text). NULL with err on failure,
 * speech2text_check's errors included. */
speech2text *speech2text_open(backend *be, const model_files *mf, const s2t_opts *o, esp_err *err);
void speech2text_close(speech2text *s);

/* The token list the ids index (for callers that detokenize themselves). */
const token_list *speech2text_tokens(const speech2text *s);
/* What a caller that cuts audio itself needs (core/decode/longform.h): the frontend's settings
 * (fs, hop_length), the shortest waveform it takes, and the options the decoder was opened with. */
const frontend_opts *speech2text_frontend(const speech2text *s);
size_t speech2text_min_samples(const speech2text *s);
const s2t_opts *speech2text_options(const speech2text *s);
/* Sizes the joint search's attention-decoder caches once for waveforms of up to n samples: the
 * beam and the maximum length of their encoder frames, so that they do not grow step by step with
 * the longest hypothesis heard (long-form windows: every window of one length then needs the same
 * memory, reached in the first). Only ever enlarges; nothing for a search without the model's
 * attention decoder. Utterances decoded whole do without it: it sizes for the maximum length,
 * which hypotheses seldom approach. */
void speech2text_reserve(speech2text *s, size_t n);
/* The model's sampling rate (frontend_conf.fs) and output classes (the token list's size). */
int speech2text_fs(const speech2text *s);
int speech2text_vocab(const speech2text *s);
/* What the streaming decoder (core/decode/speech2text_stream.h) runs on its own: the model (eval,
 * on the speech2text's backend), the featurizer (frontend and normalization), the LM's scorer
 * (NULL without shallow fusion), new-utterance resets of the decoder's and the LM's caches, and a
 * hypothesis' text (blanks dropped, detokenized; the caller frees it). One user at a time. */
struct asr_model;
struct asr_data;
struct asr_model *speech2text_model(const speech2text *s);
struct asr_data *speech2text_data(const speech2text *s);
const bs_scorer *speech2text_lm_scorer(const speech2text *s);
void speech2text_new_utterance(const speech2text *s);
char *speech2text_text(const speech2text *s, const int *ids, size_t n);

/* Decodes T frames of normalized features (T x n_mels, host, row-major). */
void speech2text_decode_feats(speech2text *s, const float *feats, int T, s2t_hyp *out);
/* Decodes n utterances' features (feats[i]: T[i] x n_mels) as one batch (split while it does not
 * fit, see above) into out[0..n). */
void speech2text_decode_feats_batch(speech2text *s, const float *const *feats, const int *T, int n, s2t_hyp *out);
/* How many times a batch was split because it did not fit, since speech2text_open. */
int speech2text_batch_splits(const speech2text *s);
/* The device bytes a batch of n utterances of at most Tmax feature frames is planned to take
 * beyond the model's parameters (what is compared with be->mem_available). */
size_t speech2text_batch_bytes(const speech2text *s, int n, int Tmax);
/* Decodes a waveform at the model's rate (model.frontend_conf.fs); one shorter than the STFT
 * needs is an error. */
int speech2text_decode_wav(speech2text *s, const float *wav, size_t n, s2t_hyp *out, esp_err *err);
/* Decodes n waveforms at the model's rate as one batch into out[0..n); one too short is an error
 * (nothing is left in out). */
int speech2text_decode_wavs(speech2text *s, const float *const *wavs, const size_t *ns, int n, s2t_hyp *out,
                            esp_err *err);
/* Decodes n audio files in order into out[0..n), as one batch. On an error (unreadable file, wrong rate, too
 * short) nothing is left in out and err names the file. */
int speech2text_decode_files(speech2text *s, const char *const *paths, int n, s2t_hyp *out, esp_err *err);
/* The same for spans of the files: [starts[i], ends[i]) seconds (Kaldi segments; ends[i] 0: all),
 * one batch. */
int speech2text_decode_spans(speech2text *s, const char *const *paths, const double *starts, const double *ends, int n,
                             s2t_hyp *out, esp_err *err);

/* Forced alignment of given token ids (no search): the log-probs of the waveform at the model's
 * rate, then the ids' CTC alignment into out as a timed hypothesis (ids, text, tok_start, tok_end,
 * tok_score as with opts.timestamps; score: the path's log-probability, -inf when no path fits, the
 * times then NaN). Ids must be tokens of the model (1 .. vocab - 2: no blank, no <sos/eos>). */
int speech2text_align_wav(speech2text *s, const float *wav, size_t n, const int *ids, size_t n_ids, s2t_hyp *out,
                          esp_err *err);
/* The same for an audio file (read and resampled as decode_files does). */
int speech2text_align_file(speech2text *s, const char *path, const int *ids, size_t n_ids, s2t_hyp *out, esp_err *err);

/* The CTC log-probabilities of a waveform of any length, for aligning a long recording: the
 * encoder runs on windows of window_s seconds (its memory bounded by the window's), each window
 * overlapping the next by half its length; a frame is taken from the window where it lies furthest
 * from an edge (the middle half of each window, the outer quarters of the first and last), so it
 * sees at least a quarter window of context on each side. Windows start on encoder-frame
 * boundaries, so the frames stitch into the sequence of one forward over the whole waveform.
 * *logp (*T x vocab, host) is allocated; *frames gets the feature frames of the whole waveform
 * (for speech2text_align_frames' clock). */
int speech2text_ctc_logp(speech2text *s, const float *wav, size_t n, double window_s, float **logp, int *T,
                         int *frames, esp_err *err);
/* Forced alignment of ids against frames [t0, t1) of log-probs from speech2text_ctc_logp (T rows,
 * the waveform's feature frames `frames`): out as speech2text_align_wav gives it, the times in
 * seconds from the start of the waveform. */
void speech2text_align_frames(speech2text *s, const float *logp, int t0, int t1, int frames, const int *ids,
                              size_t n_ids, s2t_hyp *out);

#endif
