#!/opt/espnet3-venv/bin/python
"""Writes test/fixtures/optim/sgd_adadelta.npz: torch.optim.SGD and torch.optim.Adadelta (torch 2.11,
foreach=False: the single-tensor update, float32 on the CPU) on three parameter tensors for 300
steps of given gradients (checked by test/unit/train/test_optim_sgd_adadelta.c).

Adadelta takes two square roots per element. PyPI's torch takes a float32 sqrt on the CPU from
MKL's vector math (VML, high-accuracy mode), which is not IEEE's correctly rounded sqrt: about one
value in six comes out one ulp away (up to 0.6 ulp of error), by an algorithm no other backend
(CUDA's sqrtf, glibc, a build without MKL such as Debian's torch) reproduces. So Adadelta's
fixtures run torch 2.11's own _single_tensor_adadelta with Tensor.sqrt_ made the correctly rounded
sqrt (numpy's) and nothing else changed: the update espnet3 computes on every backend. The same
cases under Debian's torch 1.13 (built without MKL; the same five tensor ops) give these bits
unpatched. The script prints how far MKL's sqrt moves the result.

Shared:      shapes (elements per tensor, flattened in this order), params0 (n), grads (STEPS x n),
             checkpoints (the steps after which parameters are kept).
sgd<i>_*     opts [lr, momentum, dampening, weight_decay, nesterov, maximize], lr (STEPS: the lr of
             each step, which a scheduler would set), params (len(checkpoints) x n), momentum_buffer
             (n, the final state; zeros when momentum is 0, where torch keeps none).
adadelta<i>_* opts [lr, rho, eps, weight_decay, maximize], lr, params, square_avg, acc_delta, step.

Before writing, the script checks what test/unit/train and core/config rely on:
  - foreach=True and foreach=None give the same bits as foreach=False for every case (torch runs its
    _foreach ops per tensor on the CPU), so espnet3 accepts any value of optimizer.foreach;
  - fused=True gives other bits for SGD with momentum (torch's fused CPU kernel), so it is refused;
  - differentiable=True fails on a model's parameters (an in-place update of a leaf that requires
    grad), so it is refused.
Bit-identity with these fixtures holds for torch's AVX2 CPU kernels (asserted below). Run:
    /opt/espnet3-venv/bin/python scripts/make_sgd_adadelta_fixtures.py [outdir]
"""
import os
import sys

import numpy as np
import torch

SHAPES = [(5, 7), (16,), (9,)]  # 60 parameters; 35 and 9 leave tails past the 8-wide AVX2 vectors
STEPS = 300
CHECKPOINTS = [1, 2, 3, 150, 300]

# lr, momentum, dampening, weight_decay, nesterov, maximize, lr ramp (a warmup-like lr per step)
SGD_CASES = [
    (0.01, 0.0, 0.0, 0.0, 0, 0, 0),     # plain SGD: no momentum buffer
    (0.01, 0.0, 0.0, 1e-2, 0, 1, 0),    # momentum 0 with weight decay, maximize
    (0.05, 0.9, 0.0, 0.0, 0, 0, 0),     # heavy ball
    (0.01, 0.9, 0.1, 1e-3, 0, 0, 1),    # dampening, weight decay, an lr that changes every step
    (0.01, 0.9, 0.0, 1e-4, 1, 0, 0),    # nesterov
    (0.003, 0.5, 0.0, 1e-2, 1, 1, 0),   # nesterov + maximize
    (1e-3, 0.99, 0.5, 0.0, 0, 1, 0),    # torch's default lr, strong dampening, maximize
]

