// ToolHooks: the StepHooks of benchmarks and tests. Pass one in CudaBackendOptions::hooks, then
// attach a StepProfiler (per-op GPU time) or a RoutingOverride (forced or traced expert routing)
// for as long as needed; while either is attached, steps run eager so the hooks see every kernel.
#pragma once

#include <atomic>

#include "backends/cuda/core/step_hooks.h"
#include "backends/cuda/tools/router_override.h"
#include "backends/cuda/tools/step_profile.h"

namespace mkserve::cuda {

class ToolHooks : public StepHooks {
 public:
  // The caller owns them; null detaches.
  void set_profiler(StepProfiler* profiler) { profiler_ = profiler; }
  // The caller sets the override's first row before each step.
  void set_routing_override(RoutingOverride* routing) { routing_ = routing; }
  // The next megakernel step wedges (any thread may call it; the step's thread takes it).
  void stick_next_step() { stick_next_step_ = true; }

  bool active() const override { return profiler_ != nullptr || routing_ != nullptr; }
  bool rewrites_routing() const override { return routing_ != nullptr; }
  void Mark(StepOp op, cudaStream_t stream) override {
    if (profiler_ != nullptr) profiler_->Mark(op, stream);
  }
  void AfterRouterTopK(int64_t layer_id, const float* router_logits, int64_t num_tokens,
                       int32_t* expert_ids, float* expert_weights, cudaStream_t stream) override {
    if (routing_ != nullptr) {
      routing_->Apply(layer_id, router_logits, num_tokens, expert_ids, expert_weights, stream);
    }
  }
  void Finish(cudaStream_t stream) override {
    if (profiler_ != nullptr) profiler_->Finish(stream);
  }
  bool TakeStuckStep() override { return stick_next_step_.exchange(false); }

 private:
  StepProfiler* profiler_ = nullptr;
  RoutingOverride* routing_ = nullptr;
  std::atomic<bool> stick_next_step_{false};
};

}  // namespace mkserve::cuda
