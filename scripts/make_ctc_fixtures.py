#!/usr/bin/python3
"""Writes the CTC loss parity fixtures under test/fixtures/ctc/.

Each case is an .npz with float32 log-probs (batch-first, (B, T, V), the log_softmax of random
logits), frame lengths, padded labels (B, Lmax) and label lengths, and what torch computes for
ESPnet2's CTC: F.ctc_loss(blank=0, reduction='sum', zero_infinity=True) / B, the per-utterance
losses (reduction='none') and the gradient torch returns for the log-probs. The reference is
computed twice: in float64 on the same float32 log-probs (`loss`, `losses`, `grad`) and in
float32 as training runs it (`loss32`, `losses32`, `grad32`).

Run with Debian's python3 (python3-torch, python3-numpy):
    /usr/bin/python3 scripts/make_ctc_fixtures.py [outdir]
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F


def case_mixed(g):
    """Padding frames, repeated labels, an empty label sequence and an impossible alignment."""
    B, T, V = 4, 20, 8
    hlens = [20, 17, 12, 5]
    labels = [[1, 2, 3, 3, 4, 5],  # "3 3" needs a blank between: 7 frames at least
              [2, 2, 2],           # 5 frames at least
              [],                  # all blanks
              [1, 1, 1, 1]]        # needs 7 frames, has 5: impossible -> zero_infinity
    logits = torch.randn(B, T, V, generator=g)
    return logits, hlens, labels, V


def case_peaky(g):
    """Model-like sizes: 30 tokens, peaky distributions, long label sequences."""
    B, T, V = 3, 50, 30
    hlens = [50, 43, 31]
    ylens = [20, 17, 9]
    labels = [torch.randint(1, V, (n,), generator=g).tolist() for n in ylens]
    logits = 4.0 * torch.randn(B, T, V, generator=g)
    return logits, hlens, labels, V


def torch_ctc(logp, hlens, ys, ylens, dtype):
    """ESPnet2 CTC loss (sum / B, zero_infinity) and torch's gradient w.r.t. the log-probs."""
    lp = logp.to(dtype).transpose(0, 1).contiguous().requires_grad_(True)  # (T, B, V)
    B = logp.shape[0]
    loss = F.ctc_loss(lp, ys, hlens, ylens, blank=0, reduction="sum", zero_infinity=True) / B
    loss.backward()
    losses = F.ctc_loss(lp.detach(), ys, hlens, ylens, blank=0, reduction="none",
                        zero_infinity=True)
    return loss.item(), losses.numpy(), lp.grad.transpose(0, 1).contiguous().numpy()


def write(outdir, name, logits, hlens, labels, V, g):
    B, T, _ = logits.shape
    logp = torch.log_softmax(logits.float(), dim=-1)  # float32, as the model produces it
    lmax = max(1, max(len(y) for y in labels))
    ys = torch.randint(1, V, (B, lmax), generator=g)  # padding past ylens: ignored by torch
    for b, y in enumerate(labels):
        ys[b, :len(y)] = torch.tensor(y, dtype=torch.long)
    hl = torch.tensor(hlens, dtype=torch.long)
    yl = torch.tensor([len(y) for y in labels], dtype=torch.long)
    loss, losses, grad = torch_ctc(logp, hl, ys, yl, torch.float64)
    loss32, losses32, grad32 = torch_ctc(logp, hl, ys, yl, torch.float32)
    # torch's gradient for the log-probs is already the logits gradient: the log_softmax
    # backward on top of it changes nothing (its rows sum to zero).
    z = logits.double().requires_grad_(True)
    lpz = torch.log_softmax(z, dim=-1).transpose(0, 1)
    lpz.retain_grad()
    (F.ctc_loss(lpz, ys, hl, yl, blank=0, reduction="sum", zero_infinity=True) / B).backward()
    assert torch.allclose(z.grad, lpz.grad.transpose(0, 1), atol=1e-12)
    assert abs(loss32 - loss) <= 1e-5 * abs(loss), (loss32, loss)
    assert np.abs(grad32 - grad).max() <= 1e-4 * np.abs(grad).max()
    path = os.path.join(outdir, name + ".npz")
    np.savez(path, logp=logp.numpy(), hlens=hl.numpy(), labels=ys.numpy(), ylens=yl.numpy(),
             loss=np.float64(loss), losses=losses, grad=grad,
             loss32=np.float32(loss32), losses32=losses32.astype(np.float32),
             grad32=grad32.astype(np.float32))
    print(f"{path}: B={B} T={T} V={V} loss={loss:.6f} losses={losses}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "test", "fixtures", "ctc")
    os.makedirs(outdir, exist_ok=True)
    g = torch.Generator().manual_seed(20240605)
    for name, make in [("mixed", case_mixed), ("peaky", case_peaky)]:
        logits, hlens, labels, V = make(g)
        write(outdir, name, logits, hlens, labels, V, g)


if __name__ == "__main__":
    main()
