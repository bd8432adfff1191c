#!/usr/bin/python3
"""Writes the PyTorch parity fixture of the encoder ops under test/fixtures/ops/.

Two small pieces of the ESPnet2 Transformer-CTC encoder (the math of asr_ctc_ref.py in the
project's shared reference: Conv2dSubsampling, pre-LN encoder layer, final LayerNorm, CTC linear,
log_softmax), dropout off, float32:
  conv.*   Conv2dSubsampling with d=8 on a (2, 23, 80) batch, lengths 23 and 17 (padding zeroed):
           Conv2d(1,8,3,2)+ReLU, Conv2d(8,8,3,2)+ReLU, Linear(8*19, 8) on the channel-major
           flattening per frame, x*sqrt(8) + sinusoidal PE. loss = sum(out * conv.in.g).
  block.*  one encoder layer (d=16, 2 heads, FF 32) on a (2, 9, 16) input with lengths 9 and 6,
           then after_norm + Linear(16, 7) + log_softmax. loss = sum(logp * block.in.g).
Every tensor (inputs, weights with ESPnet2-style names, outputs, gradients as grad.<name>) goes
into one raw little-endian float32 file ops.f32; index.txt lists `name offset dims...` with the
offset in floats.

Run with Debian's python3 (python3-torch):  /usr/bin/python3 scripts/make_ops_fixtures.py [outdir]
"""
import math
import os
import sys

import torch
import torch.nn.functional as F


def posenc(t, d):
    pe = torch.zeros(t, d)
    pos = torch.arange(t, dtype=torch.float32).unsqueeze(1)
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * -(math.log(10000.0) / d))
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def conv_case(g, out):
    d, idim, T = 8, 80, 23
    lens = torch.tensor([23, 17])
    x = torch.randn(2, T, idim, generator=g)
    x[1, 17:] = 0
    f2 = ((idim - 1) // 2 - 1) // 2
    p = {
        'conv.embed.conv.0.weight': torch.randn(d, 1, 3, 3, generator=g) / 3,
        'conv.embed.conv.0.bias': torch.randn(d, generator=g) * 0.1,
        'conv.embed.conv.2.weight': torch.randn(d, d, 3, 3, generator=g) / math.sqrt(9 * d),
        'conv.embed.conv.2.bias': torch.randn(d, generator=g) * 0.1,
        'conv.embed.out.0.weight': torch.randn(d, d * f2, generator=g) / math.sqrt(d * f2),
        'conv.embed.out.0.bias': torch.randn(d, generator=g) * 0.1,
    }
    for v in p.values():
        v.requires_grad_(True)
    h = F.relu(F.conv2d(x.unsqueeze(1), p['conv.embed.conv.0.weight'], p['conv.embed.conv.0.bias'], stride=2))
    out['conv.h1'] = h
    h = F.relu(F.conv2d(h, p['conv.embed.conv.2.weight'], p['conv.embed.conv.2.bias'], stride=2))
    b, c, t, f = h.shape
    h = F.linear(h.transpose(1, 2).reshape(b, t, c * f), p['conv.embed.out.0.weight'], p['conv.embed.out.0.bias'])
    y = h * math.sqrt(d) + posenc(t, d)
    gy = torch.randn(y.shape, generator=g)
    (y * gy).sum().backward()
    out['conv.in.x'] = x
    out['conv.in.lens'] = lens.float()
    out['conv.in.g'] = gy
    out['conv.out.y'] = y
    out['conv.out.lens'] = (((lens - 1) // 2 - 1) // 2).float()
    for k, v in p.items():
        out[k] = v
        out['grad.' + k] = v.grad


def block_case(g, out):
    d, h, ff, V, T = 16, 2, 32, 7, 9
    dk = d // h
    lens = torch.tensor([9, 6])
    x = torch.randn(2, T, d, generator=g, requires_grad=True)
    lin = lambda o, i: (torch.randn(o, i, generator=g) / math.sqrt(i), torch.randn(o, generator=g) * 0.1)
    p = {}
    for name, (o, i) in [('self_attn.linear_q', (d, d)), ('self_attn.linear_k', (d, d)),
                         ('self_attn.linear_v', (d, d)), ('self_attn.linear_out', (d, d)),
                         ('feed_forward.w_1', (ff, d)), ('feed_forward.w_2', (d, ff)), ('ctc_lo', (V, d))]:
        p[f'block.{name}.weight'], p[f'block.{name}.bias'] = lin(o, i)
    for name in ('norm1', 'norm2', 'after_norm'):
        p[f'block.{name}.weight'] = 1 + 0.1 * torch.randn(d, generator=g)
        p[f'block.{name}.bias'] = 0.1 * torch.randn(d, generator=g)
    for v in p.values():
        v.requires_grad_(True)
    P = lambda n: (p[f'block.{n}.weight'], p[f'block.{n}.bias'])
    mask = (torch.arange(T)[None, :] < lens[:, None]).unsqueeze(1)  # (B,1,T) True = valid

    def mha(z):
        B = z.size(0)
        q = F.linear(z, *P('self_attn.linear_q')).view(B, T, h, dk).transpose(1, 2)
        k = F.linear(z, *P('self_attn.linear_k')).view(B, T, h, dk).transpose(1, 2)
        v = F.linear(z, *P('self_attn.linear_v')).view(B, T, h, dk).transpose(1, 2)
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(dk)
        m = ~mask.unsqueeze(1)
        a = torch.softmax(s.masked_fill(m, float('-inf')), dim=-1).masked_fill(m, 0.0)
        out['block.att'] = a
        y = torch.matmul(a, v)
        return F.linear(y.transpose(1, 2).reshape(B, T, d), *P('self_attn.linear_out'))

    ln = lambda z, n: F.layer_norm(z, (d,), *P(n), eps=1e-12)
    x1 = x + mha(ln(x, 'norm1'))
    x2 = x1 + F.linear(F.relu(F.linear(ln(x1, 'norm2'), *P('feed_forward.w_1'))), *P('feed_forward.w_2'))
    logp = F.log_softmax(F.linear(ln(x2, 'after_norm'), *P('ctc_lo')), dim=-1)
    gl = torch.randn(logp.shape, generator=g)
    (logp * gl).sum().backward()
    out['block.in.x'] = x
    out['block.in.lens'] = lens.float()
    out['block.in.g'] = gl
    out['block.out.y'] = x2
    out['block.out.logp'] = logp
    out['grad.block.in.x'] = x.grad
    for k, v in p.items():
        out[k] = v
        out['grad.' + k] = v.grad


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures', 'ops')
    os.makedirs(outdir, exist_ok=True)
    g = torch.Generator().manual_seed(20240601)
    out = {}
    conv_case(g, out)
    block_case(g, out)
    off = 0
    with open(os.path.join(outdir, 'ops.f32'), 'wb') as blob, \
            open(os.path.join(outdir, 'index.txt'), 'w') as idx:
        idx.write('# name offset(floats) dims... (written by scripts/make_ops_fixtures.py)\n')
        for k, v in out.items():
            a = v.detach().contiguous().float().numpy()
            blob.write(a.astype('<f4').tobytes())
            idx.write(' '.join([k, str(off)] + [str(s) for s in a.shape]) + '\n')
            off += a.size
    print(f'wrote {len(out)} tensors ({off} floats) to {outdir}')


if __name__ == '__main__':
    main()
