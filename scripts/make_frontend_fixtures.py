#!/usr/bin/python3
"""Writes the frontend parity fixtures under test/fixtures/frontend/.

Speech from espeak-ng (22050 Hz) is resampled to 16 kHz and stored as 16-bit WAV; for each
configuration the log-mel features are computed the way ESPnet2's DefaultFrontend does
(torch.stft center/reflect with a periodic Hann window centred in n_fft, power, librosa's Slaney
mel matrix, log of max(x, 1e-10)), in float32, and stored as raw little-endian float32 (.f32).

Run with Debian's python3 (python3-torch, python3-numpy, python3-scipy) plus librosa:
    /usr/bin/python3 scripts/make_frontend_fixtures.py [outdir]
"""
import os
import subprocess
import sys
import tempfile

import librosa
import numpy as np
import scipy.io.wavfile
import scipy.signal
import torch

UTTS = [
    ("utt1", "en-us", "Speech features from the same frames."),
    ("utt2", "en-gb+f2", "Quick brown fox."),
    ("utt3", "en-us+m3", "Seven hungry cats ate it all."),
]
CONFIGS = [(512, 400, 160), (512, 512, 128)]  # (n_fft, win_length, hop_length)
FS, N_MELS = 16000, 80


def synth(voice, text):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.wav")
        subprocess.run(["espeak-ng", "-v", voice, "-s", "175", "-w", path, text], check=True)
        sr, x = scipy.io.wavfile.read(path)
    assert sr == 22050, sr
    y = scipy.signal.resample_poly(x.astype(np.float64), 160, 441)  # 22050 -> 16000
    return np.clip(np.round(y), -32768, 32767).astype(np.int16)


def mel_matrix(n_fft):
    return librosa.filters.mel(sr=FS, n_fft=n_fft, n_mels=N_MELS, fmin=0, fmax=FS / 2, htk=False)


def logmel(x, n_fft, win, hop, dtype=torch.float32):
    """ESPnet2 DefaultFrontend: Stft (espnet2/layers/stft.py) + LogMel (espnet2/layers/log_mel.py)."""
    wav = torch.from_numpy(x.astype(np.float64) / 32768.0).to(dtype)
    window = torch.hann_window(win, periodic=True, dtype=dtype)
    spec = torch.stft(wav, n_fft=n_fft, hop_length=hop, win_length=win, window=window,
                      center=True, pad_mode="reflect", normalized=False, onesided=True,
                      return_complex=True)  # (F, T); torch pads the window to n_fft centred
    power = spec.real ** 2 + spec.imag ** 2
    mel = torch.from_numpy(mel_matrix(n_fft)).to(dtype)
    feat = torch.matmul(power.T, mel.T)
    return torch.clamp(feat, min=1e-10).log().numpy()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test",
                                                              "fixtures", "frontend")
    os.makedirs(out, exist_ok=True)
    lines = ["# kind fields... (written by scripts/make_frontend_fixtures.py)",
             "# logmel <wav> <f32> <n_fft> <win_length> <hop_length> <n_mels> <n_samples> <frames>",
             "# melrow <n_fft> <row> <sum> <argmax_bin> <max_value>"]
    for name, voice, text in UTTS:
        x = synth(voice, text)
        scipy.io.wavfile.write(os.path.join(out, name + ".wav"), FS, x)
        for n_fft, win, hop in CONFIGS:
            feat = logmel(x, n_fft, win, hop)
            ref64 = logmel(x, n_fft, win, hop, torch.float64)
            f32 = f"{name}_{n_fft}_{win}_{hop}.f32"
            feat.astype("<f4").tofile(os.path.join(out, f32))
            lines.append(f"logmel {name}.wav {f32} {n_fft} {win} {hop} {N_MELS} {len(x)} {feat.shape[0]}")
            print(f"{f32}: {feat.shape}, float32 vs float64 max abs diff "
                  f"{np.abs(feat - ref64).max():.2e}", file=sys.stderr)
    mel = mel_matrix(512)
    for row in (0, 1, 10, 40, 79):
        r = mel[row]
        lines.append(f"melrow 512 {row} {float(r.astype(np.float64).sum()):.9g} {int(r.argmax())} "
                     f"{float(r.max()):.9g}")
    with open(os.path.join(out, "index.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
