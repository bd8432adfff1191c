#!/usr/bin/env bash
# Word boundaries of `espnet3 align` against the synthesizer's own (docs/decoding.md's table): each
# utterance of test/fixtures/synth_model/speech (espeak-ng speech the fixture model never heard,
# with espeak-ng's word boundaries in word_times: scripts/espeak_word_times.py) aligned to its
# transcript with --ctm, then |ours - espeak-ng's| over every word start and end: the median, the
# 90th percentile and the largest, in milliseconds.
#   scripts/measure_word_times.sh [MODEL [SPEECH_DIR]]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-test/fixtures/synth_model}
speech=${2:-test/fixtures/synth_model/speech}
bin=${ESPNET3_BIN:-build/espnet3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
while read -r utt file; do
  grep "^$utt " "$speech/text" >"$work/$utt.txt"
  "$bin" align -q "$model" "$speech/$file" "$work/$utt.txt" -o "$work/$utt.seg" --ctm "$work/$utt.ctm"
  # the CTM's words in order, numbered as word_times numbers them
  awk -v u="$utt" '{ print u, NR - 1, $3, $3 + $4, $5 }' "$work/$utt.ctm" >>"$work/ours"
done <"$speech/wav.scp"
awk 'NR == FNR { t[$1 " " $2] = $3 " " $4 " " $5; next }
     ($1 " " $2) in t { split(t[$1 " " $2], r, " ");
                        if (r[3] != $5) { print "word mismatch: " $0 > "/dev/stderr"; exit 1 }
                        d1 = $3 - r[1]; d2 = $4 - r[2]; print (d1 < 0 ? -d1 : d1); print (d2 < 0 ? -d2 : d2) }' \
    "$work/ours" "$speech/word_times" | sort -g >"$work/err"
n=$(wc -l <"$work/err")
pick() { sed -n "$(( $1 ))p" "$work/err"; }
printf '%d word boundaries (%d words): median %.0f ms, 90th percentile %.0f ms, max %.0f ms\n' "$n" $((n / 2)) \
  "$(echo "$(pick $((n / 2 + 1))) * 1000" | bc -l)" "$(echo "$(pick $((n * 9 / 10 + 1))) * 1000" | bc -l)" \
  "$(echo "$(pick "$n") * 1000" | bc -l)"
