#!/usr/bin/env python3
"""Writes the joint CTC/attention beam search parity fixtures under test/fixtures/beam/.

ESPnet's own BatchBeamSearch, built as espnet2.bin.asr_inference.Speech2Text builds it (scorers
decoder, ctc = CTCPrefixScorer, length_bonus = LengthBonus; weights 1 - ctc_weight, ctc_weight,
penalty; pre_beam_score_key "full" unless ctc_weight is 1.0; BeamSearch turned into
BatchBeamSearch), decodes a few utterances of fixed CTC log-probabilities with a toy attention
decoder: a seeded trigram table of log-probabilities, dec[a, b] the next-token distribution after
(..., a, b), a = <sos> for a prefix of <sos> alone. test/unit/decode/test_beam_search.c
reimplements that decoder and checks our search against the n-best written here.

No decisive ties: ESPnet ranks in float32 and breaks exact ties in torch.topk's unspecified order
(exact ties do happen: candidates holding CTC's log zero, -1e10, are all equal in float32); we
rank in double and give ties to the lower index. So a case is kept only when ESPnet returns the
same n-best (token sequences; scores within 1e-4) with exact ties broken the opposite way (a
stand-in for torch.topk, lower index or higher index first) and when run in float64, and when
no n-best entry holds log zero; an utterance whose cases do not all pass is drawn again with
the next seed (the seed used is stored). The reference written is ESPnet's unmodified float32
run.

Each utterance is one .npz: logp (T, V) f32, dec (V, V, V) f32, seed; cases (n, 6) f64 rows
[beam_size, nbest, ctc_weight, penalty, maxlenratio, minlenratio]; per case the n-best: n_hyps
(n,), yseq (n, nbest, L) i64 (yseq[1:-1], -1 padded), ylen (n, nbest), score, sc_decoder, sc_ctc,
sc_length_bonus (n, nbest) f64 (NaN for a scorer that is off, as it is absent from hyp.scores).

Run with ESPnet's venv (fixtures only; nothing at test time needs it):
    /opt/espnet3-venv/bin/python scripts/make_beam_fixtures.py [outdir]
"""
import logging
import os
import sys

import numpy as np
import torch

from espnet.nets.batch_beam_search import BatchBeamSearch
from espnet.nets.beam_search import BeamSearch
from espnet.nets.scorer_interface import BatchScorerInterface
from espnet.nets.scorers.ctc import CTCPrefixScorer
from espnet.nets.scorers.length_bonus import LengthBonus

UTTS = [            # (name, T, V, first seed)
    ("utt_t24_v12", 24, 12, 1),
    ("utt_t32_v15", 32, 15, 100),
    ("utt_t40_v20", 40, 20, 200),
]


def cases():
    """[beam, nbest, ctc_weight, penalty, maxlenratio, minlenratio] rows."""
    rows = []
    for ctc_weight in (0.3, 0.5):
        for beam in (1, 4, 10):
            for penalty in (0.0, 0.5):
                for maxlenratio in (0.0, 0.5):
                    rows.append([beam, 3, ctc_weight, penalty, maxlenratio, 0.0])
    rows += [
        [4, 3, 0.5, 0.0, 0.0, 0.3],    # minlen
        [4, 3, 0.5, 0.0, 0.5, 0.95],   # minlen above maxlen: retried with minlenratio - 0.1 ...
        [4, 3, 0.5, 0.5, -6.0, 0.0],   # fixed maxlen
        [10, 5, 0.3, 0.0, 0.0, 0.0],   # longer n-best
        [4, 30, 0.5, 0.0, 0.0, 0.0],   # every ended hypothesis: how many depends on end detection
        [4, 30, 1.0, 0.0, 0.0, 0.0],
        [4, 3, 1.0, 0.0, 0.0, 0.0],    # CTC only (no decoder, no pre-beam)
        [10, 3, 1.0, 0.5, 0.0, 0.0],
        [4, 3, 0.0, 0.0, 0.5, 0.0],    # attention only
        [10, 3, 0.0, 0.5, 0.0, 0.0],
    ]
    return rows


class TableDecoder(BatchScorerInterface):
    """Next-token log-probs from a trigram table over the prefix (which starts with <sos>)."""

    def __init__(self, table, sos):
        self.table = table
        self.sos = sos

    def _row(self, y):
        a = int(y[-2]) if len(y) >= 2 else self.sos
        return self.table[a, int(y[-1])]

    def score(self, y, state, x):
        return self._row(y), None

    def batch_score(self, ys, states, xs):
        return torch.stack([self._row(y) for y in ys]), [None] * len(ys)


class FixedCTC:
    """Stands in for the model's CTC module: its log_softmax hands over fixed log-probs."""

    def log_softmax(self, x):
        return x


class Unstable(Exception):
    pass


TIES = {"desc_index": False}  # which of exactly equal scores torch.topk's stand-in returns first


def topk_ties(x, k, dim=-1, **kw):
    """torch.topk with a chosen order for exact ties (torch's own order is unspecified)."""
    assert dim in (-1, x.dim() - 1)
    xs = x.flip(-1) if TIES["desc_index"] else x
    vals, idx = torch.sort(xs, dim=-1, descending=True, stable=True)
    if TIES["desc_index"]:
        idx = x.shape[-1] - 1 - idx
    return vals[..., :k], idx[..., :k]


class TieSearch(BatchBeamSearch):
    def batch_beam(self, weighted_scores, ids):
        top_ids = topk_ties(weighted_scores.view(-1), self.beam_size)[1]
        prev_hyp_ids = torch.div(top_ids, self.n_vocab, rounding_mode="trunc")
        new_token_ids = top_ids % self.n_vocab
        return prev_hyp_ids, new_token_ids, prev_hyp_ids, new_token_ids


