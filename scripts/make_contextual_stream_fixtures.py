#!/usr/bin/env python3
"""Writes the ESPnet parity fixtures of the streaming contextual block Transformer and Conformer
encoders (test/fixtures/contextual_stream/<case>.npz; the Conformer's cases are named conformer*).

Each case builds the real ESPnet2 ContextualBlockTransformerEncoder or
ContextualBlockConformerEncoder (ESPnet 202511, torch 2.11) at a small size with seeded weights
(LayerNorm and BatchNorm affine parameters moved off 1/0, BatchNorm's running statistics drawn),
in eval mode, and
feeds one utterance's features to its forward_infer in chunks (the last one final), as
Speech2TextStreaming does: per push, the output frames it returns.

Arrays: param.<name> (ESPnet's names: encoder.*, and a CTC of 9 tokens the model needs but the
stream does not run), in.feats (T, idim), in.chunks (the chunk sizes),
out.counts (frames each push returned), out.enc (all returned frames, concatenated); float32,
np.savez_compressed, weights and features on bfloat16's grid. Run with the ESPnet venv:

    /opt/espnet3-venv/bin/python scripts/make_contextual_stream_fixtures.py [OUTDIR]
"""
import argparse
import os

import numpy as np
import torch

from espnet2.asr.ctc import CTC
from espnet2.asr.encoder.contextual_block_conformer_encoder import ContextualBlockConformerEncoder
from espnet2.asr.encoder.contextual_block_transformer_encoder import ContextualBlockTransformerEncoder
from fixture_util import save_case, seed_weights

SMALL = dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=2)
# name: (idim, encoder_conf, frames, chunk sizes (the rest goes with the final push))
CASES = {
    # 150 frames in uneven chunks (one too short for the input layer, one of a single frame): blocks
    # of 8 (hop 4, look-ahead 2) over several pushes, positions and contexts carried across them.
    'chunks': (20, dict(SMALL, block_size=8, hop_size=4, look_ahead=2), 150, (5, 13, 1, 30, 17, 40)),
    # No past frames, context vectors without positional encoding, three layers, pushes of 16.
    'no_ctx_pe': (20, dict(SMALL, num_blocks=3, block_size=6, hop_size=3, look_ahead=3, ctx_pos_enc=False), 131,
                  (16,) * 7),
    # The utterance fits one block and comes in one final push: the layers over the whole of it.
    'whole': (20, dict(SMALL, block_size=40, hop_size=16, look_ahead=16), 70, ()),
    # The linear input layer (no subsampling), look-ahead 0.
    'linear': (12, dict(output_size=16, attention_heads=4, linear_units=24, num_blocks=1, input_layer='linear',
                        block_size=10, hop_size=5, look_ahead=0), 61, (7, 20, 3)),
    # The Conformer layer (macaron, conv module of kernel 5, swish) in the 'chunks' pushes.
    'conformer': (20, dict(SMALL, block_size=8, hop_size=4, look_ahead=2, macaron_style=True, cnn_module_kernel=5),
                  150, (5, 13, 1, 30, 17, 40)),
    # The Conformer layer over a whole utterance that fits a block (one final push).
    'conformer_whole': (20, dict(SMALL, block_size=40, hop_size=16, look_ahead=16, cnn_module_kernel=3), 70, ()),
}


def make_case(name, idim, conf, T, chunks):
    torch.manual_seed(0)
    conformer = name.startswith('conformer')
    cls = ContextualBlockConformerEncoder if conformer else ContextualBlockTransformerEncoder
    enc = cls(idim, dropout_rate=0.0, positional_dropout_rate=0.0, attention_dropout_rate=0.0, **conf)
    ctc = CTC(9, conf['output_size'], dropout_rate=0.0)
    g = torch.Generator().manual_seed(3)
    if conformer:
        seed_weights(enc.modules(), enc.parameters(), g, (torch.nn.LayerNorm, torch.nn.BatchNorm1d))
        with torch.no_grad():
            for mod in enc.modules():
                if isinstance(mod, torch.nn.BatchNorm1d):
                    mod.running_mean.copy_((0.3 * torch.randn(mod.running_mean.shape, generator=g)).bfloat16())
                    mod.running_var.copy_((0.5 + torch.rand(mod.running_var.shape, generator=g)).bfloat16())
    else:
        seed_weights(enc.modules(), enc.parameters(), g)
    enc.eval()
    feats = torch.randn(T, idim, generator=g).bfloat16().float()
    sizes = list(chunks) + [T - sum(chunks)]
    states, outs, counts, at = None, [], [], 0
    with torch.no_grad():
        for i, n in enumerate(sizes):
            final = i == len(sizes) - 1
            x = feats[at:at + n].unsqueeze(0)
            at += n
            y, _, states = enc.forward_infer(x, torch.tensor([n]), states, is_final=final)
            y = y.reshape(-1, conf['output_size'])
            outs.append(y)
            counts.append(y.shape[0])
    arrays = {'param.encoder.' + k: v.numpy() if v.dtype == torch.int64 else v.float().numpy()
              for k, v in enc.state_dict().items()}
    arrays.update({'param.ctc.' + k: v.float().numpy() for k, v in ctc.state_dict().items()})
    arrays.update({'in.feats': feats.numpy(), 'in.chunks': np.array(sizes, np.float32),
                   'out.counts': np.array(counts, np.float32), 'out.enc': torch.cat(outs).numpy()})
    return arrays, counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out', nargs='?', default='test/fixtures/contextual_stream')
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    for name, (idim, conf, T, chunks) in CASES.items():
        arrays, counts = make_case(name, idim, conf, T, chunks)
        save_case(a.out, name, arrays, f'frames per push {counts}')


if __name__ == '__main__':
    main()
