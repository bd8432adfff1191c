#!/usr/bin/env python3
"""Writes checkpoints as ESPnet2's trainer and Lightning really write them (issue 44: the readers take
the weights and step over the rest without running it), with the real torch, ESPnet2 and Lightning:

  test/fixtures/interop/conformer/espnet_model/exp/asr_train/checkpoint.pth
      ESPnet2 Trainer's resume file, as espnet2/train/trainer.py saves it: {"model": the state dict of
      valid.acc.ave.pth beside it, "reporter": a Reporter with train/valid stats (numpy scalars),
      "optimizers": [Adam after one step (its exp_avg tensors; over the CTC head to stay small)],
      "schedulers": [WarmupLR], "scaler": None}. Decoding with it must give valid.acc.ave.pth's
      hypotheses.
  test/fixtures/torch/lightning_hparams.ckpt
      Trainer.save_checkpoint of a LightningModule that saved an OmegaConf DictConfig as its
      hyper-parameters (as ESPnet3's does with its config), holding a Linear as `model`; its
      state_dict's values go to test/fixtures/torch/expect.txt (lines for this file replaced).

Run with the ESPnet venv (scripts/install_espnet_venv.sh):

    /opt/espnet3-venv/bin/python scripts/make_trainer_checkpoint_fixtures.py
"""
import os
import struct

import torch

from espnet2.schedulers.warmup_lr import WarmupLR
from espnet2.train.reporter import Reporter

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
EXP = os.path.join(ROOT, 'test', 'fixtures', 'interop', 'conformer', 'espnet_model', 'exp', 'asr_train')
TORCH = os.path.join(ROOT, 'test', 'fixtures', 'torch')


def espnet2_checkpoint():
    sd = torch.load(os.path.join(EXP, 'valid.acc.ave.pth'), map_location='cpu')
    params = [torch.nn.Parameter(sd[k].clone()) for k in ('ctc.ctc_lo.weight', 'ctc.ctc_lo.bias')]
    opt = torch.optim.Adam(params, lr=0.002)
    sched = WarmupLR(opt, warmup_steps=25000)
    sum(p.square().sum() for p in params).backward()
    opt.step()
    sched.step()
    reporter = Reporter()
    for epoch in (1, 2):
        reporter.set_epoch(epoch)
        for part, loss in (('train', 40.0 / epoch), ('valid', 38.0 / epoch)):
            with reporter.observe(part) as sub:  # two batches: their means are numpy scalars
                for b in range(2):
                    sub.register({'loss': torch.tensor(loss + b), 'acc': 0.5 + 0.1 * epoch})
                    sub.next()
    torch.save({'model': sd, 'reporter': reporter.state_dict(), 'optimizers': [opt.state_dict()],
                'schedulers': [sched.state_dict()], 'scaler': None}, os.path.join(EXP, 'checkpoint.pth'))


def lightning_hparams():
    import lightning.pytorch as pl
    from omegaconf import OmegaConf

    class Lit(pl.LightningModule):
        def __init__(self, config):
            super().__init__()
            self.save_hyperparameters(config)
            self.model = torch.nn.Linear(3, 2)

        def training_step(self, batch, i):
            return self.model(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    torch.manual_seed(1)
    cfg = OmegaConf.create({'exp_tag': 'asr', 'model': {'encoder': 'conformer', 'encoder_conf': {'num_blocks': 2}}})
    lit = Lit(cfg)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4, 3)), batch_size=2)
    tr = pl.Trainer(max_steps=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, accelerator='cpu', default_root_dir='/tmp/pl_hparams')
    tr.fit(lit, data)
    path = os.path.join(TORCH, 'lightning_hparams.ckpt')
    tr.save_checkpoint(path)
    raw = open(path, 'rb').read()
    assert b'omegaconf' in raw and b'DictConfig' in raw, 'the hyper-parameters are not a DictConfig'
    lines = []
    for k, v in lit.state_dict().items():
        f = v.detach().to(torch.float32).reshape(-1)
        vals = ' '.join('%08x' % struct.unpack('<I', struct.pack('<f', x))[0] for x in f.tolist())
        lines.append('lightning_hparams.ckpt %s F32 %s %s' % (k, 'x'.join(str(s) for s in v.shape), vals))
    expect = os.path.join(TORCH, 'expect.txt')
    kept = [l for l in open(expect).read().splitlines() if l and not l.startswith('lightning_hparams.ckpt ')]
    open(expect, 'w').write('\n'.join(kept + lines) + '\n')


espnet2_checkpoint()
lightning_hparams()
print('wrote', os.path.join(EXP, 'checkpoint.pth'), 'and', os.path.join(TORCH, 'lightning_hparams.ckpt'))
