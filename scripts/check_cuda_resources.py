#!/usr/bin/env python3
"""Resource check of the CUDA kernels (.ci/run runs it after the CUDA build; no GPU needed).

`make CUDA=1` compiles every cuda/*.cu for each architecture of CUDA_ARCHS (80 and 90) with
`-Xptxas -v` and keeps ptxas' report beside the object (build-cuda/cuda/<file>.ptxas); this script
reads those reports, so it compiles nothing again, and checks every kernel:

  - no spill stores or loads: a spill moves registers to local memory, which a hot loop then
    reads and writes at memory speed;
  - at most MAX_REGS registers per thread (default 128): with the backend's 256-thread blocks an
    SM (65536 registers on sm_80 and sm_90) still holds two blocks, 16 warps, to hide latency;
  - at most MAX_SMEM bytes of static shared memory per block (48 KB, what a block gets without
    opting in; the fused attention's tiles, cuda/flash.cuh, are sized to it).

Every kernel counts as hot: each runs over whole activations or gradients in a training step.
A stack frame without spills is reported but allowed (CUDA's sinf/cosf keep a small array for
the slow path of their argument reduction). One line per kernel and architecture; exit status 1
on a violation, 2 when a report is missing or older than its source (build with make CUDA=1 first).

    scripts/check_cuda_resources.py [--max-regs N] [--build DIR] [FILE.cu ...]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

MAX_REGS = 128
MAX_SMEM = 48 * 1024

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
PROPS = re.compile(r"Function properties for (\S+)")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")


def archs_of(root):
    """The architectures of `make CUDA=1` (CUDA_ARCHS)."""
    out = subprocess.run(["make", "-s", "--no-print-directory", "CUDA=1", "print-nvcc"], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    vals = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return vals["CUDA_ARCHS"].split()


def report(src, build):
    """ptxas' report of one file's build: {(kernel, arch): dict} (kernels only, not device functions)."""
    path = os.path.join(build, "cuda", os.path.basename(src)[:-3] + ".ptxas")
    obj = path[:-6] + ".o"
    if not os.path.exists(path) or not os.path.exists(obj) or os.path.getmtime(obj) < os.path.getmtime(src):
        raise SystemExit(f"check_cuda_resources: no current ptxas report of {src} ({path}): build with make CUDA=1 first")
    kernels, cur, entry = {}, None, None
    with open(path) as f:
        for line in f:
            if m := ENTRY.search(line):
                entry = (m.group(1), m.group(2)[3:])
                kernels[entry] = {"regs": 0, "frame": 0, "spill_st": 0, "spill_ld": 0, "smem": 0}
            elif m := PROPS.search(line):
                cur = (m.group(1), entry[1]) if entry else None
            elif (m := FRAME.search(line)) and cur in kernels:
                k = kernels[cur]
                k["frame"], k["spill_st"], k["spill_ld"] = map(int, m.groups())
            elif (m := USED.search(line)) and entry:
                kernels[entry]["regs"] = int(m.group(1))
                if s := SMEM.search(line):
                    kernels[entry]["smem"] = int(s.group(1))
    return kernels


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    # Keep the name and template arguments, drop the parameter list.
    return {n: re.sub(r"^void ", "", re.sub(r"\(.*\)$", "", d)) for n, d in zip(names, out)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-regs", type=int, default=MAX_REGS)
    ap.add_argument("--build", default="build-cuda", help="the CUDA build's folder (default build-cuda)")
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    files = args.files or sorted(glob.glob("cuda/*.cu"))
    archs = archs_of(root)
    results = [(src, report(src, args.build)) for src in files]
    for src, kernels in results:
        seen = {a for _, a in kernels}
        if kernels and seen != set(archs):
            print(f"check_cuda_resources: {src}: ptxas reported sm_{', sm_'.join(sorted(seen))}, the build asks for "
                  f"sm_{', sm_'.join(archs)} (rebuild with make CUDA=1)", file=sys.stderr)
            return 2
    names = demangle(sorted({k for _, ks in results for k, _ in ks}))
    bad, count = [], 0
    print(f"{'kernel':<58} {'arch':<6} {'regs':>4} {'spill st/ld':>11} {'stack':>5} {'smem':>5}")
    for src, kernels in results:
        for (k, arch), v in sorted(kernels.items(), key=lambda kv: (names[kv[0][0]], kv[0][1])):
            count += 1
            label = f"{os.path.basename(src)}:{names[k]}"
            print(f"{label:<58} sm_{arch:<3} {v['regs']:>4} {v['spill_st']:>5}/{v['spill_ld']:<5} {v['frame']:>5} "
                  f"{v['smem']:>5}")
            if v["spill_st"] or v["spill_ld"]:
                bad.append(f"{label} (sm_{arch}): spills {v['spill_st']} bytes stored, {v['spill_ld']} loaded")
            if v["regs"] > args.max_regs:
                bad.append(f"{label} (sm_{arch}): {v['regs']} registers > {args.max_regs}")
            if v["smem"] > MAX_SMEM:
                bad.append(f"{label} (sm_{arch}): {v['smem']} bytes of shared memory > {MAX_SMEM}")
    for b in bad:
        print(f"check_cuda_resources: {b}", file=sys.stderr)
    if bad:
        print(f"check_cuda_resources: {len(bad)} problem(s) in {count} kernel builds", file=sys.stderr)
        return 1
    if count == 0:
        print("check_cuda_resources: ptxas reported no kernel (its report format changed?)", file=sys.stderr)
        return 1
    print(f"check_cuda_resources: {count} kernel builds ({len(files)} files x sm_{', sm_'.join(archs)}): "
          f"no spills, at most {max(v['regs'] for _, ks in results for v in ks.values())} registers "
          f"(limit {args.max_regs}), at most {max(v['smem'] for _, ks in results for v in ks.values())} bytes of "
          f"shared memory (limit {MAX_SMEM})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
