// LayeredForward: the model run one kernel per operation over every token of a plan, prefill
// chunks and decode rows alike (cuBLAS for large GEMMs, the weight-streaming GEMV and the fused
// decode kernels for decode-sized ones). Every decode path but a megakernel, and the prefill
// sub-step, are this pass plus the LM head. Stateless between calls: only the workspace and the
// KV pool change.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/core/step_metadata.h"
#include "backends/cuda/decode/decode_path.h"
#include "backends/cuda/decode/norm.h"

namespace mkserve::cuda {

class LayeredForward {
 public:
  LayeredForward(const DecodePathContext& context, cudaStream_t stream)
      : c_(context), stream_(stream) {}

  // Embedding, every layer and the final norm over the plan's tokens: workspace.normed holds
  // the final normalized rows. Asynchronous on the stream (capturable).
  void Run(const StepPlan& plan, const DeviceMetadata& meta) const;
  // LM head over logits rows [first_row, first_row + num_rows) of the plan (`logit_tokens` is
  // DeviceMetadata::logit_tokens): their logits into workspace.logits, argmax into
  // workspace.sampled. num_rows <= kLogitRowsPerChunk.
  void ComputeLogits(const int32_t* logit_tokens, size_t first_row, int64_t num_rows) const;

 private:
  // Each returns the MoE combine it left for the next AddNorm to fold in (empty when none).
  PendingMoe RunLayer(int64_t layer_id, const StepPlan& plan, const DeviceMetadata& meta,
                      const PendingMoe& pending) const;
  void RunAttention(int64_t layer_id, const StepPlan& plan, const DeviceMetadata& meta) const;
  PendingMoe RunFfn(int64_t layer_id, int64_t num_tokens) const;
  void RunMlp(const DeviceMlp& mlp, int64_t num_tokens, float* out) const;
  PendingMoe PendingCombine(int64_t layer_id) const;
  void Mark(StepOp op) const {
    if (c_.options.hooks) c_.options.hooks->Mark(op, stream_);
  }

  const DecodePathContext& c_;
  cudaStream_t stream_;
};

}  // namespace mkserve::cuda
