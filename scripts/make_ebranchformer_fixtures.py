#!/usr/bin/env python3
"""Writes the ESPnet parity fixtures of the E-Branchformer encoder (test/fixtures/ebranchformer/<case>.npz).

Each case builds the real ESPnet2 ESPnetASRModel (ESPnet 202511, torch 2.11) with an
EBranchformerEncoder (espnet2/asr/encoder/e_branchformer_encoder.py: cgMLP branch with its
convolutional spatial gating unit, merge by depthwise conv + merge_proj) at a small size, seeded
weights with PyTorch's default init (LibriSpeech-100's `init: none`; LayerNorm affine parameters
moved off 1/0 so their gradients are not degenerate), dropout and layer drop off, and runs a
padded batch of 2 utterances in training mode:

  main      LibriSpeech-100's encoder_conf, small: rel_pos latest + rel_selfattn, macaron FFN
            (use_ffn, macaron_ffn, swish), identity gate, no linear after the conv, cgmlp and
            merge kernels 31 (longer than the sequence), with a TransformerDecoder and the joint
            loss of the recipe (ctc_weight 0.3, lsm_weight 0.1)
  abs_lin   abs_pos + selfattn, no FFN, use_linear_after_conv with a swish gate, kernels 5 and 3,
            CTC only (ctc_weight 1.0, no decoder)
  ffn_relu  rel_pos, one FFN without macaron (scale 1), relu in the FFN and the gate, kernels 7
            and 5, CTC only

Arrays: param.<name> (the state dict before the forward, ESPnet's names), grad.<name> of every
parameter, in.feats (already normalized), in.lens, in.ys (padded with -1), in.ylens, out.enc
(after after_norm), out.logp (CTC log-probs), out.hlens, out.loss, out.loss_ctc, out.loss_att
(NaN without a decoder); float32, written with np.savez_compressed. Weights and features are drawn
on bfloat16's grid (float32 values with 8 significant bits) so they compress.

As scripts/make_conformer_fixtures.py, the one documented deviation (docs/training.md): ESPnet's
Conv2dSubsampling slices the padded mask, espnet3 uses the exact conv formula
((L - 1) // 2 - 1) // 2; the fixture patches that one line. Run with the ESPnet venv:

    /opt/espnet3-venv/bin/python scripts/make_ebranchformer_fixtures.py [OUTDIR]
"""
import argparse
import math
import os

import numpy as np
import torch

from espnet2.asr.ctc import CTC
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.e_branchformer_encoder import EBranchformerEncoder
from espnet2.asr.espnet_model import ESPnetASRModel
from espnet.nets.pytorch_backend.transformer import subsampling
from fixture_util import padded_targets, save_case, seed_weights

# name: (idim, encoder_conf, vocab, decoder blocks (0: none), ctc_weight, frames, labels per utterance)
CASES = {
    'main': (40, dict(output_size=32, attention_heads=4, attention_layer_type='rel_selfattn',
                      pos_enc_layer_type='rel_pos', rel_pos_type='latest', cgmlp_linear_units=64,
                      cgmlp_conv_kernel=31, use_linear_after_conv=False, gate_activation='identity',
                      num_blocks=2, linear_units=48, positionwise_layer_type='linear', use_ffn=True,
                      macaron_ffn=True, ffn_activation_type='swish', merge_conv_kernel=31),
             23, 1, 0.3, (100, 77), (10, 7)),
    'abs_lin': (20, dict(output_size=16, attention_heads=2, attention_layer_type='selfattn',
                         pos_enc_layer_type='abs_pos', rel_pos_type='latest', cgmlp_linear_units=24,
                         cgmlp_conv_kernel=5, use_linear_after_conv=True, gate_activation='swish',
                         num_blocks=1, use_ffn=False, merge_conv_kernel=3, use_flash_attn=False),
                9, 0, 1.0, (40, 29), (5, 3)),
    'ffn_relu': (20, dict(output_size=16, attention_heads=2, attention_layer_type='rel_selfattn',
                          pos_enc_layer_type='rel_pos', rel_pos_type='latest', cgmlp_linear_units=20,
                          cgmlp_conv_kernel=7, gate_activation='relu', num_blocks=2, linear_units=24,
                          use_ffn=True, macaron_ffn=False, ffn_activation_type='relu', merge_conv_kernel=5),
                 9, 0, 1.0, (40, 29), (5, 3)),
}


