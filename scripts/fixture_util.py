"""What the encoder fixture scripts (make_{conformer,ebranchformer,contextual,contextual_stream,
input_layer,interctc}_fixtures.py) share: the output folder, the seeded weights, the padded targets,
an encoder + CTC training step's reference arrays and the writing of one case's npz. Imported from the scripts beside it (run as `python scripts/make_<x>_fixtures.py`)."""
import argparse
import os

import numpy as np
import torch


def seed_weights(modules, params, g, norms=(torch.nn.LayerNorm,)):
    """Moves the affine parameters of the `norms` among modules off 1/0 (so their gradients are
    exercised), drawn from g, then puts every parameter on bfloat16's grid (8 significant bits: the
    npz compresses; the math stays float32)."""
    with torch.no_grad():
        for mod in modules:
            if isinstance(mod, norms):
                mod.weight.copy_(1 + 0.2 * torch.randn(mod.weight.shape, generator=g))
                mod.bias.copy_(0.2 * torch.randn(mod.bias.shape, generator=g))
        for p in params:
            p.copy_(p.bfloat16().float())


def padded_targets(ylens, vocab, g, low=1):
    """Token ids in [low, vocab - 1) (never blank, nor <sos/eos> = vocab - 1), padded with -1."""
    ys = torch.full((len(ylens), max(ylens)), -1, dtype=torch.long)
    for b, n in enumerate(ylens):
        ys[b, :n] = torch.randint(low, vocab - 1, (n,), generator=g)
    return ys


def save_case(out, name, arrays, note):
    """<out>/<name>.npz, compressed, and a line saying what it holds."""
    path = os.path.join(out, name + '.npz')
    np.savez_compressed(path, **arrays)
    print(f'{path}: {len(arrays)} arrays, {os.path.getsize(path) / 1024:.0f} KiB; {note}')


def fixture_dir(default_out, prepare=None):
    """The output folder from the command line (default_out when none is given), made; prepare()
    (a script's patches of ESPnet) run first, and torch on one thread."""
    ap = argparse.ArgumentParser()
    ap.add_argument('out', nargs='?', default=default_out)
    a = ap.parse_args()
    if prepare:
        prepare()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    return a.out


def encoder_ctc_step(enc, ctc, idim, lens, ylens, vocab, g):
    """One training step of an encoder and CTC as the reference: the weights before it ('param.',
    int64 buffers kept), features and targets drawn from g ('in.'), the outputs and the loss ('out.')
    and every parameter's gradient ('grad.'). Returns the arrays and (feats, ilens, hs, hlens, loss)
    for what a script adds."""
    state = {'encoder.' + k: v.detach().clone() for k, v in enc.state_dict().items()}
    state.update({'ctc.' + k: v.detach().clone() for k, v in ctc.state_dict().items()})
    B, T = len(lens), max(lens)
    feats = torch.randn(B, T, idim, generator=g).bfloat16().float()
    ilens = torch.tensor(lens)
    ys = padded_targets(ylens, vocab, g)
    ylens_t = torch.tensor(ylens)
    enc.train(), ctc.train()
    hs, hlens, _ = enc(feats, ilens)
    loss = ctc(hs, hlens, ys, ylens_t)
    logp = ctc.log_softmax(hs)
    loss.backward()
    arrays = {'param.' + k: v.numpy() if v.dtype == torch.int64 else v.float().numpy() for k, v in state.items()}
    for k, p in enc.named_parameters():
        arrays['grad.encoder.' + k] = p.grad.float().numpy()
    for k, p in ctc.named_parameters():
        arrays['grad.ctc.' + k] = p.grad.float().numpy()
    arrays.update({
        'in.feats': feats.numpy(), 'in.lens': ilens.float().numpy(), 'in.ys': ys.float().numpy(),
        'in.ylens': ylens_t.float().numpy(), 'out.enc': hs.detach().float().numpy(),
        'out.logp': logp.detach().float().numpy(), 'out.hlens': hlens.float().numpy(),
        'out.loss': loss.detach().reshape(1).float().numpy(),
    })
    return arrays, (feats, ilens, hs, hlens, loss)
