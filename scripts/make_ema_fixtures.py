#!/usr/bin/env python3
"""Lightning's EMAWeightAveraging, recorded for test/unit/train/test_ema.c:

- "averages": torch.optim.swa_utils.AveragedModel built as Lightning's WeightAveraging builds it
  (avg_fn=get_ema_avg_fn(decay), use_buffers as given), updated 300 times from a small module whose
  parameters, float buffer and int64 counter take, at update t, values the C test computes the
  same way (value(t, i) below: whole multiples of 2^-12, exact in float32). The averaged tensors'
  float32 bits (the counter as an integer) after some of the updates, for five decays, with and
  without use_buffers.
- "should_update": EMAWeightAveraging.should_update for a few argument sets, after each step index
  and each epoch index.
- "lightning": a tiny Lightning fit with the callback: what validation sees and what the
  checkpoints hold (a weights-only ModelCheckpoint as ESPnet3's best-k ones, and a full one as its
  last), as facts (true/false).

Run with the ESPnet venv (lightning 2.6.6, torch 2.11.0):

    /opt/espnet3-venv/bin/python scripts/make_ema_fixtures.py > test/fixtures/train/ema.json
"""
import glob
import json
import logging
import os
import struct
import tempfile
import warnings

import lightning
import torch
from lightning.pytorch.callbacks import Callback, EMAWeightAveraging, ModelCheckpoint
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_avg_fn
from torch.utils.data import DataLoader, TensorDataset

N_W, N_B, N_RUN = 63, 5, 4  # parameters w (7 x 9), b; float buffer run; int64 buffer count
UPDATES = 300
RECORD = [1, 2, 3, 150, 300]
DECAYS = [0.999, 0.9, 0.5, 0.0, 1.0]


def value(t, i):
    """A value in [-4.9, 4.9], a whole multiple of 2^-12 (exact in float32), from a 32-bit hash."""
    h = (t * 2654435761 + i * 40503 + 12345) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0x5BD1E995) & 0xFFFFFFFF
    h ^= h >> 15
    return ((h % 40001) - 20000) / 4096.0


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(7, 9))
        self.b = nn.Parameter(torch.zeros(N_B))
        self.register_buffer("run", torch.zeros(N_RUN))
        self.register_buffer("count", torch.tensor(0, dtype=torch.long))

    def set(self, t):
        # the flat index runs over w, b, run as the C test's layout (parameters, then buffers)
        with torch.no_grad():
            flat = [value(t, i) for i in range(N_W + N_B + N_RUN)]
            self.w.copy_(torch.tensor(flat[:N_W]).view(7, 9))
            self.b.copy_(torch.tensor(flat[N_W:N_W + N_B]))
            self.run.copy_(torch.tensor(flat[N_W + N_B:]))
            self.count.fill_(7 * t + t % 5)


def bits(x):
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


def averages():
    out = []
    for decay in DECAYS:
        for use_buffers in (True, False):
            model = Small()
            model.set(0)
            avg = AveragedModel(model, avg_fn=get_ema_avg_fn(decay=decay), use_buffers=use_buffers)
            snaps = []
            for t in range(1, UPDATES + 1):
                model.set(t)
                avg.update_parameters(model)
                if t in RECORD:
                    m = avg.module
                    floats = torch.cat([m.w.detach().flatten(), m.b.detach(), m.run])
                    snaps.append({"after": t, "bits": [bits(v) for v in floats.tolist()], "count": int(m.count)})
            out.append({"decay": decay, "use_buffers": use_buffers, "snapshots": snaps})
    return out


SHOULD_UPDATE_ARGS = [
    {},
    {"update_every_n_steps": 3},
    {"update_starting_at_step": 5},
    {"update_every_n_steps": 2, "update_starting_at_step": 3},
    {"update_starting_at_epoch": 2},
    {"update_every_n_steps": 0, "update_starting_at_epoch": 1},
]


