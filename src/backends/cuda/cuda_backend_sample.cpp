// CudaBackend's last phase: the LM head over the rows that need logits, then greedy argmax on the
// GPU, or the engine's CPU sampler on the copied row when the request needs more than argmax
// (temperature, penalties, bias, logprobs), so every sampling semantic is the CPU sampler's own.
#include <algorithm>
#include <vector>

#include "backends/cuda/argmax.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/embedding.h"
#include "backends/cuda/linear.h"
#include "engine/sampler.h"

namespace mkserve::cuda {
namespace {

bool IsPlainGreedy(const SamplingParams& p) {
  return p.is_greedy() && p.num_logprobs < 0 && p.presence_penalty == 0.0f &&
         p.frequency_penalty == 0.0f && p.repetition_penalty == 1.0f && p.logit_bias.empty();
}

struct RowNeeds {
  bool sample = false;
  bool prompt_logprob = false;
  bool host_logits = false;
};

RowNeeds NeedsOf(const SequenceStep& step, int32_t token_in_sequence) {
  RowNeeds needs;
  const bool last = token_in_sequence + 1 == static_cast<int32_t>(step.token_ids.size());
  needs.sample = step.sample && last;
  needs.prompt_logprob =
      !step.next_token_ids.empty() && step.next_token_ids[token_in_sequence] >= 0;
  needs.host_logits = step.return_logits || needs.prompt_logprob ||
                      (needs.sample && !IsPlainGreedy(*step.sampling));
  return needs;
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
  const int64_t vocab = config_.vocab_size;
  std::vector<int32_t> greedy(kLogitRowsPerChunk);
  std::vector<float> row_logits(vocab);
  const size_t num_rows = plan.logit_rows.size();
  for (size_t first = 0; first < num_rows; first += kLogitRowsPerChunk) {
    const int64_t count = std::min<int64_t>(kLogitRowsPerChunk, num_rows - first);
    ComputeLogits(first, count);
    MKSERVE_CUDA_CHECK(cudaMemcpyAsync(greedy.data(), workspace_->sampled.data(),
                                       count * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (int64_t r = 0; r < count; ++r) {
      const LogitRow& row = plan.logit_rows[first + r];
      const SequenceStep& step = inputs.sequences[row.sequence_index];
      SequenceResult& result = outputs->results[row.sequence_index];
      const RowNeeds needs = NeedsOf(step, row.token_in_sequence);
      if (needs.host_logits) {
        MKSERVE_CUDA_CHECK(cudaMemcpy(row_logits.data(), workspace_->logits.data() + r * vocab,
                                      vocab * sizeof(float), cudaMemcpyDeviceToHost));
      }
      if (step.return_logits) result.logits.push_back(row_logits);
      if (needs.prompt_logprob) {
        const int32_t k = step.sampling ? std::max(step.sampling->num_prompt_logprobs, 0) : 0;
        result.prompt_logprobs.push_back(
            ComputeLogprobs(row_logits, step.next_token_ids[row.token_in_sequence], k));
      }
      if (!needs.sample) continue;
      if (!needs.host_logits || IsPlainGreedy(*step.sampling)) {
        result.token_id = greedy[r];
      } else {
        SequenceResult sampled = SampleFromLogits(row_logits, step);
        result.token_id = sampled.token_id;
        result.logprobs = std::move(sampled.logprobs);
      }
    }
  }
}

}  // namespace mkserve::cuda
