#include "backends/cuda/tools/prefill_profile.h"

#include "backends/cuda/tools/decode_bench.h"

namespace mkserve::cuda {

PrefillProfile ProfilePrefill(CudaBackend& backend, ToolHooks& hooks, int64_t prompt_tokens) {
  constexpr int kProfiledRuns = 2;
  BenchPrefill(backend, prompt_tokens, 1);  // warm-up (cuBLAS heuristics, first touch)
  StepProfiler profiler;
  hooks.set_profiler(&profiler);
  const PrefillPoint point = BenchPrefill(backend, prompt_tokens, kProfiledRuns - 1);  // + warm-up
  hooks.set_profiler(nullptr);
  PrefillProfile profile;
  profile.prompt_tokens = prompt_tokens;
  profile.chunk_tokens = backend.max_num_tokens();
  profile.wall_ms = point.ms;
  for (int i = 0; i < kNumStepOps; ++i) {
    profile.op_ms[i] = profiler.total_ms()[i] / kProfiledRuns;
    profile.gpu_ms += profile.op_ms[i];
  }
  return profile;
}

}  // namespace mkserve::cuda
