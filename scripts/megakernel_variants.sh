#!/bin/bash
# Kernel variants for one GPU call: a kernel change moves every batch 1-3 % by its code alone, so
# a candidate counts only against main in the same call, and only once it is correct.
#
# On the build machine, build each variant (a git ref of this repository) into DIR/NAME/:
#   scripts/megakernel_variants.sh --build DIR NAME=REF [NAME=REF ...]
# (a detached worktree per ref, Release, CUDA on; megakernel_bench and megakernel_decoder_test,
# stripped; ccache shares the unchanged objects between them). Carry DIR to the GPU machine and
# there run:
#   scripts/megakernel_variants.sh --run DIR
# which runs every variant's decoder test (the whole step against the layered path) and then
# scripts/megakernel_ab.sh over the variants that passed (its env: ROUNDS, BATCHES, CONTEXT, OUT).
# It prints each variant's test verdict, then the A/B table last.
set -u
usage() { sed -n 2,13p "$0" >&2; exit 2; }
(($# >= 2)) || usage
mode=$1 dir=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)

if [[ $mode == --build ]]; then
  (($# > 0)) || usage
  repo=$(git -C "$here/.." rev-parse --show-toplevel) || exit 1
  mkdir -p "$dir"
  dir=$(realpath "$dir")
  for arg in "$@"; do
    name=${arg%%=*} ref=${arg#*=}
    [[ $arg == *=* && -n $name && -n $ref ]] || { echo "not NAME=REF: $arg" >&2; exit 2; }
    tree=$(mktemp -d /tmp/megakernel-variant.XXXXXX)
    git -C "$repo" worktree add -q --detach "$tree" "$ref" || exit 1
    echo "== $name ($ref, $(git -C "$tree" rev-parse --short HEAD))" >&2
    # Relative paths in ccache's keys: the worktrees' unchanged files hit each other's objects.
    export CCACHE_BASEDIR=$tree
    if cmake -S "$tree" -B "$tree/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMKSERVE_CUDA=ON \
         > "$dir/$name.build.log" 2>&1 &&
       cmake --build "$tree/build" --target megakernel_bench megakernel_decoder_test \
         >> "$dir/$name.build.log" 2>&1; then
      mkdir -p "$dir/$name"
      for binary in megakernel_bench megakernel_decoder_test; do
        strip -o "$dir/$name/$binary" "$tree/build/tests/megakernel/device/$binary"
      done
      git -C "$tree" rev-parse HEAD > "$dir/$name/commit"
    else
      echo "build of $name failed: $dir/$name.build.log" >&2
      tail -20 "$dir/$name.build.log" >&2
    fi
    git -C "$repo" worktree remove --force "$tree"
  done
  du -sh "$dir"/*/ 2>/dev/null
  exit 0
fi

[[ $mode == --run ]] || usage
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
passed=() verdicts=()
for variant in "$dir"/*/; do
  name=$(basename "$variant")
  [[ -x $variant/megakernel_decoder_test ]] || continue
  timeout 600 "$variant/megakernel_decoder_test" > "$OUT/decoder_$name.log" 2>&1
  rc=$?
  summary=$(grep -E '^\[  (PASSED|FAILED)  \]' "$OUT/decoder_$name.log" | tr '\n' ' ')
  verdicts+=("| $name | $(cut -c1-12 "$variant/commit" 2>/dev/null) | rc $rc ${summary:-no gtest summary} |")
  ((rc == 0)) && passed+=("$name=$variant/megakernel_bench")
done
((${#passed[@]} > 0)) && "$here/megakernel_ab.sh" "${passed[@]}" > "$OUT/ab_table.md"
echo "| variant | commit | decoder test |"
echo "|---|---|---|"
printf '%s\n' "${verdicts[@]}"
echo
cat "$OUT/ab_table.md" 2>/dev/null
