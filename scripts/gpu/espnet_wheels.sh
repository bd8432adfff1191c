#!/usr/bin/env bash
# The Python packages the GPU lease's ESPnet side needs and the GPU machine's image lacks, as
# wheels for its Python (3.12, manylinux x86-64) in DIR, for scripts/gpu/lease.sh pack:
#   scripts/gpu/espnet_wheels.sh DIR
# Which: every distribution whose modules scripts/bench/espnet_step.py and decode_espnet.py import
# in the ESPnet venv (/opt/espnet3-venv, scripts/install_espnet_venv.sh), at the version installed
# there, less those in scripts/gpu/host_packages.txt (the image's list, docs in /work/.library/device).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:?usage: $0 DIR}
VENV_PY=${ESPNET_PYTHON:-/opt/espnet3-venv/bin/python}
mkdir -p "$DIR"
reqs=$(cd scripts/bench && "$VENV_PY" - <<'PY' 2>/dev/null
import importlib.metadata as md, sys
import espnet_step, decode_espnet  # noqa: F401  (their imports are what the lease runs)
dists = md.packages_distributions()
host = {l.strip().lower().replace("_", "-") for l in open("../gpu/host_packages.txt") if l.strip() and not l.startswith("#")}
need = set()
for mod in list(sys.modules):
    for d in dists.get(mod.split(".")[0], []):
        if d.lower().replace("_", "-") not in host:
            need.add(d)
for d in sorted(need):
    print(f"{d}=={md.version(d)}")
PY
)
reqs=$(grep -E '^[A-Za-z0-9_.-]+==[^ ]+$' <<<"$reqs" || true) # ESPnet prints notes on stdout too
[ -n "$reqs" ] || { echo "espnet_wheels: no requirement found (is $VENV_PY the ESPnet venv?)" >&2; exit 1; }
for r in $reqs; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d "$DIR" "$r" 2>/dev/null ||
        python3 -m pip wheel -q --no-deps -w "$DIR" "$r" 2>/dev/null || # a pure-Python sdist, built here
        { echo "espnet_wheels: no cp312 wheel for $r" >&2; exit 1; }
done
echo "espnet_wheels: $(ls "$DIR" | wc -l) wheels in $DIR ($(du -sm "$DIR" | cut -f1) MiB)"
