"""What a character LM gives the default recipe, measured with ESPnet's own code (never part of
the tests; written before espnet3 trained LMs, kept to compare its fusion with ESPnet's). Three steps:
  1. LM text: the sentences of the fortune files create_dataset reads (/usr/share/games/fortunes,
     the same files it lists), normalized as its transcripts are (upper case A-Z, apostrophes inside
     words), leaving out every fortune whose text holds a valid, test or test_engine transcript.
  2. ESPnet's SequentialRNNLM (2 LSTM layers of `unit`) inside its ESPnetLanguageModel, on the
     recipe's token list, trained for `seconds` of wall time (Adam, batches of 64 sentences).
  3. ESPnet's Speech2Text (BatchBeamSearch, beam 10, ctc_weight 0.3, as conf/inference.yaml) on an
     espnet3 model (exp/<tag>/valid.acc.ave.safetensors; decode_espnet.py loads it) with that LM at
     each lm_weight, one process per (split, weight); WER by word edit distance on the normalized
     text (lm_weight 0 is the recipe's own joint decoding, to compare with its sclite WER).
    lm_fusion_probe.py --exp recipes/espeak_fortunes/exp/training [--seconds 600] [--unit 384]
                       [--weights 0,0.3,0.5] [--sets valid,test] [--jobs 2] [--reuse_lm]
(--reuse_lm: decode with the LM an earlier run left in <exp>/lm_fusion_probe instead of training one.)
Needs ESPnet 202511 + torch (/opt/espnet3-venv)."""
import argparse
import glob
import multiprocessing
import os
import random
import re
import sys
import time

import numpy as np
import scipy.io.wavfile
import torch
import torch._dynamo  # noqa: F401  (the optimizer imports it; after decode_espnet's stub modules it fails)
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_espnet  # noqa: E402  (ESPnet's optional imports stubbed, the ASR model from our weights)
from espnet2.bin.asr_inference import Speech2Text  # noqa: E402
from espnet2.lm.espnet_model import ESPnetLanguageModel  # noqa: E402
from espnet2.lm.seq_rnn_lm import SequentialRNNLM  # noqa: E402
from espnet2.tasks.asr import ASRTask  # noqa: E402

RECIPE = 'recipes/espeak_fortunes'
FORTUNES = '/usr/share/games/fortunes'


def normalize(text):
    """create_dataset's transcript normalization (recipes/espeak_fortunes/text_norm.h)."""
    t = text.replace('\u2019', "'").upper()
    t = re.sub(r"(?<=[A-Z])'(?=[A-Z])", '\x01', t)
    return ' '.join(re.sub(r"[^A-Z\x01]+", ' ', t).replace('\x01', "'").split())


def lm_sentences(held_out):
    sentences, dropped = set(), 0
    for path in sorted(glob.glob(os.path.join(FORTUNES, '*'))):
        name = os.path.basename(path)
        if name.startswith('.') or name.endswith(('.dat', '.u8')) or not os.path.isfile(path):
            continue
        for fortune in re.split(r'\n%\n', open(path, encoding='utf-8', errors='replace').read()):
            whole = normalize(fortune)
            if any(h in whole for h in held_out):
                dropped += 1
                continue
            for s in re.split(r'(?<=[.!?])\s+', ' '.join(fortune.split())):
                s = normalize(s)
                if s:
                    sentences.add(s)
    return sorted(sentences), dropped


def encode(tokens, s):
    index = {t: i for i, t in enumerate(tokens)}
    unk = index['<unk>']
    return [index.get('<space>' if c == ' ' else c, unk) for c in s]


def train_lm(a, tokens, held_out, work):
    sentences, dropped = lm_sentences(held_out)
    print(f'LM text: {len(sentences)} sentences, {sum(map(len, sentences))} characters '
          f'({dropped} fortunes left out for holding a valid/test transcript)', flush=True)
    data = sorted((encode(tokens, s) for s in sentences), key=len)
    batches = [data[i:i + 64] for i in range(0, len(data), 64)]
    torch.manual_seed(0)
    random.seed(0)
    lm = SequentialRNNLM(len(tokens), unit=a.unit, nlayers=2, rnn_type='lstm', dropout_rate=0.1)
    model = ESPnetLanguageModel(lm, len(tokens))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    t0, step = time.time(), 0
    while time.time() - t0 < a.seconds:
        random.shuffle(batches)
        for b in batches:
            lens = torch.tensor([len(x) for x in b])
            text = torch.zeros(len(b), int(lens.max()), dtype=torch.long)
            for i, x in enumerate(b):
                text[i, :len(x)] = torch.tensor(x)
            loss, _, _ = model(text, lens)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 200 == 0:
                print(f'LM step {step} {time.time() - t0:.0f} s loss {loss.item():.3f} nats/token', flush=True)
            if time.time() - t0 >= a.seconds:
                break
    model.eval()
    torch.save(model.state_dict(), os.path.join(work, 'lm.pth'))
    with open(os.path.join(work, 'lm.yaml'), 'w', encoding='utf-8') as f:
        yaml.safe_dump(dict(token_list=tokens, lm='seq_rnn', lm_conf=dict(unit=a.unit, nlayers=2, rnn_type='lstm'),
                            model='lm', model_conf={}, init=None, token_type='char', bpemodel=None,
                            use_preprocessor=True, non_linguistic_symbols=None, cleaner=None, g2p=None), f)


