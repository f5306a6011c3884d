// StepHooks: what benchmarks and tests may observe or change inside a step (per-op GPU time,
// forced expert routing), as an interface the serving code only calls through. CudaBackend takes
// it from CudaBackendOptions::hooks, which serving leaves null; the implementations live in the
// tools library (tools/tool_hooks.h), apart from the serving library.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/core/step_op.h"

namespace mkserve::cuda {

class StepHooks {
 public:
  virtual ~StepHooks() = default;

  // True while the hooks must see every kernel of every step: a decode path that replays
  // captured work (graphs) or fuses the operations (a megakernel) refuses the step then.
  virtual bool active() const = 0;
  // True while AfterRouterTopK may rewrite expert ids: the fused decode router then leaves the
  // bucketing to MoeExperts, which buckets the final ids.
  virtual bool rewrites_routing() const = 0;
  // An operation of class `op` starts next on `stream`.
  virtual void Mark(StepOp op, cudaStream_t stream) = 0;
  // After the top-k of layer `layer_id` (an MoE layer) over `num_tokens` rows; the arrays are
  // the workspace's, on the device.
  virtual void AfterRouterTopK(int64_t layer_id, const float* router_logits, int64_t num_tokens,
                               int32_t* expert_ids, float* expert_weights, cudaStream_t stream) = 0;
  // The step's last kernel is queued on `stream`.
  virtual void Finish(cudaStream_t stream) = 0;
  // True once when a test wants the next fused decode step to wedge: the megakernel runs it with
  // a wait no task meets, so its watchdog has to end the step (a BackendFatalError).
  virtual bool TakeStuckStep() { return false; }
};

}  // namespace mkserve::cuda
