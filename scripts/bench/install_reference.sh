#!/usr/bin/env bash
# Installs what the benchmarks' PyTorch side needs (never the build or the tests): Debian's torch
# and scientific packages for /usr/bin/python3, and librosa (its mel filters; Debian does not
# package it) from PyPI into the same Python. Idempotent and quiet when all is there.
#   scripts/bench/install_reference.sh
set -euo pipefail
PY=/usr/bin/python3
packages=(python3-torch python3-numpy python3-scipy python3-numba python3-joblib python3-sklearn
          python3-pooch python3-msgpack python3-decorator python3-typing-extensions python3-pip)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=
[ "$(id -u)" -eq 0 ] || sudo=sudo
if [ ${#missing[@]} -gt 0 ]; then
  echo "install_reference.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# librosa's own dependencies come from Debian above; these are the ones Debian lacks.
if ! "$PY" -c "import librosa.filters" 2>/dev/null; then
  echo "install_reference.sh: installing librosa from PyPI for $PY" >&2
  $sudo "$PY" -m pip install -q --break-system-packages --root-user-action=ignore --no-deps \
    librosa==0.10.1 lazy_loader audioread soundfile soxr
fi
"$PY" -c "import torch, librosa.filters, scipy.io.wavfile" || {
  echo "install_reference.sh: $PY still cannot import torch, librosa and scipy" >&2; exit 1; }
