#!/usr/bin/env python3
"""Writes test/fixtures/optim/more_schedulers.npz: the learning rates (and OneCycleLR's Adam beta1)
that torch 2.11's MultiStepLR, PolynomialLR, CosineAnnealingWarmRestarts, OneCycleLR and
ReduceLROnPlateau and ESPnet2's (espnet 202511) WarmupStepLR, PiecewiseLinearWarmupLR,
CosineAnnealingWarmupRestarts, ExponentialDecayWarmup, TristageLR and WarmupReduceLROnPlateau give
an optimizer, for test/unit/train/test_schedulers.c (bit-identical expected). Per case <c>:

  case<c>_kind    the class, KINDS below
  case<c>_args    the optimizer's lr, then the class's arguments in ARGS' order (lists: their
                  length, then their values)
  case<c>_lr      param_groups[0]["lr"] before each optimizer step
  case<c>_beta1   OneCycleLR: param_groups[0]["betas"][0] (Adam) before each step
  case<c>_metric  the plateau schedulers: the validation value fed after each epoch (float32 for
                  torch's ReduceLROnPlateau, as Lightning logs it; a Python float for ESPnet2's
                  WarmupReduceLROnPlateau, as ESPnet2's reporter gives it)

Step schedulers are stepped after each optimizer step (Lightning's interval "step"), STEPS steps.
ReduceLROnPlateau is stepped once per epoch with the epoch's value (Lightning's interval "epoch"
with a monitor): case<c>_lr holds the lr of each of EPOCHS epochs. WarmupReduceLROnPlateau is
stepped as ESPnet2's trainer steps it: step() after each optimizer step, step(value) after each
epoch of args' steps_per_epoch steps.

adam_*: torch.optim.Adam (foreach off) with OneCycleLR cycling beta1 over ADAM_STEPS steps of given
gradients on 48 float32 parameters: adam_params0, adam_grads, adam_params (after each step).

Run with the ESPnet venv (scripts/install_espnet_venv.sh: torch 2.11, espnet 202511):
    /opt/espnet3-venv/bin/python scripts/make_more_scheduler_fixtures.py [OUTDIR]
"""
import os
import sys
import warnings

import numpy as np
import torch
from torch.optim import lr_scheduler as S

from espnet2.schedulers.cosine_anneal_warmup_restart import CosineAnnealingWarmupRestarts
from espnet2.schedulers.exponential_decay_warmup import ExponentialDecayWarmup
from espnet2.schedulers.piecewise_linear_warmup_lr import PiecewiseLinearWarmupLR
from espnet2.schedulers.tristage_lr import TristageLR
from espnet2.schedulers.warmup_reducelronplateau import WarmupReduceLROnPlateau
from espnet2.schedulers.warmup_step_lr import WarmupStepLR

STEPS = 300
EPOCHS = 120
KINDS = ["MultiStepLR", "PolynomialLR", "CosineAnnealingWarmRestarts", "OneCycleLR", "WarmupStepLR",
         "PiecewiseLinearWarmupLR", "CosineAnnealingWarmupRestarts", "ExponentialDecayWarmup", "TristageLR",
         "ReduceLROnPlateau", "WarmupReduceLROnPlateau"]
