"""warp-transducer's RNNTLoss, which ESPnet2's ESPnetASRModel imports for its transducer branch
(`from warprnnt_pytorch import RNNTLoss`) but PyPI does not carry for torch 2.11, stood in by
torchaudio.functional.rnnt_loss(reduction="mean", fused_log_softmax=True): the same function of the
logits (the sum over the batch of -log p(y|x), divided by the batch size; log_softmax inside).
Imported by scripts/make_transducer_fixtures.py and scripts/bench/espnet_step.py before ESPnet's
model: `install()` puts it where ESPnetASRModel looks."""
import sys
import types

import torch
import torchaudio


class RNNTLoss(torch.nn.Module):
    def __init__(self, blank=0, fastemit_lambda=0.0, reduction="mean"):
        super().__init__()
        assert fastemit_lambda == 0.0
        self.blank, self.reduction = blank, reduction

    def forward(self, acts, labels, act_lens, label_lens):
        return torchaudio.functional.rnnt_loss(acts, labels.int(), act_lens.int(), label_lens.int(), blank=self.blank,
                                               reduction=self.reduction, fused_log_softmax=True)


def install():
    sys.modules["warprnnt_pytorch"] = types.SimpleNamespace(RNNTLoss=RNNTLoss)
