#!/usr/bin/env python3
"""Writes the beam search + language model (shallow fusion) parity fixtures under
test/fixtures/beam_lm/.

The search of scripts/make_beam_fixtures.py (ESPnet's own BatchBeamSearch, built as
espnet2.bin.asr_inference.Speech2Text builds it, over fixed CTC log-probabilities and a toy trigram
attention decoder) with a language model added as Speech2Text adds one: scorers decoder,
ctc = CTCPrefixScorer, length_bonus = LengthBonus, lm (inserted in that order); weights
decoder 1 - ctc_weight, ctc ctc_weight, length_bonus penalty, lm lm_weight; pre_beam_score_key
"full" unless ctc_weight is 1.0 (then None); BeamSearch turned into BatchBeamSearch (every full
scorer is a BatchScorerInterface). BeamSearch drops every scorer whose weight is 0, so:
  - ctc_weight 1.0: no decoder; full scorers lm and length_bonus (when their weights are not 0);
    no pre-beam (pre_beam_score_key None), so CTC scores every token of every running hypothesis
    and a hypothesis's candidates are ranked by lm_weight * lm + penalty + ctc over the whole
    vocabulary;
  - ctc_weight 0.0: no CTC; full scorers decoder, lm, length_bonus; no pre-beam (there is no
    partial scorer), the candidates are ranked by (1 - 0) * decoder + lm_weight * lm + penalty;
  - otherwise: the pre-beam keeps the int(1.5 * beam) best tokens by the weighted sum of the full
    scorers, (1 - ctc_weight) * decoder + lm_weight * lm + penalty (without the hypothesis's own
    score), when int(1.5 * beam) < V (here beam 10 has none with V 12 or 15), and CTC scores those
    and always <eos>; the other tokens (and blank, always) get ctc_weight times CTC's log zero
    (-1e10, less the prefix's CTC score).
A hypothesis ended by the length limit (maxlen) has <eos> appended without any score, so its
sc_lm and sc_decoder hold no <eos> term; one that chose <eos> has it.

The toy LM is a seeded bigram table lm (V, V) of log-probabilities (each row a log_softmax):
lm[a] is the next-token distribution after last token a (a = <sos/eos> = V-1 for the prefix
<sos> alone), biased toward the bigrams of the reference the CTC log-probs spell (the reference
make_beam_fixtures.make_utt draws) but noisy enough to disagree with it; no final score (its
final_score would be 0, and BatchBeamSearch.post_process, unlike BeamSearch's, calls none). The
decoder and CTC log-probs are make_beam_fixtures.make_utt's.

No decisive ties, as make_beam_fixtures.py: a case is kept only when ESPnet returns the same
n-best (token sequences; scores within 1e-4) with exact ties broken the opposite way (a stand-in
for torch.topk, in the pre-beam and in the beam, lower index or higher index first) and when run
in float64, and when no n-best entry holds CTC's log zero; an utterance whose cases do not all
pass is drawn again with the next seed (the seed used is stored). The reference written is
ESPnet's unmodified float32 run.

Each utterance is one .npz:
  logp (T, V) f32          CTC log-probs (blank 0, <sos/eos> V-1)
  dec (V, V, V) f32        decoder table, dec[a, b] after (..., a, b), a = V-1 for <sos> alone
  lm (V, V) f32            LM table, lm[a] after last token a (a = V-1 for <sos> alone)
  seed () i64              the seed the utterance was drawn with
  cases (n, 7) f64         rows [beam_size, nbest, ctc_weight, lm_weight, penalty, maxlenratio,
                           minlenratio]
  n_hyps (n,) i64          how many hypotheses ESPnet returned, at most nbest
  yseq (n, nbest, L) i64   hypothesis tokens without <sos> and <eos> (yseq[1:-1]), -1 padded;
                           nbest here is the largest nbest of the cases, L the longest hypothesis
                           (at least 1)
  ylen (n, nbest) i64      hypothesis lengths (0 beyond n_hyps)
  score, sc_decoder, sc_ctc, sc_length_bonus, sc_lm (n, nbest) f64
                           hyp.score and hyp.scores[k] (unweighted sums); NaN beyond n_hyps and
                           for a scorer that is off (weight 0), as it is absent from hyp.scores

Run with ESPnet's venv (fixtures only; nothing at test time needs it):
    /opt/espnet3-venv/bin/python scripts/make_beam_lm_fixtures.py [outdir]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_beam_fixtures as mb  # noqa: E402

UTTS = [            # (name, T, V, first seed)
    ("utt_t24_v12", 24, 12, 1000),
    ("utt_t32_v15", 32, 15, 1100),
    ("utt_t40_v20", 40, 20, 1200),
]

SCORERS = ("decoder", "ctc", "length_bonus", "lm")


def cases():
    """[beam, nbest, ctc_weight, lm_weight, penalty, maxlenratio, minlenratio] rows."""
    rows = []
    for ctc_weight in (0.3, 0.5):
        for beam in (1, 5, 10):
            for lm_weight in (0.3, 1.0):
                for penalty in (0.0, 0.5):
                    for maxlenratio in (0.0, 0.5):
                        rows.append([beam, 3, ctc_weight, lm_weight, penalty, maxlenratio, 0.0])
    rows += [
        [5, 3, 0.3, 0.5, 0.0, 0.0, 0.0],    # lm_weight 0.5
        [10, 3, 0.5, 0.5, 0.5, 0.0, 0.0],
        [5, 3, 0.3, 0.5, -0.5, 0.0, 0.0],   # negative penalty
        [5, 1, 0.3, 0.5, 0.0, 0.0, 0.0],    # nbest 1
        [10, 1, 0.3, 0.3, 0.0, 0.0, 0.0],
        [1, 1, 0.5, 1.0, 0.0, 0.0, 0.0],
        [5, 3, 0.5, 0.0, 0.0, 0.0, 0.0],    # lm off (weight 0): sc_lm NaN
        [5, 3, 0.5, 0.5, 0.0, 0.0, 0.3],    # minlen
        [5, 3, 0.5, 0.5, 0.0, 0.5, 0.95],   # minlen above maxlen: retried with minlenratio - 0.1 ...
        [5, 3, 0.5, 0.5, 0.5, -6.0, 0.0],   # fixed maxlen
        [10, 5, 0.3, 0.5, 0.0, 0.0, 0.0],   # longer n-best
        [5, 30, 0.3, 0.5, 0.0, 0.0, 0.0],   # every ended hypothesis: how many depends on end detection
        [5, 30, 1.0, 0.5, 0.0, 0.0, 0.0],
        [5, 30, 0.0, 0.5, 0.0, 0.0, 0.0],
        [1, 3, 1.0, 0.3, 0.0, 0.0, 0.0],    # CTC + LM (no decoder, no pre-beam)
        [5, 3, 1.0, 0.5, 0.0, 0.0, 0.0],
        [10, 3, 1.0, 1.0, 0.0, 0.0, 0.0],
        [5, 3, 1.0, 1.0, 0.5, 0.5, 0.0],
        [10, 3, 1.0, 0.3, 0.5, 0.0, 0.0],
        [5, 1, 1.0, 0.5, 0.0, 0.0, 0.0],
        [1, 3, 0.0, 0.3, 0.0, 0.0, 0.0],    # decoder + LM (no CTC, no pre-beam)
        [5, 3, 0.0, 0.5, 0.0, 0.5, 0.0],
        [10, 3, 0.0, 1.0, 0.5, 0.0, 0.0],
        [5, 3, 0.0, 1.0, 0.0, 0.0, 0.0],
        [5, 3, 0.0, 0.5, 1.0, 0.5, 0.0],
        [10, 1, 0.0, 0.3, 0.0, 0.0, 0.0],
    ]
    return rows


class TableLM(BatchScorerInterface):
    """Next-token log-probs from a bigram table over the last token of the prefix (which starts
    with <sos> = V-1); no state."""

    def __init__(self, table):
        self.table = table

    def score(self, y, state, x):
        return self.table[int(y[-1])], None

    def batch_score(self, ys, states, xs):
        return self.table[ys[:, -1]], [None] * len(ys)


def make_lm(T, V, seed):
    """The bigram LM of an utterance: noise, plus a boost for the bigrams of the reference
    make_beam_fixtures.make_utt(T, V, seed) draws (its generator's first draw, repeated here),
    <sos> -> first token ... last token -> <eos>."""
    g = torch.Generator().manual_seed(seed)
    ref = torch.randint(1, V - 1, (T // 4,), generator=g).tolist()   # as make_utt
    sos = eos = V - 1
    g = torch.Generator().manual_seed(1_000_000 + seed)
    table = 1.5 * torch.randn(V, V, generator=g)
    for a, b in zip([sos] + ref, ref + [eos]):
        table[a, b] += 2.5
    return torch.log_softmax(table, dim=-1).float()


def run_case(logp, dec, lm, row, dtype=torch.float32, desc_index=False):
    """ESPnet's n-best for one case: [(yseq[1:-1], score, scores)]."""
    beam, nbest, ctc_weight, lm_weight, penalty, maxlenratio, minlenratio = row
    V = logp.shape[1]
    sos = eos = V - 1
    scorers = dict(decoder=mb.TableDecoder(dec.to(dtype), sos), ctc=CTCPrefixScorer(ctc=mb.FixedCTC(), eos=eos),
                   length_bonus=LengthBonus(V))
    scorers["lm"] = TableLM(lm.to(dtype))
    weights = dict(decoder=1.0 - ctc_weight, ctc=ctc_weight, lm=lm_weight, ngram=0.9, length_bonus=penalty)
    search = BeamSearch(beam_size=int(beam), weights=weights, scorers=scorers, sos=sos, eos=eos, vocab_size=V,
                        token_list=None, pre_beam_score_key=None if ctc_weight == 1.0 else "full")
    assert all(isinstance(v, BatchScorerInterface) for v in search.full_scorers.values())
    search.__class__ = mb.TieSearch if desc_index else BatchBeamSearch
    mb.TIES["desc_index"] = desc_index
    torch.topk = mb.topk_ties if desc_index else mb._topk
    try:
        hyps = search(x=logp.to(dtype).clone(), maxlenratio=maxlenratio, minlenratio=minlenratio)
    finally:
        torch.topk = mb._topk
    out = []
    for h in hyps[: int(nbest)]:
        sc = {k: float(v) for k, v in h.scores.items()}
        out.append((h.yseq[1:-1].tolist(), float(h.score), sc))
    return out


def stable_case(logp, dec, lm, row):
    """ESPnet's float32 result, when ties and float32 rounding cannot have decided it (as
    make_beam_fixtures.stable_case)."""
    ref = run_case(logp, dec, lm, row)
    for other, what in ((run_case(logp, dec, lm, row, desc_index=True), "tie order"),
                        (run_case(logp, dec, lm, row, dtype=torch.float64), "float64")):
        if [y for y, _, _ in other] != [y for y, _, _ in ref]:
            raise mb.Unstable(f"case {row}: {what} changes the n-best")
        if any(abs(a[1] - b[1]) > 1e-4 for a, b in zip(ref, other)):
            raise mb.Unstable(f"case {row}: {what} changes a score by more than 1e-4")
    if any(s < -1e8 for _, s, _ in ref):
        raise mb.Unstable(f"case {row}: an n-best entry holds CTC's log zero")
    return ref


def write_utt(path, logp, dec, lm, seed, rows, results):
    n, nb = len(rows), max(int(r[1]) for r in rows)
    L = max([len(y) for res in results for y, _, _ in res] + [1])
    yseq = np.full((n, nb, L), -1, np.int64)
    ylen = np.zeros((n, nb), np.int64)
    arr = {k: np.full((n, nb), np.nan) for k in ["score"] + ["sc_" + k for k in SCORERS]}
    for i, res in enumerate(results):
        for j, (y, score, sc) in enumerate(res):
            yseq[i, j, : len(y)] = y
            ylen[i, j] = len(y)
            arr["score"][i, j] = score
            for k in SCORERS:
                if k in sc:
                    arr["sc_" + k][i, j] = sc[k]
    np.savez_compressed(path, logp=logp.numpy(), dec=dec.numpy(), lm=lm.numpy(), seed=np.int64(seed),
                        cases=np.array(rows, np.float64), n_hyps=np.array([len(r) for r in results], np.int64),
                        yseq=yseq, ylen=ylen, **arr)


def main():
    logging.disable(logging.WARNING)
    torch.set_num_threads(1)
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "fixtures",
                                                                 "beam_lm")
    os.makedirs(outdir, exist_ok=True)
    rows = cases()
    for name, T, V, seed in UTTS:
        for attempt in range(200):
            logp, dec = mb.make_utt(T, V, seed + attempt)
            lm = make_lm(T, V, seed + attempt)
            try:
                results = [stable_case(logp, dec, lm, r) for r in rows]
            except mb.Unstable as e:
                print(f"{name}: seed {seed + attempt}: {e}; next seed")
                continue
            break
        else:
            sys.exit(f"{name}: no seed without near-ties")
        write_utt(os.path.join(outdir, name + ".npz"), logp, dec, lm, seed + attempt, rows, results)
        lens = [len(res[0][0]) if res else -1 for res in results]
        print(f"{name}: T {T} V {V} seed {seed + attempt}: {len(rows)} cases, best lengths {lens}")


if __name__ == "__main__":
    main()