ARGS = {
    "MultiStepLR": "milestones(list) gamma",
    "PolynomialLR": "total_iters power",
    "CosineAnnealingWarmRestarts": "T_0 T_mult eta_min",
    "OneCycleLR": "max_lr total_steps(0: epochs x steps_per_epoch) epochs steps_per_epoch pct_start "
                  "anneal_strategy(0 cos, 1 linear) div_factor final_div_factor three_phase cycle_momentum "
                  "base_momentum max_momentum",
    "WarmupStepLR": "warmup_steps steps_per_epoch step_size gamma",
    "PiecewiseLinearWarmupLR": "warmup_steps_list(list) warmup_lr_list(list)",
    "CosineAnnealingWarmupRestarts": "first_cycle_steps cycle_mult max_lr min_lr warmup_steps gamma",
    "ExponentialDecayWarmup": "max_lr min_lr total_steps warmup_steps warm_from_zero",
    "TristageLR": "max_steps warmup_ratio hold_ratio decay_ratio init_lr_scale final_lr_scale",
    "ReduceLROnPlateau": "mode(0 min, 1 max) factor patience threshold threshold_mode(0 rel, 1 abs) cooldown "
                         "min_lr eps",
    "WarmupReduceLROnPlateau": "warmup_steps mode factor patience threshold threshold_mode cooldown min_lr eps "
                               "steps_per_epoch",
}
# (kind, optimizer lr, args as ARGS lists them; lists as Python lists)
CASES = [
    ("MultiStepLR", 0.01, [[30, 80, 80, 200], 0.1]),
    ("MultiStepLR", 2e-3, [[0, 1, 7, 150], 0.5]),
    ("PolynomialLR", 0.01, [5, 1.0]),
    ("PolynomialLR", 1e-3, [250, 2.0]),
    ("PolynomialLR", 2e-3, [120, 0.5]),
    ("CosineAnnealingWarmRestarts", 1e-3, [50, 1, 0.0]),
    ("CosineAnnealingWarmRestarts", 0.01, [10, 2, 1e-4]),
    ("CosineAnnealingWarmRestarts", 2e-3, [7, 3, 1e-5]),
    ("OneCycleLR", 1e-3, [0.01, 300, 0, 0, 0.3, 0, 25.0, 1e4, 0, 1, 0.85, 0.95]),
    ("OneCycleLR", 1e-3, [2e-3, 0, 50, 7, 0.25, 1, 10.0, 100.0, 0, 1, 0.8, 0.9]),
    ("OneCycleLR", 1e-3, [0.1, 400, 0, 0, 0.3, 0, 25.0, 1e4, 1, 1, 0.85, 0.95]),
    ("OneCycleLR", 1e-3, [5e-3, 500, 0, 0, 0.45, 1, 5.0, 1e3, 1, 0, 0.85, 0.95]),
    ("WarmupStepLR", 2e-3, [25, 40, 1, 0.1]),
    ("WarmupStepLR", 1e-3, [100, 30, 2, 0.5]),
    ("PiecewiseLinearWarmupLR", 1e-3, [[0, 25000], [0.0, 0.001]]),
    ("PiecewiseLinearWarmupLR", 2e-3, [[0, 30, 30, 100, 180.5], [0.0, 1e-3, 5e-4, 2e-3, 1.5e-3]]),
    ("PiecewiseLinearWarmupLR", 1e-3, [[10, 60], [1e-4, 1e-3]]),
    ("CosineAnnealingWarmupRestarts", 1e-3, [60, 1.0, 0.01, 1e-4, 10, 1.0]),
    ("CosineAnnealingWarmupRestarts", 1e-3, [40, 1.5, 0.02, 1e-5, 5, 0.8]),
    ("CosineAnnealingWarmupRestarts", 1e-3, [25, 2.0, 0.1, 0.001, 0, 0.5]),
    ("ExponentialDecayWarmup", 1e-3, [0.01, 1e-5, 250, 30, 1]),
    ("ExponentialDecayWarmup", 5e-4, [2e-3, 1e-4, 200, 20, 0]),
    ("ExponentialDecayWarmup", 1e-3, [1e-3, 1e-6, 100, 0, 0]),
    ("TristageLR", 1e-3, [250, 0.1, 0.4, 0.5, 0.01, 0.01]),
    ("TristageLR", 2e-3, [333.7, 0.15, 0.35, 0.5, 0.05, 0.2]),
    ("TristageLR", 1e-3, [200, 0.2, 0.8, 0.0, 0.1, 0.5]),
    ("ReduceLROnPlateau", 0.01, [0, 0.1, 10, 1e-4, 0, 0, 0.0, 1e-8]),
    ("ReduceLROnPlateau", 0.01, [0, 0.5, 3, 1e-2, 0, 2, 1e-4, 1e-8]),
    ("ReduceLROnPlateau", 0.002, [1, 0.3, 2, 0.01, 1, 1, 1e-5, 1e-6]),
    ("ReduceLROnPlateau", 1e-3, [0, 0.7, 0, 0.05, 1, 0, 2e-4, 1e-5]),
    ("WarmupReduceLROnPlateau", 2e-3, [25, 0, 0.5, 2, 1e-3, 0, 0, 1e-5, 1e-8, 7]),
    ("WarmupReduceLROnPlateau", 1e-3, [10, 1, 0.2, 1, 0.01, 1, 1, 0, 1e-8, 5]),
]
ADAM_STEPS = 120


def flat_args(args):
    out = []
    for a in args:
        if isinstance(a, list):
            out.append(len(a))
            out.extend(a)
        else:
            out.append(a)
    return out


