#!/bin/bash
# The megakernel's SASS and where it spills, on the GPU machine (cuobjdump and nvdisasm come with
# its CUDA toolkit, not with the build machine's): extracts the megakernel's cubin from a binary
# that links it (megakernel_bench, mkserve), disassembles it with line information and prints
# megakernel_sass.py's summary (highest register named, spill instructions by file and line).
#   scripts/megakernel_sass.sh BINARY [lines]
# Env: OUT (/tmp/out; the SASS stays as $OUT/megakernel.sass).
set -u
(($# >= 1)) || { sed -n 2,7p "$0" >&2; exit 2; }
binary=$(realpath "$1")
OUT=${OUT:-/tmp/out}
export PATH=$PATH:/usr/local/cuda/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && cuobjdump -xelf all "$binary" > /dev/null) || { echo "megakernel_sass: cuobjdump failed on $binary" >&2; exit 1; }
cubins=("$work"/megakernel*.cubin)
cubin=${cubins[0]}
[[ -f $cubin ]] || { echo "megakernel_sass: no megakernel cubin in $binary" >&2; exit 1; }
mkdir -p "$OUT"
nvdisasm -g -c "$cubin" > "$OUT/megakernel.sass" || exit 1
python3 "$(dirname "$0")/megakernel_sass.py" "$OUT/megakernel.sass" "${2:-30}"
