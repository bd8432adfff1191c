#!/usr/bin/env python3
"""Lightning's EarlyStopping decisions on recorded metric sequences, for
test/unit/train/test_early_stopping.c: each case's settings, the values fed one validation at a
time (float32, as Lightning's logged metrics are), and after each value Lightning's should_stop,
wait_count and best_score. Run with the ESPnet venv (scripts/install_espnet_venv.sh: lightning
2.6.6, torch 2.11.0):

    /opt/espnet3-venv/bin/python scripts/make_early_stopping_fixtures.py > test/fixtures/train/early_stopping.json
"""
import json
import math

import lightning
import torch
from lightning.pytorch.callbacks import EarlyStopping

NAN = float("nan")
INF = float("inf")
CASES = [
    ("min_patience_3", dict(mode="min", patience=3), [5.0, 4.0, 3.0, 3.1, 3.05, 3.2, 2.9, 2.95, 3.0, 3.1, 2.5]),
    ("max_patience_2_min_delta", dict(mode="max", patience=2, min_delta=0.1),
     [0.5, 0.55, 0.7, 0.75, 0.79, 0.95, 0.9, 0.96]),
    ("min_delta_half", dict(mode="min", patience=2, min_delta=0.5), [10.0, 9.6, 9.4, 9.0, 8.4, 8.3, 8.0]),
    ("stopping_threshold", dict(mode="min", patience=5, stopping_threshold=1.0), [3.0, 2.0, 1.5, 1.0, 0.5]),
    ("divergence_threshold", dict(mode="min", patience=5, divergence_threshold=10.0), [3.0, 2.0, 5.0, 10.5, 1.0]),
    ("non_finite_stops", dict(mode="min", patience=5), [3.0, 2.0, NAN, 1.0]),
    ("non_finite_counted", dict(mode="min", patience=2, check_finite=False), [3.0, NAN, INF, 1.0]),
    ("max_patience_0", dict(mode="max", patience=0), [1.0, 0.5, 2.0]),
    ("float32_rounding", dict(mode="min", patience=1, min_delta=1e-7), [1.0, 0.99999994, 0.9999999, 0.99999]),
]


def number(x):
    return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))


def main():
    out = {"lightning": lightning.__version__, "torch": torch.__version__.split("+")[0], "cases": []}
    for name, kw, values in CASES:
        cb = EarlyStopping(monitor="valid/loss", **kw)
        steps = []
        for v in values:
            stop, _ = cb._evaluate_stopping_criteria(torch.tensor(v, dtype=torch.float32))
            steps.append({"value": number(float(torch.tensor(v, dtype=torch.float32))), "stop": bool(stop),
                          "wait_count": cb.wait_count, "best": number(float(cb.best_score))})
        out["cases"].append({"name": name, "settings": {k: number(float(v)) if isinstance(v, float) else v
                                                        for k, v in kw.items()}, "steps": steps})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
