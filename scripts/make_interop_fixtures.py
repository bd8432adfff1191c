#!/usr/bin/env python3
"""Writes test/fixtures/interop/: the two-way ESPnet parity fixtures (issue 17).

Run with the ESPnet venv (ESPnet 202511, torch):
    /opt/espnet3-venv/bin/python scripts/make_interop_fixtures.py --ours DIR
where DIR is the `espnet/` folder of an espnet3 model pack (stage 8, e.g. the tiny hybrid recipe:
training_tiny_hybrid.yaml stages 1-5, then inference_tiny.yaml --stages pack_model).

  wav/utt{1,2,3}.wav   short 16 kHz WAVs, synthesized deterministically (a tone per character)
  espnet_model/        a tiny ESPnet2 model trained here for a few hundred steps with ESPnet's own
                       classes (ASRTask.build_model: Transformer encoder 2 blocks d=32, decoder 1 block,
                       char tokens, ctc_weight 0.3, global_mvn): ESPnet2 packed-model layout (meta.yaml,
                       exp/asr_train/config.yaml, exp/asr_train/valid.acc.ave.pth,
                       exp/asr_stats/train/feats_stats.npz)
  espnet3_model/       DIR copied: the model espnet3 trained and packed for ESPnet; loaded here with
                       load_state_dict(strict=True) before decoding
  hyps.txt             Speech2Text's hypotheses, one line each: <model> <beam> <ctc_weight> <utt> <ids>|<text>
                       (model espnet_model or espnet3_model; beam 1 and 4 with ctc_weight 0.3)
"""
import argparse
import importlib
import os
import shutil
import sys
import types
import warnings

warnings.filterwarnings('ignore')
import numpy as np
import scipy.io.wavfile
import torch
import torch._dynamo  # noqa: F401  (imported lazily by Adam; it inspects sys.modules, stubs included)
import yaml

# espnet2.tasks.asr imports every task's optional dependencies; the venv lacks some, none is used
# here (as scripts/bench/decode_espnet.py).
for _name in ['einops', 'g2p_en', 'jamo', 'tacotron_cleaner', 'tacotron_cleaner.cleaners', 'jaconv', 'ci_sdr',
              'fast_bss_eval']:
    try:
        importlib.import_module(_name)
    except ImportError:
        _m = types.ModuleType(_name)
        _m.__path__ = []
        _m.__getattr__ = lambda attr: (lambda *args, **kwargs: None)
        sys.modules[_name] = _m

from espnet2.asr.frontend.default import DefaultFrontend  # noqa: E402
from espnet2.bin.asr_inference import Speech2Text  # noqa: E402
from espnet2.tasks.asr import ASRTask  # noqa: E402

FS = 16000
CHARS = 'ABCDE'
FREQ = {c: 300.0 + 170.0 * i for i, c in enumerate(CHARS)}
TOKENS = ['<blank>', '<unk>', '<space>'] + list(CHARS) + ['<sos/eos>']
TEST = {'utt1': 'ABC', 'utt2': 'CAB E', 'utt3': 'DEAD'}
FRONTEND = dict(fs=FS, n_fft=512, win_length=400, hop_length=160, n_mels=40)


def synth(text, rng):
    """0.12 s of a tone per character, 0.06 s of quiet for a space, a little noise."""
    parts = []
    for c in text:
        n = int(0.12 * FS) if c != ' ' else int(0.06 * FS)
        t = np.arange(n) / FS
        f = FREQ.get(c, 0.0)
        tone = 0.3 * np.sin(2 * np.pi * f * t) * np.hanning(n) if f else np.zeros(n)
        parts.append(tone)
    x = np.concatenate([np.zeros(800), *parts, np.zeros(800)])
    x = x + 0.003 * rng.standard_normal(len(x))
    return np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)


def ids(text):
    return [TOKENS.index('<space>' if c == ' ' else c) for c in text]


def espnet_config(stats_rel):
    return {
        # what ESPnet writes beside a model also holds the training options; espnet3 ignores them
        'batch_type': 'folded', 'batch_size': 8, 'max_epoch': 1, 'optim': 'adam', 'optim_conf': {'lr': 0.005},
        'seed': 0, 'num_workers': 0, 'best_model_criterion': [['valid', 'acc', 'max']],
        'token_list': TOKENS, 'token_type': 'char', 'bpemodel': None, 'init': None, 'input_size': None,
        'model': 'espnet', 'model_conf': {'ctc_weight': 0.3, 'lsm_weight': 0.1, 'length_normalized_loss': False},
        'ctc_conf': {'dropout_rate': 0.0, 'ctc_type': 'builtin', 'reduce': True, 'ignore_nan_grad': None,
                     'zero_infinity': True},
        'use_preprocessor': True, 'non_linguistic_symbols': None, 'cleaner': None, 'g2p': None,
        'frontend': 'default', 'frontend_conf': dict(FRONTEND, fs='16k'),
        'specaug': None, 'specaug_conf': {},
        'normalize': 'global_mvn', 'normalize_conf': {'stats_file': stats_rel},
        'preencoder': None, 'preencoder_conf': {},
        'encoder': 'transformer',
        'encoder_conf': {'output_size': 32, 'attention_heads': 4, 'linear_units': 64, 'num_blocks': 2,
                         'dropout_rate': 0.1, 'positional_dropout_rate': 0.1, 'attention_dropout_rate': 0.0,
                         'input_layer': 'conv2d', 'normalize_before': True},
        'postencoder': None, 'postencoder_conf': {},
        'decoder': 'transformer',
        'decoder_conf': {'attention_heads': 4, 'linear_units': 64, 'num_blocks': 1, 'dropout_rate': 0.1,
                         'positional_dropout_rate': 0.1, 'self_attention_dropout_rate': 0.0,
                         'src_attention_dropout_rate': 0.0},
        'required': ['output_dir', 'token_list'], 'version': '202511', 'distributed': False,
    }


