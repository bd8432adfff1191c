#!/usr/bin/env python3
"""Writes the parity fixtures of ESPnet2's asr_transducer task (test/fixtures/asr_transducer/) with
the real ESPnet2: ESPnetASRTransducerModel with its Encoder (ConvInput, subsampling 4, then two
`conformer` blocks of body_conf and MultiBlocks' norm_blocks), a 2-layer LSTM RNNDecoder and the
JointNetwork, transducer_weight 0.8 and auxiliary_ctc_weight 0.3 (ctc_lin); no frontend, specaug or
normalize, dropout off, seeded weights, a padded batch of 2 whose second utterance (12 input
frames) is shorter than the encoder's 15 output frames, so the Encoder's masks (attention, the
convolution module's masked_fill_) cut it. Run with the ESPnet venv:

    /opt/espnet3-venv/bin/python scripts/make_asr_transducer_fixtures.py [OUTDIR]

warp-transducer's RNNTLoss (`warprnnt_pytorch`, not on PyPI for torch 2.11) is stood in by
torchaudio's rnnt_loss, as scripts/make_transducer_fixtures.py does; with fastemit_lambda by
scripts/rnnt_loss_standin.py's float64 PyTorch reference of warp-transducer's FastEmit formula.

The same model with a StatelessDecoder (embed_size 12; the RNNDecoder's weights but its LSTMs, the
same batch and search encoder output) gives the stateless_* packs; a model of two `ebranchformer`
blocks (depth_conv_kernel_size 5) with that StatelessDecoder, on the same batch, the ebranchformer_*
packs, and one of two `branchformer` blocks the branchformer_* packs.

Files (scripts/make_decoder_fixtures.py's pack format):
  weights  every parameter and buffer under its ESPnet2 state-dict name
  loss     inputs (in.*), out.hlens, out.enc (the Encoder's output in eval mode), out.loss, out.loss_transducer,
           out.loss_aux_ctc and grad.<name> of every parameter
  search   espnet2/asr_transducer's BeamSearchTransducer (asr_transducer_inference's) on utterance 0's
           Encoder output (in.enc), lin_out's weight times 3 (weight.joint_network.lin_out.weight): per
           mode of SEARCHES <mode>.n hypotheses, <mode>.<i>.yseq (the blank first) and <mode>.<i>.score
  stateless_loss    the stateless model's out.loss, out.loss_transducer, out.loss_aux_ctc and grad.<name>
                    of every parameter (inputs: loss's in.*)
  stateless_search  search's items for the stateless model
  <block>_weights, <block>_loss  weights and loss for the E-Branchformer and Branchformer models
                    (inputs: loss's in.*; their own out.hlens and out.enc)
  aux_weights, aux_loss  the RNNDecoder model with model_conf AUX (fastemit_lambda, the auxiliary LM
                    loss' lm_lin): its weights (lm_lin.* besides weights' tensors) and loss's items
                    with out.loss_aux_lm (inputs: loss's in.*)
  gru_weights  an RNNDecoder with rnn_type gru and embed_size 8 (2 GRU layers of 12 units; default
               init under seed 3): its decoder.* parameters; every other one is weights'
  gru_loss     loss's batch on the GRU model: out.loss, out.loss_transducer, out.loss_aux_ctc and
               grad.<name> of the decoder's and the joint network's parameters
  gru_search   search's modes on the GRU model (in.enc: the same encoder output)
  mixed_weights, mixed_loss, mixed_search  the RNNDecoder model on MIXED, an Encoder whose blocks
                    differ in type, linear_size, heads and conv_mod_kernel_size: weights, loss's items
                    (inputs: loss's in.*; its own out.hlens and out.enc) and search's items on its
                    Encoder output of utterance 0
  pointwise_weights, pointwise_loss, pointwise_search  the same for POINTWISE, X-former blocks with
                    conv1d blocks between them that keep the frames and the size (kernel_size 1,
                    stride 1: ESPnet2's Encoder is right about the lengths there, unpatched), one
                    with BatchNorm1d and 2 groups, one without ReLU or bias
  norms_<kind>_weights, norms_<kind>_loss  the same for MIXED's Encoder with NORMS[kind]: main_conf's
                    norm_type and conv_mod_norm_type (rms_norm, basic_norm, scale_norm) with per-block
                    norm_eps / norm_partial / conv_mod_norm_eps / conv_mod_norm_partial and after_norm_*;
                    norms_rms_search: search's items on its Encoder output of utterance 0
  shrink_weights, shrink_loss, shrink_search  the same for SHRINK, conv1d blocks that shrink the
                    frames (kernel 2, dilation 2, stride 2 with BatchNorm1d; kernel 2 without ReLU or
                    bias) between X-former
                    blocks. ESPnet2's Encoder.forward returns the lengths from before the blocks
                    (MultiBlocks never hands back the shrunk mask; torchaudio's rnnt_loss then fails
                    with "input length mismatch"), so for this body the script patches
                    Encoder.forward to return the lengths of the last block's mask (shrunk_forward)
  widen_weights, widen_loss, widen_search  the same for WIDEN, conv1d blocks that change the size
                    (16 -> 24 with BatchNorm1d and 2 groups, then X-former blocks of hidden 24; 24 -> 20
                    of kernel 2, one frame fewer, without ReLU or bias, then an E-Branchformer of 20)
                    after a ConvInput of conv_size 8 (its Linear from 8 x 4 bins to 16); shrunk_forward
  convfirst_weights, convfirst_loss, convfirst_search  the same for CONVFIRST, a conv1d block first:
                    ConvInput without its output Linear (conv_size = the block's output_size 16, x 4
                    bins: 64 features, the positional encoding's size too), the conv1d block 64 -> 16
                    (kernel 3: 15 -> 13 frames), then X-former blocks of 16; shrunk_forward
  blockdrop_loss    mixed_weights' model with main_conf blockdrop_rate BLOCKDROP_RATE in training:
                    MultiBlocks' draws fixed to BLOCKDROP_DRAWS (FixedDraws stands in for keep_probs),
                    which skip blocks 1 and 2 of 5; out.dropped (1 per skipped block), out.loss,
                    out.loss_transducer, out.loss_aux_ctc and grad.<name> (the skipped blocks' zero)
  chunk_loss        mixed_weights' model with main_conf CHUNK_CONF (dynamic_chunk_training: causal
                    convolutions, the attention's chunk mask): Encoder.forward's torch.randint patched
                    to CHUNK_DRAW (chunk CHUNK_DRAW % short_chunk_size + 1 = 5 of the 15 frames, one
                    left chunk); out.chunk, out.loss, out.loss_transducer, out.loss_aux_ctc, grad.<name>
                    (training mode); out.enc_chunk: the eval-mode Encoder output with that draw
                    (validation: ESPnet2's Encoder.forward draws whatever the mode); out.enc: the
                    eval-mode output with dynamic_chunk_training off (asr_transducer_inference's
                    Speech2Text turns it off: causal convolutions, full-context attention)
  simplified_weights, simplified_loss, simplified_search  the same as mixed_* for MIXED's Encoder with
                    main_conf simplified_att_score (RelPositionMultiHeadedAttention's simplified score:
                    linear_pos to one scalar per head with a bias, no pos_bias_u / pos_bias_v)
  simplified_chunk_loss  chunk_loss's items for simplified_weights' model with CHUNK_CONF as well
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rnnt_loss_standin  # noqa: E402

rnnt_loss_standin.install()

from make_decoder_fixtures import write_pack  # noqa: E402
from make_transducer_fixtures import search_items  # noqa: E402

from espnet2.asr_transducer.decoder.rnn_decoder import RNNDecoder  # noqa: E402
from espnet2.asr_transducer.decoder.stateless_decoder import StatelessDecoder  # noqa: E402
from espnet2.asr_transducer.encoder.encoder import Encoder  # noqa: E402
from espnet2.asr_transducer.espnet_transducer_model import ESPnetASRTransducerModel  # noqa: E402
from espnet2.asr_transducer.joint_network import JointNetwork  # noqa: E402

IDIM, D, LINEAR, HEADS, KERNEL, BLOCKS = 20, 16, 24, 2, 3, 2
HIDDEN, LAYERS, JOINT = 12, 2, 10
TOKENS = ["<blank>", "<unk>"] + list("abcdefghi") + ["<sos/eos>"]  # vocab 12
FEAT_LENS, LABEL_LENS = [64, 12], [7, 4]


# The aux_* packs' model_conf: FastEmit and the auxiliary LM loss (lm_lin) with a smoothing of its own.
AUX = {"fastemit_lambda": 0.5, "auxiliary_lm_loss_weight": 0.4, "auxiliary_lm_loss_smoothing": 0.1}


GRU_EMBED = 8  # the GRU decoder's embed_size, apart from its hidden_size


# body_conf of the mixed_* packs: blocks of three types, each with its own sizes, in four runs.
MIXED = [
    {"block_type": "conformer", "hidden_size": D, "linear_size": 24, "heads": 2, "conv_mod_kernel_size": 3,
     "num_blocks": 2},
    {"block_type": "ebranchformer", "hidden_size": D, "linear_size": 20, "heads": 4, "conv_mod_kernel_size": 5,
     "depth_conv_kernel_size": 3},
    {"block_type": "branchformer", "hidden_size": D, "linear_size": 12, "heads": 1, "conv_mod_kernel_size": 3},
    {"block_type": "conformer", "hidden_size": D, "linear_size": 32, "heads": 4, "conv_mod_kernel_size": 5},
]


# body_conf of the pointwise_* packs: conv1d blocks of kernel 1 between X-former blocks.
POINTWISE = [
    MIXED[0] | {"num_blocks": 1},
    {"block_type": "conv1d", "output_size": D, "kernel_size": 1, "batch_norm": True, "groups": 2},
    MIXED[1],
    {"block_type": "conv1d", "output_size": D, "kernel_size": 1, "relu": False, "bias": False},
    MIXED[3],
]


# body_conf of the widen_* packs (input_conf WIDEN_INPUT): conv1d blocks that change the size.
WIDEN = [
    MIXED[0] | {"num_blocks": 1},
    {"block_type": "conv1d", "output_size": 24, "kernel_size": 1, "batch_norm": True, "groups": 2},
    {"block_type": "conformer", "hidden_size": 24, "linear_size": 32, "heads": 4, "conv_mod_kernel_size": 3},
    {"block_type": "conv1d", "output_size": 20, "kernel_size": 2, "relu": False, "bias": False},
    {"block_type": "ebranchformer", "hidden_size": 20, "linear_size": 20, "heads": 2, "conv_mod_kernel_size": 3},
]
WIDEN_INPUT = {"conv_size": 8}


# body_conf of the convfirst_* packs: a conv1d block first, after ConvInput without its Linear.
CONVFIRST = [
    {"block_type": "conv1d", "output_size": D, "kernel_size": 3},
    MIXED[1],
    MIXED[3],
]


# body_conf of the shrink_* packs: conv1d blocks that shrink the frames (15 -> 7 -> 6 frames,
# lengths [15, 12] -> [7, 6] -> [6, 6]; utterance 0's 7 labels, one repeated, no longer fit CTC's
# 6 frames: zero_infinity drops its CTC loss, on both sides).
SHRINK = [
    MIXED[0] | {"num_blocks": 1},
    {"block_type": "conv1d", "output_size": D, "kernel_size": 2, "dilation": 2, "stride": 2, "batch_norm": True},
    MIXED[1],
    {"block_type": "conv1d", "output_size": D, "kernel_size": 2, "relu": False, "bias": False},
    MIXED[3],
]


# The norms_<kind>_* packs: MIXED's Encoder (every norm site: the Conformer's, the E-Branchformer's
# and the Branchformer's, their gating units' and norm_blocks) with main_conf's norm_type and
# conv_mod_norm_type of get_normalization's other kinds, and per-block eps / partial keys:
# (main_conf, {body entry: extra keys}).
NORMS = {
    "rms": ({"norm_type": "rms_norm", "conv_mod_norm_type": "scale_norm", "after_norm_partial": 0.25},
            {0: {"norm_partial": 0.5, "norm_eps": 1e-4}, 1: {"conv_mod_norm_eps": 1e-3}}),
    "basic": ({"norm_type": "basic_norm", "conv_mod_norm_type": "rms_norm", "after_norm_eps": 0.5},
              {1: {"conv_mod_norm_partial": 0.5}, 2: {"norm_eps": 0.1}}),
    "scale": ({"norm_type": "scale_norm", "conv_mod_norm_type": "basic_norm"},
              {3: {"norm_eps": 1e-3}}),
}
# main_conf.blockdrop_rate of the blockdrop_loss pack and MultiBlocks' uniform draws (the last block's
# stays 1): block l of 5 is skipped when its draw is below 0.8 * l / 5 (0, 0.16, 0.32, 0.48, 0.64).
BLOCKDROP_RATE, BLOCKDROP_DRAWS = 0.8, [0.05, 0.1, 0.3, 0.5, 1.0]

# main_conf of the chunk_loss pack, and the torch.randint(1, 15) draw its Encoder.forward gets:
# 4 <= 15 * 0.75, so the chunk is 4 % 25 + 1 = 5 frames (3 chunks), each seeing one chunk before it.
CHUNK_CONF = {"dynamic_chunk_training": True, "short_chunk_size": 25, "num_left_chunks": 1}
CHUNK_DRAW = 4

# main_conf of the simplified_* packs.
SIMPLIFIED_CONF = {"simplified_att_score": True}


class FixedDraws:
    """MultiBlocks.keep_probs with its draws fixed: keep_probs[:-1].uniform_() fills a copy."""

    def __init__(self, draws):
        self.u = torch.tensor(draws)

    def __getitem__(self, i):
        return self.u[i].clone() if isinstance(i, slice) else self.u[i]


def shrunk_forward(self, x, x_len):
    """Encoder.forward (no dynamic chunks) returning the lengths of the blocks' last mask, which
    MultiBlocks.forward computes but drops; the unpatched one returns the input block's."""
    from espnet2.asr_transducer.utils import make_source_mask

    mask = make_source_mask(x_len)
    x, mask = self.embed(x, mask)
    pos_enc = self.pos_enc(x)
    for block in self.encoders.blocks:
        x, mask, pos_enc = block(x, pos_enc, mask, chunk_mask=None)
    return self.encoders.norm_blocks(x), mask.eq(0).sum(1)


