#!/usr/bin/env bash
# Makes test/fixtures/synth_model: a small Transformer-CTC model on characters trained on
# espeak-ng's en-us voice (variants m1, m3, f2; recipes/espeak_fortunes/conf/
# training_synth_fixture.yaml), packed by stage 8, with speech it has never heard and espeak-ng's
# own word boundaries for it (scripts/espeak_word_times.py), for the tests of timestamps, forced
# alignment and long recordings. Our own binary does the synthesis of the training data, the
# training (one core), decoding, scoring and packing.
#   scripts/make_synth_model_fixture.sh [WORK_DIR]
# (REUSE=1 with a WORK_DIR whose stages 1-8 already ran with these configs: only the copying and
# the speech.)
# Writes test/fixtures/synth_model/: the pack (model.safetensors, conf/, tokens/, stats/, README.md;
# not its ESPnet copy), RESULTS.md (its WER and CER on valid, the training voices, and test, an
# en-gb voice it never heard) and speech/ (SPEECH_N sentences of the test split said by the en-us
# voices, 16 kHz FLAC: wav.scp, text and word_times, `utt index start end WORD` lines).
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d)}
out=test/fixtures/synth_model
bin=$PWD/build/espnet3
make -s build/espnet3
conf=recipes/espeak_fortunes/conf
common=(--template_dir conf --config $conf/training_synth_fixture.yaml
        --inference_config $conf/inference_synth_fixture.yaml --metrics_config $conf/metrics_ctc.yaml
        data_dir="$work/data" dataset_dir="$work/dl" stats_dir="$work/stats" exp_dir="$work/exp"
        parallel.n_workers=1 create_dataset.nj=1)
start=$SECONDS
if [[ "${REUSE:-}" != 1 ]]; then
  OMP_NUM_THREADS=1 "$bin" "${common[@]}" --stage 1 --stop_stage 8 >"$work/run.log" 2>&1 ||
    { tail -5 "$work/run.log"; exit 1; }
  echo "stages 1-8: $((SECONDS - start)) s"
fi
rm -rf "$out" && mkdir -p "$out/speech"
pack=$work/exp/model_pack
cp -r "$pack/model.safetensors" "$pack/conf" "$pack/tokens" "$pack/stats" "$pack/README.md" "$out/"
# the pack's data_dir is this run's: point it inside the fixture
sed -i "s#^data_dir: .*#data_dir: \${config_path:..}/speech#" "$out/conf/inference.yaml"
cp "$work/exp/inference/RESULTS.md" "$out/RESULTS.md"
# Speech of the training voices from sentences it has not heard (the test split's), with
# espeak-ng's word boundaries.
n=${SPEECH_N:-16}
voices=(en-us+m1 en-us+m3 en-us+f2)
: >"$out/speech/word_times"
: >"$out/speech/text"
: >"$out/speech/wav.scp"
i=0
while IFS=$'\t' read -r _ _ text && (( i < n )); do
  utt=$(printf 'synth%02d' "$i")
  voice=${voices[$((i % 3))]}
  rate=$((150 + (i * 7) % 26)) # the training range, 150-175 wpm
  lower=$(printf '%s' "$text" | tr 'A-Z' 'a-z')
  echo "$utt $lower" | scripts/espeak_word_times.py "$work" "$voice" "$rate" 50 |
    awk '{ $5 = toupper($5); print }' >>"$out/speech/word_times"
  sox "$work/$utt.wav" -r 16000 -b 16 "$out/speech/$utt.flac"
  echo "$utt $text" >>"$out/speech/text"
  echo "$utt $utt.flac" >>"$out/speech/wav.scp"
  i=$((i + 1))
done <"$work/data/manifest/test.tsv"
du -sh "$out"
