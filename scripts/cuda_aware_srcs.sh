#!/usr/bin/env bash
# The C sources whose object differs in a CUDA build (make CUDA=1): those that name ESPNET3_CUDA or
# include, at any depth, a header that does. The Makefile compiles only these into build-cuda/ and
# links the CUDA build from the CPU build's objects for the rest, which are the same bytes.
# Over-inclusive by design (any mention counts); a source missed here would lose its CUDA code, so
# the pattern is closed over #include until no new header joins.
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=(core cli stages lib recipes test/unit)
pat='ESPNET3_CUDA'
while :; do
  mapfile -t hdrs < <(grep -rlE --include='*.h' "$pat" "${dirs[@]}" | sort)
  next='ESPNET3_CUDA'
  for h in "${hdrs[@]}"; do b=$(basename "$h"); next+="|#include \"([^\"]*/)?${b//./\\.}\""; done
  [[ "$next" == "$pat" ]] && break
  pat=$next
done
grep -rlE --include='*.c' "$pat" "${dirs[@]}" | sort
