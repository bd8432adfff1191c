/* The text a character language model of the espeak_fortunes recipe trains on, written by stage 1
 * beside the manifests in ESPnet3's LM dataset format (espnet3.systems.esp2_asr.lm_dataset:
 * UTF-8 lines "<id> <transcript>"):
 *
 *   <data_dir>/lm/train.txt  every distinct sentence of the text source, split as the dataset's
 *                            sentences are (fortunes.h) and normalized as its transcripts are
 *                            (text_norm.h), without the dataset's selection (word counts, plain
 *                            prose, abbreviations): each one that normalizes to a non-empty
 *                            transcript; sorted, ids lm_000001, lm_000002, ... Left out: every
 *                            sentence of a fortune whose normalized text holds a held-out
 *                            transcript (valid, test, test_engine) as whole words, so the LM sees
 *                            neither a held-out transcript nor its context.
 *   <data_dir>/lm/valid.txt  the valid split's transcripts, one line per utterance ("<utt> <text>").
 *   <data_dir>/lm/.built     the dataset's built stamp with the LM text's format: while it matches,
 *                            the files are up to date.
 *
 * Every file is written atomically and holds the same bytes on every run. */
#ifndef ESPNET3_LM_TEXT_H
#define ESPNET3_LM_TEXT_H

#include <stddef.h>
#include "core/base/log.h"

typedef struct lm_text_args {
    const char *text_source;     /* create_dataset.text_source */
    const char *data_dir;        /* lm/ is written here */
    const char *manifest_dir;    /* <split>.tsv of the held-out splits */
    const char *const *held_out; /* split names whose transcripts the LM must not see; "valid" among them */
    size_t n_held_out;
    const char *stamp; /* the dataset's built stamp */
} lm_text_args;

/* 1 when <data_dir>/lm holds train.txt and valid.txt and its stamp matches the dataset's stamp. */
int lm_text_is_built(const char *data_dir, const char *stamp);
/* Writes <data_dir>/lm/{train,valid}.txt, then lm/.built; logs one line with the counts. */
int lm_text_write(const lm_text_args *a, esp_err *err);

#endif
