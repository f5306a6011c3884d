#!/bin/bash
# HBM traffic over one megakernel step, on the GPU machine: Nsight Compute's PM sampling of one
# launch of megakernel_bench (the launches before it warm up), then megakernel_hbm_timeline.py's
# summary. Clocks stay as they are (--clock-control none).
#   scripts/megakernel_hbm_timeline.sh BENCH [layers (49)] [context (8192)] [policy.json...]
# Env: BATCHES (1: a launch of one batch size), SKIP (6 launches skipped), OUT (/tmp/out; the
# report is $OUT/hbm.ncu-rep), WINDOW ("START_US LENGTH_US" for the sample listing).
set -u
(($# >= 1)) || { sed -n 2,7p "$0" >&2; exit 2; }
bench=$1
shift
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
MEGAKERNEL_BENCH_BATCHES=${BATCHES:-1} timeout 600 ncu --clock-control none \
  --kernel-name regex:MegakernelKernel --launch-skip "${SKIP:-6}" --launch-count 1 \
  --section PmSampling -f -o "$OUT/hbm" "$bench" "${1:-49}" "${2:-8192}" "${@:3}" \
  > "$OUT/hbm_ncu.log" 2>&1 || { tail -20 "$OUT/hbm_ncu.log"; exit 1; }
# shellcheck disable=SC2086  # WINDOW is two numbers
python3 "$(dirname "$0")/megakernel_hbm_timeline.py" "$OUT/hbm.ncu-rep" ${WINDOW:-}
