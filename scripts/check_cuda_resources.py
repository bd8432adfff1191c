#!/usr/bin/env python3
"""Resource check of the CUDA kernels (.ci/run runs it after the CUDA build; no GPU needed).

Every cuda/*.cu is compiled to a cubin for each architecture of `make CUDA=1` (CUDA_ARCHS: 80 and
90) with the build's own nvcc flags plus `-Xptxas -v`, and ptxas' report of every kernel is
checked:

  - no spill stores or loads: a spill moves registers to local memory, which a hot loop then
    reads and writes at memory speed;
  - at most MAX_REGS registers per thread (default 128): with the backend's 256-thread blocks an
    SM (65536 registers on sm_80 and sm_90) still holds two blocks, 16 warps, to hide latency.

Every kernel counts as hot: each runs over whole activations or gradients in a training step.
A stack frame without spills is reported but allowed (CUDA's sinf/cosf keep a small array for
the slow path of their argument reduction). One line per kernel and architecture; exit status 1
on a violation, 2 when nvcc fails.

    scripts/check_cuda_resources.py [--max-regs N] [FILE.cu ...]
"""
import argparse
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

MAX_REGS = 128

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
PROPS = re.compile(r"Function properties for (\S+)")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers")
SMEM = re.compile(r"(\d+) bytes smem")


def build_flags(root):
    """nvcc, its flags without the -gencode pairs, and the architectures, as `make CUDA=1` has them."""
    out = subprocess.run(["make", "-s", "--no-print-directory", "CUDA=1", "print-nvcc"], cwd=root, check=True,
                         capture_output=True, text=True).stdout
    vals = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    flags, skip = [], False
    for f in shlex.split(vals["NVCCFLAGS"]):
        if skip:
            skip = False
        elif f == "-gencode":
            skip = True
        elif not f.startswith("-gencode="):
            flags.append(f)
    return vals["NVCC"], flags, vals["CUDA_ARCHS"].split()


def report(nvcc, flags, src, arch, tmp):
    """ptxas' report for one file and architecture: {kernel: dict} (kernels only, not device functions)."""
    cubin = os.path.join(tmp, f"{os.path.basename(src)}.sm_{arch}.cubin")
    cmd = [nvcc, *flags, f"-arch=sm_{arch}", "-cubin", "-Xptxas", "-v", "-o", cubin, src]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"check_cuda_resources: nvcc failed on {src} for sm_{arch}: {shlex.join(cmd)}")
    kernels, props, entry = {}, {}, None
    for line in (r.stdout + r.stderr).splitlines():
        if m := ENTRY.search(line):
            entry = m.group(1)
            kernels[entry] = {"regs": 0, "frame": 0, "spill_st": 0, "spill_ld": 0, "smem": 0}
        elif m := PROPS.search(line):
            props["cur"] = m.group(1)
        elif (m := FRAME.search(line)) and props.get("cur") in kernels:
            k = kernels[props["cur"]]
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
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    files = args.files or sorted(glob.glob("cuda/*.cu"))
    nvcc, flags, archs = build_flags(root)
    jobs = [(f, a) for f in files for a in archs]
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda fa: (fa, report(nvcc, flags, fa[0], fa[1], tmp)), jobs))
    names = demangle(sorted({k for _, ks in results for k in ks}))
    bad, count = [], 0
    print(f"{'kernel':<58} {'arch':<6} {'regs':>4} {'spill st/ld':>11} {'stack':>5} {'smem':>5}")
    for (src, arch), kernels in results:
        for k, v in sorted(kernels.items(), key=lambda kv: names[kv[0]]):
            count += 1
            label = f"{os.path.basename(src)}:{names[k]}"
            print(f"{label:<58} sm_{arch:<3} {v['regs']:>4} {v['spill_st']:>5}/{v['spill_ld']:<5} {v['frame']:>5} "
                  f"{v['smem']:>5}")
            if v["spill_st"] or v["spill_ld"]:
                bad.append(f"{label} (sm_{arch}): spills {v['spill_st']} bytes stored, {v['spill_ld']} loaded")
            if v["regs"] > args.max_regs:
                bad.append(f"{label} (sm_{arch}): {v['regs']} registers > {args.max_regs}")
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
          f"(limit {args.max_regs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
