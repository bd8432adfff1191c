"""The same log-mel features the way ESPnet2's DefaultFrontend computes them (Stft: torch.stft
center/reflect with a periodic Hann window; LogMel: power @ librosa mel matrix, clamp 1e-10, log),
one utterance at a time, timed like fbank_bench.c: WAVs loaded first, one warm-up pass, median
of `runs` passes. Prints the same line format.
    fbank_torch.py <threads> <runs> <n_fft> <win_length> <hop_length> < wav_list"""
import statistics
import sys
import time

import librosa
import numpy as np
import scipy.io.wavfile
import torch


def main():
    threads, runs, n_fft, win, hop = (int(a) for a in sys.argv[1:6])
    torch.set_num_threads(threads)
    fs = 16000
    wavs = []
    for line in sys.stdin:
        path = line.strip()
        if path:
            sr, x = scipy.io.wavfile.read(path)
            assert sr == fs and x.dtype == np.int16, (path, sr, x.dtype)
            wavs.append(torch.from_numpy(x.astype(np.float32) / 32768.0))
    window = torch.hann_window(win)
    mel = torch.from_numpy(librosa.filters.mel(sr=fs, n_fft=n_fft, n_mels=80, fmin=0, fmax=fs / 2))
    mel_t = mel.T.contiguous()

    def one_pass():
        acc = 0.0
        for x in wavs:
            spec = torch.stft(x, n_fft, hop_length=hop, win_length=win, window=window, center=True,
                              pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
            power = spec.real ** 2 + spec.imag ** 2           # ESPnet2 Stft -> power
            feat = torch.matmul(power.T, mel_t)               # LogMel
            feat = torch.clamp(feat, min=1e-10).log()
            acc += float(feat[feat.shape[0] // 2, 0])
        return acc

    with torch.inference_mode():
        one_pass()
        secs = []
        for _ in range(runs):
            t0 = time.perf_counter()
            one_pass()
            secs.append(time.perf_counter() - t0)
    audio = sum(len(x) for x in wavs) / fs
    med = statistics.median(secs)
    print(f"utterances {len(wavs)} audio_s {audio:.3f} median_s {med:.6f} audio_s_per_s {audio / med:.1f}")


if __name__ == "__main__":
    main()
