#!/usr/bin/env python3
"""Writes the PyTorch parity fixture of the Transformer-CTC model (test/fixtures/model/).

It runs the project's reference model (asr_ctc_ref.py, the benchmark model in PyTorch) at a small
size so the fixture can be committed, with dropout off, and maps the reference's parameter names
to ESPnet2's state-dict names (what espnet3 checkpoints use). Output: <name>.f32 raw little-endian
float32 files and index.txt lines "name dim...". Run with Debian's python3 + python3-torch:

    /usr/bin/python3 scripts/make_model_fixture.py --ref /path/to/asr_ctc_ref.py [OUTDIR]
"""
import argparse, importlib.util, os, re

import torch

# Small but complete: every layer type, 2 blocks, a vocabulary that includes <sos/eos>.
D_MODEL, N_HEADS, D_FF, N_LAYERS, VOCAB = 32, 4, 64, 2, 31


def espnet2_name(ref_name):
    """Reference parameter name -> ESPnet2 ASR model state-dict name."""
    rules = [
        (r'^mvn\.mean$', 'normalize.mean'),
        (r'^embed\.conv1\.(weight|bias)$', r'encoder.embed.conv.0.\1'),
        (r'^embed\.conv2\.(weight|bias)$', r'encoder.embed.conv.2.\1'),
        (r'^embed\.out\.(weight|bias)$', r'encoder.embed.out.0.\1'),  # Sequential(Linear, PosEnc)
        (r'^layers\.(\d+)\.att\.q\.(weight|bias)$', r'encoder.encoders.\1.self_attn.linear_q.\2'),
        (r'^layers\.(\d+)\.att\.k\.(weight|bias)$', r'encoder.encoders.\1.self_attn.linear_k.\2'),
        (r'^layers\.(\d+)\.att\.v\.(weight|bias)$', r'encoder.encoders.\1.self_attn.linear_v.\2'),
        (r'^layers\.(\d+)\.att\.o\.(weight|bias)$', r'encoder.encoders.\1.self_attn.linear_out.\2'),
        (r'^layers\.(\d+)\.ff1\.(weight|bias)$', r'encoder.encoders.\1.feed_forward.w_1.\2'),
        (r'^layers\.(\d+)\.ff2\.(weight|bias)$', r'encoder.encoders.\1.feed_forward.w_2.\2'),
        (r'^layers\.(\d+)\.norm([12])\.(weight|bias)$', r'encoder.encoders.\1.norm\2.\3'),
        (r'^after_norm\.(weight|bias)$', r'encoder.after_norm.\1'),
        (r'^ctc_lo\.(weight|bias)$', r'ctc.ctc_lo.\1'),
    ]
    for pat, rep in rules:
        if re.match(pat, ref_name):
            return re.sub(pat, rep, ref_name)
    raise SystemExit(f'no ESPnet2 name for reference parameter {ref_name}')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out', nargs='?', default='test/fixtures/model')
    ap.add_argument('--ref', required=True, help='path of asr_ctc_ref.py')
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location('asr_ctc_ref', a.ref)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    # The reference reads its sizes from module constants when it builds the model.
    ref.D_MODEL, ref.N_HEADS, ref.D_FF, ref.N_LAYERS = D_MODEL, N_HEADS, D_FF, N_LAYERS

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    mean, std = torch.randn(80, generator=g) * 2 - 8, torch.rand(80, generator=g) * 2 + 1.5
    model = ref.TransformerCTC(mean=mean, std=std, dropout=0.0, vocab=VOCAB)
    feats, _, ys, _ = ref.make_batch(2, 120, 12, seed=1)
    feats = feats * 3 - 8                 # log-mel-like range, so global MVN does real work
    ys = torch.randint(3, VOCAB - 1, ys.shape, generator=g)  # never blank, <unk> or <sos/eos>
    lens, ylens = torch.tensor([120, 97]), torch.tensor([12, 9])
    loss = model.loss(feats, lens, ys, ylens)
    loss.backward()
    with torch.no_grad():
        logp, hlens = model(feats, lens)

    items = []
    for k, v in model.named_parameters():
        items.append((espnet2_name(k), v.detach()))
        items.append(('grad.' + espnet2_name(k), v.grad))
    items.append(('normalize.mean', model.mvn.mean))
    items.append(('normalize.std', 1.0 / model.mvn.istd))
    items += [('in.feats', feats), ('in.lens', lens.float()), ('in.ys', ys.float()), ('in.ylens', ylens.float()),
              ('out.logp', logp), ('out.hlens', hlens.float()), ('out.loss', loss.detach().reshape(1))]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, 'index.txt'), 'w') as idx:
        idx.write(f'# d_model {D_MODEL} heads {N_HEADS} linear_units {D_FF} num_blocks {N_LAYERS} vocab {VOCAB}\n')
        for k, v in items:
            v.detach().contiguous().float().numpy().tofile(os.path.join(a.out, k + '.f32'))
            idx.write(k + ' ' + ' '.join(map(str, v.shape)) + '\n')
    n = sum(v.numel() for _, v in items)
    print(f'wrote {len(items)} tensors ({n * 4 / 1024:.0f} KiB) to {a.out}; loss {loss.item():.6f}')


if __name__ == '__main__':
    main()
