// Where a prefill spends its GPU time: the per-op-class totals of StepProfiler (step_profile.h)
// over one whole prompt, run in chunks of the backend's max_num_tokens. For the prefill tool and,
// later, `mkserve bench`.
#pragma once

#include <array>
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/tools/step_profile.h"
#include "backends/cuda/tools/tool_hooks.h"

namespace mkserve::cuda {

struct PrefillProfile {
  int64_t prompt_tokens = 0;
  int64_t chunk_tokens = 0;
  double wall_ms = 0.0;                     // one prompt, eager, profiled
  double gpu_ms = 0.0;                      // sum of op_ms
  std::array<double, kNumStepOps> op_ms{};  // per prompt, summed over its chunks
};

// Two unprofiled prompts (warm-up), then two profiled ones; the figures are per prompt. `hooks`
// are the backend's (CudaBackendOptions::hooks).
PrefillProfile ProfilePrefill(CudaBackend& backend, ToolHooks& hooks, int64_t prompt_tokens);

}  // namespace mkserve::cuda
