// CudaBackend's last phase: the LM head over the rows that need logits, then sampling. Plain
// greedy rows take the GPU argmax; every other sampled row goes to the GpuSampler (the engine
// sampler's semantics on the GPU: penalties, bias, min_tokens, temperature, top-k/p, min-p,
// seeded draws, logprobs), so only ids and logprobs come back. Rows that need the whole logits
// row on the host (return_logits, prompt logprobs, more top logprobs than the GPU returns) copy
// it and use the engine's own SampleFromLogits / ComputeLogprobs.
#include <algorithm>
#include <vector>

#include "backends/cuda/argmax.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/embedding.h"
#include "backends/cuda/gpu_sampler.h"
#include "backends/cuda/linear.h"
#include "engine/sampler.h"

namespace mkserve::cuda {
namespace {

struct RowNeeds {
  bool sample = false;
  bool gpu_sample = false;   // GpuSampler
  bool host_sample = false;  // SampleFromLogits on the copied row
  bool prompt_logprob = false;
  bool host_logits = false;
};

RowNeeds NeedsOf(const SequenceStep& step, int32_t token_in_sequence, int64_t vocab) {
  RowNeeds needs;
  const bool last = token_in_sequence + 1 == static_cast<int32_t>(step.token_ids.size());
  needs.sample = step.sample && last;
  // A constrained row never takes the unmasked argmax.
  if (needs.sample && (!IsPlainGreedy(step.sampling) || !step.allowed_tokens.empty())) {
    needs.gpu_sample = SampledOnGpu(step.sampling, vocab);
    needs.host_sample = !needs.gpu_sample;
  }
  needs.prompt_logprob =
      !step.next_token_ids.empty() && step.next_token_ids[token_in_sequence] >= 0;
  needs.host_logits = step.return_logits || needs.prompt_logprob || needs.host_sample;
  return needs;
}

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

void CudaBackend::ComputeLogits(size_t first_row, int64_t num_rows) {
  StepWorkspace& ws = *workspace_;
  Mark(StepOp::kLmHead);
  GatherRows(ws.normed.data(), logit_tokens_ + first_row, num_rows, config_.hidden_size,
             ws.logit_inputs.data(), stream_);
  Linear(cublas_, ws.logit_inputs.data(), num_rows, config_.hidden_size, weights_.lm_head(),
         config_.vocab_size, config_.logit_scale, ws.logits.data(), stream_);
  Mark(StepOp::kSampling);
  ArgmaxRows(ws.logits.data(), num_rows, config_.vocab_size, ws.sampled.data(), stream_);
}

void CudaBackend::Sample(const StepInputs& inputs, const StepPlan& plan, StepOutputs* outputs) {
  const size_t num_rows = plan.logit_rows.size();
  for (size_t first = 0; first < num_rows; first += kLogitRowsPerChunk) {
    const int64_t count = std::min<int64_t>(kLogitRowsPerChunk, num_rows - first);
    ComputeLogits(first, count);
    SampleComputedRows(inputs, plan, first, count, outputs);
  }
}

// Logits rows [first, first + count) of the plan are in the workspace, with their argmax.
void CudaBackend::SampleComputedRows(const StepInputs& inputs, const StepPlan& plan, size_t first,
                                     int64_t count, StepOutputs* outputs) {
  const int64_t vocab = config_.vocab_size;
  std::vector<int32_t> greedy(count);
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(greedy.data(), workspace_->sampled.data(),
                                     count * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  std::vector<float> row_logits;
  std::vector<GpuSampleRequest> gpu_rows;
  std::vector<size_t> gpu_sequences;
  for (int64_t r = 0; r < count; ++r) {  // host copies first: the GPU sampler edits rows
    const LogitRow& row = plan.logit_rows[first + r];
    const SequenceStep& step = inputs.sequences[row.sequence_index];
    SequenceResult& result = outputs->results[row.sequence_index];
    const RowNeeds needs = NeedsOf(step, row.token_in_sequence, vocab);
    ServeOnHost(workspace_->logits.data() + r * vocab, vocab, step, row.token_in_sequence, needs,
                row_logits, result);
    if (needs.gpu_sample) {
      gpu_rows.push_back({r, &step});
      gpu_sequences.push_back(row.sequence_index);
    } else if (needs.sample && !needs.host_sample) {
      result.token_id = greedy[r];
    }
  }
  if (gpu_rows.empty()) return;
  if (!sampler_) sampler_ = std::make_unique<GpuSampler>(vocab);
  std::vector<SequenceResult> sampled =
      sampler_->Sample(workspace_->logits.data(), count, gpu_rows, stream_);
  for (size_t i = 0; i < sampled.size(); ++i) {
    outputs->results[gpu_sequences[i]].token_id = sampled[i].token_id;
    outputs->results[gpu_sequences[i]].logprobs = std::move(sampled[i].logprobs);
  }
}

}  // namespace mkserve::cuda
