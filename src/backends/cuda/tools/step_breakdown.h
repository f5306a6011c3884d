// `mkserve bench --breakdown`: where an eager layered decode step spends its GPU time, per op
// class (step_profile.h), with the bytes each class must read and the bandwidth it achieves.
#pragma once

#include <array>
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/tools/step_profile.h"
#include "backends/cuda/tools/tool_hooks.h"

namespace mkserve::cuda {

struct OpShare {
  StepOp op = StepOp::kEmbed;
  double us_per_step = 0.0;
  double share = 0.0;  // of the summed GPU time
  double bytes = 0.0;  // the minimum it must read per step
  double gb_per_second = 0.0;
};

struct StepBreakdown {
  int64_t batch = 0;
  int64_t context_tokens = 0;
  double wall_ms = 0.0;  // mean eager Step() wall time, host planning and syncs included
  double gpu_ms = 0.0;   // mean sum of the op intervals
  int64_t distinct_experts = 0;
  std::array<OpShare, kNumStepOps> ops{};
};

// Bytes each op class must read in one decode step (weights, KV, activations that matter).
std::array<double, kNumStepOps> DecodeOpBytes(const ModelConfig& config, int64_t batch,
                                              int64_t context_tokens, int64_t distinct_experts);

// Eager steps (graphs skipped while profiling): `warmup_steps` untimed, then `steps` profiled.
// `hooks` are the backend's (CudaBackendOptions::hooks).
StepBreakdown BenchBreakdown(CudaBackend& backend, ToolHooks& hooks, int64_t batch,
                             int64_t context_tokens, int warmup_steps, int steps);

}  // namespace mkserve::cuda
