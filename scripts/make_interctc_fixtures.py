#!/usr/bin/env python3
"""Writes the ESPnet parity fixtures of intermediate CTC (test/fixtures/interctc/<case>.npz).

Each case builds the real ESPnet2 ESPnetASRModel (ESPnet 202511, torch 2.11) with
model_conf.interctc_weight and the encoder's interctc_layer_idx / interctc_use_conditioning (which
gives the encoder ESPnetASRModel's conditioning_layer), at a small size, seeded weights (LayerNorm
affine parameters moved off 1/0; weights and features on bfloat16's grid), dropout off, and runs a padded batch of 2 in training mode:

  transformer_cond  TransformerEncoder, 3 blocks, interctc_layer_idx [2, 1] (any order), conditioning,
                    interctc_weight 0.3, CTC only
  conformer         ConformerEncoder (rel_pos latest, macaron, conv module), 2 blocks, [1], no
                    conditioning, interctc_weight 0.5, CTC only (BatchNorm in training mode)
  ebf_cond_joint    EBranchformerEncoder, 2 blocks, [1], conditioning, interctc_weight 0.4, with a
                    TransformerDecoder and the joint loss (ctc_weight 0.3): its intermediate output
                    is not normalized

Arrays: param.<name> (the state dict, ESPnet's names), grad.<name> of every parameter, in.feats,
in.lens, in.ys (padded with -1), in.ylens, out.logp (the CTC log-probs of the conditioned encoder,
model.encode as decoding runs it), out.hlens, out.loss, out.loss_ctc (the final layer's),
out.loss_interctc (each listed layer's, in layer order), out.loss_att (NaN without a decoder).

As scripts/make_ebranchformer_fixtures.py, ESPnet's Conv2dSubsampling mask is patched to espnet3's
exact lengths ((L - 1) // 2 - 1) // 2. Run with the ESPnet venv:

    /opt/espnet3-venv/bin/python scripts/make_interctc_fixtures.py [OUTDIR]
"""
import argparse
import math
import os

import numpy as np
import torch

from espnet2.asr.ctc import CTC
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.conformer_encoder import ConformerEncoder
from espnet2.asr.encoder.e_branchformer_encoder import EBranchformerEncoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder
from espnet2.asr.espnet_model import ESPnetASRModel

# espnet3's exact subsampling lengths, patched into ESPnet's Conv2dSubsampling as for the E-Branchformer
from make_ebranchformer_fixtures import exact_mask_subsampling
from fixture_util import padded_targets, save_case, seed_weights

IDIM, VOCAB, LENS, YLENS = 20, 9, (40, 29), (5, 3)
OFF = dict(dropout_rate=0.0, positional_dropout_rate=0.0, attention_dropout_rate=0.0, input_layer='conv2d')

# name: (encoder class, encoder kwargs, interctc_weight, ctc_weight, decoder blocks (0: none))
CASES = {
    'transformer_cond': (TransformerEncoder,
                         dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=3,
                              interctc_layer_idx=[2, 1], interctc_use_conditioning=True, use_flash_attn=False),
                         0.3, 1.0, 0),
    'conformer': (ConformerEncoder,
                  dict(output_size=16, attention_heads=2, linear_units=24, num_blocks=2, macaron_style=True,
                       rel_pos_type='latest', pos_enc_layer_type='rel_pos', selfattention_layer_type='rel_selfattn',
                       activation_type='swish', use_cnn_module=True, cnn_module_kernel=5, interctc_layer_idx=[1]),
                  0.5, 1.0, 0),
    'ebf_cond_joint': (EBranchformerEncoder,
                       dict(output_size=16, attention_heads=2, attention_layer_type='rel_selfattn',
                            pos_enc_layer_type='rel_pos', rel_pos_type='latest', cgmlp_linear_units=24,
                            cgmlp_conv_kernel=5, num_blocks=2, linear_units=24, use_ffn=True, macaron_ffn=True,
                            merge_conv_kernel=3, layer_drop_rate=0.0, interctc_layer_idx=[1],
                            interctc_use_conditioning=True),
                       0.4, 0.3, 1),
}


