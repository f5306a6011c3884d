#!/bin/bash
# GPU check for the CUDA backend, run on the GPU machine from the repository root with an
# already-built build directory:
#   scripts/gpu_check.sh [BUILD_DIR]        (default: build-cuda)
# Runs every CUDA test binary (kernels vs CPU loops, weights, HF golden fixtures, the megakernel
# ops and decoder, CudaBackend vs CpuBackend), compute-sanitizer memcheck on the small golden
# model and the megakernel's op and five-layer tests when available, then the decode / prefill
# benchmark. Logs go to $OUT (default /tmp/out); a short summary table is printed last.
# Env: BENCH_ARGS overrides the benchmark flags (add --breakdown for per-op times);
# SANITIZER_FILTER picks the golden tests memcheck runs; SKIP_BENCH=1 / SKIP_SANITIZER=1 skip;
# BUILD=1 configures and builds BUILD_DIR first (when the binaries were not carried over);
# ONLY=a,b runs (and --pack packs) just those test binaries of TESTS.
# E2E=1 also runs the OpenAI SDK suite through `serve --backend cuda` (scripts/gpu_e2e.sh: needs
# node on PATH and tests/e2e/node_modules).
# HF_REFERENCE=1 first writes the full-width HF references (tools/oracle/full_width_reference.py:
# the routed model and, in no_choice/, one with as many experts as top-k; ~8 GB in
# /tmp/hf_reference, a few minutes) and runs cuda_hf_full_width_test against them (HF's routing
# forced, free against HF bf16's own scores, no-choice; figures printed after the table).
# docs/gpu-testing.md has the build-and-carry recipe and what each test must show.
# Packing (on the build machine): scripts/gpu_check.sh --pack [BUILD_DIR] [PACK_DIR] copies the
# binaries this script runs, stripped of debug info, into PACK_DIR (default build-cuda-pack, a
# few MB instead of ~100), to carry to the GPU machine and pass as BUILD_DIR there.
set -u
TESTS=(cuda_step_plan_test cuda_kernels_test cuda_weights_test cuda_golden_test cuda_vs_cpu_test
       cuda_prefill_test cuda_gpu_sampler_test cuda_ragged_full_width_test cuda_engine_test
       cuda_prompt_chunk_test cuda_fatal_fault_test cuda_hf_full_width_test megakernel_ops_test
       megakernel_topk_test megakernel_decoder_test megakernel_stuck_step_test
       cuda_started_step_test)
if [[ -n "${ONLY:-}" ]]; then IFS=, read -r -a TESTS <<< "$ONLY"; fi
test_subdir() {  # test name -> its folder under the build's tests/
  [[ $1 == megakernel_* ]] && echo megakernel/device || echo backends/cuda
}
if [[ "${1:-}" == --pack ]]; then
  from=${2:-build-cuda}
  to=${3:-build-cuda-pack}
  mkdir -p "$to/tests/backends/cuda" "$to/tests/megakernel/device"
  strip -o "$to/mkserve" "$from/mkserve" || echo "warning: no $from/mkserve" >&2
  for t in "${TESTS[@]}"; do
    strip -o "$to/tests/$(test_subdir "$t")/$t" "$from/tests/$(test_subdir "$t")/$t" ||
      echo "warning: $t not built, not packed" >&2
  done
  du -sh "$to"
  exit 0
fi
BUILD_DIR=${1:-build-cuda}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
BENCH_ARGS=${BENCH_ARGS:---random-weights --batch 1,8,64 --context 1024,8192 --prefill 1024,8192}
declare -A RESULT