def make(kind, opt, a):
    if kind == "MultiStepLR":
        return S.MultiStepLR(opt, milestones=a[0], gamma=a[1])
    if kind == "PolynomialLR":
        return S.PolynomialLR(opt, total_iters=a[0], power=a[1])
    if kind == "CosineAnnealingWarmRestarts":
        return S.CosineAnnealingWarmRestarts(opt, T_0=a[0], T_mult=a[1], eta_min=a[2])
    if kind == "OneCycleLR":
        kw = dict(total_steps=a[1]) if a[1] else dict(epochs=a[2], steps_per_epoch=a[3])
        return S.OneCycleLR(opt, max_lr=a[0], pct_start=a[4], anneal_strategy=["cos", "linear"][a[5]],
                            div_factor=a[6], final_div_factor=a[7], three_phase=bool(a[8]),
                            cycle_momentum=bool(a[9]), base_momentum=a[10], max_momentum=a[11], **kw)
    if kind == "WarmupStepLR":
        return WarmupStepLR(opt, warmup_steps=a[0], steps_per_epoch=a[1], step_size=a[2], gamma=a[3])
    if kind == "PiecewiseLinearWarmupLR":
        return PiecewiseLinearWarmupLR(opt, warmup_steps_list=a[0], warmup_lr_list=a[1])
    if kind == "CosineAnnealingWarmupRestarts":
        return CosineAnnealingWarmupRestarts(opt, first_cycle_steps=a[0], cycle_mult=a[1], max_lr=a[2], min_lr=a[3],
                                             warmup_steps=a[4], gamma=a[5])
    if kind == "ExponentialDecayWarmup":
        return ExponentialDecayWarmup(opt, max_lr=a[0], min_lr=a[1], total_steps=a[2], warmup_steps=a[3],
                                      warm_from_zero=bool(a[4]))
    if kind == "TristageLR":
        return TristageLR(opt, max_steps=a[0], warmup_ratio=a[1], hold_ratio=a[2], decay_ratio=a[3],
                          init_lr_scale=a[4], final_lr_scale=a[5])
    if kind == "ReduceLROnPlateau":
        return S.ReduceLROnPlateau(opt, mode=["min", "max"][a[0]], factor=a[1], patience=a[2], threshold=a[3],
                                   threshold_mode=["rel", "abs"][a[4]], cooldown=a[5], min_lr=a[6], eps=a[7])
    modes = dict(mode=["min", "max"][a[1]], factor=a[2], patience=a[3], threshold=a[4],
                 threshold_mode=["rel", "abs"][a[5]], cooldown=a[6], min_lr=a[7], eps=a[8])
    return WarmupReduceLROnPlateau(opt, warmup_steps=a[0], **modes)


def metric_sequence(rng, n, mode):
    """A validation curve that improves, stalls, wobbles and improves again (float64)."""
    t = np.arange(n, dtype=np.float64)
    base = 2.0 / (1.0 + 0.08 * t) + 0.3
    base[n // 3: n // 2] = base[n // 3]  # a long plateau: patience runs out
    base[n // 2:] -= 0.05
    wobble = rng.uniform(-1, 1, n) * 0.02 * (rng.uniform(0, 1, n) < 0.5)
    v = base + wobble
    return -v + 3.0 if mode == 1 else v


def run_case(c, kind, lr, args, rng, arrays):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=lr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sched = make(kind, opt, args)
        lrs, beta1, metric = [], [], []
        if kind == "ReduceLROnPlateau":
            values = metric_sequence(rng, EPOCHS, args[0]).astype(np.float32)
            for e in range(EPOCHS):
                lrs.append(float(opt.param_groups[0]["lr"]))
                opt.step()
                v = torch.tensor(values[e], dtype=torch.float32)  # Lightning's logged value
                sched.step(v)
                metric.append(values[e])
            arrays[f"case{c}_metric"] = np.array(metric, dtype=np.float32)
        elif kind == "WarmupReduceLROnPlateau":
            spe = args[-1]
            epochs = STEPS // spe
            values = metric_sequence(rng, epochs, args[1])
            for e in range(epochs):
                for _ in range(spe):
                    lrs.append(float(opt.param_groups[0]["lr"]))
                    opt.step()
                    sched.step()
                sched.step(float(values[e]))
            arrays[f"case{c}_metric"] = np.array(values, dtype=np.float64)
        else:
            for _ in range(STEPS):
                lrs.append(float(opt.param_groups[0]["lr"]))
                beta1.append(float(opt.param_groups[0]["betas"][0]))
                opt.step()
                sched.step()
            if kind == "OneCycleLR":
                arrays[f"case{c}_beta1"] = np.array(beta1, dtype=np.float64)
    arrays[f"case{c}_kind"] = np.array([KINDS.index(kind)], dtype=np.int64)
    arrays[f"case{c}_args"] = np.array([lr, *flat_args(args)], dtype=np.float64)
    arrays[f"case{c}_lr"] = np.array(lrs, dtype=np.float64)


def adam_one_cycle(rng, arrays):
    n = 48
    p0 = rng.standard_normal(n).astype(np.float32)
    grads = (rng.standard_normal((ADAM_STEPS, n)) * np.linspace(0.1, 3, ADAM_STEPS)[:, None]).astype(np.float32)
    p = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = torch.optim.Adam([p], lr=1e-3, betas=(0.9, 0.98), eps=1e-8, weight_decay=1e-4, foreach=False)
    sched = S.OneCycleLR(opt, max_lr=0.05, total_steps=ADAM_STEPS, pct_start=0.3, base_momentum=0.8,
                         max_momentum=0.95)
    traj = []
    for k in range(ADAM_STEPS):
        p.grad = torch.from_numpy(grads[k].copy())
        opt.step()
        sched.step()
        traj.append(p.detach().numpy().copy())
    arrays["adam_params0"] = p0
    arrays["adam_grads"] = grads
    arrays["adam_params"] = np.stack(traj)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "fixtures",
                                                             "optim")
    rng = np.random.RandomState(20251)
    arrays = {}
    for c, (kind, lr, args) in enumerate(CASES):
        run_case(c, kind, lr, args, rng, arrays)
    adam_one_cycle(rng, arrays)
    np.savez(os.path.join(out, "more_schedulers.npz"), **arrays)
    print(f"wrote {len(CASES)} cases (torch {torch.__version__})")


if __name__ == "__main__":
    main()