def build(stateless=False, block="conformer", aux=False, rnn_type="lstm", main_conf=None):
    body = [{"block_type": block, "hidden_size": D, "linear_size": LINEAR, "heads": HEADS,
             "conv_mod_kernel_size": KERNEL, "num_blocks": BLOCKS}]
    if block == "ebranchformer":
        body[0]["depth_conv_kernel_size"] = 5
    if block == "mixed":
        body = MIXED
    if block == "pointwise":
        body = POINTWISE
    if block == "shrink":
        body = SHRINK
    if block == "widen":
        body = WIDEN
    if block == "convfirst":
        body = CONVFIRST
    if block == "simplified":
        body, main_conf = MIXED, SIMPLIFIED_CONF | (main_conf or {})
    if block.startswith("norms_"):
        main_conf, extra = NORMS[block[len("norms_"):]]
        body = [entry | extra.get(i, {}) for i, entry in enumerate(MIXED)]
    encoder = Encoder(IDIM, body, input_conf=dict(WIDEN_INPUT) if block == "widen" else {}, main_conf=main_conf or {})
    if block in ("shrink", "widen", "convfirst"):
        encoder.forward = shrunk_forward.__get__(encoder)
    if stateless:
        decoder = StatelessDecoder(len(TOKENS), embed_size=HIDDEN)
    elif rnn_type == "gru":
        decoder = RNNDecoder(len(TOKENS), embed_size=GRU_EMBED, hidden_size=HIDDEN, rnn_type="gru", num_layers=LAYERS)
    else:
        decoder = RNNDecoder(len(TOKENS), embed_size=HIDDEN, hidden_size=HIDDEN, num_layers=LAYERS)
    joint = JointNetwork(len(TOKENS), encoder.output_size, decoder.output_size, joint_space_size=JOINT)
    return ESPnetASRTransducerModel(len(TOKENS), TOKENS, frontend=None, specaug=None, normalize=None, encoder=encoder,
                                    decoder=decoder, joint_network=joint, transducer_weight=0.8,
                                    auxiliary_ctc_weight=0.3, **(AUX if aux else {}))