def train_espnet_model(root, rng):
    torch.manual_seed(0)
    train = []
    for i in range(64):
        n = rng.integers(2, 6)
        text = ''.join(rng.choice(list(CHARS + ' '), n)).strip() or 'A'
        train.append((text, synth(text, rng)))
    # global_mvn statistics over the training features (as collect_stats: count, sum, sum_square)
    fe = DefaultFrontend(**FRONTEND)
    count, s, s2 = 0, np.zeros(FRONTEND['n_mels']), np.zeros(FRONTEND['n_mels'])
    with torch.no_grad():
        for _, w in train:
            x = torch.from_numpy(w.astype(np.float32) / 32768)[None]
            f, _ = fe(x, torch.tensor([x.shape[1]]))
            f = f[0].double().numpy()
            count += f.shape[0]
            s += f.sum(0)
            s2 += (f * f).sum(0)
    stats_rel = 'exp/asr_stats/train/feats_stats.npz'
    os.makedirs(os.path.join(root, 'exp/asr_stats/train'), exist_ok=True)
    os.makedirs(os.path.join(root, 'exp/asr_train'), exist_ok=True)
    np.savez(os.path.join(root, stats_rel), count=np.array(count), sum=s, sum_square=s2)
    cfg = espnet_config(stats_rel)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        args = argparse.Namespace(**{**cfg, 'frontend_conf': dict(FRONTEND)})
        model = ASRTask.build_model(args)
    finally:
        os.chdir(cwd)
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    model.train()
    for step in range(300):
        batch = [train[(step * 8 + k) % len(train)] for k in range(8)]
        wl = torch.tensor([len(w) for _, w in batch])
        sp = torch.zeros(8, int(wl.max()))
        for k, (_, w) in enumerate(batch):
            sp[k, :len(w)] = torch.from_numpy(w.astype(np.float32) / 32768)
        tl = torch.tensor([len(ids(t)) for t, _ in batch])
        tx = torch.full((8, int(tl.max())), -1, dtype=torch.long)
        for k, (t, _) in enumerate(batch):
            tx[k, :len(ids(t))] = torch.tensor(ids(t))
        loss, stats, _ = model(sp, wl, tx, tl)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print('espnet model: loss %.3f acc %s' % (loss.item(), stats.get('acc')))
    torch.save(model.state_dict(), os.path.join(root, 'exp/asr_train/valid.acc.ave.pth'))
    with open(os.path.join(root, 'exp/asr_train/config.yaml'), 'w', encoding='utf-8') as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    with open(os.path.join(root, 'meta.yaml'), 'w', encoding='utf-8') as f:
        yaml.safe_dump({'files': {'asr_model_file': 'exp/asr_train/valid.acc.ave.pth'},
                        'yaml_files': {'asr_train_config': 'exp/asr_train/config.yaml'}}, f)


def decode(root, model_file, wavs, name, lines):
    cwd = os.getcwd()
    os.chdir(root)  # ESPnet reads the config's relative paths from the working directory
    try:
        model, _ = ASRTask.build_model_from_file('exp/asr_train/config.yaml', None, 'cpu')
        missing = model.load_state_dict(torch.load(model_file, map_location='cpu', weights_only=True), strict=True)
        assert not missing.missing_keys and not missing.unexpected_keys
        for beam in (1, 4):
            s2t = Speech2Text('exp/asr_train/config.yaml', model_file, device='cpu', beam_size=beam, ctc_weight=0.3,
                              lm_weight=0.0, penalty=0.0, nbest=1, maxlenratio=0.0, minlenratio=0.0)
            for utt, path in wavs:
                rate, w = scipy.io.wavfile.read(path)
                assert rate == FS
                text, token, token_int, hyp = s2t(torch.from_numpy(w.astype(np.float32) / 32768))[0]
                lines.append('%s %d 0.3 %s %s|%s' % (name, beam, utt, ' '.join(map(str, token_int)), text))
    finally:
        os.chdir(cwd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--ours', required=True, help="an espnet3 pack's espnet/ folder")
    ap.add_argument('--out', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test',
                                                   'fixtures', 'interop'))
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, 'wav'))
    rng = np.random.default_rng(17)
    wavs = []
    for utt, text in TEST.items():
        p = os.path.join(out, 'wav', utt + '.wav')
        scipy.io.wavfile.write(p, FS, synth(text, rng))
        wavs.append((utt, p))
    esp = os.path.join(out, 'espnet_model')
    train_espnet_model(esp, np.random.default_rng(3))
    lines = []
    decode(esp, 'exp/asr_train/valid.acc.ave.pth', wavs, 'espnet_model', lines)
    ours = os.path.join(out, 'espnet3_model')
    shutil.copytree(a.ours, ours)
    pth = yaml.safe_load(open(os.path.join(ours, 'meta.yaml')))['files']['asr_model_file']
    decode(ours, pth, wavs, 'espnet3_model', lines)
    with open(os.path.join(out, 'hyps.txt'), 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
