#!/usr/bin/python3
"""Writes the optimizer fixtures under test/fixtures/optim/ (checked by test/unit/train/test_optim.c).

adam.npz     torch.optim.Adam / AdamW (torch 1.13, foreach off, float32) on 300 parameters in three
             tensors for 20 steps of given gradients. Per case <c>: opts (kind 0 Adam / 1 AdamW, lr,
             beta1, beta2, eps, weight_decay, amsgrad, warmup_steps, maximize; warmup_steps > 0 drives
             lr with ESPnet2's WarmupLR), params (21 x n: before and after each step), the final exp_avg,
             exp_avg_sq, max_exp_avg_sq and the lr used at each step. Shared: params0, grads (20 x n).
warmup.npz   ESPnet2's WarmupLR (source copied below; espnet is not installed) on a torch optimizer:
             the lr of the first 30 optimizer steps for several (base lr, warmup_steps).
clip.npz     torch.nn.utils.clip_grad_norm_ on three gradient tensors: per case the input grads, the
             max_norm, the returned total norm and the clipped grads.

The test expects Adam/AdamW results bit-identical to these, which holds for torch's AVX2 kernels
(torch.backends.cpu.get_cpu_capability() / torch.__config__.show(): "CPU capability usage: AVX2").
Run with Debian's python3 (python3-torch 1.13, python3-numpy):
    /usr/bin/python3 scripts/make_optim_fixtures.py [outdir]
"""
import os
import sys

import numpy as np
import torch
from torch.optim.lr_scheduler import _LRScheduler

SHAPES = [(10, 20), (20,), (80,)]  # 300 parameters, flattened in this order
STEPS = 20


class WarmupLR(_LRScheduler):
    """espnet2/schedulers/warmup_lr.py (ESPnet 202x), verbatim formula."""

    def __init__(self, optimizer, warmup_steps=25000, last_epoch=-1):
        self.warmup_steps = warmup_steps
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        step_num = self.last_epoch + 1
        return [
            lr * self.warmup_steps**0.5 * min(step_num**-0.5, step_num * self.warmup_steps**-1.5)
            for lr in self.base_lrs
        ]


# kind, lr, beta1, beta2, eps, weight_decay, amsgrad, warmup_steps, maximize
ADAM_CASES = [
    (0, 1e-3, 0.9, 0.999, 1e-8, 0.0, 0, 0, 0),
    (0, 2e-3, 0.9, 0.999, 1e-8, 1e-2, 0, 0, 0),
    (0, 1e-2, 0.9, 0.98, 1e-6, 0.0, 1, 0, 0),
    (0, 5e-3, 0.8, 0.99, 1e-8, 0.1, 1, 0, 0),
    (1, 1e-3, 0.9, 0.999, 1e-8, 0.01, 0, 0, 0),
    (1, 1e-2, 0.9, 0.999, 1e-8, 0.0, 0, 0, 0),
    (1, 3e-3, 0.85, 0.995, 1e-7, 0.05, 1, 0, 0),
    (0, 2e-3, 0.9, 0.999, 1e-8, 1e-6, 0, 5, 0),  # the template config: Adam + WarmupLR
    (0, 2e-3, 0.9, 0.999, 1e-8, 1e-2, 1, 0, 1),  # maximize: the gradient negated before the L2 term
    (1, 3e-3, 0.9, 0.98, 1e-8, 0.05, 0, 0, 1),
]


def flat(tensors):
    return torch.cat([t.detach().reshape(-1) for t in tensors]).numpy().astype(np.float32)


def unflat(v):
    out, o = [], 0
    for s in SHAPES:
        k = int(np.prod(s))
        out.append(torch.from_numpy(v[o:o + k].reshape(s).copy()))
        o += k
    return out