# lr, rho, eps, weight_decay, maximize, lr ramp
ADADELTA_CASES = [
    (1.0, 0.9, 1e-6, 0.0, 0, 0),        # torch's defaults
    (0.5, 0.95, 1e-6, 1e-2, 0, 1),      # weight decay, a changing lr
    (1.0, 0.9, 1e-8, 1e-3, 1, 0),       # maximize
    (2.0, 0.0, 1e-6, 0.0, 0, 0),        # rho 0: only the newest gradient
    (0.1, 0.99, 1e-4, 0.1, 1, 0),
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
        x = rng.standard_normal(n) * 10.0 ** rng.uniform(-4, 1)
        x[rng.random(n) < 0.05] = 0.0       # some parameters get no gradient
        x[rng.random(n) < 0.02] *= 1e-6     # and some tiny ones
        g[s] = x.astype(np.float32)
    return g


def lr_schedule(lr, ramp):
    steps = np.arange(1, STEPS + 1, dtype=np.float64)
    return lr * np.minimum(1.0, steps / 40.0) if ramp else np.full(STEPS, lr)


def run(cls, kwargs, lrs, p0, grads, params_as_leaves=True):
    params = [torch.nn.Parameter(t.clone()) if params_as_leaves else t.clone() for t in unflat(p0)]
    opt = cls(params, **kwargs)
    kept = []
    for s in range(STEPS):
        for p, g in zip(params, unflat(grads[s])):
            p.grad = g.clone()
        opt.param_groups[0]["lr"] = float(lrs[s])
        opt.step()
        if s + 1 in CHECKPOINTS:
            kept.append(flat(params))
    return np.stack(kept), [opt.state[p] for p in params]


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


def sgd_kwargs(case):
    lr, mom, damp, wd, nesterov, maximize, _ = case
    return dict(lr=lr, momentum=mom, dampening=damp, weight_decay=wd, nesterov=bool(nesterov), maximize=bool(maximize))


def adadelta_kwargs(case):
    lr, rho, eps, wd, maximize, _ = case
    return dict(lr=lr, rho=rho, eps=eps, weight_decay=wd, maximize=bool(maximize))


class ieee_sqrt:
    """While active, Tensor.sqrt_ is the correctly rounded float32 sqrt (numpy's) instead of MKL's."""

    def __enter__(self):
        torch.Tensor.sqrt_ = lambda t: t.copy_(torch.from_numpy(np.sqrt(t.detach().numpy())))

    def __exit__(self, *exc):
        del torch.Tensor.sqrt_


def check_torch_options(p0, grads):
    """The facts core/config/config_values.c's optimizer rules stand on."""
    fused_differs = False
    for cls, cases, kw, ramp in [(torch.optim.SGD, SGD_CASES, sgd_kwargs, 6),
                                 (torch.optim.Adadelta, ADADELTA_CASES, adadelta_kwargs, 5)]:
        for case in cases:
            lrs = lr_schedule(case[0], case[ramp])
            ref, _ = run(cls, dict(kw(case), foreach=False), lrs, p0, grads)
            for foreach in (True, None):
                got, _ = run(cls, dict(kw(case), foreach=foreach), lrs, p0, grads)
                assert same_bits(ref, got), f"{cls.__name__} {case}: foreach={foreach} changed the bits"
            if cls is torch.optim.SGD:
                got, _ = run(cls, dict(kw(case), fused=True), lrs, p0, grads)
                fused_differs |= not same_bits(ref, got)
            try:
                run(cls, dict(kw(case), differentiable=True), lrs, p0, grads)
                raise AssertionError(f"{cls.__name__}: differentiable=True stepped a model's parameters")
            except RuntimeError as e:
                assert "leaf Variable that requires grad" in str(e), e
    assert fused_differs, "SGD fused=True gave the single-tensor bits in every case"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test",
                                                             "fixtures", "optim")
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    assert torch.__version__.startswith("2.11"), torch.__version__
    assert "CPU capability usage: AVX2" in torch.__config__.show(), "regenerate on an AVX2 torch build"

    rng = np.random.default_rng(20260611)
    n = sum(int(np.prod(s)) for s in SHAPES)
    p0 = (rng.standard_normal(n) * 0.5).astype(np.float32)
    grads = make_grads(rng, n)
    check_torch_options(p0, grads)

    fx = {"shapes": np.array([int(np.prod(s)) for s in SHAPES], np.int64), "params0": p0, "grads": grads,
          "checkpoints": np.array(CHECKPOINTS, np.int64)}
    for i, case in enumerate(SGD_CASES):
        lrs = lr_schedule(case[0], case[6])
        params, state = run(torch.optim.SGD, dict(sgd_kwargs(case), foreach=False), lrs, p0, grads)
        fx[f"sgd{i}_opts"] = np.array(case[:6], np.float64)
        fx[f"sgd{i}_lr"] = lrs
        fx[f"sgd{i}_params"] = params
        fx[f"sgd{i}_momentum_buffer"] = (flat([s["momentum_buffer"] for s in state]) if case[1] != 0
                                         else np.zeros(n, np.float32))
    worst_mkl = 0.0
    for i, case in enumerate(ADADELTA_CASES):
        lrs = lr_schedule(case[0], case[5])
        kwargs = dict(adadelta_kwargs(case), foreach=False)
        with ieee_sqrt():
            params, state = run(torch.optim.Adadelta, kwargs, lrs, p0, grads)
        with_mkl, _ = run(torch.optim.Adadelta, kwargs, lrs, p0, grads)
        assert not same_bits(params, with_mkl), "Tensor.sqrt_ was not replaced"
        worst_mkl = max(worst_mkl, float(np.max(np.abs(with_mkl - params) / np.maximum(np.abs(params), 1e-3))))
        fx[f"adadelta{i}_opts"] = np.array(case[:5], np.float64)
        fx[f"adadelta{i}_lr"] = lrs
        fx[f"adadelta{i}_params"] = params
        fx[f"adadelta{i}_square_avg"] = flat([s["square_avg"] for s in state])
        fx[f"adadelta{i}_acc_delta"] = flat([s["acc_delta"] for s in state])
        fx[f"adadelta{i}_step"] = np.array([float(state[0]["step"])], np.float64)
    np.savez(os.path.join(out, "sgd_adadelta.npz"), **fx)
    print(f"wrote {out}/sgd_adadelta.npz: {len(SGD_CASES)} SGD and {len(ADADELTA_CASES)} Adadelta cases x "
          f"{STEPS} steps over {n} parameters; foreach True/None = False bit for bit; Adadelta with MKL's sqrt "
          f"instead of IEEE's: parameters up to {worst_mkl:.3g} apart (relative)")


if __name__ == "__main__":
    main()
