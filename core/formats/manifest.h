/* Dataset manifests: ESPnet3's `<split>.tsv` (utt \t wav \t text, no header) and Kaldi-style
 * data directories (wav.scp, text, utt2spk). */
#ifndef ESPNET3_MANIFEST_H
#define ESPNET3_MANIFEST_H

#include <stddef.h>
#include "core/base/log.h"

typedef struct manifest_entry {
    char *utt;
    char *wav;  /* path to the audio file */
    char *text; /* transcript; may be "" */
    char *spk;  /* speaker id; NULL when the source had none (a .tsv manifest) */
    double start, end; /* Kaldi segments: the utterance is [start, end) seconds of wav; end 0: all of it */
} manifest_entry;

typedef struct manifest {
    manifest_entry *items;
    size_t n, cap;
} manifest;

/* Appends a copy of the fields (spk may be NULL). */
void manifest_add(manifest *m, const char *utt, const char *wav, const char *text, const char *spk);
/* The same for a Kaldi segment: [start, end) seconds of the recording wav (end > start >= 0). */
void manifest_add_span(manifest *m, const char *utt, const char *wav, const char *text, const char *spk, double start,
                       double end);
/* Sorts by utterance id (byte order, as Kaldi's LC_ALL=C sort). */
void manifest_sort(manifest *m);
void manifest_free(manifest *m);

/* Writes `utt \t wav \t text` lines atomically in the manifest's order. Fields must not hold
 * tabs or newlines (an error names the utterance). */
int manifest_write_tsv(const char *path, const manifest *m, esp_err *err);
/* Reads a .tsv manifest; errors name file:line. Duplicate utterance ids are an error. */
int manifest_read_tsv(const char *path, manifest *out, esp_err *err);

/* Writes <dir>/wav.scp, <dir>/text and <dir>/utt2spk (atomically, sorted by utt id); every
 * entry needs a speaker id. Creates dir. */
int manifest_write_kaldi_dir(const char *dir, const manifest *m, esp_err *err);
/* Reads <dir>/wav.scp and <dir>/text (and utt2spk when present), joined on utt id, in wav.scp's
 * order; an utterance missing from text is an error naming it. wav.scp values are audio paths: a
 * command pipe (`sox ... |`) is an error naming its line, and so is a `segments` file (not read yet). */
int manifest_read_kaldi_dir(const char *dir, manifest *out, esp_err *err);

#endif
