#!/usr/bin/env python3
"""Checks that every relative markdown link [text](path) in README.md and docs/**/*.md points at a
file or folder of the repository (and, for path#anchor into a markdown file, at one of its
headings). Prints each broken link as file:line: target and exits 1 if there is any."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def anchors(md):
    out, fenced = set(), False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def main():
    files = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    bad = 0
    for md in files:
        fenced = False
        for n, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            if line.startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):  # http:, https:, mailto: ...
                    continue
                path, _, anchor = target.partition("#")
                dest = (md.parent / path).resolve() if path else md
                why = None
                if not dest.exists():
                    why = "no such file"
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    why = "no such heading"
                if why:
                    bad += 1
                    print(f"{md.relative_to(ROOT)}:{n}: {target}: {why}")
    if bad:
        print(f"{bad} broken link(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
