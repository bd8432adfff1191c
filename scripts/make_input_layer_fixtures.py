#!/usr/bin/env python3
"""Writes the ESPnet parity fixtures of the encoder input layers and utterance_mvn
(test/fixtures/input_layer/<case>.npz) with the real ESPnet 202511 / torch 2.11.

Each encoder case builds ESPnet2's own TransformerEncoder, ConformerEncoder or EBranchformerEncoder with an
`input_layer` (Conv2dSubsampling2/6/8, Conv1dSubsampling2, linear, None) at a small size with
seeded weights (LayerNorm/BatchNorm affine parameters moved off 1/0), dropout off, plus CTC, and
runs a padded batch of 2 utterances in training mode: encoder output, CTC log-probs, CTC loss and
every parameter's gradient. Arrays as in scripts/make_conformer_fixtures.py: param.<name> (the
state dict, ESPnet's names), grad.<name>, in.feats, in.lens, in.ys, in.ylens, out.enc, out.logp,
out.hlens, out.loss; float32 on bfloat16's grid (compressible).

As in the other fixtures, ESPnet's subsampling classes slice the padded mask
(x_mask[:, :, :-2:2]...), which gives a padded utterance more frames than the exact conv formula
espnet3 uses per utterance (docs/training.md); the script patches each class to return the
exact lengths, so attention masks and CTC lengths are espnet3's; everything else runs as ESPnet
has it.

utterance_mvn.npz: ESPnet2's utterance_mvn on a padded batch (padding filled with garbage, as the
function zeroes it), for every (norm_means, norm_vars) and one larger eps: in.x, in.lens,
out.<m><v>[_eps] (m, v in {0, 1}).

    /opt/espnet3-venv/bin/python scripts/make_input_layer_fixtures.py [OUTDIR]
"""
import os

import numpy as np
import torch

from espnet2.asr.ctc import CTC
from espnet2.asr.encoder.conformer_encoder import ConformerEncoder
from espnet2.asr.encoder.e_branchformer_encoder import EBranchformerEncoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder
from espnet2.layers.utterance_mvn import utterance_mvn
from espnet.nets.pytorch_backend.transformer import subsampling
from fixture_util import encoder_ctc_step, fixture_dir, save_case, seed_weights

VOCAB = 9
CONFORMER = dict(macaron_style=True, rel_pos_type='latest', activation_type='swish', use_cnn_module=True,
                 cnn_module_kernel=5)
REL = dict(pos_enc_layer_type='rel_pos', selfattention_layer_type='rel_selfattn')
ABS = dict(pos_enc_layer_type='abs_pos', selfattention_layer_type='selfattn')
EBF = dict(rel_pos_type='latest', cgmlp_linear_units=24, cgmlp_conv_kernel=5, use_linear_after_conv=False,
           gate_activation='identity', use_ffn=True, macaron_ffn=True, ffn_activation_type='swish', merge_conv_kernel=3,
           use_flash_attn=False)
EREL = dict(pos_enc_layer_type='rel_pos', attention_layer_type='rel_selfattn')
EABS = dict(pos_enc_layer_type='abs_pos', attention_layer_type='selfattn')

# name: (encoder class, idim, input_layer, extra encoder args, frames per utterance)
CASES = {
    't_conv2d2': ('transformer', 20, 'conv2d2', {}, (30, 23)),
    't_conv2d6': ('transformer', 20, 'conv2d6', {}, (50, 37)),
    't_conv2d8': ('transformer', 20, 'conv2d8', {}, (64, 45)),
    't_conv1d2': ('transformer', 20, 'conv1d2', {}, (30, 23)),
    't_linear': ('transformer', 20, 'linear', {}, (17, 12)),
    't_none_same': ('transformer', 16, None, {}, (17, 12)),
    't_none_linear': ('transformer', 20, None, {}, (17, 12)),
    'c_conv2d2_rel': ('conformer', 20, 'conv2d2', dict(CONFORMER, **REL), (30, 23)),
    'c_conv2d6_abs': ('conformer', 20, 'conv2d6', dict(CONFORMER, **ABS), (50, 37)),
    'c_conv2d8_rel': ('conformer', 20, 'conv2d8', dict(CONFORMER, **REL), (64, 45)),
    'c_linear_rel': ('conformer', 20, 'linear', dict(CONFORMER, **REL), (17, 12)),
    'c_linear_abs': ('conformer', 20, 'linear', dict(CONFORMER, **ABS), (17, 12)),
    'c_none_rel': ('conformer', 16, None, dict(CONFORMER, **REL), (17, 12)),
    'c_none_abs': ('conformer', 16, None, dict(CONFORMER, **ABS), (17, 12)),
    'e_conv1d2_rel': ('e_branchformer', 20, 'conv1d2', dict(EBF, **EREL), (30, 23)),
    'e_conv2d6_rel': ('e_branchformer', 20, 'conv2d6', dict(EBF, **EREL), (50, 37)),
    'e_linear_rel': ('e_branchformer', 20, 'linear', dict(EBF, **EREL), (17, 12)),
    'e_none_rel': ('e_branchformer', 16, None, dict(EBF, **EREL), (17, 12)),
    'e_none_linear_abs': ('e_branchformer', 20, None, dict(EBF, **EABS), (17, 12)),
}