if [[ "${BUILD:-0}" == 1 ]]; then
  echo "== build $BUILD_DIR" >&2
  { cmake -S . -B "$BUILD_DIR" -DMKSERVE_CUDA=ON -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$BUILD_DIR" -j"$(nproc)" --target mkserve "${TESTS[@]}"; } \
    > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; echo "build failed"; exit 1; }
fi

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >> "$OUT/nvidia-smi.txt"

run_test() {  # name -> RESULT[name] = "passed/failed/total" or "missing"/"crashed (rc)"
  local name=$1 binary
  binary="$BUILD_DIR/tests/$(test_subdir "$1")/$1"
  if [[ ! -x "$binary" ]]; then RESULT[$name]="missing binary"; return; fi
  timeout 600 "$binary" --gtest_output="xml:$OUT/$name.xml" > "$OUT/$name.log" 2>&1
  local rc=$?
  local passed failed
  passed=$(grep -oP '\[  PASSED  \] \K[0-9]+' "$OUT/$name.log" | tail -1)
  failed=$(grep -oP '\[  FAILED  \] \K[0-9]+(?= test)' "$OUT/$name.log" | tail -1)
  if [[ -z "$passed" && -z "$failed" ]]; then RESULT[$name]="crashed (rc $rc)"; return; fi
  RESULT[$name]="passed ${passed:-0}, failed ${failed:-0} (rc $rc)"
}

if [[ "${HF_REFERENCE:-0}" == 1 ]]; then
  echo "== HF full-width reference" >&2
  export MKSERVE_HF_REFERENCE_DIR=/tmp/hf_reference
  PYTHONUNBUFFERED=1 python3 tools/oracle/full_width_reference.py --out "$MKSERVE_HF_REFERENCE_DIR" \
    > "$OUT/hf_reference.log" 2>&1 || echo "full_width_reference.py failed, see hf_reference.log" >&2
fi

for t in "${TESTS[@]}"; do
  if [[ $t == cuda_hf_full_width_test && -z "${MKSERVE_HF_REFERENCE_DIR:-}" ]]; then
    RESULT[$t]="not run (HF_REFERENCE=1 runs it)"
    continue
  fi
  echo "== $t" >&2
  run_test "$t"
done

SANITIZER="not run"
# memcheck over: the small golden model on the layered path (parameterised golden tests are named
# by fixture: GoldenTest.X/north, .../sigmoid_renorm_sum), the megakernel's op tests, and its
# five-layer comparisons with the layered path (every schedule variant, batches 1-64), where
# those binaries are present. An entry is BINARY:FILTER (the filter may hold more colons).
SANITIZER_FILTER=${SANITIZER_FILTER:-'*/north:*/sigmoid_renorm_sum'}
SANITIZED=("cuda_golden_test:$SANITIZER_FILTER" "megakernel_ops_test:*"
           "megakernel_decoder_test:*OneDenseLayer*:*FiveLayers*")
if [[ "${SKIP_SANITIZER:-0}" != 1 ]] && command -v compute-sanitizer > /dev/null; then
  SANITIZER=""
  : > "$OUT/sanitizer.summary"
  for entry in "${SANITIZED[@]}"; do
    name=${entry%%:*} filter=${entry#*:}
    binary="$BUILD_DIR/tests/$(test_subdir "$name")/$name"
    [[ -x "$binary" ]] || continue
    echo "== compute-sanitizer ($name $filter)" >&2
    timeout 600 compute-sanitizer --tool memcheck --error-exitcode 3 \
      "$binary" --gtest_filter="$filter" > "$OUT/sanitizer_$name.log" 2>&1
    rc=$?
    ran=$(grep -oP '^\[==========\] \K[0-9]+(?= tests? from .* ran)' "$OUT/sanitizer_$name.log" | tail -1)
    if [[ -z "$ran" || "$ran" == 0 ]]; then
      verdict="FAILED: $name's filter '$filter' ran no tests (rc $rc, sanitizer_$name.log)"
    elif [[ $rc == 0 ]]; then
      verdict="$name clean ($ran tests)"
    elif [[ $rc == 3 ]]; then
      verdict="MEMORY ERRORS in $name ($ran tests, sanitizer_$name.log)"
    else
      verdict="$name: no memcheck error, but tests failed or crashed (rc $rc, $ran tests)"
    fi
    [[ $verdict == FAILED* ]] && echo "error: $verdict" >&2
    # A failure or memory error leads the summary, so the exit status below sees it.
    if [[ $verdict == FAILED* || $verdict == MEMORY* ]]; then
      SANITIZER="$verdict${SANITIZER:+; $SANITIZER}"
    else
      SANITIZER="${SANITIZER:+$SANITIZER; }$verdict"
    fi
    grep -m1 "ERROR SUMMARY" "$OUT/sanitizer_$name.log" | sed "s/^/$name: /" \
      >> "$OUT/sanitizer.summary"
  done
  SANITIZER=${SANITIZER:-"not run (no binary)"}
fi

E2E_RESULT="not run (E2E=1 runs it)"
if [[ "${E2E:-0}" == 1 ]]; then
  echo "== e2e (serve --backend cuda)" >&2
  timeout 600 bash scripts/gpu_e2e.sh "$BUILD_DIR/mkserve" > "$OUT/e2e.log" 2>&1
  rc=$?
  E2E_RESULT="$(grep -oP '^# pass \K[0-9]+' "$OUT/e2e.log") passed, $(grep -oP '^# fail \K[0-9]+' \
    "$OUT/e2e.log") failed (rc $rc)"
fi

BENCH="not run"
if [[ "${SKIP_BENCH:-0}" != 1 ]]; then
  echo "== bench" >&2
  # shellcheck disable=SC2086
  timeout 900 "$BUILD_DIR/mkserve" bench $BENCH_ARGS --json "$OUT/bench.json" \
    > "$OUT/bench.log" 2>&1
  rc=$?
  BENCH=$([[ $rc == 0 ]] && echo ok || echo "rc $rc, see bench.log")
fi

echo
echo "| check | result |"
echo "|---|---|"
for t in "${TESTS[@]}"; do echo "| $t | ${RESULT[$t]} |"; done
echo "| compute-sanitizer | $SANITIZER |"
echo "| e2e (OpenAI SDK, cuda) | $E2E_RESULT |"
echo "| bench | $BENCH |"
if [[ -f "$OUT/bench.log" ]]; then
  echo
  grep -E '^\||streaming read|^breakdown' "$OUT/bench.log"
fi
for t in "${TESTS[@]}"; do grep -h -m5 -E '^\[  FAILED  \] [A-Za-z]' "$OUT/$t.log" 2>/dev/null; done
if [[ "${HF_REFERENCE:-0}" == 1 ]]; then
  echo
  grep -h -E '^HF bf16|^(forced|free|no-choice) ' "$OUT/hf_reference.log" \
    "$OUT/cuda_hf_full_width_test.log" \
    2>/dev/null
fi
[[ "$SANITIZER" == FAILED* || "$SANITIZER" == MEMORY* ]] && exit 1
exit 0