def exact_mask_subsampling():
    """Conv2dSubsampling.forward with espnet3's exact output lengths instead of the sliced mask."""
    orig = subsampling.Conv2dSubsampling.forward

    def forward(self, x, x_mask):
        y, _ = orig(self, x, None)
        lens = x_mask.sum(-1).reshape(-1)
        out = torch.div(torch.div(lens - 1, 2, rounding_mode='floor') - 1, 2, rounding_mode='floor')
        t2 = (y[0] if isinstance(y, tuple) else y).size(1)
        return y, (torch.arange(t2)[None, :] < out[:, None])[:, None, :]

    subsampling.Conv2dSubsampling.forward = forward


def make_case(idim, conf, vocab, dec_blocks, ctc_weight, lens, ylens):
    torch.manual_seed(0)
    d = conf['output_size']
    tokens = ['<blank>', '<unk>'] + [f't{i}' for i in range(vocab - 3)] + ['<sos/eos>']
    enc = EBranchformerEncoder(idim, dropout_rate=0.0, positional_dropout_rate=0.0, attention_dropout_rate=0.0,
                               input_layer='conv2d', layer_drop_rate=0.0, **conf)
    dec = None
    if dec_blocks:
        dec = TransformerDecoder(vocab, d, attention_heads=conf['attention_heads'], linear_units=64,
                                 num_blocks=dec_blocks, dropout_rate=0.0, positional_dropout_rate=0.0,
                                 self_attention_dropout_rate=0.0, src_attention_dropout_rate=0.0,
                                 use_flash_attn=False)
    ctc = CTC(vocab, d, dropout_rate=0.0, ctc_type='builtin', reduce=True)
    model = ESPnetASRModel(vocab_size=vocab, token_list=tokens, frontend=None, specaug=None, normalize=None,
                           preencoder=None, encoder=enc, postencoder=None, decoder=dec, ctc=ctc,
                           joint_network=None, ctc_weight=ctc_weight, lsm_weight=0.1, length_normalized_loss=False,
                           report_cer=False, report_wer=False)
    g = torch.Generator().manual_seed(3)
    seed_weights(model.modules(), model.parameters(), g)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    B, T = 2, max(lens)
    feats = torch.randn(B, T, idim, generator=g).bfloat16().float()
    ilens = torch.tensor(lens)
    ys = padded_targets(ylens, vocab, g, low=2)  # never <unk> either
    ylens_t = torch.tensor(ylens)

    model.train()
    loss, stats, _ = model(feats, ilens, ys.clone(), ylens_t)
    loss.backward()
    with torch.no_grad():
        hs, hlens = model.encode(feats, ilens)
        logp = model.ctc.log_softmax(hs)

    def scalar(v):
        return np.array([math.nan if v is None else float(v)], dtype=np.float32)

    arrays = {'param.' + k: v.float().numpy() for k, v in state.items()}
    for k, p in model.named_parameters():
        arrays['grad.' + k] = p.grad.float().numpy()
    arrays.update({
        'in.feats': feats.numpy(), 'in.lens': ilens.float().numpy(), 'in.ys': ys.float().numpy(),
        'in.ylens': ylens_t.float().numpy(), 'out.enc': hs.float().numpy(), 'out.logp': logp.float().numpy(),
        'out.hlens': hlens.float().numpy(), 'out.loss': scalar(loss.item()),
        'out.loss_ctc': scalar(stats.get('loss_ctc')), 'out.loss_att': scalar(stats.get('loss_att')),
    })
    return arrays, loss.item(), hlens.tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out', nargs='?', default='test/fixtures/ebranchformer')
    a = ap.parse_args()
    exact_mask_subsampling()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    for name, (idim, conf, vocab, dec_blocks, w, lens, ylens) in CASES.items():
        arrays, loss, hlens = make_case(idim, conf, vocab, dec_blocks, w, lens, ylens)
        save_case(a.out, name, arrays, f'loss {loss:.6f}, hlens {hlens}')


if __name__ == '__main__':
    main()
