"""ESPnet's own joint CTC/attention decoding of an espnet3 model, for scripts/bench/decode: the
model's training config (espnet3's exp/config.yaml: frontend, global_mvn, Transformer encoder,
TransformerDecoder, CTC, model_conf) is written out as an ESPnet2 asr config, the model is built by
espnet2's ASRTask, its state dict filled from the safetensors weights (the names are ESPnet2's
already; every parameter must come from the file), saved as a .pth, and decoded by
espnet2.bin.asr_inference.Speech2Text (BatchBeamSearch, beam, ctc_weight, penalty, maxlenratio
0, minlenratio 0, no LM, nbest 1), one utterance at a time on the WAVs of the manifest. Timed:
read WAV + frontend + encoder + search for the whole list, one warm-up pass, median of `runs`
passes. Needs ESPnet 202511 + torch (/opt/espnet3-venv).
    decode_espnet.py --train_config exp/config.yaml --weights W.safetensors --tokens tokens.txt
                     --manifest test.tsv --workdir DIR --hyp OUT [--beam 10] [--ctc_weight 0.3]
                     [--penalty 0] [--threads 1] [--runs 3] [--device cpu|cuda]"""
import argparse
import importlib
import json
import os
import statistics
import sys
import time
import types
import warnings

warnings.filterwarnings('ignore')
import numpy as np
import scipy.io.wavfile
import torch
import yaml

# espnet2.tasks.asr imports every task's optional dependencies (S4 decoder, phoneme tokenizers,
# text cleaners, enhancement losses); /opt/espnet3-venv lacks these, and none is on this code path
# (char tokens, no cleaner, no g2p). Each missing one becomes an empty module whose attributes are
# no-op callables, so the imports succeed; a use would decode nothing sensible, and none happens.
OPTIONAL = ['einops', 'g2p_en', 'jamo', 'tacotron_cleaner', 'tacotron_cleaner.cleaners', 'jaconv', 'ci_sdr',
            'fast_bss_eval']
STUBBED = []
for _name in OPTIONAL:
    try:
        importlib.import_module(_name)
    except ImportError:
        _m = types.ModuleType(_name)
        _m.__path__ = []
        _m.__getattr__ = lambda attr: (lambda *args, **kwargs: None)
        sys.modules[_name] = _m
        STUBBED.append(_name)

from espnet2.bin.asr_inference import Speech2Text
from espnet2.tasks.asr import ASRTask


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
        key = name[6:] if name.startswith('model.') else name
        out[key] = torch.from_numpy(np.frombuffer(data[b:e], dtype='<f4').reshape(info['shape']).copy())
    return out


def espnet_config(ours, tokens):
    m = ours['model']
    keep = {k: v for k, v in m.items() if k in ('encoder', 'encoder_conf', 'decoder', 'decoder_conf', 'ctc_conf',
                                                 'frontend', 'frontend_conf', 'normalize', 'normalize_conf',
                                                 'model_conf')}
    cfg = dict(keep)
    cfg.update(token_list=tokens, token_type='char', bpemodel=None, model='espnet', input_size=None,
               specaug=None, preencoder=None, postencoder=None, init=None, use_preprocessor=True,
               non_linguistic_symbols=None, cleaner=None, g2p=None)
    cfg['frontend_conf'] = dict(cfg.get('frontend_conf') or {})
    cfg['frontend_conf'].setdefault('n_mels', 80)
    return cfg


def main():
    ap = argparse.ArgumentParser()
    for k in ['train_config', 'weights', 'tokens', 'manifest', 'workdir', 'hyp']:
        ap.add_argument('--' + k, required=True)
    ap.add_argument('--beam', type=int, default=10)
    ap.add_argument('--ctc_weight', type=float, default=0.3)
    ap.add_argument('--penalty', type=float, default=0.0)
    ap.add_argument('--threads', type=int, default=1)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--device', default='cpu')
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    ours = yaml.safe_load(open(a.train_config, encoding='utf-8'))
    tokens = [t.rstrip('\n') for t in open(a.tokens, encoding='utf-8')]
    os.makedirs(a.workdir, exist_ok=True)
    cfg_path = os.path.join(a.workdir, 'espnet_config.yaml')
    with open(cfg_path, 'w', encoding='utf-8') as f:
        yaml.safe_dump(espnet_config(ours, tokens), f)
    model, _ = ASRTask.build_model_from_file(cfg_path, None, 'cpu')
    sd = model.state_dict()
    # espnet3 writes ESPnet2's names (embed.out.0: Linear inside Sequential(Linear, PositionalEncoding));
    # its older files named that Linear embed.out.
    w = {k.replace('encoder.embed.out.', 'encoder.embed.out.0.') if k not in sd else k: v
         for k, v in read_safetensors(a.weights).items()}
    extra = sorted(set(w) - set(sd))
    assert not extra, f'not in ESPnet\'s model: {extra}'
    params = {k for k, _ in model.named_parameters()}
    missing = sorted(params - set(w))
    assert not missing, f'parameters the weights do not give: {missing}'
    for k, v in w.items():
        assert sd[k].shape == v.shape, (k, sd[k].shape, v.shape)
        sd[k] = v
    pth = os.path.join(a.workdir, 'model.pth')
    torch.save(sd, pth)

    s2t = Speech2Text(asr_train_config=cfg_path, asr_model_file=pth, device=a.device, beam_size=a.beam,
                      ctc_weight=a.ctc_weight, lm_weight=0.0, penalty=a.penalty, maxlenratio=0.0, minlenratio=0.0,
                      nbest=1, batch_size=1)
    utts = [line.rstrip('\n').split('\t')[:2] for line in open(a.manifest, encoding='utf-8') if line.strip()]

    def one_pass():
        hyps, audio = [], 0.0
        for utt, wav in utts:
            sr, x = scipy.io.wavfile.read(wav)
            x = x.astype(np.float32) / 32768.0 if x.dtype == np.int16 else x.astype(np.float32)
            audio += len(x) / sr
            text = s2t(torch.from_numpy(x))[0][0]
            hyps.append((utt, text))
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
    print(f'utterances {len(utts)} audio_s {audio:.3f} median_s {statistics.median(secs):.4f} '
          f'torch {torch.__version__} stubbed {",".join(STUBBED) or "none"}')


if __name__ == '__main__':
    main()
