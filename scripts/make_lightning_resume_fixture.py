#!/usr/bin/env python3
"""Writes test/fixtures/train/lightning_resume.ckpt: a checkpoint that Lightning 2.6 wrote while
training an ESPnet2 model as ESPnet3 does (the model as `self.model` of a LightningModule, Adam and
ESPnet2's WarmupLR stepped per step, ESPnet3's last-checkpoint ModelCheckpoint: filename
"step{step}", save_last="link", save_on_train_epoch_end=True), for the tests of `fit.ckpt_path`
(test/unit/train/test_fit_ckpt_path.c): resuming from another trainer's checkpoint.

Run with the ESPnet venv (ESPnet 202511, torch 2.11, lightning 2.6.6):
    /opt/espnet3-venv/bin/python scripts/make_lightning_resume_fixture.py PACK OUT [sgd]
With `sgd` the optimizer is torch.optim.SGD (lr 0.002, momentum 0.9, nesterov; no scheduler):
test/fixtures/train/lightning_resume_sgd.ckpt, whose state is SGD's momentum_buffer.
PACK is the `espnet/` folder of an espnet3 model pack of the tiny recipe at d 16 (its config and
parameter names are ESPnet2's), made with D a scratch folder:
    C="./build/espnet3 -q data_dir=$D/data dataset_dir=$D/dl stats_dir=$D/stats exp_dir=$D/small
       dataloader.train.iter_factory.batches.batch_bins=80000
       model.encoder_conf.output_size=16 model.encoder_conf.linear_units=32
       model.encoder_conf.attention_heads=2 --config recipes/espeak_fortunes/conf/training_tiny.yaml"
    $C trainer.max_epochs=1 --stage 1 --stop_stage 5
    $C --inference_config recipes/espeak_fortunes/conf/inference_tiny.yaml --stages pack_model
    PACK=$D/small/model_pack/espnet
Lightning trains it for 2 epochs of 3 batches of random features and token ids (the values do not
matter: the test checks that espnet3 takes the weights, Adam's moments and step, the scheduler's
step and the epoch / step counters from the file), then the newest step checkpoint is copied to OUT.
"""
import glob
import os
import shutil
import sys
import tempfile

import lightning as L
import torch
from espnet2.schedulers.warmup_lr import WarmupLR
from espnet2.tasks.asr import ASRTask


class Lit(L.LightningModule):
    def __init__(self, model, sgd=False):
        super().__init__()
        self.model = model
        self.sgd = sgd

    def training_step(self, batch, _):
        loss, _, _ = self.model(**batch)
        return loss

    def configure_optimizers(self):
        if self.sgd:
            return torch.optim.SGD(self.parameters(), lr=0.002, momentum=0.9, nesterov=True)
        opt = torch.optim.Adam(self.parameters(), lr=0.002, weight_decay=1e-6)
        sched = WarmupLR(opt, warmup_steps=10)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def batches(vocab, n=3, b=2, frames=40, feats=80, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        speech = torch.randn(b, frames * 160, generator=g)
        text = torch.randint(2, vocab - 1, (b, 5), generator=g)
        out.append({"speech": speech, "speech_lengths": torch.full((b,), frames * 160),
                    "text": text, "text_lengths": torch.full((b,), 5)})
    return out


def main():
    pack, out = sys.argv[1], sys.argv[2]
    cwd = os.getcwd()
    os.chdir(pack)  # the pack's config names its files relative to it
    model, args = ASRTask.build_model_from_file("exp/asr_train/config.yaml",
                                                glob.glob("exp/asr_train/*.pth")[0], "cpu")
    os.chdir(cwd)
    torch.manual_seed(0)
    lit = Lit(model, sgd=len(sys.argv) > 3 and sys.argv[3] == "sgd")
    with tempfile.TemporaryDirectory() as d:
        ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=d, save_last="link", filename="step{step}",
                                                   auto_insert_metric_name=False, save_on_train_epoch_end=True,
                                                   save_weights_only=False)
        trainer = L.Trainer(max_epochs=2, callbacks=[ckpt], logger=False, enable_progress_bar=False,
                            enable_model_summary=False, accelerator="cpu", devices=1,
                            num_sanity_val_steps=0, limit_val_batches=0)
        data = batches(len(args.token_list))
        trainer.fit(lit, train_dataloaders=torch.utils.data.DataLoader(data, batch_size=None))
        shutil.copyfile(os.path.realpath(os.path.join(d, "last.ckpt")), out)
    print("wrote", out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
