#!/usr/bin/env python3
"""Where Lightning validates inside training (trainer.val_check_interval, check_val_every_n_epoch,
limit_train_batches, accumulate_grad_batches, max_steps), recorded for test/unit/train/test_val_check.c:
for each setting a tiny fit on n batches of one sample, the validations as (epoch, batches of the
epoch done, global step), the files a ModelCheckpoint that saves after each validation wrote
(ESPnet3's best-k name pattern epoch{epoch}_step{step}), whether EarlyStopping checks at the epoch
end or after each validation, or Lightning's error. Run with the ESPnet venv (lightning 2.6.6):

    /opt/espnet3-venv/bin/python scripts/make_val_check_fixtures.py > test/fixtures/train/val_check.json
"""
import glob
import json
import logging
import os
import tempfile
import warnings

import lightning
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CASES = [
    ("fraction_half", 5, dict(max_epochs=2, val_check_interval=0.5)),
    ("count_2", 5, dict(max_epochs=2, val_check_interval=2)),
    ("fraction_half_even", 6, dict(max_epochs=1, val_check_interval=0.5)),
    ("epoch_end", 5, dict(max_epochs=2, val_check_interval=1.0)),
    ("every_batch", 3, dict(max_epochs=1, val_check_interval=1)),
    ("fraction_of_limited", 10, dict(max_epochs=1, limit_train_batches=0.5, val_check_interval=0.3)),
    ("fraction_of_count_limit", 10, dict(max_epochs=1, limit_train_batches=3, val_check_interval=0.5)),
    ("count_equals_epoch", 5, dict(max_epochs=2, val_check_interval=5)),
    ("count_above_epoch", 5, dict(max_epochs=1, val_check_interval=6)),
    ("fraction_0_4", 8, dict(max_epochs=1, val_check_interval=0.4)),
    ("fraction_small", 7, dict(max_epochs=1, val_check_interval=0.1)),
    ("every_2nd_epoch", 5, dict(max_epochs=4, val_check_interval=3, check_val_every_n_epoch=2)),
    ("over_epochs", 5, dict(max_epochs=3, val_check_interval=3, check_val_every_n_epoch=None)),
    ("over_epochs_above_epoch", 4, dict(max_epochs=3, val_check_interval=6, check_val_every_n_epoch=None)),
    ("max_steps_between", 5, dict(max_epochs=2, val_check_interval=2, max_steps=3)),
    ("accumulate_2", 6, dict(max_epochs=1, val_check_interval=2, accumulate_grad_batches=2)),
]


class Tiny(lightning.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 1)
        self.validations = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        return ((self.lin(x) - y) ** 2).mean()

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("valid/loss", ((self.lin(x) - y) ** 2).mean())

    def on_validation_epoch_start(self):
        if not self.trainer.sanity_checking:
            loop = self.trainer.fit_loop.epoch_loop
            self.validations.append([self.current_epoch, loop.batch_idx + 1, self.global_step])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def run(n, kw):
    torch.manual_seed(0)
    train = DataLoader(TensorDataset(torch.randn(n, 2), torch.randn(n, 1)), batch_size=1)
    valid = DataLoader(TensorDataset(torch.randn(2, 2), torch.randn(2, 1)), batch_size=1)
    d = tempfile.mkdtemp()
    best = ModelCheckpoint(dirpath=d, monitor="valid/loss", save_top_k=-1, save_on_train_epoch_end=False,
                           filename="epoch{epoch}_step{step}", auto_insert_metric_name=False, save_weights_only=True)
    es = EarlyStopping(monitor="valid/loss", patience=1000)
    model = Tiny()
    trainer = lightning.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
                                num_sanity_val_steps=0, callbacks=[best, es], **kw)
    try:
        trainer.fit(model, train, valid)
    except Exception as e:  # Lightning's refusal, as it says it
        return {"error": type(e).__name__ + ": " + " ".join(str(e).split())}
    return {"validations": model.validations,
            "checkpoints": sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(d, "*.ckpt"))),
            "early_stopping_checks_at_epoch_end": bool(es._check_on_train_epoch_end)}


def main():
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    out = {"lightning": lightning.__version__, "torch": torch.__version__.split("+")[0], "cases": []}
    for name, n, kw in CASES:
        rec = {"name": name, "batches": n,
               "settings": {k: ("null" if v is None else v) for k, v in kw.items()}}
        rec.update(run(n, kw))
        out["cases"].append(rec)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
