#!/usr/bin/env python3
"""Writes test/fixtures/torch/: small PyTorch checkpoints for core/formats/torch_zip.h's reader.

Run with the ESPnet venv's python (torch, lightning): /opt/espnet3-venv/bin/python scripts/make_torch_fixtures.py

  plain.pth     an OrderedDict state dict: float32 (one shared storage, a strided view, an offset view),
                float16, bfloat16, float64, int64 scalar, int32
  module.pth    nn.Module.state_dict() (Linear + BatchNorm1d: `_metadata` set by BUILD)
  lightning.ckpt  a real Lightning checkpoint (Trainer.save_checkpoint) of a module holding the
                Linear as `model`: state_dict with the `model.` prefix, optimizer states, loops
  expect.txt    per file and tensor: name, dtype (F32/I64), shape, values as float32 hex bits or ints
  evil_*.pth    hostile files: os.system in a GLOBAL, REDUCE of an allowed storage class,
                a view past its storage, a truncated zip, a huge declared storage
"""
import collections, io, os, struct, sys, zipfile

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'test', 'fixtures', 'torch')
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
lines = []


def record(fname, sd):
    for k, v in sd.items():
        v = v.detach().contiguous()
        if v.dtype in (torch.int64, torch.int32):
            vals = ' '.join(str(int(x)) for x in v.reshape(-1).tolist())
            dt = 'I64'
        else:
            f = v.to(torch.float32).reshape(-1)
            vals = ' '.join('%08x' % struct.unpack('<I', struct.pack('<f', x))[0] for x in f.tolist())
            dt = 'F32'
        shape = 'x'.join(str(s) for s in v.shape) or '-'
        lines.append('%s %s %s %s %s' % (fname, k, dt, shape, vals))


base = torch.randn(24)
sd = collections.OrderedDict()
sd['a.weight'] = base[:12].view(3, 4)             # shares base's storage
sd['a.t'] = base[:12].view(3, 4).t()              # strided (transposed) view of the same storage
sd['a.off'] = base[5:11:2]                        # offset and stride 2
sd['b.half'] = torch.randn(2, 3).half()
sd['b.bf16'] = torch.randn(5).bfloat16()
sd['b.f64'] = torch.randn(2, 2, dtype=torch.float64)
sd['c.num_batches_tracked'] = torch.tensor(7)
sd['c.i32'] = torch.tensor([1, -2, 3], dtype=torch.int32)
torch.save(sd, os.path.join(OUT, 'plain.pth'))
record('plain.pth', sd)

mod = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
torch.save(mod.state_dict(), os.path.join(OUT, 'module.pth'))
record('module.pth', mod.state_dict())

import lightning.pytorch as pl


class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = torch.nn.Linear(3, 2)

    def training_step(self, batch, i):
        return self.model(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(4, 3)), batch_size=2)
tr = pl.Trainer(max_steps=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, accelerator='cpu', default_root_dir='/tmp/pl_fixture')
lit = Tiny()
tr.fit(lit, data)
tr.save_checkpoint(os.path.join(OUT, 'lightning.ckpt'))
record('lightning.ckpt', lit.state_dict())


class Evil:
    def __reduce__(self):
        return (os.system, ('echo pwned',))


torch.save({'x': Evil()}, os.path.join(OUT, 'evil_global.pth'))


def patch(src, dst, fn):
    """Rewrites entries of a torch zip (stored) through fn(name, bytes) -> bytes."""
    zin = zipfile.ZipFile(src)
    with zipfile.ZipFile(dst, 'w', zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            zout.writestr(info, fn(info.filename, zin.read(info.filename)))


small = collections.OrderedDict(w=torch.arange(4, dtype=torch.float32))
torch.save(small, '/tmp/small.pth')
# REDUCE of torch.FloatStorage (an allowed class, but not a callable we run)
patch('/tmp/small.pth', os.path.join(OUT, 'evil_reduce.pth'),
      lambda n, b: b.replace(b'ctorch._utils\n_rebuild_tensor_v2\n', b'ctorch\nFloatStorage\n')
      if n.endswith('data.pkl') else b)
# a view past its storage: size 4 -> 9 (BININT1 4 in the size tuple)
patch('/tmp/small.pth', os.path.join(OUT, 'evil_past.pth'),
      lambda n, b: b.replace(b'K\x04\x85', b'K\x09\x85') if n.endswith('data.pkl') else b)
# a storage declared with 2^40 elements
patch('/tmp/small.pth', os.path.join(OUT, 'evil_huge.pth'),
      lambda n, b: b.replace(b'X\x03\x00\x00\x00cpuq\x07K\x04', b'X\x03\x00\x00\x00cpuq\x07\x8a\x06\x00\x00\x00\x00\x00\x01')
      if n.endswith('data.pkl') else b)
raw = open('/tmp/small.pth', 'rb').read()
open(os.path.join(OUT, 'evil_truncated.pth'), 'wb').write(raw[: len(raw) * 2 // 3])
torch.save(small, os.path.join(OUT, 'small.pth'))
record('small.pth', small)

for f in ('evil_reduce.pth', 'evil_past.pth', 'evil_huge.pth'):
    zz = zipfile.ZipFile(os.path.join(OUT, f))
    assert zz.read([n for n in zz.namelist() if n.endswith('data.pkl')][0]) != zipfile.ZipFile('/tmp/small.pth').read('small/data.pkl'), f
with open(os.path.join(OUT, 'expect.txt'), 'w') as fp:
    fp.write('\n'.join(lines) + '\n')
print('wrote', OUT)
