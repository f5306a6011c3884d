#include "backends/cuda/tools/step_profile.h"

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::cuda {

StepProfiler::~StepProfiler() {
  for (cudaEvent_t event : events_) cudaEventDestroy(event);
}

cudaEvent_t StepProfiler::EventAt(size_t index) {
  while (events_.size() <= index) {
    cudaEvent_t event = nullptr;
    MKSERVE_CUDA_CHECK(cudaEventCreate(&event));
    events_.push_back(event);
  }
  return events_[index];
}

void StepProfiler::Mark(StepOp op, cudaStream_t stream) {
  if (!ops_.empty() && ops_.back() == op) return;  // same class continues
  MKSERVE_CUDA_CHECK(cudaEventRecord(EventAt(ops_.size()), stream));
  ops_.push_back(op);
}

void StepProfiler::Finish(cudaStream_t stream) {
  if (ops_.empty()) return;
  cudaEvent_t last = EventAt(ops_.size());
  MKSERVE_CUDA_CHECK(cudaEventRecord(last, stream));
  MKSERVE_CUDA_CHECK(cudaEventSynchronize(last));
  for (size_t i = 0; i < ops_.size(); ++i) {
    float ms = 0.0f;
    MKSERVE_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
    total_ms_[static_cast<int>(ops_[i])] += ms;
  }
  ops_.clear();
  ++steps_;
}

void StepProfiler::Clear() {
  ops_.clear();
  total_ms_ = {};
  steps_ = 0;
}

}  // namespace mkserve::cuda
