#include "backends/cuda/sampling/step_sampler.h"

#include <algorithm>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "engine/sampler.h"

namespace mkserve::cuda {
namespace {

// The host's share of one row: the copy, returned logits, prompt logprobs, host sampling.
// `row_logits` is sized on first use: most steps need no host row, and a 262144-float buffer per
// step would cost the decode loop a megabyte of zeroing.
void ServeOnHost(const float* device_row, int64_t vocab, const SequenceStep& step,
                 int32_t token_in_sequence, const RowNeeds& needs, std::vector<float>& row_logits,
                 SequenceResult& result) {
  if (!needs.host_logits) return;
  row_logits.resize(vocab);
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(row_logits.data(), device_row, vocab * sizeof(float), cudaMemcpyDeviceToHost));
  if (step.return_logits) result.logits.push_back(row_logits);
  if (needs.prompt_logprob) {
    const int32_t k = step.sampling ? std::max(step.sampling->num_prompt_logprobs, 0) : 0;
    result.prompt_logprobs.push_back(
        ComputeLogprobs(row_logits, step.next_token_ids[token_in_sequence], k));
  }
  if (needs.host_sample) {
    SequenceResult sampled = SampleFromLogits(row_logits, step);
    result.token_id = sampled.token_id;
    result.logprobs = std::move(sampled.logprobs);
  }
}

}  // namespace

void StepSampler::SampleRows(const StepInputs& inputs, const StepPlan& plan, size_t first,
                             int64_t count, float* logits, const int32_t* argmax,
                             cudaStream_t stream, StepOutputs* outputs) {
  std::vector<int32_t> greedy(count);
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(greedy.data(), argmax, count * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, stream));
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> row_logits;
  std::vector<GpuSampleRequest> gpu_rows;
  std::vector<size_t> gpu_sequences;
  for (int64_t r = 0; r < count; ++r) {  // host copies first: the GPU sampler edits rows
    const LogitRow& row = plan.logit_rows[first + r];
    const SequenceStep& step = inputs.sequences[row.sequence_index];
    SequenceResult& result = outputs->results[row.sequence_index];
    ServeOnHost(logits + r * vocab_, vocab_, step, row.token_in_sequence, row.needs, row_logits,
                result);
    if (row.needs.gpu_sample) {
      gpu_rows.push_back({r, &step});
      gpu_sequences.push_back(row.sequence_index);
    } else if (row.needs.sample && !row.needs.host_sample) {
      result.token_id = greedy[r];
    }
  }
  if (gpu_rows.empty()) return;
  if (!gpu_sampler_) gpu_sampler_ = std::make_unique<GpuSampler>(vocab_);
  std::vector<SequenceResult> sampled = gpu_sampler_->Sample(logits, count, gpu_rows, stream);
  for (size_t i = 0; i < sampled.size(); ++i) {
    outputs->results[gpu_sequences[i]].token_id = sampled[i].token_id;
    outputs->results[gpu_sequences[i]].logprobs = std::move(sampled[i].logprobs);
  }
}

}  // namespace mkserve::cuda
