#!/usr/bin/env python3
"""Writes the parity fixtures of the joint CTC/attention model (test/fixtures/decoder/) with the
real ESPnet2: ESPnetASRModel(TransformerEncoder + TransformerDecoder + CTC), no frontend,
specaug or normalize, dropout off, seeded weights, a padded batch of 2 with different feature
and label lengths. Run with the ESPnet venv (scripts/install_espnet_venv.sh):

    /opt/espnet3-venv/bin/python scripts/make_decoder_fixtures.py [OUTDIR]

Files: each <pack>.txt lists "name offset count dim..." for the float32 values in <pack>.f32:
  weights     every parameter under its ESPnet2 state-dict name
  ctc03       ctc_weight 0.3, lsm_weight 0.1: inputs (in.*), out.loss, out.loss_ctc,
              out.loss_att, out.acc, out.hlens and grad.<name> of every parameter
  ctc05_norm  the same with ctc_weight 0.5 and length_normalized_loss true
  score       decoder batch_score: the encoder output of one utterance (in.hs), prefixes
              (prefix.<i>, each starting with <sos/eos>) and their next-token log-probabilities
              (logp.<i>), each prefix scored alone, plus logp_batch.* for equal-length prefixes
              scored as one batch

espnet3 computes encoder output lengths with the exact conv formula ((L-1)//2-1)//2, where
ESPnet2's Conv2dSubsampling slices the padded mask (a different length for padded utterances,
docs/training.md); the script gives the subsampling that exact mask so both models attend to the
same frames.
"""
import argparse
import os

import numpy as np
import torch

from espnet2.asr.ctc import CTC
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder
from espnet2.asr.espnet_model import ESPnetASRModel

IDIM, D, HEADS, UNITS, BLOCKS = 80, 32, 4, 64, 2
TOKENS = ["<blank>", "<unk>"] + list("abcdefghi") + ["<sos/eos>"]  # vocab 12, <sos/eos> last
FEAT_LENS, LABEL_LENS = [64, 51], [7, 4]


def exact_mask_subsampling(embed):
    """Wraps Conv2dSubsampling so its mask holds ((L-1)//2-1)//2 frames per utterance."""
    forward = embed.forward

    def patched(x, x_mask):
        lens = x_mask.squeeze(1).sum(-1)
        y, mask = forward(x, x_mask)
        exact = torch.div(torch.div(lens - 1, 2, rounding_mode="floor") - 1, 2, rounding_mode="floor")
        mask = (torch.arange(y.size(1))[None, :] < exact[:, None])[:, None, :]
        return y, mask

    embed.forward = patched


def build(ctc_weight, length_normalized):
    encoder = TransformerEncoder(IDIM, output_size=D, attention_heads=HEADS, linear_units=UNITS,
                                 num_blocks=BLOCKS, dropout_rate=0.0, positional_dropout_rate=0.0,
                                 attention_dropout_rate=0.0, input_layer="conv2d", use_flash_attn=False)
    decoder = TransformerDecoder(len(TOKENS), D, attention_heads=HEADS, linear_units=UNITS, num_blocks=BLOCKS,
                                 dropout_rate=0.0, positional_dropout_rate=0.0, self_attention_dropout_rate=0.0,
                                 src_attention_dropout_rate=0.0, use_flash_attn=False)
    ctc = CTC(len(TOKENS), D)
    model = ESPnetASRModel(vocab_size=len(TOKENS), token_list=TOKENS, frontend=None, specaug=None,
                           normalize=None, preencoder=None, encoder=encoder, postencoder=None, decoder=decoder,
                           ctc=ctc, joint_network=None, ctc_weight=ctc_weight, lsm_weight=0.1,
                           length_normalized_loss=length_normalized, report_cer=False, report_wer=False)
    exact_mask_subsampling(model.encoder.embed)
    return model


