#!/usr/bin/env python3
"""Writes the parity fixture of validation's error rates (test/fixtures/transducer_errors/cases.jsonl;
core/decode/error_calculator.h): one JSON object a line with a token list, sym_space, sym_blank, a
batch of hypotheses and references (token ids, references unpadded), and the CER and WER of
ESPnet's three calculators on them (espnet2/asr/transducer/error_calculator.py's
ErrorCalculatorTransducer under "asr", espnet2/asr_transducer/error_calculator.py's ErrorCalculator
under "asr_transducer", espnet/nets/e2e_asr_common.py's ErrorCalculator, which ESPnetASRModel runs
on its attention decoder's argmax, under "attention"; null where Python divides by zero). For the
transducer calculators the references are padded with id 0 to the batch's longest, as
get_transducer_task_io pads the target they read; for the attention one with -1, and its
hypotheses are rows of the batch's longest reference + 1 ids ("att_hat": each hypothesis padded
with <sos/eos> or cut), of which it reads each reference's length, as _calc_att_loss passes them. The searches are not run here (their
parity is test_transducer_search.c's and test_asr_transducer_search.c's): convert_to_char,
calculate_cer and calculate_wer are. Run with the ESPnet venv:

    /opt/espnet3-venv/bin/python scripts/make_transducer_errors_fixtures.py [OUTDIR]
"""
import argparse
import json
import os

import torch
from espnet.nets.e2e_asr_common import ErrorCalculator as AttentionErrorCalculator
from espnet2.asr.transducer.error_calculator import ErrorCalculatorTransducer
from espnet2.asr_transducer.error_calculator import ErrorCalculator

CHARS = ["<blank>", "<unk>", "<space>", "a", "b", "c", "d", "\u00e9", "<sos/eos>"]
BPE = ["<blank>", "<unk>", "\u2581he", "llo", "\u2581wor", "ld", "\u2581", "s", "<sos/eos>"]

cases = [
    # char list, a padded batch: substitutions, a deletion, <unk> counts as its 5 characters
    dict(tokens=CHARS, hyps=[[3, 4, 2, 5], [3, 1, 6], [7, 7, 2, 3]], refs=[[3, 4, 2, 6, 5], [3, 6], [7, 2, 3]]),
    # an empty reference counts (its hypothesis' characters are edits)
    dict(tokens=CHARS, hyps=[[3, 4], [5, 6, 2, 7]], refs=[[], [5, 6, 2, 7, 3]]),
    # every reference empty: ESPnet2 divides by zero
    dict(tokens=CHARS, hyps=[[3]], refs=[[]]),
    # sym_blank not in the list: the references' padding ("<blank>") stays as characters
    dict(tokens=CHARS, sym_blank="<b>", hyps=[[3, 4], [3, 2, 4]], refs=[[3, 4, 5, 6], [3, 2, 4]]),
    # sym_space matched across token boundaries of the joined text
    dict(tokens=CHARS, sym_space="ab", hyps=[[3, 4, 5, 3], [6, 3]], refs=[[5, 3, 4, 6], [6, 4, 3]]),
    # an empty sym_space: Python's replace puts a space around every character
    dict(tokens=CHARS, sym_space="", hyps=[[3, 4, 2, 5]], refs=[[3, 5, 2, 5]]),
    # BPE pieces: the ASR task's WER splits on spaces only, the asr_transducer task's on U+2581 too
    dict(tokens=BPE, hyps=[[2, 3, 4, 5], [2, 3, 6, 7]], refs=[[2, 3, 4, 5, 7], [2, 3]]),
    dict(tokens=BPE, hyps=[[4, 5, 2, 3]], refs=[[2, 3, 4, 5]]),
]


def cer_wer(calc, cp, ct):
    """calculate_cer and calculate_wer of the converted texts; None where Python divides by zero."""
    out = []
    for f in (calc.calculate_cer, calc.calculate_wer):
        try:
            out.append(f(cp, ct))
        except ZeroDivisionError:
            out.append(None)
    return out


def rates(cls, tokens, space, blank, hyps, refs):
    calc = cls.__new__(cls)  # the conversion and rates only: no decoder, no search
    calc.token_list, calc.space, calc.blank = tokens, space, blank
    lmax = max(len(r) for r in refs)
    target = torch.zeros(len(refs), lmax, dtype=torch.int32)  # padded with blank_id 0
    for i, r in enumerate(refs):
        target[i, : len(r)] = torch.tensor(r, dtype=torch.int32)
    pred = [torch.tensor(h, dtype=torch.long) for h in hyps]
    return cer_wer(calc, *calc.convert_to_char(pred, target))


def attention_rates(tokens, space, blank, hyps, refs):
    """ESPnetASRModel's cer/wer: ys_hat (B, lmax + 1) against ys_pad padded with -1."""
    calc = AttentionErrorCalculator(tokens, space, blank, report_cer=True, report_wer=True)
    lmax = max(len(r) for r in refs)
    eos = len(tokens) - 1
    ys_hat = torch.tensor([(h + [eos] * (lmax + 1))[: lmax + 1] for h in hyps], dtype=torch.long)
    ys_pad = torch.full((len(refs), lmax), -1, dtype=torch.long)
    for i, r in enumerate(refs):
        ys_pad[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return ys_hat.tolist(), cer_wer(calc, *calc.convert_to_char(ys_hat, ys_pad))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="test/fixtures/transducer_errors")
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "cases.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for c in cases:
            space, blank = c.get("sym_space", "<space>"), c.get("sym_blank", "<blank>")
            row = dict(tokens=c["tokens"], sym_space=space, sym_blank=blank, hyps=c["hyps"], refs=c["refs"])
            row["asr"] = rates(ErrorCalculatorTransducer, c["tokens"], space, blank, c["hyps"], c["refs"])
            row["asr_transducer"] = rates(ErrorCalculator, c["tokens"], space, blank, c["hyps"], c["refs"])
            row["att_hat"], row["attention"] = attention_rates(c["tokens"], space, blank, c["hyps"], c["refs"])
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