# The convs of each subsampling class: (kernel, stride) along time.
CONVS = {
    subsampling.Conv2dSubsampling2: [(3, 2), (3, 1)],
    subsampling.Conv2dSubsampling6: [(3, 2), (5, 3)],
    subsampling.Conv2dSubsampling8: [(3, 2), (3, 2), (3, 2)],
    subsampling.Conv1dSubsampling2: [(3, 1), (3, 2)],
}


def exact_masks():
    for cls, convs in CONVS.items():
        orig = cls.forward

        def forward(self, x, x_mask, *rest, _orig=orig, _convs=convs):
            y, _ = _orig(self, x, None, *rest)
            lens = x_mask.sum(-1).reshape(-1)
            for k, s in _convs:
                lens = torch.where(lens < k, torch.zeros_like(lens), torch.div(lens - k, s, rounding_mode='floor') + 1)
            t2 = (y[0] if isinstance(y, tuple) else y).size(1)
            return y, (torch.arange(t2)[None, :] < lens[:, None])[:, None, :]

        cls.forward = forward


def make_case(kind, idim, layer, extra, lens):
    torch.manual_seed(0)
    common = dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=1, dropout_rate=0.0,
                  positional_dropout_rate=0.0, attention_dropout_rate=0.0, input_layer=layer, normalize_before=True)
    if kind == 'transformer':
        enc = TransformerEncoder(idim, **common, **extra)
    elif kind == 'conformer':
        enc = ConformerEncoder(idim, **common, **extra)
    else:
        del common['normalize_before']  # EBranchformerEncoder has no such key (always pre-LN)
        enc = EBranchformerEncoder(idim, **common, **extra)
    ctc = CTC(VOCAB, 16, dropout_rate=0.0, ctc_type='builtin', reduce=True)
    g = torch.Generator().manual_seed(3)
    seed_weights(enc.modules(), list(enc.parameters()) + list(ctc.parameters()), g,
                 (torch.nn.LayerNorm, torch.nn.BatchNorm1d))
    arrays, (_, _, _, hlens, loss) = encoder_ctc_step(enc, ctc, idim, lens, (5, 3), VOCAB, g)
    return arrays, loss.item(), hlens.tolist()


def make_mvn():
    g = torch.Generator().manual_seed(7)
    B, T, D = 3, 9, 5
    lens = torch.tensor([9, 6, 2])
    x = (3 + 2 * torch.randn(B, T, D, generator=g)).float()
    x[:, :, 4] = 1.5  # a constant dimension: var 0, the eps clamp
    x[1, :6, 4] = 1.5 + 1e-3 * torch.arange(6)  # nearly constant where valid
    arrays = {'in.x': x.clone().numpy(), 'in.lens': lens.float().numpy()}
    for m in (0, 1):
        for v in (0, 1):
            y, _ = utterance_mvn(x.clone(), lens, norm_means=bool(m), norm_vars=bool(v))
            arrays[f'out.{m}{v}'] = y.numpy()
            y, _ = utterance_mvn(x.clone(), lens, norm_means=bool(m), norm_vars=bool(v), eps=0.01)
            arrays[f'out.{m}{v}_eps'] = y.numpy()
    return arrays


def main():
    out = fixture_dir('test/fixtures/input_layer', exact_masks)
    for name, (kind, idim, layer, extra, lens) in CASES.items():
        arrays, loss, hlens = make_case(kind, idim, layer, extra, lens)
        save_case(out, name, arrays, f'loss {loss:.6f}, hlens {hlens}')
    path = os.path.join(out, 'utterance_mvn.npz')
    np.savez_compressed(path, **make_mvn())
    print(path)


if __name__ == '__main__':
    main()