def make_case(enc_cls, conf, interctc_weight, ctc_weight, dec_blocks):
    torch.manual_seed(0)
    d = conf['output_size']
    tokens = ['<blank>', '<unk>'] + [f't{i}' for i in range(VOCAB - 3)] + ['<sos/eos>']
    enc = enc_cls(IDIM, **OFF, **conf)
    dec = None
    if dec_blocks:
        dec = TransformerDecoder(VOCAB, d, attention_heads=conf['attention_heads'], linear_units=24,
                                 num_blocks=dec_blocks, dropout_rate=0.0, positional_dropout_rate=0.0,
                                 self_attention_dropout_rate=0.0, src_attention_dropout_rate=0.0,
                                 use_flash_attn=False)
    ctc = CTC(VOCAB, d, dropout_rate=0.0, ctc_type='builtin', reduce=True)
    model = ESPnetASRModel(vocab_size=VOCAB, token_list=tokens, frontend=None, specaug=None, normalize=None,
                           preencoder=None, encoder=enc, postencoder=None, decoder=dec, ctc=ctc,
                           joint_network=None, ctc_weight=ctc_weight, interctc_weight=interctc_weight,
                           lsm_weight=0.1, length_normalized_loss=False, report_cer=False, report_wer=False)
    g = torch.Generator().manual_seed(3)
    seed_weights(model.modules(), model.parameters(), g)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}

    B, T = 2, max(LENS)
    feats = torch.randn(B, T, IDIM, generator=g).bfloat16().float()
    ilens = torch.tensor(LENS)
    ys = padded_targets(YLENS, VOCAB, g, low=2)  # never <unk> either
    ylens = torch.tensor(YLENS)

    model.train()
    loss, stats, _ = model(feats, ilens, ys.clone(), ylens)
    loss.backward()
    layers = sorted(set(conf['interctc_layer_idx']))
    inter = [float(stats[f'loss_interctc_layer{k}']) for k in layers]
    model.eval()  # decoding's encoder: BatchNorm's running statistics, the conditioning fed back
    with torch.no_grad():
        hs, hlens = model.encode(feats, ilens)
        hs = hs[0] if isinstance(hs, tuple) else hs  # (encoder_out, intermediate_outs)
        logp = model.ctc.log_softmax(hs)

    def scalar(v):
        return np.array([math.nan if v is None else float(v)], dtype=np.float32)

    # num_batches_tracked stays int64, as in the state dict
    arrays = {'param.' + k: (v.float() if v.is_floating_point() else v).numpy() for k, v in state.items()}
    for k, p in model.named_parameters():
        arrays['grad.' + k] = p.grad.float().numpy()
    arrays.update({
        'in.feats': feats.numpy(), 'in.lens': ilens.float().numpy(), 'in.ys': ys.float().numpy(),
        'in.ylens': ylens.float().numpy(), 'out.logp': logp.float().numpy(), 'out.hlens': hlens.float().numpy(),
        'out.loss': scalar(loss.item()), 'out.loss_ctc': scalar(stats.get('loss_ctc')),
        'out.loss_interctc': np.array(inter, dtype=np.float32), 'out.loss_att': scalar(stats.get('loss_att')),
    })
    return arrays, loss.item(), inter


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out', nargs='?', default='test/fixtures/interctc')
    a = ap.parse_args()
    exact_mask_subsampling()
    torch.set_num_threads(1)
    os.makedirs(a.out, exist_ok=True)
    for name, case in CASES.items():
        arrays, loss, inter = make_case(*case)
        save_case(a.out, name, arrays, f'loss {loss:.6f}, interctc {inter}')


if __name__ == '__main__':
    main()
