#!/usr/bin/env python3
"""Parity fixtures for CTC segmentation (core/decode/ctc_segment.h, espnet3 align): the
`ctc_segmentation` package (1.7.5, what ESPnet2's asr_align.py imports) run on log-probabilities
made here, as asr_align.py's CTCSegmentation calls it with text_converter "tokenize":
prepare_token_list, ctc_segmentation, determine_utterance_segments, and the segments printed as
CTCSegmentationTask.__str__ prints them.

Each case is test/fixtures/ctc_segment/<case>.npz: lpz (T x V float32), ids (the utterances' token
ids, concatenated), lens, opts (min_window_size, max_window_size, scoring_length, blank,
gratis_blank, index_duration) and the package's timings, char_probs, segments (start, end, score)
and its printed segments text (utf-8 bytes).

The log-probabilities come from a known alignment: each utterance's tokens spread over its frames
with blanks between, a peak of the right token per emitting frame, noise elsewhere, silences
between utterances; one case speaks a word that the transcript replaces by another.

  python3 -m venv /tmp/ctcseg && /tmp/ctcseg/bin/pip install ctc-segmentation==1.7.5 numpy
  /tmp/ctcseg/bin/python scripts/make_ctc_segment_fixtures.py test/fixtures/ctc_segment
"""
import sys

import numpy as np
from ctc_segmentation import (CtcSegmentationParameters, ctc_segmentation, determine_utterance_segments,
                              prepare_token_list)

V = 30


def make_lpz(rng, utts, frames_per_token, gap, spoken=None):
    """Log-probs of the utterances (lists of ids) said one after another with `gap` silent frames."""
    spoken = spoken or utts
    rows = []
    for _ in range(gap):
        rows.append(0)
    for u in spoken:
        for tok in u:
            rows.append(tok)
            rows.extend([0] * (frames_per_token - 1))
        rows.extend([0] * gap)
    T = len(rows)
    logits = rng.normal(0, 1.0, size=(T, V))
    for t, tok in enumerate(rows):
        logits[t, tok] += 6.0 if tok else 4.0
    logits -= logits.max(axis=1, keepdims=True)
    lpz = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return lpz.astype(np.float32)


def run(name, out_dir, lpz, utts, texts, **opts):
    config = CtcSegmentationParameters()
    config.char_list = ["<blank>"] + [f"t{i}" for i in range(1, V)]
    config.index_duration = opts.get("index_duration", 0.04)
    config.min_window_size = opts.get("min_window_size", 8000)
    config.max_window_size = opts.get("max_window_size", 100000)
    config.score_min_mean_over_L = opts.get("scoring_length", 30)
    config.blank = 0
    config.blank_transition_cost_zero = bool(opts.get("gratis_blank", False))
    gt, begins = prepare_token_list(config, [np.array(u, dtype=np.int64) for u in utts])
    timings, char_probs, _ = ctc_segmentation(config, lpz, gt)
    segs = determine_utterance_segments(config, begins, char_probs, timings, texts)
    lines = []
    for i, (s, e, sc) in enumerate(segs):
        lines.append(f"utt{i} {name} {s:.2f} {e:.2f} {sc:3.4f} {texts[i]}\n")
    np.savez(f"{out_dir}/{name}.npz", lpz=lpz, ids=np.array([i for u in utts for i in u], dtype=np.int64),
             lens=np.array([len(u) for u in utts], dtype=np.int64),
             opts=np.array([config.min_window_size, config.max_window_size, config.score_min_mean_over_L, 0,
                            int(config.blank_transition_cost_zero), config.index_duration], dtype=np.float64),
             timings=np.array(timings, dtype=np.float64), char_probs=np.array(char_probs, dtype=np.float64),
             segments=np.array(segs, dtype=np.float64),
             text=np.frombuffer("".join(lines).encode(), dtype=np.uint8).astype(np.int64))
    sys.stdout.write(f"{name}: T {lpz.shape[0]}, {len(utts)} utterances\n" + "".join(lines))


def main(out_dir):
    rng = np.random.default_rng(42)
    utts = [[int(x) for x in rng.integers(1, V, size=n)] for n in (7, 12, 5, 9, 15, 4)]
    texts = [" ".join(f"t{i}" for i in u) for u in utts]
    lpz = make_lpz(rng, utts, 3, 12)
    run("plain", out_dir, lpz, utts, texts)
    run("gratis_blank", out_dir, lpz, utts, texts, gratis_blank=True, scoring_length=10)
    # a small first window: the backtracking leaves it and the window doubles
    run("window", out_dir, lpz, utts, texts, min_window_size=40, scoring_length=5)
    # a preamble and a long tail of unrelated frames, and a 0.02 s frame
    pre = make_lpz(rng, [[int(x) for x in rng.integers(1, V, size=20)]], 2, 5)
    run("preamble", out_dir, np.concatenate([pre, lpz, pre]), utts, texts, index_duration=0.02)
    # utterance 2 is spoken as other tokens than the transcript says: a low score
    spoken = [list(u) for u in utts]
    spoken[2] = [int(x) for x in rng.integers(1, V, size=len(utts[2]))]
    run("wrong_words", out_dir, make_lpz(rng, utts, 3, 12, spoken), utts, texts, scoring_length=8)


if __name__ == "__main__":
    main(sys.argv[1])
