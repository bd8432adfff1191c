#!/usr/bin/env bash
# Installs every Debian package the build, the default recipe and the tests need.
# Idempotent and quiet: prints nothing when everything is already installed.
set -euo pipefail

packages=(
  # build
  gcc make libc6-dev
  libyaml-dev libcyaml-dev      # config files
  libsndfile1-dev libsamplerate0-dev   # audio I/O and resampling
  libfftw3-dev zlib1g-dev       # STFT; .npz (zip) files
  libopenblas-dev               # sgemm for the CPU backend
  libxsmm-dev                   # JIT GEMM kernels for the shapes where they beat OpenBLAS (AVX-512)
  libjansson-dev                # JSON: safetensors headers, trainer state
  libzip-dev                    # PyTorch checkpoints (.pth, .ckpt: torch.save's zip)
  libicu-dev                    # Unicode tables of the metrics' whisper_basic text cleaner
  g++ libsentencepiece-dev      # SentencePiece tokenizers (bpe, unigram) behind core/data/spm_shim.cc
  libpmix-dev pkg-config        # ranks of `srun --mpi=pmix` steps (optional: probed by the Makefile)
  # tests
  libcriterion-dev              # unit/integration test framework
  libboost-context-dev          # fibers of the CUDA emulation's threads (scripts/cuda_emu/emu.cpp)
  clang libclang-rt-14-dev      # libFuzzer + sanitizer runtimes for `make fuzz`
  python3-numpy                 # checks that numpy reads our .npz / safetensors files
  python3-protobuf              # decodes our TensorBoard event records in a test
  python3-sentencepiece         # checks that Python's sentencepiece reads our models the same way
  python3-yaml sox              # the ESPnet3 recipe folders of the tests: their Python reads YAML; sox
                                # carries out the tests' sph2pipe (test/fixtures/egs3/tools)
  python3-soundfile             # ... and ESPnet3's own mini_an4 dataset/ reads WAVs with soundfile
  sctk                          # sclite: the scoring test checks our alignments against it
  # the local SLURM cluster of the runner tests (scripts/slurm_local.sh); libpmix-dev also
  # because srun --mpi=pmix dlopen()s the unversioned libpmix.so
  slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins libpmix-dev
  # the default recipe
  espeak-ng fortunes
  # more voice engines for the default recipe (create_dataset.engines / test_engine)
  festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts flite
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
  command -v sudo >/dev/null || { echo "install_deps.sh: need root to install: ${missing[*]}" >&2; exit 1; }
else
  sudo=
fi
echo "install_deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
