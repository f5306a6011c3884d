// Per-operation GPU time of eager steps, for `mkserve bench --breakdown`: through ToolHooks, a
// CUDA event is recorded on the step's stream each time an operation of another class starts; the
// time between consecutive events is charged to the class that ran in between. Launch gaps land
// in the op that was waiting, which is what an eager step pays.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <vector>

#include "backends/cuda/core/step_op.h"

namespace mkserve::cuda {

class StepProfiler {
 public:
  StepProfiler() = default;
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Ends the running interval (if any) and starts one of `op`.
  void Mark(StepOp op, cudaStream_t stream);
  // Ends the running interval; waits for it and adds every interval to the totals.
  void Finish(cudaStream_t stream);

  const std::array<double, kNumStepOps>& total_ms() const { return total_ms_; }
  int64_t steps() const { return steps_; }
  void Clear();

 private:
  cudaEvent_t EventAt(size_t index);

  std::vector<cudaEvent_t> events_;  // reused across steps
  std::vector<StepOp> ops_;          // ops_[i] runs from events_[i] to events_[i + 1]
  std::array<double, kNumStepOps> total_ms_{};
  int64_t steps_ = 0;
};

}  // namespace mkserve::cuda
