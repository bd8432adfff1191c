#!/usr/bin/env bash
# Installs the real ESPnet (espnet==202511 with torch==2.11.0 and the matching torchaudio, from
# PyPI) into a virtual environment, for the fixture scripts (scripts/make_*_fixtures.py) and the
# benchmark peers. Never a runtime or test dependency: `make check` reads the committed fixtures.
#   scripts/install_espnet_venv.sh [VENV]   (default: $ESPNET_VENV or /opt/espnet3-venv)
# Prints the venv's python path on the last line. Idempotent.
set -euo pipefail
VENV=${1:-${ESPNET_VENV:-/opt/espnet3-venv}}
PY=$VENV/bin/python
if ! command -v python3 >/dev/null || ! python3 -c "import venv, ensurepip" 2>/dev/null; then
  sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends python3-venv python3-pip >/dev/null
fi
[ -x "$PY" ] || python3 -m venv "$VENV"
if ! "$PY" -c "import espnet, torch, torchaudio; assert torch.__version__.startswith('2.11.0')" 2>/dev/null; then
  echo "install_espnet_venv.sh: installing espnet 202511, torch 2.11.0, torchaudio into $VENV" >&2
  "$PY" -m pip install -q --upgrade pip
  "$PY" -m pip install -q torch==2.11.0 torchaudio==2.11.0
  # espnet's own requirements list ci_sdr, which pulls a git URL that pip refuses from PyPI; the
  # ASR modules need none of the speech-enhancement/TTS packages, so install the rest by name.
  "$PY" -m pip install -q --no-deps espnet==202511
  "$PY" -m pip install -q "setuptools<74" packaging "configargparse>=1.2.1" typeguard humanfriendly scipy \
    filelock "librosa>=0.10.2" "PyYAML>=5.1.2" soundfile h5py kaldiio torch_complex nltk "numpy>=2" protobuf \
    hydra-core opt-einsum lightning sentencepiece==0.2.0 editdistance "importlib-metadata<5"
fi
# What espnet2.bin.asr_train imports beyond the ASR modules (its task registry loads the TTS and
# S4 modules too), for scripts/bench/espnet_train_curve.
if ! "$PY" -c "import espnet2.bin.asr_train" >/dev/null 2>&1; then
  "$PY" -m pip install -q einops g2p_en jamo espnet_tts_frontend tensorboard matplotlib
fi
# Whisper's normalizers, which espnet2's TextCleaner imports for whisper_basic / whisper_en, for
# scripts/make_text_cleaner_fixtures.py.
if ! "$PY" -c "import whisper.normalizers" >/dev/null 2>&1; then
  "$PY" -m pip install -q openai-whisper
fi
"$PY" -c "import espnet, torch, torchaudio, sentencepiece" || {
  echo "install_espnet_venv.sh: $PY cannot import espnet, torch, torchaudio, sentencepiece" >&2; exit 1; }
echo "$PY"
