#!/usr/bin/env bash
# Hashes of everything the tiny recipe computes (stages 1-6, 3 epochs of 5 steps) on one rank, on two
# ddp ranks and on two fsdp ranks: checkpoints, trainer state, k-best averages and hyp.scp. Run it on
# two trees (before and after a refactor) and diff the outputs: a pure refactor changes no line.
#   scripts/result_hashes.sh [TREE]   (default: this tree; needs ./espnet3 built there)
# Writes under TREE/recipes/espeak_fortunes/{data_tiny,downloads_tiny,exp} (ignored by git).
set -euo pipefail
T=${1:-$(dirname "$0")/..}
cd "$T"
R=recipes/espeak_fortunes
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() { # tag, overrides...
  local tag=$1; shift
  rm -rf $R/exp/training_tiny
  if ! ./espnet3 --config $R/conf/training_tiny.yaml --inference_config $R/conf/inference_tiny.yaml \
      --stage 1 --stop_stage 6 trainer.max_epochs=3 dataloader.train.iter_factory.batches.batch_bins=80000 "$@" \
      >"$log" 2>&1; then
    echo "$tag: FAILED"; tail -5 "$log"; return 1
  fi
  (cd $R/exp/training_tiny && find . -name '*.safetensors' -o -name hyp.scp | sort | xargs sha256sum | sed "s|^|$tag |")
}
run one
run ddp2 trainer.devices=2 num_device=2
run fsdp2 trainer.devices=2 num_device=2 trainer.strategy=fsdp
