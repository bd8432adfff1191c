#!/usr/bin/env python3
"""Writes the RNN-T loss parity fixtures under test/fixtures/rnnt/.

Each case is an .npz with the joint network's float32 logits (B, T, U+1, V), frame lengths, padded
labels (B, U) and label lengths, the blank id and clamp, and what torchaudio computes for them as
ESPnet2's transducer loss calls it: torchaudio.functional.rnnt_loss(logits, targets,
logit_lengths, target_lengths, blank, clamp, reduction="mean", fused_log_softmax=True) (the loss,
float32 as training runs it), the per-utterance losses (reduction="none") and the gradient of the
mean loss with respect to the logits. torchaudio takes float32 logits only; the test compares with
float tolerance. torchaudio requires T = max(logit_lengths) and U + 1 = max(target_lengths) + 1.

Run with the ESPnet venv (torch 2.11, torchaudio 2.11):
    /opt/espnet3-venv/bin/python scripts/make_rnnt_fixtures.py [outdir]
"""
import os
import sys

import numpy as np
import torch
import torchaudio.functional as AF


def case_mixed(g):
    """Padding frames and prefixes, a repeated label, an utterance with no labels; blank 0."""
    hlens = [12, 9, 4]
    labels = [[1, 4, 4, 7, 2], [3, 8, 1], []]
    return torch.randn(3, 12, 6, 10, generator=g), hlens, labels, 10, 0, -1.0


def case_clamp(g):
    """Peaky logits and clamp 0.05 (some raw gradients are larger); blank V - 1 (torchaudio's default)."""
    hlens = [6, 5]
    labels = [[0, 3, 5], [2]]
    return 5.0 * torch.randn(2, 6, 4, 7, generator=g), hlens, labels, 7, 6, 0.05


def case_edges(g):
    """T = 1: one utterance with no labels (U = 0), one that emits its three labels at frame 0."""
    hlens = [1, 1]
    labels = [[], [2, 1, 2]]
    return torch.randn(2, 1, 4, 5, generator=g), hlens, labels, 5, 0, -1.0


def case_longer(g):
    """Model-like proportions: 32 tokens, 24 frames, 10 labels."""
    hlens = [24, 17]
    ylens = [10, 6]
    labels = [torch.randint(1, 32, (n,), generator=g).tolist() for n in ylens]
    return 2.0 * torch.randn(2, 24, 11, 32, generator=g), hlens, labels, 32, 0, -1.0


def write(outdir, name, logits, hlens, labels, V, blank, clamp, g):
    B, T, U1, _ = logits.shape
    umax = max(1, max(len(y) for y in labels))
    assert U1 == max(len(y) for y in labels) + 1 and T == max(hlens)
    ys = torch.zeros(B, umax, dtype=torch.int32)  # padding past ylens: ignored
    for b, y in enumerate(labels):
        ys[b, :len(y)] = torch.tensor(y, dtype=torch.int32)
    hl = torch.tensor(hlens, dtype=torch.int32)
    yl = torch.tensor([len(y) for y in labels], dtype=torch.int32)
    x = logits.float().clone().requires_grad_(True)
    loss = AF.rnnt_loss(x, ys, hl, yl, blank=blank, clamp=clamp, reduction="mean")
    loss.backward()
    losses = AF.rnnt_loss(logits.float(), ys, hl, yl, blank=blank, clamp=clamp, reduction="none")
    path = os.path.join(outdir, name + ".npz")
    np.savez(path, logits=logits.float().numpy(), hlens=hl.numpy().astype(np.int64),
             labels=ys.numpy().astype(np.int64), ylens=yl.numpy().astype(np.int64),
             blank=np.int64(blank), clamp=np.float64(clamp), loss=np.float32(loss.item()),
             losses=losses.detach().numpy(), grad=x.grad.numpy())
    gmax = x.grad.abs().max().item()
    print(f"{path}: B={B} T={T} U1={U1} V={V} blank={blank} clamp={clamp} loss={loss.item():.6f} "
          f"losses={losses.numpy()} max|grad|={gmax:.4g}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "test", "fixtures", "rnnt")
    os.makedirs(outdir, exist_ok=True)
    g = torch.Generator().manual_seed(20250611)
    for name, make in [("mixed", case_mixed), ("clamp", case_clamp), ("edges", case_edges),
                       ("longer", case_longer)]:
        write(outdir, name, *make(g), g)


if __name__ == "__main__":
    main()
