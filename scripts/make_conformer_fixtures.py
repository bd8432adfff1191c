#!/usr/bin/env python3
"""Writes the ESPnet parity fixtures of the Conformer encoder (test/fixtures/conformer/<case>.npz).

Each case builds the real ESPnet2 ConformerEncoder and CTC (ESPnet 202511, torch 2.11) at a small
size with seeded weights (LayerNorm and BatchNorm affine parameters moved off 1/0 so their
gradients are not degenerate), dropout off, and runs a padded batch of 2 utterances:

  training mode  encoder output, CTC log-probs, CTC loss, every parameter's gradient, and the
                 BatchNorm buffers after that one forward (momentum 0.1, num_batches_tracked 1);
  eval mode      encoder output and log-probs with those running statistics.

Arrays: param.<name> (the state dict before the forward, ESPnet's names, buffers included),
grad.<name>, after.<name> (buffers after the training forward), in.feats (already normalized),
in.lens, in.ys (padded with -1), in.ylens, out.enc, out.logp, out.hlens, out.loss, eval.enc,
eval.logp; float32 (num_batches_tracked int64), written with np.savez_compressed. Weights and
features are drawn on bfloat16's grid (float32 values with 8 significant bits) so they compress.

One deviation from ESPnet, the one espnet3 documents (docs/training.md): ESPnet's
Conv2dSubsampling slices the padded mask (mask[:, :, :-2:2][:, :, :-2:2]), which gives a padded
utterance 2 frames more than the exact conv formula ((L - 1) // 2 - 1) // 2 that espnet3 uses.
The fixture patches that one line to the exact formula, so attention masks and CTC lengths are
espnet3's; everything else runs as ESPnet has it. Run with the ESPnet venv:

    /opt/espnet3-venv/bin/python scripts/make_conformer_fixtures.py [OUTDIR]
"""

import numpy as np
import torch

from espnet2.asr.ctc import CTC
from espnet2.asr.encoder.conformer_encoder import ConformerEncoder
from espnet.nets.pytorch_backend.transformer import subsampling
from fixture_util import encoder_ctc_step, fixture_dir, save_case, seed_weights

# name: (idim, encoder_conf, vocab, frames per utterance, labels per utterance)
CASES = {
    # The Conformer of ESPnet2's recipes, small: macaron, rel-pos attention, swish, conv module.
    'main': (80, dict(output_size=32, attention_heads=4, linear_units=64, num_blocks=2, macaron_style=True,
                      rel_pos_type='latest', pos_enc_layer_type='rel_pos', selfattention_layer_type='rel_selfattn',
                      activation_type='swish', use_cnn_module=True, cnn_module_kernel=7),
             31, (100, 77), (10, 7)),
    # Absolute positions with plain attention, relu, no macaron; the conv module with relu.
    'abs_relu': (20, dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=1, macaron_style=False,
                          rel_pos_type='latest', pos_enc_layer_type='abs_pos', selfattention_layer_type='selfattn',
                          activation_type='relu', use_cnn_module=True, cnn_module_kernel=5),
                 9, (40, 29), (5, 3)),
    # Relative positions without the conv module (no BatchNorm, no norm_final), macaron.
    'no_cnn': (20, dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=1, macaron_style=True,
                        rel_pos_type='latest', pos_enc_layer_type='rel_pos', selfattention_layer_type='rel_selfattn',
                        activation_type='swish', use_cnn_module=False, cnn_module_kernel=31),
               9, (40, 29), (5, 3)),
    # Long utterances (9 and 6 s: 224 and 152 frames after subsampling, 447 relative positions) with
    # the default recipe's kernel 15: the relative shift and the padded conv beyond short test lengths.
    'long': (40, dict(output_size=32, attention_heads=4, linear_units=64, num_blocks=2, macaron_style=True,
                      rel_pos_type='latest', pos_enc_layer_type='rel_pos', selfattention_layer_type='rel_selfattn',
                      activation_type='swish', use_cnn_module=True, cnn_module_kernel=15),
             31, (900, 613), (60, 41)),
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


def make_case(name, idim, conf, vocab, lens, ylens):
    torch.manual_seed(0)
    enc = ConformerEncoder(idim, dropout_rate=0.0, positional_dropout_rate=0.0, attention_dropout_rate=0.0,
                           input_layer='conv2d', normalize_before=True, **conf)
    ctc = CTC(vocab, conf['output_size'], dropout_rate=0.0, ctc_type='builtin', reduce=True)
    g = torch.Generator().manual_seed(3)
    seed_weights(enc.modules(), list(enc.parameters()) + list(ctc.parameters()), g,
                 (torch.nn.LayerNorm, torch.nn.BatchNorm1d))
    arrays, (feats, ilens, hs, hlens, loss) = encoder_ctc_step(enc, ctc, idim, lens, ylens, vocab, g)
    after = {'encoder.' + k: v.detach().clone() for k, v in enc.state_dict().items() if 'norm.running' in k
             or 'num_batches_tracked' in k}

    enc.eval(), ctc.eval()
    with torch.no_grad():
        hs_e, _, _ = enc(feats, ilens)
        logp_e = ctc.log_softmax(hs_e)

    for k, v in after.items():
        arrays['after.' + k] = v.numpy() if v.dtype == torch.int64 else v.float().numpy()
    arrays.update({'eval.enc': hs_e.float().numpy(), 'eval.logp': logp_e.float().numpy()})
    return arrays, loss.item(), hlens.tolist()


def main():
    out = fixture_dir('test/fixtures/conformer', exact_mask_subsampling)
    for name, (idim, conf, vocab, lens, ylens) in CASES.items():
        arrays, loss, hlens = make_case(name, idim, conf, vocab, lens, ylens)
        save_case(out, name, arrays, f'loss {loss:.6f}, hlens {hlens}')


if __name__ == '__main__':
    main()
