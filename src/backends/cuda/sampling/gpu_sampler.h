// GpuSampler: the engine sampler's semantics (engine/sampler.h: penalties -> logit_bias ->
// min_tokens masking -> the grammar's allowed tokens -> greedy, or temperature -> top-k -> top-p ->
// min-p -> draw with SampleUniform(seed, sample_index); logprobs of the unchanged row) for a batch
// of logits rows on the GPU, so only the sampled ids and the requested logprobs come back to the
// host. Deterministic and batch-independent: a row's result depends only on its logits, parameters,
// seed and sample_index. Tested token for token against SampleFromLogits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/core/host_mapped_buffer.h"
#include "backends/cuda/sampling/sample_rows.h"
#include "engine/backend.h"

namespace mkserve::cuda {

// Greedy with nothing to apply or report: the step's argmax serves the row.
bool IsPlainGreedy(const SamplingParams* params);

// The row's sample comes from the GPU (argmax or GpuSampler) without copying its logits to the
// host.
bool SampledOnGpu(const SamplingParams* params, int64_t vocab);

struct GpuSampleRequest {
  int64_t logits_row = 0;              // row of the logits buffer
  const SequenceStep* step = nullptr;  // sampling params (null: defaults), token ids, index
};

class GpuSampler {
 public:
  explicit GpuSampler(int64_t vocab);

  // False where the host path must serve the request: more top logprobs than the GPU returns.
  static bool CanSample(const SamplingParams* params);

  // Samples each request's row of `logits` ([num_logit_rows][vocab], device) and returns one
  // result (token_id, logprobs) per request. The rows are changed in place (penalties, bias).
  // Throws mkserve::Error for a row outside the buffer, a row with edits shared by requests, a
  // request CanSample refuses, or bad parameters (non-finite, repetition_penalty <= 0).
  std::vector<SequenceResult> Sample(float* logits, int64_t num_logit_rows,
                                     std::span<const GpuSampleRequest> requests,
                                     cudaStream_t stream);

  // Sample in two halves, for a kernel that samples the rows itself: Stage checks the requests
  // (as Sample) and uploads their arrays on `stream`; Collect waits for the stream (unless
  // `step_done`: the caller waited for the kernel) and returns the results the kernel wrote into
  // the staged outputs.
  StagedSamples Stage(int64_t num_logit_rows, std::span<const GpuSampleRequest> requests,
                      cudaStream_t stream);
  std::vector<SequenceResult> Collect(cudaStream_t stream, bool step_done = false);

 private:
  void AddRow(const GpuSampleRequest& request, int64_t num_logit_rows);
  void AddEdits(const SequenceStep& step, const SamplingParams& params);

  int64_t vocab_ = 0;
  // Host staging, rebuilt per call.
  std::vector<SampleRowParams> rows_;
  std::vector<LogitEdit> edits_;
  std::vector<float> bias_values_;
  std::vector<std::vector<float>> edit_biases_;  // per edit while building
  std::vector<int32_t> edit_of_token_;           // [vocab], -1 between rows
  std::vector<uint32_t> allowed_masks_;          // the rows' allowed-token bitmasks, back to back
  // Device copies, grown on demand.
  DeviceBuffer<SampleRowParams> device_rows_;
  DeviceBuffer<LogitEdit> device_edits_;
  DeviceBuffer<float> device_bias_values_;
  DeviceBuffer<float> device_originals_;
  DeviceBuffer<uint32_t> device_allowed_masks_;
  HostMappedBuffer<SampleRowOutput> outputs_;  // the kernel writes, Collect reads after a sync
};

}  // namespace mkserve::cuda
