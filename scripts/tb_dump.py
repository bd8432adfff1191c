#!/usr/bin/env python3
"""Prints the scalars TensorBoard sees in an event directory, as TensorBoard's own server reads it
(plugin_event_accumulator, purging included). A manual check of espnet3's event files:

    python3 -m venv /tmp/tbv && /tmp/tbv/bin/pip install tensorboard
    /tmp/tbv/bin/python scripts/tb_dump.py exp/.../tensorboard/<name>/version_0
"""
import sys

from tensorboard.backend.event_processing import plugin_event_accumulator
from tensorboard.util import tensor_util


def main(logdir):
    acc = plugin_event_accumulator.EventAccumulator(logdir)
    acc.Reload()
    for tag in sorted(acc.Tags()["tensors"]):
        events = acc.Tensors(tag)
        values = [(e.step, float(tensor_util.make_ndarray(e.tensor_proto))) for e in events]
        head = ", ".join(f"{s}:{v:.6g}" for s, v in values[:5])
        print(f"{tag}: {len(values)} points; first {head}; last {values[-1][0]}:{values[-1][1]:.6g}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