def seeded_weights(model):
    """Default init with a seed; norms and the BatchNorms' statistics moved off 1/0."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    sd = {}
    for name, p in model.state_dict().items():
        if ("norm" in name or ".bn." in name) and p.is_floating_point():
            base = 1.0 if name.endswith("weight") or name.endswith("running_var") else 0.0
            if name.endswith(".scale") or name.endswith(".eps"):  # RMSNorm's, ScaleNorm's, BasicNorm's: off their init
                base = p.detach().clone()
            sd[name] = base + 0.1 * torch.randn(p.shape, generator=g).abs()
        else:
            sd[name] = p.detach().clone()
    return sd


def batch():
    g = torch.Generator().manual_seed(2)
    feats = torch.randn(2, max(FEAT_LENS), IDIM, generator=g)
    for b, n in enumerate(FEAT_LENS):
        feats[b, n:] = 0.0
    ys = torch.full((2, max(LABEL_LENS)), -1, dtype=torch.long)
    for b, n in enumerate(LABEL_LENS):
        ys[b, :n] = torch.randint(1, len(TOKENS), (n,), generator=g)  # never the blank
    return feats, torch.tensor(FEAT_LENS), ys, torch.tensor(LABEL_LENS)


def stateless_weights(weights):
    """The RNN model's weights but its LSTMs (decoder.rnn.*), which the StatelessDecoder lacks."""
    return {k: v for k, v in weights.items() if not k.startswith("decoder.rnn.")}


