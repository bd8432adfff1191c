/* Corpora as they come on disk, read into manifests (utterance, audio path, text, speaker):
 * a LibriSpeech tree and CMU's AN4 tree (as ESPnet's mini_an4 archive holds it). Every error names
 * the file (and line) that is wrong; a reader returns nothing half-built. */
#ifndef ESPNET3_CORPUS_H
#define ESPNET3_CORPUS_H

#include "core/base/log.h"
#include "core/formats/manifest.h"

/* <root>/<split>/<spk>/<chapter>/<spk>-<chapter>.trans.txt, one "<spk>-<chapter>-<utt> TEXT" line per
 * utterance, audio <spk>-<chapter>-<utt>.flac beside it; root is the LibriSpeech folder or its
 * parent. Speakers are "<spk>-<chapter>" as ESPnet's data prep writes them. Sorted by utterance id.
 * A missing split folder, a line that does not parse, an id from another chapter or given twice,
 * a missing .flac or a split without utterances is an error naming the file (and line). */
int corpus_read_librispeech(const char *root, const char *split, manifest *out, esp_err *err);

/* The LibriSpeech folder under root (root/LibriSpeech, or root itself when it holds split
 * folders); NULL when neither. Caller frees. */
char *corpus_librispeech_root(const char *root);

/* AN4: <an4>/etc/an4_<split>.transcription lines "[<s>] WORDS [</s>] (<spk-id>-<speaker>-<n>)",
 * audio <an4>/wav/<an4_clstk|an4test_clstk>/<speaker>/<src>.sph (split train or test). Utterance
 * ids are "<speaker>-<spk-id>-<n>" as ESPnet's mini_an4 prep makes them; sorted by id. */
int corpus_read_an4(const char *an4_root, const char *split, manifest *out, esp_err *err);

/* One AN4 transcript line: *utt, *src, *words (caller frees all three); -1 when it does not parse. */
int corpus_an4_parse_line(const char *line, char **utt, char **src, char **words);

#endif
