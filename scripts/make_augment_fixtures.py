#!/opt/espnet3-venv/bin/python
"""Writes the data augmentation parity fixtures under test/fixtures/augment/.

A short test signal (0.1 s at 16 kHz: three tones, a chirp and seeded noise, peak 0.9) goes
through ESPnet2's own effect functions (espnet2/layers/augmentation.py's effects_dict, which call
torchaudio.functional: the biquad filters, contrast, resample, lfilter...) with fixed arguments,
in float32 as ESPnet's preprocessor runs them (corrupt_phase with scale 0: its noise is torch's
randn, so only the STFT round trip is compared). Written: input.f32 and one <case>.f32 per case
(raw little-endian float32) and cases.yaml, whose `effect` entries are written as ESPnet3's
data_aug_effects entries are ([weight, name, {args}]), so test/unit/data/test_augment.c reads them
with our config parser.

Run in the ESPnet venv (torch 2.11 + torchaudio + espnet 202511):
    /opt/espnet3-venv/bin/python scripts/make_augment_fixtures.py [outdir]
"""
import json
import os
import sys

import numpy as np
import torch
from espnet2.layers.augmentation import effects_dict

FS = 16000
N = 1600

CASES = [
    ("lowpass_1000", "lowpass", {"cutoff_freq": 1000, "Q": 0.707}),
    ("lowpass_default", "lowpass", {}),
    ("highpass_3000", "highpass", {"cutoff_freq": 3000, "Q": 0.707}),
    ("highpass_5000", "highpass", {"cutoff_freq": 5000, "Q": 0.707}),
    ("bandpass_3000", "bandpass", {"center_freq": 3000, "Q": 0.707}),
    ("bandpass_skirt", "bandpass", {"center_freq": 1500, "Q": 2.0, "const_skirt_gain": True}),
    ("bandreject_3000", "bandreject", {"center_freq": 3000, "Q": 0.707}),
    ("equalization_0db", "equalization", {"center_freq": 1000, "gain": 0, "Q": 0.707}),
    ("equalization_12db", "equalization", {"center_freq": 2000, "gain": 12.0, "Q": 2.0}),
    ("equalization_cut", "equalization", {"center_freq": 440, "gain": -9.5, "Q": 1.0}),
    ("contrast_75", "contrast", {"enhancement_amount": 75.0}),
    ("contrast_0", "contrast", {"enhancement_amount": 0}),
    ("speed_0.9", "speed_perturb", {"factor": 0.9}),
    ("speed_1.1", "speed_perturb", {"factor": 1.1}),
    ("speed_1.3", "speed_perturb", {"factor": 1.3}),
    ("speed_0.85", "speed_perturb", {"factor": 0.85}),
    ("preemphasis", "preemphasis", {"coeff": 0.97}),
    ("deemphasis", "deemphasis", {"coeff": 0.97}),
    ("deemphasis_05", "deemphasis", {"coeff": 0.5}),
    ("clipping_default", "clipping", {}),
    ("clipping_10_80", "clipping", {"min_quantile": 0.1, "max_quantile": 0.8}),
    ("polarity_inverse", "polarity_inverse", {}),
    ("reverse", "reverse", {}),
    ("time_stretch_0.9", "time_stretch", {"factor": 0.9}),
    ("time_stretch_1.1", "time_stretch", {"factor": 1.1}),
    ("time_stretch_1.3", "time_stretch", {"factor": 1.3}),
    ("time_stretch_win", "time_stretch", {"factor": 0.8, "win_length": 400, "hop_length": 0.01}),
    ("time_stretch_rect", "time_stretch", {"factor": 1.2, "window": None}),
    ("pitch_shift_2", "pitch_shift", {"n_steps": 2}),
    ("pitch_shift_-3", "pitch_shift", {"n_steps": -3}),
    ("pitch_shift_q", "pitch_shift", {"n_steps": 1.5, "bins_per_octave": 24}),
    ("corrupt_phase_0", "corrupt_phase", {"scale": 0.0}),
]


def signal():
    t = np.arange(N) / FS
    rng = np.random.default_rng(20261124)
    x = (0.3 * np.sin(2 * np.pi * 220 * t) + 0.2 * np.sin(2 * np.pi * 1900 * t + 0.3)
         + 0.15 * np.sin(2 * np.pi * 5200 * t) + 0.2 * np.sin(2 * np.pi * (300 + 20000 * t) * t)
         + 0.1 * rng.standard_normal(N))
    x *= 0.9 / np.max(np.abs(x))
    return x.astype(np.float32)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test",
                                                             "fixtures", "augment")
    os.makedirs(out, exist_ok=True)
    x = signal()
    x.astype("<f4").tofile(os.path.join(out, "input.f32"))
    lines = ["# Made by scripts/make_augment_fixtures.py: ESPnet2's effects_dict (torchaudio %s) on"
             % __import__("torchaudio").__version__,
             "# input.f32 (%d float32 samples at %d Hz); each output is <name>.f32." % (N, FS),
             "fs: %d" % FS, "input: input.f32", "cases:"]
    for name, eff, args in CASES:
        y = effects_dict[eff](torch.from_numpy(x.copy()), FS, **dict(args))
        y = y.numpy().astype("<f4")
        y.tofile(os.path.join(out, name + ".f32"))
        lines.append("  - {name: %s, samples: %d, effect: [1.0, %s, %s]}"
                     % (name, y.size, json.dumps(eff), json.dumps(args)))
        print("%-20s %5d samples, peak %.4f" % (name, y.size, float(np.max(np.abs(y)))))
    with open(os.path.join(out, "cases.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