def seeded_weights(model):
    """Default init with a seed, LayerNorms moved off 1/0 so their gradients are exercised."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    sd = {}
    for name, p in model.named_parameters():
        if ".norm" in name or "after_norm" in name:
            base = 1.0 if name.endswith("weight") else 0.0
            sd[name] = base + 0.1 * torch.randn(p.shape, generator=g)
        else:
            sd[name] = p.detach().clone()
    return sd


def batch(label_lo=2, label_hi=len(TOKENS) - 1):
    """Labels drawn from [label_lo, label_hi): by default never blank, <unk> or <sos/eos>."""
    g = torch.Generator().manual_seed(2)
    feats = torch.randn(2, max(FEAT_LENS), IDIM, generator=g)
    for b, n in enumerate(FEAT_LENS):
        feats[b, n:] = 0.0
    ys = torch.full((2, max(LABEL_LENS)), -1, dtype=torch.long)
    for b, n in enumerate(LABEL_LENS):
        ys[b, :n] = torch.randint(label_lo, label_hi, (n,), generator=g)
    return feats, torch.tensor(FEAT_LENS), ys, torch.tensor(LABEL_LENS)


def write_pack(out, name, items):
    off = 0
    with open(os.path.join(out, name + ".txt"), "w") as idx, open(os.path.join(out, name + ".f32"), "wb") as f:
        for k, v in items:
            a = np.ascontiguousarray(v.detach().cpu().numpy() if torch.is_tensor(v) else v, dtype=np.float32)
            idx.write(f"{k} {off} {a.size} {' '.join(map(str, a.shape))}\n".rstrip() + "\n")
            f.write(a.tobytes())
            off += a.size
    return off


def loss_case(weights, ctc_weight, length_normalized, inputs):
    model = build(ctc_weight, length_normalized)
    model.load_state_dict(weights)
    model.train()  # dropout rates are 0: train mode only skips the error calculators
    feats, lens, ys, ylens = inputs
    loss, stats, _ = model(feats, lens, ys.clone(), ylens)
    loss.backward()
    with torch.no_grad():
        _, hlens = model.encode(feats, lens)
    items = [("in.feats", feats), ("in.lens", lens.float()), ("in.ys", ys.float()), ("in.ylens", ylens.float()),
             ("out.hlens", hlens.float()), ("out.loss", loss.detach().reshape(1)),
             ("out.loss_ctc", stats["loss_ctc"].reshape(1)), ("out.loss_att", stats["loss_att"].reshape(1)),
             ("out.acc", torch.tensor([stats["acc"]]))]
    items += [("grad." + k, p.grad) for k, p in model.named_parameters()]
    return items, loss.item()


def score_case(weights):
    model = build(0.3, False)
    model.load_state_dict(weights)
    model.eval()
    feats, lens, _, _ = batch()
    with torch.no_grad():
        hs, _ = model.encode(feats[:1, : FEAT_LENS[0]], lens[:1])  # one utterance, unpadded
        hs = hs[0]
        sos = len(TOKENS) - 1
        prefixes = [[sos], [sos, 3], [sos, 3, 5], [sos, 3, 5, 7], [sos, 4, 4, 2], [sos, 9, 3, 5, 7, 8]]
        items = [("in.hs", hs)]
        for i, p in enumerate(prefixes):
            ys = torch.tensor([p])
            logp, _ = model.decoder.batch_score(ys, [None], hs[None])
            items += [(f"prefix.{i}", torch.tensor(p, dtype=torch.float32)), (f"logp.{i}", logp[0])]
        same = [3, 4]  # equal lengths: one batch of 2
        ys = torch.tensor([prefixes[i] for i in same])
        logp, _ = model.decoder.batch_score(ys, [None, None], hs[None].expand(len(same), -1, -1))
        items += [(f"logp_batch.{k}", logp[k]) for k in range(len(same))]
    return items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="test/fixtures/decoder")
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    weights = seeded_weights(build(0.3, False))
    n = write_pack(out, "weights", list(weights.items()))
    inputs = batch()
    for name, w, norm in [("ctc03", 0.3, False), ("ctc05_norm", 0.5, True)]:
        items, loss = loss_case(weights, w, norm, inputs)
        n += write_pack(out, name, items)
        print(f"{name}: loss {loss:.6f}")
    n += write_pack(out, "score", score_case(weights))
    print(f"wrote {n * 4 / 1024:.0f} KiB to {out}")


if __name__ == "__main__":
    main()