def make_grads(rng, n):
    g = np.empty((STEPS, n), np.float32)
    for s in range(STEPS):
        scale = 10.0 ** rng.uniform(-4, 1)
        x = rng.standard_normal(n) * scale
        x[rng.random(n) < 0.05] = 0.0               # some parameters get no gradient
        x[rng.random(n) < 0.02] *= 1e-6             # and some tiny ones
        g[s] = x.astype(np.float32)
    return g


def run_adam(case, p0, grads):
    kind, lr, b1, b2, eps, wd, ams, warm, maximize = case
    params = [torch.nn.Parameter(t.clone()) for t in unflat(p0)]
    cls = torch.optim.AdamW if kind == 1 else torch.optim.Adam
    opt = cls(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, amsgrad=bool(ams), foreach=False,
              maximize=bool(maximize))
    sched = WarmupLR(opt, warmup_steps=warm) if warm > 0 else None
    traj, lrs = [flat(params)], []
    for s in range(STEPS):
        for p, g in zip(params, unflat(grads[s])):
            p.grad = g.clone()
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if sched is not None:
            sched.step()
        traj.append(flat(params))
    st = [opt.state[p] for p in params]
    zeros = np.zeros_like(p0)
    return {
        "opts": np.array(case, np.float64),
        "params": np.stack(traj),
        "exp_avg": flat([x["exp_avg"] for x in st]),
        "exp_avg_sq": flat([x["exp_avg_sq"] for x in st]),
        "max_exp_avg_sq": flat([x["max_exp_avg_sq"] for x in st]) if ams else zeros,
        "step": np.array([float(st[0]["step"])], np.float64),
        "lr": np.array(lrs, np.float64),
    }


def warmup_table():
    out = {}
    cases = [(0.002, 15000), (1.0, 10), (0.5, 1), (1e-3, 25000), (4.0, 7)]
    for i, (lr, warm) in enumerate(cases):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)
        sched = WarmupLR(opt, warmup_steps=warm)
        lrs = []
        for _ in range(30):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        out[f"case{i}_opts"] = np.array([lr, warm], np.float64)
        out[f"case{i}_lr"] = np.array(lrs, np.float64)
    return out


def clip_table(rng):
    out = {}
    n = sum(int(np.prod(s)) for s in SHAPES)
    cases = [(1.0, 1.0), (5.0, 100.0), (0.5, 0.01), (1e6, 3.0), (2.0, 1e-3)]  # (max_norm, grad scale)
    for i, (max_norm, scale) in enumerate(cases):
        g = (rng.standard_normal(n) * scale).astype(np.float32)
        params = [torch.nn.Parameter(torch.zeros(s)) for s in SHAPES]
        for p, x in zip(params, unflat(g)):
            p.grad = x.clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm)
        out[f"case{i}_max_norm"] = np.array([max_norm], np.float64)
        out[f"case{i}_grads"] = g
        out[f"case{i}_total_norm"] = np.array([total.item()], np.float64)
        out[f"case{i}_clipped"] = flat([p.grad for p in params])
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test",
                                                             "fixtures", "optim")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    assert "CPU capability usage: AVX2" in torch.__config__.show(), "regenerate on an AVX2 torch build"

    rng = np.random.default_rng(20240607)
    n = sum(int(np.prod(s)) for s in SHAPES)
    p0 = (rng.standard_normal(n) * 0.5).astype(np.float32)
    grads = make_grads(rng, n)

    adam = {"params0": p0, "grads": grads, "shapes": np.array([int(np.prod(s)) for s in SHAPES], np.int64)}
    for i, case in enumerate(ADAM_CASES):
        for k, v in run_adam(case, p0, grads).items():
            adam[f"case{i}_{k}"] = v
    np.savez(os.path.join(out, "adam.npz"), **adam)
    np.savez(os.path.join(out, "warmup.npz"), **warmup_table())
    np.savez(os.path.join(out, "clip.npz"), **clip_table(rng))
    print(f"wrote {out}: {len(ADAM_CASES)} optimizer cases x {STEPS} steps over {n} parameters")


if __name__ == "__main__":
    main()
