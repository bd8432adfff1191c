#!/usr/bin/env python3
"""Writes the parity fixtures of the Transformer language model (test/fixtures/lm/) with the real
ESPnet2: ESPnetLanguageModel(TransformerLM), vocab 12 = <blank> <unk> a..i <sos/eos> (sos = eos =
11, ignore_id 0), embed_unit 16, att_unit 32, 4 heads, 64 units, 2 layers, every dropout off
(dropout_rate, positional_dropout_rate and attention_dropout_rate all 0.0), seeded weights moved
off their defaults (weights normal * 0.3, biases 0.1 * normal, LayerNorm weights 1 + 0.1 * normal).
Two models: A with pos_enc None (suffix ""), B with pos_enc "sinusoidal" (suffix "_sin", its own
seed). Run with the ESPnet venv (scripts/install_espnet_venv.sh):

    /opt/espnet3-venv/bin/python scripts/make_lm_fixtures.py [OUTDIR]

Files: each <pack>.txt lists "name offset count dim..." for the float32 values in <pack>.f32
(integer inputs are stored as float32 values too); <sfx> is "" for A, "_sin" for B:
  weights<sfx>  every state_dict entry under its ESPnet2 name (no buffers: PositionalEncoding.pe is
                a plain attribute, not saved):
                  lm.embed.weight (12,16)                       nn.Embedding, no padding_idx
                  lm.encoder.embed.0.weight (32,16), .bias      Linear(embed_unit, att_unit)
                  lm.encoder.embed.1.weight (32), .bias         torch.nn.LayerNorm, eps 1e-5
                  lm.encoder.encoders.<l>.self_attn.linear_{q,k,v,out}.{weight (32,32),bias}
                  lm.encoder.encoders.<l>.feed_forward.w_1.weight (64,32), .bias
                  lm.encoder.encoders.<l>.feed_forward.w_2.weight (32,64), .bias
                  lm.encoder.encoders.<l>.norm1.{weight,bias}, .norm2.{weight,bias}  eps 1e-12
                  lm.encoder.after_norm.{weight,bias}           eps 1e-12
                  lm.decoder.weight (12,32), .bias (12)         output projection to the vocab
  loss<sfx>     ESPnetLanguageModel.forward on a padded batch of 3 (ids 1..10, lengths 7 4 1, padded
                with 0 like ESPnet's collate, int_pad_value 0): in.text (3,7), in.text_lengths (3),
                out.loss (1) = nll.sum() / ntokens, out.ntokens (1) = sum(lengths + 1),
                out.nll (3,8) as ESPnetLanguageModel.nll returns it (0 past length + 1),
                out.logp (3,8,12) = log_softmax(lm(x)) for x = [eos] + text (padding 0), and
                grad.<name> of loss.backward() for every parameter
  score<sfx>    TransformerLM.batch_score (the beam search's call, eval mode), each prefix scored
                alone with state None: prefix.<i> (starts with 11, lengths 1 2 3 5 5) and logp.<i>
                (12 next-token log-probabilities); logp_inc.<k> (k = 0..4): prefix 4 cut to length
                k + 1, scored with the states batch_score returned for the previous step (the
                cached path; asserted equal to the full path); logp_batch.<k> (k = 0, 1): prefixes
                3 and 4 (equal length) scored as one batch of 2

Architecture facts (ESPnet 202511, espnet2/lm/transformer_lm.py, espnet2/lm/espnet_model.py,
espnet/nets/pytorch_backend/transformer/{encoder,encoder_layer,attention,embedding}.py):
  * TransformerLM: x = embed(ids) -> Encoder(idim=embed_unit, input_layer="linear") -> Linear to
    the vocab. Encoder defaults used: normalize_before=True (pre-LN blocks + after_norm),
    concat_after=False, positionwise "linear" FFN w_2(ReLU(w_1 x)), plain MultiHeadedAttention
    (no flash / sdpa, scores q k^T / sqrt(d_k)). TransformerLM's own defaults are dropout_rate 0.1,
    positional_dropout_rate 0.1, attention_dropout_rate 0.1 (passed to the Encoder, whose own
    attention default would be 0.0); the fixtures set all three to 0.0.
  * input_layer "linear" = Sequential(Linear(idim, att), torch.nn.LayerNorm(att) with the default
    eps 1e-5 (NOT ESPnet's 1e-12 LayerNorm), Dropout(dropout_rate), ReLU, pos_enc_class(att,
    positional_dropout_rate)). pos_enc None -> an empty nn.Sequential (identity, no scaling, no
    dropout); "sinusoidal" -> PositionalEncoding: x * sqrt(att_unit) + pe[pos], pe[p, 2i] =
    sin(p * exp(-2i ln(10000) / d)), pe[p, 2i+1] = cos(same), positions 0.. absolute, then dropout.
  * Block (EncoderLayer, normalize_before): x = x + att(norm1(x)); x = x + ffn(norm2(x)); norm1,
    norm2 and after_norm are espnet LayerNorm with eps 1e-12.
  * Masks: _target_mask(ids) = (ids != 0)[:, None, :] & tril(ones(L, L)): keys whose id is 0 are
    masked, plus the causal (subsequent) mask. Masked scores are filled with finfo(float32).min,
    softmax, then masked probabilities set to 0.
  * ESPnetLanguageModel.nll: text cut to max(length); x = [eos] + text, t = text + [ignore_id 0]
    with t[b, len_b] = eos; nll = cross_entropy(lm(x), t, reduction none), zeroed at positions
    >= len_b + 1; forward: loss = nll.sum() / sum(len_b + 1).
  * batch_score / score: Encoder.forward_one_step(embed(ys), _target_mask(ys), cache). The input
    layer (Linear, LayerNorm, ReLU, pos enc) is recomputed on the whole prefix every step. With
    cache None every block runs on all positions; with a cache each block computes only the last
    query position (mask[:, -1:, :]) against keys/values norm1(x) of all positions and appends it
    to its cache. The new cache per layer is that layer's output for all positions BEFORE
    after_norm; after_norm is applied to the returned sequence and the output Linear and
    log_softmax to its last position only. xs (the encoder output) is unused by the LM.

SequentialRNNLM packs (suffix "_rnn" and "_rnn1", espnet2/lm/seq_rnn_lm.py): same vocab, same padded
batch (in.text / in.text_lengths identical to the transformer packs), dropout_rate 0.0, rnn_type
"lstm", tie_weights False, ignore_id 0. "_rnn": SequentialRNNLM(12, unit=16, nhid=24, nlayers=2)
(seed 10); "_rnn1": SequentialRNNLM(12, unit=20, nlayers=1), nhid defaulting to unit = 20 (seed 11).
Seeding as above (weights 0.3 * normal, biases 0.1 * normal), then row 0 (the padding_idx) of
lm.encoder.weight is set to ZERO again, as nn.Embedding(padding_idx=0)'s own init leaves it.
  weights_rnn   lm.encoder.weight (12,16)       nn.Embedding(12, 16, padding_idx=0), row 0 zero
                lm.rnn.weight_ih_l0 (96,16)      nn.LSTM(16, 24, 2, batch_first=True), 4H = 96
                lm.rnn.weight_hh_l0 (96,24)
                lm.rnn.bias_ih_l0 (96), lm.rnn.bias_hh_l0 (96)
                lm.rnn.weight_ih_l1 (96,24), lm.rnn.weight_hh_l1 (96,24)
                lm.rnn.bias_ih_l1 (96), lm.rnn.bias_hh_l1 (96)
                lm.decoder.weight (12,24), lm.decoder.bias (12)
  weights_rnn1  lm.encoder.weight (12,20), lm.rnn.{weight_ih_l0 (80,20), weight_hh_l0 (80,20),
                bias_ih_l0 (80), bias_hh_l0 (80)}, lm.decoder.weight (12,20), lm.decoder.bias (12)
  loss_rnn, loss_rnn1   exactly the loss<sfx> layout above (in.*, out.loss, out.ntokens, out.nll
                (3,8), out.logp (3,8,12), grad.<name>); grad.lm.encoder.weight row 0 is 0
  score_rnn     prefix.<i> (the same 5 prefixes) and logp.<i> = log_softmax of the LAST position
                of lm(prefix, None) (the whole prefix from the zero state); asserted equal (1e-5) to
                batch_score fed step by step (first call [11] with states [None], each later call
                the prefix cut to length k + 1 with the states of the previous call; batch_score
                only reads ys[:, -1:]); logp_inc.<k> (k = 0..4): those step-by-step scores for
                prefix 4 cut to length k + 1; logp_batch.<k> (k = 0, 1): prefixes 3 and 4 in ONE
                batch_score call, given the states each reached step by step on its first 4 tokens

"_gru" (weights_gru, loss_gru, score_gru): the "_rnn" packs' layouts for SequentialRNNLM(12, unit=16,
nhid=24, nlayers=2, rnn_type="gru") (seed 12): lm.rnn.weight_ih_l0 (72,16), 3H = 72 in the order r, z,
n of nn.GRU (n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h = (1 - z) n + z h_prev); its states
in batch_score are h alone.

SequentialRNNLM facts (torch nn.LSTM / nn.Embedding semantics):
  * forward(ids, hidden): emb = drop(encoder(ids)); out, hidden = rnn(emb, hidden); out =
    drop(out); logits = decoder(out) (Linear nhid -> vocab). hidden None = zero h0 and c0 for
    every layer. Dropout sites: the embedding output, between LSTM layers (nn.LSTM's own dropout
    on the output of every layer but the last, training only), and the LSTM output before the
    decoder; all are off here (dropout_rate 0.0).
  * nn.LSTM per layer and step: g = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh (BOTH biases added),
    rows of g in 4 blocks of H in the order i, f, g, o: i = sigmoid(g[0:H]), f = sigmoid(g[H:2H]),
    c~ = tanh(g[2H:3H]), o = sigmoid(g[3H:4H]); c_t = f * c_{t-1} + i * c~; h_t = o * tanh(c_t).
    Layer l > 0 takes layer l - 1's h_t as input (weight_ih_l1 is (4H, H)). No projection.
  * The padded batch runs over the full padded length (no pack_padded_sequence): padded positions
    feed id 0 (the zero embedding row) through the LSTM like any token; they do not change the
    real positions (causal), their nll is masked to 0, but out.logp holds them as computed.
  * Embedding padding_idx 0: the gradient of row 0 is always zero (never accumulated), even though
    id 0 occurs at padded positions; row 0 is zero in these weights.
  * Loss: the same ESPnetLanguageModel.nll / forward as for the TransformerLM (above).
  * batch_score(ys, states, xs) feeds only ys[:, -1:] with the given states (None -> zero state),
    so the beam search must carry the states; a state per hypothesis is (h, c), each (nlayers, H).
"""
import argparse
import os
import sys