def word_errors(ref, hyp):
    r, h = ref.split(), hyp.split()
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
    return d[len(h)], len(r)


def decode(job):
    split, weight, work = job
    torch.set_num_threads(1)
    s2t = Speech2Text(asr_train_config=os.path.join(work, 'asr.yaml'), asr_model_file=os.path.join(work, 'asr.pth'),
                      lm_train_config=os.path.join(work, 'lm.yaml') if weight > 0 else None,
                      lm_file=os.path.join(work, 'lm.pth') if weight > 0 else None, lm_weight=weight, device='cpu',
                      beam_size=10, ctc_weight=0.3, penalty=0.0, maxlenratio=0.0, minlenratio=0.0, nbest=1)
    errors = words = 0
    out = os.path.join(work, f'hyp_{split}_lm{weight}')
    with torch.inference_mode(), open(out, 'w', encoding='utf-8') as f:
        for line in open(os.path.join(RECIPE, 'data/manifest', split + '.tsv'), encoding='utf-8'):
            utt, wav, ref = line.rstrip('\n').split('\t')
            sr, x = scipy.io.wavfile.read(wav)
            x = x.astype(np.float32) / 32768.0 if x.dtype == np.int16 else x.astype(np.float32)
            hyp = s2t(torch.from_numpy(x))[0][0]
            f.write(f'{utt} {hyp}\n')
            e, n = word_errors(ref, hyp)
            errors, words = errors + e, words + n
    return split, weight, 100.0 * errors / words


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--exp', required=True)
    ap.add_argument('--seconds', type=float, default=600)
    ap.add_argument('--unit', type=int, default=384)
    ap.add_argument('--weights', default='0,0.3,0.5')
    ap.add_argument('--sets', default='valid,test')
    ap.add_argument('--jobs', type=int, default=2)
    ap.add_argument('--reuse_lm', action='store_true')
    a = ap.parse_args()
    torch.set_num_threads(a.jobs)
    work = os.path.join(a.exp, 'lm_fusion_probe')
    os.makedirs(work, exist_ok=True)
    tokens = [t.rstrip('\n') for t in open(os.path.join(RECIPE, 'data/tokens_char/tokens.txt'), encoding='utf-8')]
    held_out = set()
    for split in ('valid', 'test', 'test_engine'):
        for line in open(os.path.join(RECIPE, 'data/manifest', split + '.tsv'), encoding='utf-8'):
            held_out.add(line.rstrip('\n').split('\t')[2])
    if not (a.reuse_lm and os.path.exists(os.path.join(work, 'lm.pth'))):
        train_lm(a, tokens, held_out, work)
    ours = yaml.safe_load(open(os.path.join(a.exp, 'config.yaml'), encoding='utf-8'))
    with open(os.path.join(work, 'asr.yaml'), 'w', encoding='utf-8') as f:
        yaml.safe_dump(decode_espnet.espnet_config(ours, tokens), f)
    model, _ = ASRTask.build_model_from_file(os.path.join(work, 'asr.yaml'), None, 'cpu')
    sd = model.state_dict()
    for k, v in decode_espnet.read_safetensors(os.path.join(a.exp, 'valid.acc.ave.safetensors')).items():
        assert k in sd and sd[k].shape == v.shape, k
        sd[k] = v
    torch.save(sd, os.path.join(work, 'asr.pth'))
    jobs = [(s, float(w), work) for s in a.sets.split(',') for w in a.weights.split(',')]
    with multiprocessing.get_context('spawn').Pool(a.jobs) as pool:
        for split, weight, wer in pool.imap(decode, jobs):
            print(f'{split} lm_weight {weight}: WER {wer:.1f}', flush=True)


if __name__ == '__main__':
    main()
