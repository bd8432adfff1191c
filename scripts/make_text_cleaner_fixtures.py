#!/usr/bin/env python3
"""Writes the parity fixture of the metrics' whisper_basic text cleaner
(test/fixtures/text_cleaner/whisper_basic.jsonl): one JSON array [input, output] per line, the
output from ESPnet2's TextCleaner(["whisper_basic"]) (openai-whisper's BasicTextNormalizer) on
inputs that exercise its steps: case (Final_Sigma, dotted I), [..] <..> (..) spans and unclosed
ones, NFKC (ligatures, fractions, full-width, superscripts), marks, symbols and punctuation of
several scripts, Unicode whitespace (NBSP, em space, line separator, NEL, U+001C..U+001F), format
characters that stay. Run with the ESPnet venv (scripts/install_espnet_venv.sh installs
openai-whisper):

    /opt/espnet3-venv/bin/python scripts/make_text_cleaner_fixtures.py [OUTDIR]
"""
import argparse
import json
import os
import unicodedata

from espnet2.text.cleaner import TextCleaner

cases = [
    "HELLO WORLD",
    "Hello, World! It's 5 o'clock.",
    "[noise] okay <unk> then",
    "a<b[c]d>e",
    "he said (laughs) fine () and (( nested) x",
    "unclosed [bracket and (paren",
    "Café naïve Ünïcödé résumé",
    "ﬁne ½ x² Ⅻ ｆｕｌｌｗｉｄｔｈ",
    "İstanbul ΣΑΣ ΟΔΟΣ",
    "tab\there\nnew\u00a0nbsp\u2003em\u2028ls",
    "  leading and trailing  ",
    "em—dash – en-dash ‘quotes’ «guillemets» “double”",
    "$100 €5 #hash @at 50% a+b=c ~tilde^",
    "日本語のテキスト、句読点。",
    "मानक हिन्दी",
    "emoji 😀 and 🎉 party",
    "a\u0301 combining e\u0308",
    "zero\u200bwidth soft\u00adhyphen",
    "",
    "...",
    "x\x1cy\x1fz\x85w",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?", default="test/fixtures/text_cleaner")
    out = ap.parse_args().out
    os.makedirs(out, exist_ok=True)
    clean = TextCleaner(["whisper_basic"])
    assert clean.whisper_cleaner is not None, "openai-whisper is not installed"
    path = os.path.join(out, "whisper_basic.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps([c, clean(c)], ensure_ascii=False) + "\n")
    print(f"{path}: {len(cases)} cases (Python's Unicode {unicodedata.unidata_version})")


if __name__ == "__main__":
    main()