def loss_case(weights, stateless=False, block="conformer", aux=False, rnn_type="lstm"):
    feats, lens, ys, ylens = batch()
    model = build(stateless, block, aux, rnn_type)
    model.load_state_dict(weights)
    model.eval()  # the Encoder's output with the BatchNorms' running statistics
    with torch.no_grad():
        enc, hlens = model.encoder(feats, lens)
    model.train()  # dropout rates are 0; BatchNorm on the batch's statistics
    loss, stats, _ = model(feats, lens, ys.clone(), ylens)
    loss.backward()
    items = [("in.feats", feats), ("in.lens", lens.float()), ("in.ys", ys.float()), ("in.ylens", ylens.float()),
             ("out.hlens", hlens.float()), ("out.enc", enc), ("out.loss", loss.detach().reshape(1)),
             ("out.loss_transducer", stats["loss_transducer"].reshape(1)),
             ("out.loss_aux_ctc", stats["loss_aux_ctc"].reshape(1))]
    if aux:
        items.append(("out.loss_aux_lm", stats["loss_aux_lm"].reshape(1)))
    items += [("grad." + k, p.grad) for k, p in model.named_parameters()]
    if stateless:  # the inputs (and but for another encoder, its output) are loss's
        items = [kv for kv in items if not kv[0].startswith("in.")
                 and (block != "conformer" or kv[0] not in ("out.hlens", "out.enc"))]
    return items, loss.item(), hlens.tolist()


