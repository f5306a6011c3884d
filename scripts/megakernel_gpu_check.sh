#!/bin/bash
# The megakernel's GPU check in one call: its op and decoder tests (scripts/gpu_check.sh with
# ONLY), then its decode step against the layered path's over batch sizes (one table),
# optionally with schedule policy files.
#   On the build machine: scripts/megakernel_gpu_check.sh --pack [BUILD_DIR] [PACK_DIR]
#     gpu_check.sh's pack of the two tests plus megakernel_bench and the probes (stream_probe,
#     pipe_probe, topk_probe), stripped, and mkserve (about 32 MB; they need no library the GPU
#     image lacks).
#   On the GPU machine: scripts/megakernel_gpu_check.sh PACK_DIR [policy.json...]
# Env: BATCHES (default 1,8,32,64), CONTEXT (8192), LAYERS (49), SKIP_TESTS=1, PROBE=1 also runs
# the probes. Logs go to $OUT (default /tmp/out); the summary is printed last.
# Exits non-zero when a test or the benchmark failed.
set -u
here=$(dirname "$0")
TESTS_ONLY=megakernel_ops_test,megakernel_decoder_test
TOOLS=(megakernel_bench stream_probe pipe_probe topk_probe)
if [[ "${1:-}" == --pack ]]; then
  from=${2:-build}
  to=${3:-build-megakernel-pack}
  status=0
  ONLY=$TESTS_ONLY bash "$here/gpu_check.sh" --pack "$from" "$to" > /dev/null
  for t in ${TESTS_ONLY//,/ }; do [[ -x "$to/tests/megakernel/device/$t" ]] || status=1; done
  for b in "${TOOLS[@]}"; do
    strip -o "$to/tests/megakernel/device/$b" "$from/tests/megakernel/device/$b" || status=1
  done
  ((status == 0)) || echo "megakernel_gpu_check: some binaries are not built in $from" >&2
  du -sh "$to"
  exit $status
fi
PACK=${1:?usage: scripts/megakernel_gpu_check.sh PACK_DIR [policy.json...] (or --pack)}
shift
BIN=$PACK/tests/megakernel/device
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
rm -f "$OUT/bench.log" "$OUT/probe.log"
status=0

if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  ONLY=$TESTS_ONLY SKIP_BENCH=1 SKIP_SANITIZER=1 OUT=$OUT bash "$here/gpu_check.sh" "$PACK" \
    > "$OUT/tests.txt"
  grep -q -E 'failed [1-9]|crashed|missing' "$OUT/tests.txt" && status=1
fi

echo "== megakernel_bench" >&2
MEGAKERNEL_BENCH_BATCHES=${BATCHES:-1,8,32,64} timeout 900 "$BIN/megakernel_bench" \
  "${LAYERS:-49}" "${CONTEXT:-8192}" "$@" > "$OUT/bench.log" 2>&1
bench_rc=$?
((bench_rc == 0)) || status=1

if [[ "${PROBE:-0}" == 1 ]]; then
  echo "== stream_probe" >&2
  timeout 300 "$BIN/stream_probe" 4 > "$OUT/probe.log" 2>&1 || status=1
  echo "== pipe_probe" >&2
  timeout 120 "$BIN/pipe_probe" >> "$OUT/probe.log" 2>&1 || status=1
  echo "== topk_probe" >&2
  timeout 120 "$BIN/topk_probe" >> "$OUT/probe.log" 2>&1 || status=1
fi

echo
if [[ -f "$OUT/tests.txt" ]]; then
  grep -E '^\|( check|---| megakernel)' "$OUT/tests.txt"
  grep -h -E '^[0-9]+ layers, batch|greedy steps' "$OUT/megakernel_decoder_test.log" 2>/dev/null
  grep -h -A4 -E 'Failure$' "$OUT"/megakernel_*_test.log 2>/dev/null | head -40
  echo
fi
echo "megakernel_bench rc $bench_rc"
sed '/^batch /,$d' "$OUT/bench.log" | grep -E '^\|'  # the step table, before the timelines
sed -n '/^batch /,$p' "$OUT/bench.log" | grep -E '^batch|^\| (qkv|attention|oproj|router|topk|moe_finalize|expert_gate_up_claim|expert_down_claim|moe_combine|join|lm_head) \|'
[[ -f "$OUT/probe.log" ]] && cat "$OUT/probe.log"
exit $status
