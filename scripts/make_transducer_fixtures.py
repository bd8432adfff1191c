#!/usr/bin/env python3
"""Writes the parity fixtures of the ASR task's transducer (test/fixtures/transducer/) with the real
ESPnet2: ESPnetASRModel(TransformerEncoder + TransducerDecoder + the JointNetwork the ASR task
builds beside it + CTC), no frontend, specaug or normalize, dropout off, seeded weights, a padded
batch of 2 with different feature and label lengths. Run with the ESPnet venv
(scripts/install_espnet_venv.sh):

    /opt/espnet3-venv/bin/python scripts/make_transducer_fixtures.py [OUTDIR]

ESPnetASRModel's transducer loss is warp-transducer's RNNTLoss(blank=0, reduction="mean")
(`warprnnt_pytorch`), which PyPI does not carry for torch 2.11: the script stands it in with
torchaudio's rnnt_loss (scripts/rnnt_loss_standin.py), the same function of the logits.

Files (the format of scripts/make_decoder_fixtures.py: <pack>.txt lists "name offset count dim..."
for the float32 values in <pack>.f32):
  weights   every parameter under its ESPnet2 state-dict name (2 LSTM layers of 24 units, joint 20)
  ctc03     ctc_weight 0.3: inputs (in.*), out.loss, out.loss_ctc, out.loss_transducer, out.hlens
            and grad.<name> of every parameter
  search    BeamSearchTransducer (espnet2/asr/transducer/beam_search_transducer.py) on one
            utterance's encoder output (in.enc), lin_out's weight times 3
            (weight.joint_network.lin_out.weight): per mode of SEARCHES (greedy, default, tsd, alsd,
            nsc, maes with their transducer_conf keys) <mode>.n hypotheses, <mode>.<i>.yseq (the
            blank first) and <mode>.<i>.score (float32 of ESPnet's double)
  gru_weights  the same model with rnn_type gru: its decoder.decoder.* (2 torch.nn.GRU layers, default
            init under seed 3); every other parameter is weights'
  gru_ctc03 ctc03's batch on the GRU model: out.loss, out.loss_ctc, out.loss_transducer and grad.<name>
            of the decoder's and the joint network's parameters (inputs: ctc03's in.*)
  gru_search  search's modes on the GRU model (in.enc its encoder output: weights' encoder)
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rnnt_loss_standin  # noqa: E402

rnnt_loss_standin.install()

from espnet2.asr.ctc import CTC  # noqa: E402
from espnet2.asr.decoder.transducer_decoder import TransducerDecoder  # noqa: E402
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder  # noqa: E402
from espnet2.asr.espnet_model import ESPnetASRModel  # noqa: E402
from espnet2.asr_transducer.joint_network import JointNetwork  # noqa: E402

from make_decoder_fixtures import (  # noqa: E402
    BLOCKS, D, FEAT_LENS, HEADS, IDIM, TOKENS, UNITS, batch, exact_mask_subsampling, seeded_weights, write_pack)

# The encoder, tokens (vocab 12) and batch are make_decoder_fixtures.py's.
HIDDEN, LAYERS, JOINT = 24, 2, 20


def build(ctc_weight, rnn_type="lstm"):
    encoder = TransformerEncoder(IDIM, output_size=D, attention_heads=HEADS, linear_units=UNITS,
                                 num_blocks=BLOCKS, dropout_rate=0.0, positional_dropout_rate=0.0,
                                 attention_dropout_rate=0.0, input_layer="conv2d", use_flash_attn=False)
    decoder = TransducerDecoder(len(TOKENS), rnn_type=rnn_type, num_layers=LAYERS, hidden_size=HIDDEN, dropout=0.0,
                                dropout_embed=0.0, embed_pad=0)
    joint = JointNetwork(len(TOKENS), encoder.output_size(), decoder.dunits, joint_space_size=JOINT)
    ctc = CTC(len(TOKENS), D)
    model = ESPnetASRModel(vocab_size=len(TOKENS), token_list=TOKENS, frontend=None, specaug=None,
                           normalize=None, preencoder=None, encoder=encoder, postencoder=None, decoder=decoder,
                           ctc=ctc, joint_network=joint, ctc_weight=ctc_weight, report_cer=False, report_wer=False)
    exact_mask_subsampling(model.encoder.embed)
    return model


def loss_case(weights, ctc_weight, inputs, rnn_type="lstm"):
    model = build(ctc_weight, rnn_type)
    model.load_state_dict(weights)
    model.train()  # dropout rates are 0
    feats, lens, ys, ylens = inputs
    loss, stats, _ = model(feats, lens, ys.clone(), ylens)
    loss.backward()
    with torch.no_grad():
        _, hlens = model.encode(feats, lens)
    items = [("in.feats", feats), ("in.lens", lens.float()), ("in.ys", ys.float()), ("in.ylens", ylens.float()),
             ("out.hlens", hlens.float()), ("out.loss", loss.detach().reshape(1)),
             ("out.loss_ctc", stats["loss_ctc"].reshape(1)),
             ("out.loss_transducer", stats["loss_transducer"].reshape(1))]
    items += [("grad." + k, p.grad) for k, p in model.named_parameters()]
    return items, loss.item()


# Search modes: (name, beam_size, transducer_conf) as an inference config spells them.
SEARCHES = [
    ("greedy", 1, {}),
    ("default", 4, {"nbest": 3}),
    ("default_norm_during", 3, {"score_norm_during": True, "score_norm": False, "nbest": 2}),
    ("tsd", 4, {"search_type": "tsd", "max_sym_exp": 3, "nbest": 3}),
    ("alsd", 4, {"search_type": "alsd", "u_max": 10, "nbest": 3}),
    ("nsc", 4, {"search_type": "nsc", "nstep": 2, "prefix_alpha": 2, "nbest": 3}),
    ("maes", 4, {"search_type": "maes", "nstep": 3, "expansion_gamma": 2.3, "expansion_beta": 2, "nbest": 3}),
]


def search_case(weights, rnn_type="lstm"):
    """BeamSearchTransducer on the encoder output of utterance 0 (lin_out scaled by 3: peakier
    distributions, so the beams hold distinct, non-tied hypotheses)."""
    from espnet2.asr.transducer.beam_search_transducer import BeamSearchTransducer

    model = build(0.3, rnn_type)
    w = dict(weights)
    w["joint_network.lin_out.weight"] = 3 * w["joint_network.lin_out.weight"]
    model.load_state_dict(w)
    model.eval()
    feats, lens, _, _ = batch(1, len(TOKENS))
    items = [("weight.joint_network.lin_out.weight", w["joint_network.lin_out.weight"])]
    with torch.no_grad():
        enc, _ = model.encode(feats[:1, : FEAT_LENS[0]], lens[:1])
        enc = enc[0]
        items.append(("in.enc", enc))
        for name, beam, conf in SEARCHES:
            search = BeamSearchTransducer(decoder=model.decoder, joint_network=model.joint_network, beam_size=beam,
                                          token_list=TOKENS, **conf)
            items += search_items(name, search(enc))
    return items


def search_items(name, hyps):
    """A search's n-best as the pack's arrays: their count, each one's label sequence and score."""
    items = [(f"{name}.n", torch.tensor([float(len(hyps))]))]
    for i, h in enumerate(hyps):
        items += [(f"{name}.{i}.yseq", torch.tensor(h.yseq, dtype=torch.float32)),
                  (f"{name}.{i}.score", torch.tensor([float(h.score)], dtype=torch.float64))]
    print(f"{name}: " + "; ".join(f"{h.yseq[1:]} {float(h.score):.4f}" for h in hyps))
    return items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="test/fixtures/transducer")
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)  # the modules' default init
    weights = seeded_weights(build(0.3))
    n = write_pack(out, "weights", list(weights.items()))
    items, loss = loss_case(weights, 0.3, batch(1, len(TOKENS)))  # labels never the blank
    n += write_pack(out, "ctc03", items)
    print(f"ctc03: loss {loss:.6f}")
    n += write_pack(out, "search", search_case(weights))
    torch.manual_seed(3)
    gru = {k: v.detach().clone() for k, v in build(0.3, "gru").named_parameters() if k.startswith("decoder.decoder.")}
    gw = {k: v for k, v in weights.items() if not k.startswith("decoder.decoder.")}
    gw.update(gru)
    n += write_pack(out, "gru_weights", list(gru.items()))
    items, loss = loss_case(gw, 0.3, batch(1, len(TOKENS)), "gru")
    n += write_pack(out, "gru_ctc03", [kv for kv in items if kv[0].startswith("out.loss")
                                       or kv[0].startswith("grad.decoder.") or kv[0].startswith("grad.joint_network.")])
    print(f"gru ctc03: loss {loss:.6f}")
    n += write_pack(out, "gru_search", search_case(gw, "gru"))
    print(f"wrote {n * 4 / 1024:.0f} KiB to {out}")


if __name__ == "__main__":
    main()