def blockdrop_case(weights):
    """loss_case's training step on MIXED with blockdrop_rate and BLOCKDROP_DRAWS."""
    feats, lens, ys, ylens = batch()
    model = build(block="mixed", main_conf={"blockdrop_rate": BLOCKDROP_RATE})
    model.load_state_dict(weights)
    model.train()
    model.encoder.encoders.keep_probs = FixedDraws(BLOCKDROP_DRAWS)
    loss, stats, _ = model(feats, lens, ys.clone(), ylens)
    loss.backward()
    n = len(BLOCKDROP_DRAWS)
    dropped = [float(u < BLOCKDROP_RATE * (1.0 / n * l)) for l, u in enumerate(BLOCKDROP_DRAWS)]
    items = [("out.dropped", torch.tensor(dropped)), ("out.loss", loss.detach().reshape(1)),
             ("out.loss_transducer", stats["loss_transducer"].reshape(1)),
             ("out.loss_aux_ctc", stats["loss_aux_ctc"].reshape(1))]
    items += [("grad." + k, p.grad if p.grad is not None else torch.zeros_like(p)) for k, p in model.named_parameters()]
    print(f"blockdrop_rate {BLOCKDROP_RATE}, skipped blocks {dropped}: loss {loss.item():.6f}")
    return items