def should_update():
    out = []
    for kw in SHOULD_UPDATE_ARGS:
        cb = EMAWeightAveraging(**kw)
        out.append({"args": kw, "steps": [bool(cb.should_update(step_idx=s)) for s in range(20)],
                    "epochs": [bool(cb.should_update(epoch_idx=e)) for e in range(6)]})
    return out


class Tiny(lightning.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.seen = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        return ((self.lin(x) - y) ** 2).mean()

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("valid/loss", ((self.lin(x) - y) ** 2).mean())

    def on_validation_epoch_start(self):  # after the callbacks' hook: the swap is done
        self.seen.append(torch.cat([p.detach().flatten().clone() for p in self.parameters()]))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Before(Callback):
    """Listed before the EMA callback: the weights just before its swap, and the average."""

    def __init__(self, ema):
        self.ema, self.cur, self.avg = ema, [], []

    def on_validation_epoch_start(self, trainer, pl_module):
        self.cur.append(torch.cat([p.detach().flatten().clone() for p in pl_module.parameters()]))
        self.avg.append(torch.cat([p.detach().flatten().clone() for p in self.ema._average_model.module.parameters()]))


def lightning_facts():
    torch.manual_seed(0)
    train = DataLoader(TensorDataset(torch.randn(6, 3), torch.randn(6, 2)), batch_size=1)
    valid = DataLoader(TensorDataset(torch.randn(2, 3), torch.randn(2, 2)), batch_size=1)
    d = tempfile.mkdtemp()
    ema = EMAWeightAveraging(decay=0.5)
    before = Before(ema)
    best = ModelCheckpoint(dirpath=d, monitor="valid/loss", save_top_k=-1, save_on_train_epoch_end=False,
                           filename="best_step{step}", auto_insert_metric_name=False, save_weights_only=True)
    last = ModelCheckpoint(dirpath=d, filename="last_step{step}", auto_insert_metric_name=False,
                           save_on_train_epoch_end=True, save_top_k=-1)
    model = Tiny()
    trainer = lightning.Trainer(accelerator="cpu", max_epochs=1, val_check_interval=3, logger=False,
                                enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                                callbacks=[before, ema, best, last])
    trainer.fit(model, train, valid)
    n = len(model.seen)
    facts = {"validations": n,
             "validation_sees_the_average": all(torch.equal(model.seen[k], before.avg[k]) for k in range(n)),
             "average_differs_from_current": all(not torch.equal(before.avg[k], before.cur[k]) for k in range(n))}
    # the weights-only (best-k) checkpoint of the validation after batch 3: current or average?
    sd = torch.load(glob.glob(os.path.join(d, "best_step3.ckpt"))[0], weights_only=False)
    w = torch.cat([sd["state_dict"][k].flatten() for k in ("lin.weight", "lin.bias")])
    facts["weights_only_checkpoint_holds_the_current_weights"] = torch.equal(w, before.cur[0])
    facts["weights_only_checkpoint_has_current_model_state"] = "current_model_state" in sd
    full = torch.load(glob.glob(os.path.join(d, "last_step6.ckpt"))[0], weights_only=False)
    avg = ema._average_model.module
    facts["full_checkpoint_state_dict_is_the_average"] = all(
        torch.equal(full["state_dict"][k], getattr(avg, k.split(".")[0]).state_dict()[k.split(".")[1]])
        for k in ("lin.weight", "lin.bias"))
    facts["full_checkpoint_has_current_model_state"] = "current_model_state" in full
    facts["full_checkpoint_averaging_state"] = {k: int(v) for k, v in full.get("averaging_state", {}).items()}
    facts["full_checkpoint_callback_state"] = [v for k, v in full["callbacks"].items() if "EMAWeightAveraging" in k]
    facts["final_model_is_the_average"] = all(torch.equal(p, q) for p, q in zip(model.parameters(), avg.parameters()))
    return facts


def main():
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    out = {"lightning": lightning.__version__, "torch": torch.__version__.split("+")[0],
           "layout": {"w": N_W, "b": N_B, "run": N_RUN}, "averages": averages(), "should_update": should_update(),
           "lightning_facts": lightning_facts()}
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
