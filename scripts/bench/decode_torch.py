"""PyTorch greedy CTC decoding of an espnet3 model, for scripts/bench/decode: the reference model
(asr_ctc_ref.py's TransformerCTC) sized from the safetensors weights and loaded with them
(ESPnet2 names mapped back to the reference's), ESPnet2's DefaultFrontend features (torch.stft +
librosa mel + log, as scripts/bench/fbank_torch.py), global MVN from feats_stats.npz, one
utterance at a time (as ESPnet2's Speech2Text), argmax over the utterance's frames, repeats and
blanks dropped, tokens joined with <space> as ' '. Timed: read WAV + features + forward + decode
for the whole list, one warm-up pass, median of `runs` passes.
    decode_torch.py --ref asr_ctc_ref.py --weights W --tokens T --stats S --manifest M --heads H
                    --threads N --runs R --n_fft 512 --win_length 400 --hop_length 160 --hyp OUT"""
import argparse
import importlib.util
import json
import re
import statistics
import time

import librosa
import numpy as np
import scipy.io.wavfile
import torch

TO_REF = [
    (r'^encoder\.embed\.conv\.0\.', 'embed.conv1.'),
    (r'^encoder\.embed\.conv\.2\.', 'embed.conv2.'),
    (r'^encoder\.embed\.out\.(0\.)?', 'embed.out.'),  # ESPnet's out.0; espnet3's older out
    (r'^encoder\.encoders\.(\d+)\.self_attn\.linear_q\.', r'layers.\1.att.q.'),
    (r'^encoder\.encoders\.(\d+)\.self_attn\.linear_k\.', r'layers.\1.att.k.'),
    (r'^encoder\.encoders\.(\d+)\.self_attn\.linear_v\.', r'layers.\1.att.v.'),
    (r'^encoder\.encoders\.(\d+)\.self_attn\.linear_out\.', r'layers.\1.att.o.'),
    (r'^encoder\.encoders\.(\d+)\.feed_forward\.w_1\.', r'layers.\1.ff1.'),
    (r'^encoder\.encoders\.(\d+)\.feed_forward\.w_2\.', r'layers.\1.ff2.'),
    (r'^encoder\.encoders\.(\d+)\.norm([12])\.', r'layers.\1.norm\2.'),
    (r'^encoder\.after_norm\.', 'after_norm.'),
    (r'^ctc\.ctc_lo\.', 'ctc_lo.'),
]


def read_safetensors(path):
    with open(path, 'rb') as f:
        n = int.from_bytes(f.read(8), 'little')
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == '__metadata__':
            continue
        assert info['dtype'] == 'F32', (name, info['dtype'])
        b, e = info['data_offsets']
        out[name] = torch.from_numpy(np.frombuffer(data[b:e], dtype='<f4').reshape(info['shape']).copy())
    return out


def ref_name(name):
    name = name[6:] if name.startswith('model.') else name
    for pat, rep in TO_REF:
        if re.match(pat, name):
            return re.sub(pat, rep, name)
    raise SystemExit(f'decode_torch.py: no reference name for {name}')


def main():
    ap = argparse.ArgumentParser()
    for k in ['ref', 'weights', 'tokens', 'stats', 'manifest', 'hyp']:
        ap.add_argument('--' + k, required=True)
    for k, v in [('heads', 4), ('threads', 1), ('runs', 3), ('n_fft', 512), ('win_length', 400), ('hop_length', 160)]:
        ap.add_argument('--' + k, type=int, default=v)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    spec = importlib.util.spec_from_file_location('asr_ctc_ref', a.ref)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)

    w = {ref_name(k): v for k, v in read_safetensors(a.weights).items()}
    ref.D_MODEL = w['embed.out.weight'].shape[0]
    ref.D_FF = w['layers.0.ff1.weight'].shape[0]
    ref.N_LAYERS = 1 + max(int(k.split('.')[1]) for k in w if k.startswith('layers.'))
    ref.N_HEADS = a.heads
    tokens = [t.strip('\n') for t in open(a.tokens, encoding='utf-8')]
    st = np.load(a.stats)
    count = float(st['count'])
    mean = st['sum'].astype(np.float64) / count
    std = np.sqrt(np.maximum(st['sum_square'].astype(np.float64) / count - mean * mean, 1e-20))
    model = ref.TransformerCTC(mean=torch.from_numpy(mean.astype(np.float32)),
                               std=torch.from_numpy(std.astype(np.float32)), dropout=0.0, vocab=len(tokens))
    missing, unexpected = model.load_state_dict(w, strict=False)
    buffers = {k for k, _ in model.named_buffers()}  # MVN stats and the PE table come from above
    assert not unexpected and set(missing) <= buffers, (missing, unexpected)
    model.eval()

    utts = [line.rstrip('\n').split('\t')[:2] for line in open(a.manifest, encoding='utf-8') if line.strip()]
    fs = 16000
    window = torch.hann_window(a.win_length)
    mel_t = torch.from_numpy(librosa.filters.mel(sr=fs, n_fft=a.n_fft, n_mels=80, fmin=0, fmax=fs / 2)).T.contiguous()

    def one_pass():
        hyps, audio = [], 0.0
        for utt, wav in utts:
            sr, x = scipy.io.wavfile.read(wav)
            x = torch.from_numpy(x.astype(np.float32) / 32768.0)
            audio += len(x) / fs
            s = torch.stft(x, a.n_fft, hop_length=a.hop_length, win_length=a.win_length, window=window, center=True,
                           pad_mode='reflect', normalized=False, onesided=True, return_complex=True)
            feat = torch.clamp(torch.matmul((s.real ** 2 + s.imag ** 2).T, mel_t), min=1e-10).log()
            logp, hlens = model(feat.unsqueeze(0), torch.tensor([feat.shape[0]]))
            best = logp[0, :int(hlens[0])].argmax(-1).tolist()
            prev, ids = -1, []
            for t in best:
                if t != prev and t != 0:
                    ids.append(t)
                prev = t
            hyps.append((utt, ''.join(' ' if tokens[i] == '<space>' else tokens[i] for i in ids)))
        return hyps, audio

    with torch.inference_mode():
        hyps, audio = one_pass()
        secs = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            one_pass()
            secs.append(time.perf_counter() - t0)
    with open(a.hyp, 'w', encoding='utf-8') as f:
        for utt, text in hyps:
            f.write(f'{utt} {text}\n')
    med = statistics.median(secs)
    print(f'utterances {len(utts)} audio_s {audio:.3f} median_s {med:.4f}')


if __name__ == '__main__':
    main()