def chunk_case(weights, block="mixed"):
    """loss_case on MIXED with CHUNK_CONF, Encoder.forward's chunk draw fixed to CHUNK_DRAW."""
    from unittest import mock

    feats, lens, ys, ylens = batch()
    model = build(block=block, main_conf=CHUNK_CONF)
    model.load_state_dict(weights)
    fixed = mock.patch("torch.randint", lambda lo, hi, size: torch.tensor([CHUNK_DRAW]))
    model.eval()
    with torch.no_grad(), fixed:
        enc_chunk, _ = model.encoder(feats, lens)
    model.encoder.dynamic_chunk_training = False  # as asr_transducer_inference's Speech2Text
    with torch.no_grad():
        enc, hlens = model.encoder(feats, lens)
    model.encoder.dynamic_chunk_training = True
    model.train()
    with fixed:
        loss, stats, _ = model(feats, lens, ys.clone(), ylens)
    loss.backward()
    chunk = CHUNK_DRAW % CHUNK_CONF["short_chunk_size"] + 1
    items = [("out.chunk", torch.tensor([float(chunk)])), ("out.hlens", hlens.float()), ("out.enc", enc),
             ("out.enc_chunk", enc_chunk), ("out.loss", loss.detach().reshape(1)),
             ("out.loss_transducer", stats["loss_transducer"].reshape(1)),
             ("out.loss_aux_ctc", stats["loss_aux_ctc"].reshape(1))]
    items += [("grad." + k, p.grad) for k, p in model.named_parameters()]
    print(f"dynamic chunk training {CHUNK_CONF}, chunk {chunk}: loss {loss.item():.6f}")
    return items


# Search modes: (name, beam_size, nbest, beam_search_config) as asr_transducer_inference spells them.
SEARCHES = [
    ("beam1", 1, 1, {}),
    ("default", 4, 3, {}),
    ("default_norm", 3, 2, {"score_norm": True}),
    ("tsd", 4, 3, {"search_type": "tsd", "max_sym_exp": 3}),
    ("alsd", 4, 3, {"search_type": "alsd", "u_max": 10}),
    ("maes", 4, 3, {"search_type": "maes", "nstep": 3, "expansion_gamma": 2.3, "expansion_beta": 2}),
    ("tsd_defaults", 3, 2, {"search_type": "tsd"}),  # BeamSearchTransducer's max_sym_exp 3
    ("maes_defaults", 3, 2, {"search_type": "maes"}),  # its nstep 2
]


