#!/bin/bash
# Compares megakernel builds the way docs/performance.md's figures are taken: every binary in one
# call, several rounds, the order rotated each round (machines differ by up to 3 % for the same
# binary, and a kernel change moves every batch 1-3 % by its code alone, so only such side-by-side
# rounds count). Run on the GPU machine:
#   scripts/megakernel_ab.sh NAME=PATH/megakernel_bench [NAME=PATH/megakernel_bench ...]
# Env: ROUNDS (default 3), BATCHES (1,2,8,64), CONTEXT (8192), LAYERS (49), POLICIES (policy
# files given to every binary, one row each), OUT (/tmp/out). Prints one table last: kernel ms of
# each round (then wall ms, and the ratio to the layered path of the last round) per binary,
# policy, batch; the raw rows are in $OUT/ab.tsv, each run's output in $OUT/ab_<round>_<name>.log.
set -u
(($# > 0)) || { sed -n 2,11p "$0" >&2; exit 2; }
ROUNDS=${ROUNDS:-3}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
names=() bins=()
for arg in "$@"; do
  [[ $arg == *=* && -x ${arg#*=} ]] || { echo "megakernel_ab: not NAME=BINARY: $arg" >&2; exit 2; }
  names+=("${arg%%=*}")
  bins+=("${arg#*=}")
done
: > "$OUT/ab.tsv"
status=0
for ((r = 0; r < ROUNDS; ++r)); do
  for ((i = 0; i < ${#names[@]}; ++i)); do
    j=$(((i + r) % ${#names[@]}))  # round r starts with binary r
    log="$OUT/ab_$((r + 1))_${names[j]}.log"
    # shellcheck disable=SC2086  # POLICIES is a list of files
    MEGAKERNEL_BENCH_BATCHES=${BATCHES:-1,2,8,64} timeout 600 "${bins[j]}" "${LAYERS:-49}" \
      "${CONTEXT:-8192}" ${POLICIES:-} > "$log" 2>&1 || status=1
    # Table rows: | policy | batch | context | layered ms | layered tok/s | megakernel ms |
    # kernel ms | tok/s | speedup | % SoL |
    awk -F'|' -v r=$((r + 1)) -v n="${names[j]}" '
      /^\| [^|]+ \| [0-9]+ \| [0-9]+ \|/ {
        for (k = 2; k <= 11; ++k) gsub(/^ +| +$/, "", $k)
        print r "\t" n "\t" $2 "\t" $3 "\t" $4 "\t" $8 "\t" $7 "\t" $10
      }' "$log" >> "$OUT/ab.tsv"
  done
done
echo "| binary | policy | batch | context | kernel ms, each round | wall ms | vs layered |"
echo "|---|---|---|---|---|---|---|"
awk -F'\t' '
  { key = $2 "\t" $3 "\t" $4 "\t" $5
    sep = (key in seen) ? " / " : ""
    if (!(key in seen)) order[++count] = key
    seen[key] = 1
    kernel[key] = kernel[key] sep $6
    wall[key] = wall[key] sep $7
    ratio[key] = $8 }
  END { for (i = 1; i <= count; ++i) {
          split(order[i], f, "\t")
          printf "| %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[2], f[3], f[4], kernel[order[i]],
                 wall[order[i]], ratio[order[i]] } }' "$OUT/ab.tsv"
((status == 0)) || echo "megakernel_ab: a run failed or timed out; see $OUT/ab_*.log" >&2
exit $status
