#!/usr/bin/env python3
"""The layer check of `make check`: which room may include which (docs/developers.md).

Every quoted include in cli/, stages/, core/, recipes/, cuda/, lib/, include/ and examples/ must be root-relative
("core/config/config.h") and point into a room its own room may see; core/base may include
nothing but the C library and POSIX. A violation prints the offending line as
`file:line: #include "x": <why>` and the script exits 1. Tests and scripts may include anything.
"""
import os
import re
import sys

# Each room and the rooms below it that it may include (its own room is always allowed).
CORE = ["base", "config", "formats", "data", "compute", "nn", "train", "decode", "runner", "dist"]
ALLOWED = {
    "core/base": [],
    "core/config": ["core/base"],
    "core/formats": ["core/base", "core/config"],
    "core/compute": ["core/base"],  # backends are built from plain options, never from config
    "core/dist": ["core/base"],     # launch, rendezvous and comms: plain options too
    "core/data": ["core/base", "core/config", "core/formats"],
    "core/runner": ["core/base", "core/config", "core/formats", "core/compute"],
    "core/nn": ["core/base", "core/config", "core/formats", "core/data", "core/compute"],
    "core/decode": ["core/base", "core/config", "core/formats", "core/data", "core/compute", "core/nn"],
    "core/train": ["core/base", "core/config", "core/formats", "core/data", "core/compute", "core/nn",
                   "core/decode", "core/dist"],
    "recipes": ["core/base", "core/config", "core/formats", "core/data"],
    "stages": ["core/" + r for r in CORE] + ["recipes"],
    "include": [],  # the library's public header: the C library only
    # libespnet3: the header's functions over core, and the recipes' key tables (recipes/keys.h)
    "lib": ["core/" + r for r in CORE] + ["include", "recipes"],
    "cli": ["core/" + r for r in CORE] + ["stages", "lib", "include"],
    "examples": ["include"],  # programs a library user would write: the public header only
    "cuda": ["core/compute", "core/dist", "core/base"],
}
# core/base is the floor: only headers of the C library and POSIX.
LIBC = set("""assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h math.h
setjmp.h signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h stdio.h stdlib.h stdnoreturn.h
string.h strings.h tgmath.h threads.h time.h uchar.h wchar.h wctype.h dirent.h fcntl.h fnmatch.h glob.h
libgen.h poll.h pthread.h sched.h spawn.h termios.h unistd.h sys/file.h sys/ioctl.h sys/mman.h
sys/prctl.h sys/resource.h sys/select.h sys/stat.h sys/syscall.h sys/time.h sys/types.h sys/wait.h
sys/random.h ftw.h netdb.h arpa/inet.h netinet/in.h netinet/tcp.h sys/socket.h sys/un.h
sys/statvfs.h sys/utsname.h semaphore.h""".split())

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def room_of(path):
    """The room a file (or an include target) belongs to: core/<room>, or its top folder."""
    parts = path.split("/")
    if parts[0] == "core" and len(parts) > 2:
        return "core/" + parts[1]
    return parts[0]


def check_file(path, problems):
    room = room_of(path)
    allowed = ALLOWED.get(room)
    if allowed is None:
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, target = m.groups()
            where = f'{path}:{no}: #include {kind}{target}{">" if kind == "<" else chr(34)}'
            if kind == "<":
                if room in ("core/base", "include") and target not in LIBC:
                    problems.append(f"{where}: {room} may include only the C library and POSIX")
                continue
            if target.startswith(".") or "/" not in target:
                problems.append(f"{where}: includes are root-relative (e.g. \"core/config/config.h\")")
                continue
            if not os.path.exists(target):
                problems.append(f"{where}: no such file from the repository root")
                continue
            to = room_of(target)
            if path.startswith("core/") and to in ("stages", "cli", "recipes", "cuda"):
                problems.append(f"{where}: core/ never includes {to}/")
            elif to != room and to not in allowed:
                may = ", ".join(allowed) if allowed else "nothing but itself"
                problems.append(f"{where}: {room} may not include {to} ({room} may see: {may})")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    os.chdir(root)
    problems, files = [], 0
    for top in ("core", "stages", "cli", "recipes", "cuda", "lib", "include", "examples"):
        for dirpath, _, names in os.walk(top):
            for name in sorted(names):
                if name.endswith((".c", ".h", ".cu", ".cuh")):
                    path = os.path.join(dirpath, name)
                    if top == "core" and path.count("/") == 1:
                        problems.append(f"{path}:1: every core file lives in a room (core/<room>/)")
                        continue
                    files += 1
                    check_file(path, problems)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) break the layer rules", file=sys.stderr)
        return 1
    print(f"check_layers: {files} files, every include within the layer rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