def search_case(weights, stateless=False, block="conformer", rnn_type="lstm"):
    from espnet2.asr_transducer.beam_search_transducer import BeamSearchTransducer

    model = build(stateless, block, rnn_type=rnn_type)
    w = dict(weights)
    w["joint_network.lin_out.weight"] = 3 * w["joint_network.lin_out.weight"]
    model.load_state_dict(w)
    model.eval()
    feats, lens, _, _ = batch()
    items = [("weight.joint_network.lin_out.weight", w["joint_network.lin_out.weight"])]
    with torch.no_grad():
        enc, _ = model.encoder(feats[:1, : FEAT_LENS[0]], lens[:1])
        enc = enc[0]
        items.append(("in.enc", enc))
        for name, beam, nbest, conf in SEARCHES:
            search = BeamSearchTransducer(model.decoder, model.joint_network, beam, nbest=nbest, **conf)
            items += search_items(name, search(enc))
    return items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="test/fixtures/asr_transducer")
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)  # the modules' default init
    weights = seeded_weights(build())
    n = write_pack(out, "weights", list(weights.items()))
    items, loss, hlens = loss_case(weights)
    n += write_pack(out, "loss", items)
    n += write_pack(out, "search", search_case(weights))
    print(f"loss {loss:.6f}, encoder lengths {hlens}")
    sw = stateless_weights(weights)
    items, loss, _ = loss_case(sw, stateless=True)
    n += write_pack(out, "stateless_loss", items)
    n += write_pack(out, "stateless_search", search_case(sw, stateless=True))
    print(f"stateless decoder: loss {loss:.6f}")
    for block in ("ebranchformer", "branchformer"):
        torch.manual_seed(0)
        bw = seeded_weights(build(stateless=True, block=block))
        n += write_pack(out, block + "_weights", list(bw.items()))
        items, loss, _ = loss_case(bw, stateless=True, block=block)
        n += write_pack(out, block + "_loss", items)
        print(f"{block} blocks: loss {loss:.6f}")
    torch.manual_seed(0)  # the same init as build()'s, then lm_lin's
    aw = seeded_weights(build(aux=True))
    n += write_pack(out, "aux_weights", list(aw.items()))
    items, loss, _ = loss_case(aw, aux=True)
    items = [kv for kv in items if not kv[0].startswith("in.")]
    n += write_pack(out, "aux_loss", items)
    lm = dict(items)["out.loss_aux_lm"].item()
    print(f"FastEmit and the auxiliary LM loss ({AUX}): loss {loss:.6f}, loss_aux_lm {lm:.6f}")
    torch.manual_seed(3)
    gru = {k: v.detach().clone() for k, v in build(rnn_type="gru").state_dict().items() if k.startswith("decoder.")}
    gw = {k: v for k, v in weights.items() if not k.startswith("decoder.")}
    gw.update(gru)
    n += write_pack(out, "gru_weights", list(gru.items()))
    items, loss, _ = loss_case(gw, rnn_type="gru")
    n += write_pack(out, "gru_loss", [kv for kv in items if kv[0].startswith("out.loss")
                                      or kv[0].startswith("grad.decoder.") or kv[0].startswith("grad.joint_network.")])
    n += write_pack(out, "gru_search", search_case(gw, rnn_type="gru"))
    print(f"gru decoder: loss {loss:.6f}")
    for body in ("mixed", "pointwise", "shrink", "widen", "convfirst", "simplified"):  # with the RNNDecoder
        torch.manual_seed(0)
        bw = seeded_weights(build(block=body))
        n += write_pack(out, body + "_weights", list(bw.items()))
        items, loss, hlens = loss_case(bw, block=body)
        n += write_pack(out, body + "_loss", [kv for kv in items if not kv[0].startswith("in.")])
        n += write_pack(out, body + "_search", search_case(bw, block=body))
        print(f"{body} blocks: loss {loss:.6f}, encoder lengths {hlens}")
    for kind in NORMS:  # MIXED's Encoder with the other norms, the RNNDecoder
        body = "norms_" + kind
        torch.manual_seed(0)
        bw = seeded_weights(build(block=body))
        n += write_pack(out, body + "_weights", list(bw.items()))
        items, loss, hlens = loss_case(bw, block=body)
        n += write_pack(out, body + "_loss", [kv for kv in items if not kv[0].startswith("in.")])
        if kind == "rms":
            n += write_pack(out, body + "_search", search_case(bw, block=body))
        print(f"{body}: loss {loss:.7f}")
    torch.manual_seed(0)
    mw = seeded_weights(build(block="mixed"))  # mixed_weights
    n += write_pack(out, "blockdrop_loss", blockdrop_case(mw))
    n += write_pack(out, "chunk_loss", chunk_case(mw))
    torch.manual_seed(0)
    n += write_pack(out, "simplified_chunk_loss", chunk_case(seeded_weights(build(block="simplified")), "simplified"))
    print(f"wrote {n * 4 / 1024:.0f} KiB to {out}")


if __name__ == "__main__":
    main()
