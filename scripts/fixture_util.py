"""What the encoder fixture scripts (make_{conformer,ebranchformer,contextual,contextual_stream,
input_layer,interctc}_fixtures.py) share: the seeded weights, the padded targets and the writing of
one case's npz. Imported from the scripts beside it (run as `python scripts/make_<x>_fixtures.py`)."""
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