def run_case(logp, table, row, dtype=torch.float32, desc_index=False):
    """ESPnet's n-best for one case: [(yseq[1:-1], score, scores)]."""
    beam, nbest, ctc_weight, penalty, maxlenratio, minlenratio = row
    V = logp.shape[1]
    sos = eos = V - 1
    scorers = dict(decoder=TableDecoder(table.to(dtype), sos), ctc=CTCPrefixScorer(ctc=FixedCTC(), eos=eos),
                   length_bonus=LengthBonus(V))
    weights = dict(decoder=1.0 - ctc_weight, ctc=ctc_weight, lm=0.0, ngram=0.0, length_bonus=penalty)
    search = BeamSearch(beam_size=int(beam), weights=weights, scorers=scorers, sos=sos, eos=eos, vocab_size=V,
                        token_list=None, pre_beam_score_key=None if ctc_weight == 1.0 else "full")
    search.__class__ = TieSearch if desc_index else BatchBeamSearch
    TIES["desc_index"] = desc_index
    torch.topk = topk_ties if desc_index else _topk
    try:
        hyps = search(x=logp.to(dtype).clone(), maxlenratio=maxlenratio, minlenratio=minlenratio)
    finally:
        torch.topk = _topk
    out = []
    for h in hyps[: int(nbest)]:
        sc = {k: float(v) for k, v in h.scores.items()}
        out.append((h.yseq[1:-1].tolist(), float(h.score), sc))
    return out


_topk = torch.topk


def stable_case(logp, table, row):
    """ESPnet's float32 result, when ties and float32 rounding cannot have decided it: the same
    sequences with exact ties broken the other way, and in float64 (scores within 1e-4)."""
    ref = run_case(logp, table, row)
    for other, what in ((run_case(logp, table, row, desc_index=True), "tie order"),
                        (run_case(logp, table, row, dtype=torch.float64), "float64")):
        if [y for y, _, _ in other] != [y for y, _, _ in ref]:
            raise Unstable(f"case {row}: {what} changes the n-best")
        if any(abs(a[1] - b[1]) > 1e-4 for a, b in zip(ref, other)):
            raise Unstable(f"case {row}: {what} changes a score by more than 1e-4")
    if any(s < -1e8 for _, s, _ in ref):
        raise Unstable(f"case {row}: an n-best entry holds CTC's log zero")
    return ref


def make_utt(T, V, seed):
    """CTC log-probs that spell a random reference (each token peaking on a few frames, blank
    elsewhere, plus noise) and a trigram decoder that mostly agrees with it (the reference's next
    token, eos at its end, boosted in its contexts): a search with competing hypotheses that end
    at several lengths, as with a trained model."""
    g = torch.Generator().manual_seed(seed)
    sos = eos = V - 1
    n = T // 4
    ref = torch.randint(1, V - 1, (n,), generator=g).tolist()
    logits = torch.randn(T, V, generator=g)
    logits[:, 0] += 5.0
    starts = sorted(torch.randperm(T - 2, generator=g)[:n].tolist())
    for tok, t in zip(ref, starts):
        logits[t, tok] += 7.0
        logits[t + 1, tok] += 4.0
    logp = torch.log_softmax(logits, dim=-1).float()
    table = 2.0 * torch.randn(V, V, V, generator=g)
    ctx = [sos, sos] + ref
    for k, nxt in enumerate(ref + [eos]):
        table[ctx[k], ctx[k + 1], nxt] += 3.0
    table = torch.log_softmax(table, dim=-1).float()
    return logp, table


def write_utt(path, logp, table, seed, rows, results):
    n, nb = len(rows), max(int(r[1]) for r in rows)
    L = max([len(y) for res in results for y, _, _ in res] + [1])
    yseq = np.full((n, nb, L), -1, np.int64)
    ylen = np.zeros((n, nb), np.int64)
    arr = {k: np.full((n, nb), np.nan) for k in ("score", "sc_decoder", "sc_ctc", "sc_length_bonus")}
    for i, res in enumerate(results):
        for j, (y, score, sc) in enumerate(res):
            yseq[i, j, : len(y)] = y
            ylen[i, j] = len(y)
            arr["score"][i, j] = score
            for k in ("decoder", "ctc", "length_bonus"):
                if k in sc:
                    arr["sc_" + k][i, j] = sc[k]
    np.savez_compressed(path, logp=logp.numpy(), dec=table.numpy(), seed=np.int64(seed), cases=np.array(rows, np.float64),
             n_hyps=np.array([len(r) for r in results], np.int64), yseq=yseq, ylen=ylen, **arr)


def main():
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "fixtures",
                                                                 "beam")
    os.makedirs(outdir, exist_ok=True)
    rows = cases()
    for name, T, V, seed in UTTS:
        for attempt in range(200):
            logp, table = make_utt(T, V, seed + attempt)
            try:
                results = [stable_case(logp, table, r) for r in rows]
            except Unstable as e:
                print(f"{name}: seed {seed + attempt}: {e}; next seed")
                continue
            break
        else:
            sys.exit(f"{name}: no seed without near-ties")
        write_utt(os.path.join(outdir, name + ".npz"), logp, table, seed + attempt, rows, results)
        lens = [len(res[0][0]) if res else -1 for res in results]
        print(f"{name}: T {T} V {V} seed {seed + attempt}: {len(rows)} cases, best lengths {lens}")


if __name__ == "__main__":
    main()
