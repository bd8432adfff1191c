#!/usr/bin/env python3
"""Loads every ESPnet3-named model file of an experiment folder with the real PyTorch, as an
ESPnet3 user would (torch.load, weights_only=True, torch's default since 2.6): last.ckpt and the
epoch<E>_step<S>_<monitor>.ckpt files (Lightning's layout: epoch, global_step, state_dict with
"model." names) and the <monitor>.ave_<n>best.pth state dicts. The tests read these files with a
stdlib stand-in (test/fixtures/egs3/tools/torch_load_numpy.py); this is the check against torch
itself, run by hand with the ESPnet venv (scripts/install_espnet_venv.sh):

    /opt/espnet3-venv/bin/python scripts/check_torch_load.py EXP_DIR

Prints one line per file; exits 1 if any file does not load or has another layout.
"""
import glob
import os
import sys

import torch


def check(path):
    d = torch.load(path, map_location="cpu", weights_only=True)
    if path.endswith(".ckpt"):
        for k in ("epoch", "global_step", "state_dict"):
            assert k in d, f"no {k}"
        sd = d["state_dict"]
        assert all(k.startswith("model.") for k in sd), "state_dict names without model."
        head = f"epoch {d['epoch']} global_step {d['global_step']}"
    else:
        sd = d
        head = "state dict"
    assert sd and all(torch.is_tensor(v) for v in sd.values()), "not a dict of tensors"
    n = sum(v.numel() for v in sd.values())
    return f"{head}, {len(sd)} tensors, {n} values"


def main():
    exp = sys.argv[1] if len(sys.argv) > 1 else "."
    files = sorted(glob.glob(os.path.join(exp, "*.ckpt")) + glob.glob(os.path.join(exp, "*.pth")))
    if not files:
        print(f"{exp}: no .ckpt or .pth files", file=sys.stderr)
        return 1
    bad = 0
    for f in files:
        try:
            print(f"{f}: ok, {check(f)} (torch {torch.__version__})")
        except Exception as e:  # report every file, then fail
            print(f"{f}: FAIL {type(e).__name__}: {e}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
