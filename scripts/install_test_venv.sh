#!/usr/bin/env bash
# Installs the Python packages of the tests' real-world checks (PyTorch loading every .pth/.ckpt we
# write, the real torchrun launching our ranks, Python's safetensors reading our files) from PyPI
# into a cached virtual environment, once per pinned set (scripts/test_venv_requirements.txt).
# `make check` runs it; the tests find the venv through ESPNET3_TEST_VENV.
#   scripts/install_test_venv.sh [VENV]   (default: $ESPNET3_TEST_VENV or ~/.cache/espnet3/test-venv)
# ESPNET3_NO_TEST_VENV=1 skips it: those tests then report themselves skipped, with this reason.
# PyPI's torch for Linux is its CUDA build (about 4.7 GB with its nvidia-* wheels; no GPU needed to
# import it); about 100 s on a fresh machine, nothing once installed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-${ESPNET3_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/espnet3/test-venv}}
REQ=$root/scripts/test_venv_requirements.txt
if [ "${ESPNET3_NO_TEST_VENV:-}" = 1 ]; then exit 0; fi
stamp=$VENV/.espnet3-requirements
# Built on Debian's /usr/bin/python3 and seeing its packages (soundfile and PyYAML, which the recipe
# folders' own Python imports beside torch: test/unit/recipes/test_egs3.c); the pins come first.
BASE=/usr/bin/python3
want=$( { cat "$REQ"; echo "# base $BASE with its system site-packages"; } )
mkdir -p "$(dirname "$VENV")"
# One installer at a time (make check and make asan may start together).
exec 9>"$VENV.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; then exit 0; fi
if ! "$BASE" -c "import venv, ensurepip" 2>/dev/null; then
  sudo=; [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi
echo "install_test_venv.sh: installing $(grep -v '^#' "$REQ" | tr '\n' ' ')into $VENV" >&2
start=$SECONDS
rm -rf "$VENV"
"$BASE" -m venv --system-site-packages "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQ" || {
  echo "install_test_venv.sh: pip could not install $REQ into $VENV (no network? ESPNET3_NO_TEST_VENV=1 skips the" \
       "tests that need it)" >&2
  exit 1
}
"$VENV/bin/python" -c "import torch, safetensors, numpy" || {
  echo "install_test_venv.sh: $VENV/bin/python cannot import torch, safetensors and numpy" >&2; exit 1; }
echo "$want" > "$stamp"
echo "install_test_venv.sh: done in $((SECONDS - start)) s" >&2
