#!/bin/bash
# The megakernel's GPU check in one call: its op and decoder tests, then its decode step against
# the layered path's over batch sizes (one table), optionally with schedule policy files.
#   On the build machine: scripts/megakernel_gpu_check.sh --pack [BUILD_DIR] [PACK_DIR]
#     copies megakernel_ops_test, megakernel_decoder_test, megakernel_bench and stream_probe
#     stripped of debug info (about 21 MB; they need no library the GPU image lacks).
#   On the GPU machine: scripts/megakernel_gpu_check.sh PACK_DIR [policy.json...]
# Env: BATCHES (default 1,8,32,64), CONTEXT (8192), LAYERS (49), TEST_FILTER (gtest filter for
# both test binaries, default all), SKIP_TESTS=1, PROBE=1 also runs stream_probe. Logs go to $OUT
# (default /tmp/out); the summary is printed last. Exits non-zero when a test failed.
set -u
BINARIES=(megakernel_ops_test megakernel_decoder_test megakernel_bench stream_probe)
if [[ "${1:-}" == --pack ]]; then
  from=${2:-build}
  to=${3:-build-megakernel-pack}
  mkdir -p "$to"
  for b in "${BINARIES[@]}"; do
    strip -o "$to/$b" "$from/tests/megakernel/device/$b" || echo "warning: $b not built" >&2
  done
  du -sh "$to"
  exit 0
fi
PACK=${1:?usage: scripts/megakernel_gpu_check.sh PACK_DIR [policy.json...] (or --pack)}
shift
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
status=0

tests_summary=()
if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  for t in megakernel_ops_test megakernel_decoder_test; do
    echo "== $t" >&2
    timeout 600 "$PACK/$t" --gtest_filter="${TEST_FILTER:-*}" > "$OUT/$t.log" 2>&1
    rc=$?
    passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$OUT/$t.log" | tail -1)
    failed=$(grep -oP '\[  FAILED  \] \K[0-9]+(?= test)' "$OUT/$t.log" | tail -1)
    tests_summary+=("| $t | passed ${passed:-0}, failed ${failed:-0} (rc $rc) |")
    [[ $rc == 0 ]] || status=1
  done
fi

echo "== megakernel_bench" >&2
MEGAKERNEL_BENCH_BATCHES=${BATCHES:-1,8,32,64} timeout 900 "$PACK/megakernel_bench" \
  "${LAYERS:-49}" "${CONTEXT:-8192}" "$@" > "$OUT/bench.log" 2>&1
bench_rc=$?

if [[ "${PROBE:-0}" == 1 ]]; then
  echo "== stream_probe" >&2
  timeout 300 "$PACK/stream_probe" 4 > "$OUT/probe.log" 2>&1
fi

echo
if ((${#tests_summary[@]} > 0)); then
  echo "| test | result |"
  echo "|---|---|"
  printf '%s\n' "${tests_summary[@]}"
  grep -h -E '^[0-9]+ layers, batch|greedy steps' "$OUT/megakernel_decoder_test.log" 2>/dev/null
  grep -h -A4 -E 'Failure$' "$OUT"/megakernel_*_test.log 2>/dev/null | head -40
  echo
fi
echo "megakernel_bench rc $bench_rc"
sed '/^batch /,$d' "$OUT/bench.log" | grep -E '^\|'  # the step table, before the timelines
sed -n '/^batch /,$p' "$OUT/bench.log" | grep -E '^batch|^\| (qkv|attention|oproj|router|topk|moe_finalize|expert_gate_up_claim|expert_down_claim|moe_combine|join|lm_head) \|'
[[ -f "$OUT/probe.log" ]] && cat "$OUT/probe.log"
[[ $bench_rc == 0 ]] || status=1
exit $status
