#!/opt/espnet3-venv/bin/python
"""Writes the mixed-precision fixtures under test/fixtures/precision/ (checked by
test/unit/compute/test_precision.c), from torch (the venv's torch 2.11):

round.bin    float32 little-endian, three arrays of N values one after the other: the inputs (edge
             cases: zeros, the largest finite values, half's overflow threshold 65520 and its
             neighbours, subnormals of both formats, ties, inf, NaN; then random values over the
             whole exponent range), x.to(torch.bfloat16).float() and x.to(torch.float16).float().
scaler.txt   torch.amp.GradScaler("cpu") with its defaults driving a one-parameter SGD: per line
             `step found_inf scale_after_update unscaled_grad_bits` for 4500 steps with inf
             gradients injected at given steps (the grad is 3.0 * scale otherwise, so the
             unscaled value is 3.0 exactly unless the step was skipped).
"""
import os
import struct
import sys

import numpy as np
import torch

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "test", "fixtures",
                                                           "precision")
os.makedirs(out, exist_ok=True)

edge = [0.0, -0.0, 1.0, -1.0, 65504.0, 65519.996, 65520.0, 65520.004, -65520.0, 65536.0, 1e5,
        3.4028235e38, -3.4028235e38, 3.3895314e38, 3.3961775e38, 2.0**-14, 2.0**-15, 2.0**-24, 2.0**-25,
        2.0**-25 * 1.0000001, 2.0**-24 * 1.5, 2.0**-24 * 2.5, 2.0**-24 * 3.5, 1e-40, -1e-45, 1.1754944e-38,
        1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 1.0 + 2.0**-11 + 2.0**-20,
        float("inf"), float("-inf"), float("nan")]
rng = np.random.default_rng(7)
n_rand = 4000
mant = rng.uniform(1.0, 2.0, n_rand)
expo = rng.integers(-150, 128, n_rand)
sign = rng.choice([-1.0, 1.0], n_rand)
with np.errstate(over="ignore"):
    rand = (sign * np.ldexp(mant, expo)).astype(np.float32)
bits = rng.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32).view(np.float32)  # any bit pattern
x = np.concatenate([np.array(edge, dtype=np.float32), rand, bits]).astype(np.float32)
t = torch.from_numpy(x)
bf = t.to(torch.bfloat16).float().numpy()
hf = t.to(torch.float16).float().numpy()
with open(os.path.join(out, "round.bin"), "wb") as f:
    f.write(struct.pack("<I", len(x)))
    for a in (x, bf, hf):
        f.write(a.astype("<f4").tobytes())

inf_steps = {1, 2, 3, 10, 2011, 4300}
p = torch.nn.Parameter(torch.zeros(1))
opt = torch.optim.SGD([p], lr=0.0)
scaler = torch.amp.GradScaler("cpu")
with open(os.path.join(out, "scaler.txt"), "w") as f:
    for step in range(1, 4501):
        opt.zero_grad()
        scaler.scale(torch.zeros(1))  # the scale's lazy init, as scaler.scale(loss) does
        s = scaler.get_scale()
        p.grad = torch.tensor([float("inf") if step in inf_steps else 3.0 * s], dtype=torch.float32)
        scaler.unscale_(opt)
        found = int(sum(v.item() for v in scaler._found_inf_per_device(opt).values()) > 0)
        g = p.grad.clone()
        scaler.step(opt)
        scaler.update()
        gb = struct.unpack("<I", struct.pack("<f", g.item()))[0]
        f.write(f"{step} {found} {scaler.get_scale():.9g} {gb:08x}\n")
print("wrote", out)
