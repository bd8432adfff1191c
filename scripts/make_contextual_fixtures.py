#!/usr/bin/env python3
"""Writes the ESPnet parity fixtures of the contextual block Transformer and Conformer encoders
(test/fixtures/contextual/<case>.npz; the Conformer's cases are named conformer*).

Each case builds the real ESPnet2 ContextualBlockTransformerEncoder or
ContextualBlockConformerEncoder and CTC (ESPnet 202511, torch 2.11) at a small size with seeded
weights (LayerNorm and BatchNorm affine parameters moved off 1/0), dropout off,
and runs a padded batch of 2 utterances in training mode (its forward_train, which whole-utterance
decoding runs too): encoder output, CTC log-probs, CTC loss and every parameter's gradient.

Arrays as scripts/make_conformer_fixtures.py writes them: param.<name>, grad.<name>, in.feats,
in.lens, in.ys, in.ylens, out.enc, out.logp, out.hlens, out.loss; float32, np.savez_compressed,
weights and features on bfloat16's grid.

The one deviation from ESPnet is the one espnet3 documents (docs/training.md): the input layer's
padded mask slicing is replaced by the exact conv formula for the output lengths (they only give
the CTC lengths here: the blocks mask nothing). Run with the ESPnet venv:

    /opt/espnet3-venv/bin/python scripts/make_contextual_fixtures.py [OUTDIR]
"""

import numpy as np
import torch

from espnet2.asr.ctc import CTC
from espnet2.asr.encoder.contextual_block_conformer_encoder import ContextualBlockConformerEncoder
from espnet2.asr.encoder.contextual_block_transformer_encoder import ContextualBlockTransformerEncoder
from espnet.nets.pytorch_backend.transformer import subsampling_without_posenc
from fixture_util import encoder_ctc_step, fixture_dir, save_case, seed_weights

# name: (idim, encoder_conf, vocab, frames per utterance, labels per utterance)
SMALL = dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=2)
CASES = {
    # 24 and 18 frames after conv2d in blocks of 8 (hop 4, look-ahead 2): 6 blocks, the last one short;
    # the shorter utterance's padding frames inside the blocks.
    'blocks': (20, dict(SMALL, block_size=8, hop_size=4, look_ahead=2), 9, (100, 77), (5, 3)),
    # No past frames (block 6 = hop 3 + look-ahead 3), context vectors without positional encoding.
    'no_ctx_pe': (20, dict(SMALL, block_size=6, hop_size=3, look_ahead=3, ctx_pos_enc=False), 9, (100, 77), (5, 3)),
    # The whole utterance fits one block: plain Transformer layers with the padding masked.
    'short': (20, dict(SMALL, block_size=40, hop_size=16, look_ahead=16), 9, (100, 77), (5, 3)),
    # The linear input layer (no subsampling), one layer, look-ahead 0, 45 frames in blocks of 10.
    'linear': (12, dict(output_size=16, attention_heads=4, linear_units=24, num_blocks=1, input_layer='linear',
                        block_size=10, hop_size=5, look_ahead=0), 9, (45, 31), (5, 3)),
    # The Conformer layer (macaron, conv module of kernel 5 over each block's 10 rows, swish) in
    # blocks of 8 (hop 4, look-ahead 2); BatchNorm's batch statistics over every block row.
    'conformer': (20, dict(SMALL, block_size=8, hop_size=4, look_ahead=2, macaron_style=True, cnn_module_kernel=5),
                  9, (100, 77), (5, 3)),
    # The Conformer layer without macaron, ReLU, a kernel (7) wider than a block's rows (6 + 2).
    'conformer_relu': (20, dict(SMALL, block_size=6, hop_size=3, look_ahead=1, activation_type='relu',
                                cnn_module_kernel=7), 9, (100, 77), (5, 3)),
    # The whole utterance fits one block: the Conformer layers over it, padding masked in the attention.
    'conformer_short': (20, dict(SMALL, block_size=40, hop_size=16, look_ahead=16, macaron_style=True,
                                 cnn_module_kernel=3), 9, (100, 77), (5, 3)),
}


def exact_mask_subsampling():
    """Conv2dSubsamplingWOPosEnc.forward with espnet3's exact output lengths instead of the sliced mask."""
    cls = subsampling_without_posenc.Conv2dSubsamplingWOPosEnc
    orig = cls.forward

    def forward(self, x, x_mask):
        y, _ = orig(self, x, None)
        if x_mask is None:
            return y, None
        lens = x_mask.sum(-1).reshape(-1)
        for k, s in zip(self.kernels, self.strides):
            lens = torch.div(lens - k, s, rounding_mode='floor') + 1
        return y, (torch.arange(y.size(1))[None, :] < lens[:, None])[:, None, :]

    cls.forward = forward


def make_case(name, idim, conf, vocab, lens, ylens):
    torch.manual_seed(0)
    conformer = name.startswith('conformer')
    cls = ContextualBlockConformerEncoder if conformer else ContextualBlockTransformerEncoder
    enc = cls(idim, dropout_rate=0.0, positional_dropout_rate=0.0, attention_dropout_rate=0.0, **conf)
    ctc = CTC(vocab, conf['output_size'], dropout_rate=0.0, ctc_type='builtin', reduce=True)
    g = torch.Generator().manual_seed(3)
    norms = (torch.nn.LayerNorm, torch.nn.BatchNorm1d) if conformer else (torch.nn.LayerNorm,)
    seed_weights(enc.modules(), list(enc.parameters()) + list(ctc.parameters()), g, norms)
    arrays, (_, _, _, hlens, loss) = encoder_ctc_step(enc, ctc, idim, lens, ylens, vocab, g)
    return arrays, loss.item(), hlens.tolist()


def main():
    out = fixture_dir('test/fixtures/contextual', exact_mask_subsampling)
    for name, (idim, conf, vocab, lens, ylens) in CASES.items():
        arrays, loss, hlens = make_case(name, idim, conf, vocab, lens, ylens)
        save_case(out, name, arrays, f'loss {loss:.6f}, hlens {hlens}')


if __name__ == '__main__':
    main()
