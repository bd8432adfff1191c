#!/usr/bin/env python3
"""Writes test/fixtures/optim/schedulers.npz: the learning rates torch's chainable schedulers (and
ESPnet2's NoamLR) give an optimizer, step by step, for test/unit/train/test_optim.c (bit-identical
expected). Per case <c>:
  case<c>_kind   0 ConstantLR, 1 StepLR, 2 ExponentialLR, 3 LinearLR, 4 CosineAnnealingLR, 5 NoamLR
  case<c>_args   base lr and the class's arguments (see CASES)
  case<c>_lr     optimizer.param_groups[0]["lr"] before each of STEPS optimizer steps, the scheduler
                 stepped after each (as Lightning does with interval "step")
Run with the ESPnet venv's torch (scripts/install_espnet_venv.sh):
    /opt/espnet3-venv/bin/python scripts/make_scheduler_fixtures.py [OUTDIR]
"""
import os
import sys

import numpy as np
import torch
from torch.optim import lr_scheduler as S

STEPS = 300
# (kind, base lr, args): ConstantLR (factor, total_iters), StepLR (step_size, gamma),
# ExponentialLR (gamma), LinearLR (start_factor, end_factor, total_iters), CosineAnnealingLR (T_max, eta_min),
# espnet2.schedulers.noam_lr.NoamLR (model_size, warmup_steps)
CASES = [
    (0, 1e-3, (1 / 3, 5)), (0, 0.002, (0.5, 40)),
    (1, 0.01, (30, 0.1)), (1, 1e-3, (7, 0.5)),
    (2, 0.01, (0.99,)), (2, 2e-3, (0.9,)),
    (3, 1e-3, (1 / 3, 1.0, 5)), (3, 0.01, (0.1, 0.5, 100)), (3, 1e-3, (1.0, 0.0, 250)),
    (4, 1e-3, (50, 0.0)), (4, 0.01, (120, 1e-4)), (4, 2e-3, (300, 1e-5)),
    (5, 1.0, (320, 25000)), (5, 5.0, (256, 100)), (5, 0.002, (144.5, 37)),
]


def make(opt, kind, args):
    if kind == 0:
        return S.ConstantLR(opt, factor=args[0], total_iters=args[1])
    if kind == 1:
        return S.StepLR(opt, step_size=args[0], gamma=args[1])
    if kind == 2:
        return S.ExponentialLR(opt, gamma=args[0])
    if kind == 3:
        return S.LinearLR(opt, start_factor=args[0], end_factor=args[1], total_iters=args[2])
    if kind == 4:
        return S.CosineAnnealingLR(opt, T_max=args[0], eta_min=args[1])
    import warnings

    from espnet2.schedulers.noam_lr import NoamLR
    warnings.simplefilter("ignore")  # its deprecation notice
    return NoamLR(opt, model_size=args[0], warmup_steps=args[1])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', 'test', 'fixtures', 'optim')
    arrays = {}
    for c, (kind, lr, args) in enumerate(CASES):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=lr)
        sched = make(opt, kind, args)
        lrs = []
        for _ in range(STEPS):
            lrs.append(opt.param_groups[0]['lr'])
            opt.step()
            sched.step()
        arrays[f'case{c}_kind'] = np.array([kind], dtype=np.int64)
        arrays[f'case{c}_args'] = np.array([lr, *args], dtype=np.float64)
        arrays[f'case{c}_lr'] = np.array(lrs, dtype=np.float64)
    np.savez(os.path.join(out, 'schedulers.npz'), **arrays)
    print(f'wrote {len(CASES)} cases of {STEPS} steps (torch {torch.__version__})')


if __name__ == '__main__':
    main()
