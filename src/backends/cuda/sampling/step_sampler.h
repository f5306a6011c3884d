// StepSampler: a step's last phase, over logits rows already on the GPU with their argmax. Plain
// greedy rows take the argmax; every other sampled row goes to the GpuSampler (the engine
// sampler's semantics on the GPU: penalties, bias, min_tokens, temperature, top-k/p, min-p,
// seeded draws, logprobs), so only ids and logprobs come back. Rows that need the whole logits
// row on the host (return_logits, prompt logprobs, more top logprobs than the GPU returns) copy it
// and use the engine's own SampleFromLogits / ComputeLogprobs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/core/host_mapped_buffer.h"
#include "backends/cuda/core/step_plan.h"
#include "backends/cuda/sampling/gpu_sampler.h"
#include "engine/backend.h"

namespace mkserve::cuda {

// The rows a decode kernel samples itself (the megakernel's kSample): their staged requests and,
// per logits row of the step, its request or -1 (the kernel writes only the row's argmax).
struct InStepSamples {
  StagedSamples staged;
  std::vector<int32_t> request_of_row;
  std::vector<size_t> sequences;  // per request: its StepInputs sequence
  GpuSampler* sampler = nullptr;  // staged them, and collects their results
};

class StepSampler {
 public:
  explicit StepSampler(int64_t vocab) : vocab_(vocab) {}

  // Stages, before the decode kernel runs, every row of `plan` the GpuSampler would sample
  // that has no allowed-token mask (the engine computes masks during the forward pass, so those
  // rows sample after it) and no host copy (it must see the row before any edit). Each of the
  // two slots has its own staging and outputs: a step staged on one may still run while the
  // next is staged on the other.
  InStepSamples StageInStep(const StepInputs& inputs, const StepPlan& plan, cudaStream_t stream,
                            int slot = 0);

  // Logits rows [first, first + count) of plan.logit_rows are `logits` rows 0..count-1 (the
  // GpuSampler edits them) and their argmax is `argmax`'s first `count` words, which the stream's
  // kernels wrote. Fills the results of their sequences; waits for the stream unless `step_done`
  // (the decode path waited for its kernels already). Rows `in_step` holds were sampled by the
  // kernel: their results come from its outputs.
  void SampleRows(const StepInputs& inputs, const StepPlan& plan, size_t first, int64_t count,
                  float* logits, const HostMappedBuffer<int32_t>& argmax, cudaStream_t stream,
                  StepOutputs* outputs, const InStepSamples* in_step = nullptr,
                  bool step_done = false);

 private:
  int64_t vocab_ = 0;
  std::unique_ptr<GpuSampler> gpu_sampler_;          // made on first use
  std::unique_ptr<GpuSampler> in_step_samplers_[2];  // the staged rows' arrays, made on first use
};

}  // namespace mkserve::cuda
