"""warp-transducer's RNNTLoss, which ESPnet2's ESPnetASRModel imports for its transducer branch
(`from warprnnt_pytorch import RNNTLoss`) but PyPI does not carry for torch 2.11, stood in by
torchaudio.functional.rnnt_loss(reduction="mean", fused_log_softmax=True): the same function of the
logits (the sum over the batch of -log p(y|x), divided by the batch size; log_softmax inside).
With fastemit_lambda > 0 (which torchaudio lacks) the loss is the small float64 PyTorch reference
below of the formula warp-transducer (b-flo's fork, which ESPnet installs) applies: the same loss
value, the gradient through each label arc's log-prob scaled by 1 + fastemit_lambda (its CPU
kernel's `grad[idx(t, u, labels[u])] = -(1 + fastemit_lambda) * exp(...)`).
Imported by scripts/make_transducer_fixtures.py and scripts/bench/espnet_step.py before ESPnet's
model: `install()` puts it where ESPnetASRModel looks."""
import sys
import types

import torch
import torchaudio


def fastemit_rnnt_loss(acts, labels, act_lens, label_lens, blank, lam, reduction):
    """-log p(y|x) per utterance from the lattice's alpha recursion in float64, the label arcs'
    log-probs entering as lp + lam * (lp - lp.detach()): the same value, autograd's gradient through
    them times 1 + lam."""
    logp = torch.log_softmax(acts.double(), dim=-1)
    losses = []
    for b in range(acts.size(0)):
        T, U = int(act_lens[b]), int(label_lens[b])
        lp = logp[b, :T, : U + 1]
        blank_lp = lp[..., blank]
        y = labels[b, :U].long()
        emit = lp[:, :U, :].gather(-1, y.view(1, U, 1).expand(T, U, 1)).squeeze(-1)
        emit = emit + lam * (emit - emit.detach())
        alpha = [[None] * (U + 1) for _ in range(T)]
        for t in range(T):
            for u in range(U + 1):
                if t == 0 and u == 0:
                    alpha[t][u] = lp.new_zeros(())
                elif t == 0:
                    alpha[t][u] = alpha[t][u - 1] + emit[t, u - 1]
                elif u == 0:
                    alpha[t][u] = alpha[t - 1][u] + blank_lp[t - 1, u]
                else:
                    alpha[t][u] = torch.logaddexp(alpha[t - 1][u] + blank_lp[t - 1, u],
                                                  alpha[t][u - 1] + emit[t, u - 1])
        losses.append(-(alpha[T - 1][U] + blank_lp[T - 1, U]))
    loss = torch.stack(losses)
    loss = loss.sum() / acts.size(0) if reduction == "mean" else loss.sum() if reduction == "sum" else loss
    return loss.to(acts.dtype)


class RNNTLoss(torch.nn.Module):
    def __init__(self, blank=0, fastemit_lambda=0.0, reduction="mean"):
        super().__init__()
        self.blank, self.reduction, self.fastemit_lambda = blank, reduction, fastemit_lambda

    def forward(self, acts, labels, act_lens, label_lens):
        plain = torchaudio.functional.rnnt_loss(acts, labels.int(), act_lens.int(), label_lens.int(), blank=self.blank,
                                                reduction=self.reduction, fused_log_softmax=True)
        if self.fastemit_lambda == 0.0:
            return plain
        loss = fastemit_rnnt_loss(acts, labels, act_lens, label_lens, self.blank, self.fastemit_lambda, self.reduction)
        assert torch.allclose(loss.detach(), plain.detach(), rtol=1e-5), (loss, plain)  # FastEmit keeps the value
        return loss


def install():
    sys.modules["warprnnt_pytorch"] = types.SimpleNamespace(RNNTLoss=RNNTLoss)
