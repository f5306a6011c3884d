#!/bin/bash
# Prints the size of the megakernel's machine code (the .text of MegakernelKernel, sm_90a), the
# figure that moved its speed most (docs/performance.md, "the megakernel's code size"): every task
# runs out of the instruction caches. Compiles megakernel.cu to a cubin with the build's own flags,
# so it needs a configured CUDA build directory (ninja). No GPU needed.
#   scripts/megakernel_code_size.sh [BUILD_DIR]   (default: build)
set -euo pipefail
build=${1:-build}
# awk reads the whole listing (grep -m1 would end the pipe early and fail it under pipefail).
command=$(ninja -C "$build" -t commands src/megakernel/device/libmkserve_megakernel.a |
          awk '/megakernel\/device\/megakernel\.cu/ && !found { print; found = 1 }')
[[ -n $command ]] || { echo "no compile command for megakernel.cu in $build" >&2; exit 1; }
cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
command=${command/\/usr\/bin\/ccache /}
command=$(sed -E 's/ -c / -cubin /; s/ -o [^ ]+/ -o '"${cubin//\//\\/}"'/;
                  s/--generate-code=arch=compute_90a,code=\[compute_90a,sm_90a\]/-arch=sm_90a/' \
          <<<"$command")
(cd "$build" && eval "$command")
size=$(readelf -S -W "$cubin" 2>/dev/null |
       awk '{ for (i = 1; i <= NF; ++i) if ($i ~ /^\.text\..*MegakernelKernel/) { print $(i + 4); exit } }')
[[ -n $size ]] || { echo "no MegakernelKernel code in the cubin" >&2; exit 1; }
echo "MegakernelKernel: $((16#$size / 1024)) KB of sm_90a code"