import numpy as np
import torch

from espnet2.lm.espnet_model import ESPnetLanguageModel
from espnet2.lm.seq_rnn_lm import SequentialRNNLM
from espnet2.lm.transformer_lm import TransformerLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_decoder_fixtures import write_pack  # noqa: E402  (the pack format the C tests read)

TOKENS = ["<blank>", "<unk>"] + list("abcdefghi") + ["<sos/eos>"]  # vocab 12, <sos/eos> last
V = len(TOKENS)
EOS = V - 1
TEXT_LENS = [7, 4, 1]
PREFIXES = [[EOS], [EOS, 3], [EOS, 1, 10], [EOS, 9, 3, 5, 7], [EOS, 4, 4, 2, 8]]


def build(pos_enc):
    lm = TransformerLM(V, pos_enc=pos_enc, embed_unit=16, att_unit=32, head=4, unit=64, layer=2,
                       dropout_rate=0.0, positional_dropout_rate=0.0, attention_dropout_rate=0.0)
    return ESPnetLanguageModel(lm, V)


def seed_weights(model, seed):
    """Every parameter off its default: weights normal * 0.3, biases 0.1 * normal, LayerNorm
    weights 1 + 0.1 * normal (the input layer's torch LayerNorm and the espnet ones alike)."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    norms = {n for n, m in model.named_modules() if isinstance(m, torch.nn.LayerNorm)}
    with torch.no_grad():
        for name, p in model.named_parameters():
            owner, kind = name.rsplit(".", 1)
            r = torch.randn(p.shape, generator=g)
            if kind == "bias":
                p.copy_(0.1 * r)
            elif owner in norms:
                p.copy_(1.0 + 0.1 * r)
            else:
                p.copy_(0.3 * r)
    return model


def batch():
    g = torch.Generator().manual_seed(2)
    text = torch.zeros(len(TEXT_LENS), max(TEXT_LENS), dtype=torch.long)  # int_pad_value 0
    for b, n in enumerate(TEXT_LENS):
        text[b, :n] = torch.randint(1, V - 1, (n,), generator=g)  # ids 1..10
    return text, torch.tensor(TEXT_LENS)


def loss_case(model):
    model.train()  # every dropout rate is 0: identical to eval
    model.zero_grad()
    text, lens = batch()
    loss, stats, ntokens = model(text.clone(), lens)
    loss.backward()
    with torch.no_grad():
        nll, xlens = model.nll(text.clone(), lens)
        x = torch.nn.functional.pad(text, [1, 0], "constant", EOS)
        logp = model.lm(x, None)[0].log_softmax(-1)
    # manual recomputation: t = text + [eos], summed over the len + 1 real positions
    total = 0.0
    for b, n in enumerate(TEXT_LENS):
        t = text[b, :n].tolist() + [EOS]
        total += sum(-logp[b, j, t[j]].item() for j in range(n + 1))
    manual = total / sum(n + 1 for n in TEXT_LENS)
    assert abs(manual - loss.item()) < 1e-5, (manual, loss.item())
    assert int(ntokens) == sum(n + 1 for n in TEXT_LENS)
    assert torch.allclose(nll.sum() / ntokens, loss.detach(), atol=1e-6)
    assert torch.allclose(stats["loss"], loss.detach())
    items = [("in.text", text.float()), ("in.text_lengths", lens.float()),
             ("out.loss", loss.detach().reshape(1)), ("out.ntokens", ntokens.float().reshape(1)),
             ("out.nll", nll), ("out.logp", logp)]
    items += [("grad." + k, p.grad) for k, p in model.named_parameters()]
    return items, loss.item()


def score_case(model):
    model.eval()
    lm = model.lm
    dummy = torch.zeros(1, 1, 1)  # the encoder output: unused by the LM
    items = []
    full = []
    with torch.no_grad():
        for i, p in enumerate(PREFIXES):
            ys = torch.tensor([p])
            logp, _ = lm.batch_score(ys, [None], dummy)
            single, _ = lm.score(ys[0], None, dummy[0])
            assert torch.allclose(logp[0], single, atol=1e-5), i
            full.append(logp[0])
            items += [(f"prefix.{i}", torch.tensor(p, dtype=torch.float32)), (f"logp.{i}", logp[0])]
        p = PREFIXES[4]
        states = [None]
        for k in range(len(p)):
            ys = torch.tensor([p[: k + 1]])
            logp, states = lm.batch_score(ys, states, dummy)
            ref, _ = lm.batch_score(ys, [None], dummy)
            assert torch.allclose(logp, ref, atol=1e-5), k
            items.append((f"logp_inc.{k}", logp[0]))
        assert torch.allclose(logp[0], full[4], atol=1e-5)
        same = [3, 4]  # equal lengths: one batch of 2
        logp, _ = lm.batch_score(torch.tensor([PREFIXES[i] for i in same]), [None, None], dummy.expand(2, 1, 1))
        for k, i in enumerate(same):
            assert torch.allclose(logp[k], full[i], atol=1e-5), i
            items.append((f"logp_batch.{k}", logp[k]))
    return items


def build_rnn(unit, nhid, nlayers, rnn_type="lstm"):
    lm = SequentialRNNLM(V, unit=unit, nhid=nhid, nlayers=nlayers, dropout_rate=0.0, rnn_type=rnn_type)
    return ESPnetLanguageModel(lm, V)


def seed_rnn_weights(model, seed):
    """seed_weights, then the padding row 0 of the embedding set back to zero (PyTorch's init for
    padding_idx)."""
    seed_weights(model, seed)
    with torch.no_grad():
        model.lm.encoder.weight[0].zero_()
    return model


def rnn_loss_case(model):
    items, loss = loss_case(model)
    d = dict(items)
    assert torch.all(d["grad.lm.encoder.weight"][0] == 0)  # padding_idx: no gradient for row 0
    # no packing: the padded batch equals each sequence run alone on its real positions
    with torch.no_grad():
        text, lens = batch()
        for b, n in enumerate(TEXT_LENS):
            x = torch.tensor([[EOS] + text[b, :n].tolist()])
            alone = model.lm(x, None)[0].log_softmax(-1)[0]
            assert torch.allclose(alone, d["out.logp"][b, : n + 1], atol=1e-5), b
    return items, loss


def rnn_score_case(model):
    model.eval()
    lm = model.lm
    dummy = torch.zeros(1, 1, 1)  # the encoder output: unused by the LM
    items = []
    full = []
    last_states = []  # per prefix: the state after all but its last token, step by step
    with torch.no_grad():
        for i, p in enumerate(PREFIXES):
            ref = lm(torch.tensor([p]), None)[0][0, -1].log_softmax(-1)
            states = [None]
            prev = [None]
            inc = []
            for k in range(len(p)):
                prev = states
                logp, states = lm.batch_score(torch.tensor([p[: k + 1]]), states, dummy)
                whole = lm(torch.tensor([p[: k + 1]]), None)[0][0, -1].log_softmax(-1)
                assert torch.allclose(logp[0], whole, atol=1e-5), (i, k)
                st = prev[0]  # an LSTM's (h, c), a GRU's h: each (nlayers, nhid) -> (nlayers, 1, nhid)
                if st is not None:
                    st = tuple(s.unsqueeze(1) for s in st) if isinstance(st, tuple) else st.unsqueeze(1)
                single, _ = lm.score(torch.tensor(p[: k + 1]), st, dummy[0])
                assert torch.allclose(logp[0], single, atol=1e-5), (i, k)
                inc.append(logp[0])
            assert torch.allclose(inc[-1], ref, atol=1e-5), i
            full.append(ref)
            last_states.append(prev[0])
            items += [(f"prefix.{i}", torch.tensor(p, dtype=torch.float32)), (f"logp.{i}", ref)]
            if i == 4:
                inc4 = inc
        for k, v in enumerate(inc4):
            items.append((f"logp_inc.{k}", v))
        same = [3, 4]  # one batch_score call of 2, each with its own step-by-step state
        logp, _ = lm.batch_score(torch.tensor([PREFIXES[i] for i in same]),
                                 [last_states[i] for i in same], dummy.expand(2, 1, 1))
        for k, i in enumerate(same):
            assert torch.allclose(logp[k], full[i], atol=1e-5), i
            items.append((f"logp_batch.{k}", logp[k]))
    return items


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="test/fixtures/lm")
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    n = 0
    for sfx, pos_enc, seed in [("", None, 0), ("_sin", "sinusoidal", 1)]:
        model = seed_weights(build(pos_enc), seed)
        n += write_pack(out, "weights" + sfx, list(model.state_dict().items()))
        items, loss = loss_case(model)
        n += write_pack(out, "loss" + sfx, items)
        n += write_pack(out, "score" + sfx, score_case(model))
        print(f"pos_enc {pos_enc}: loss {loss:.6f}, {len(model.state_dict())} tensors, "
              f"{sum(p.numel() for p in model.parameters())} parameters")
    for sfx, (unit, nhid, nlayers), seed in [("_rnn", (16, 24, 2), 10), ("_rnn1", (20, None, 1), 11),
                                             ("_gru", (16, 24, 2), 12)]:
        rnn_type = "gru" if sfx == "_gru" else "lstm"
        model = seed_rnn_weights(build_rnn(unit, nhid, nlayers, rnn_type), seed)
        n += write_pack(out, "weights" + sfx, list(model.state_dict().items()))
        items, loss = rnn_loss_case(model)
        n += write_pack(out, "loss" + sfx, items)
        if sfx != "_rnn1":
            n += write_pack(out, "score" + sfx, rnn_score_case(model))
        print(f"{rnn_type} unit {unit} nhid {model.lm.nhid} nlayers {nlayers}: loss {loss:.6f}, "
              f"{len(model.state_dict())} tensors, {sum(p.numel() for p in model.parameters())} parameters")
    print(f"wrote {n * 4 / 1024:.0f} KiB to {out}")


if __name__ == "__main__":
    main()
