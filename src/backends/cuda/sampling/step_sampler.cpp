#include "backends/cuda/sampling/step_sampler.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "common/error.h"
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

InStepSamples StepSampler::StageInStep(const StepInputs& inputs, const StepPlan& plan,
                                       cudaStream_t stream, int slot) {
  if (slot < 0 || slot > 1) throw Error("in-step sampling: slot " + std::to_string(slot));
  InStepSamples in_step;
  in_step.request_of_row.assign(plan.logit_rows.size(), -1);
  std::vector<GpuSampleRequest> requests;
  for (size_t r = 0; r < plan.logit_rows.size(); ++r) {
    const LogitRow& row = plan.logit_rows[r];
    const SequenceStep& step = inputs.sequences[row.sequence_index];
    if (!row.needs.gpu_sample || row.needs.host_logits || !step.allowed_tokens.empty()) continue;
    in_step.request_of_row[r] = static_cast<int32_t>(requests.size());
    requests.push_back({static_cast<int64_t>(r), &step});
    in_step.sequences.push_back(row.sequence_index);
  }
  if (requests.empty()) return in_step;
  std::unique_ptr<GpuSampler>& sampler = in_step_samplers_[slot];
  if (!sampler) sampler = std::make_unique<GpuSampler>(vocab_);
  in_step.sampler = sampler.get();
  in_step.staged = sampler->Stage(static_cast<int64_t>(plan.logit_rows.size()), requests, stream);
  return in_step;
}

void StepSampler::SampleRows(const StepInputs& inputs, const StepPlan& plan, size_t first,
                             int64_t count, float* logits, const HostMappedBuffer<int32_t>& argmax,
                             cudaStream_t stream, StepOutputs* outputs,
                             const InStepSamples* in_step, bool step_done) {
  auto fill = [&](const std::vector<size_t>& sequences, std::vector<SequenceResult> sampled) {
    for (size_t i = 0; i < sampled.size(); ++i) {
      outputs->results[sequences[i]].token_id = sampled[i].token_id;
      outputs->results[sequences[i]].logprobs = std::move(sampled[i].logprobs);
    }
  };
  // The kernel's samples first: their copy waits for the step, and is often all there is.
  if (in_step != nullptr && in_step->staged.count > 0) {
    fill(in_step->sequences, in_step->sampler->Collect(stream, step_done));
  }
  std::vector<int64_t> rest;  // rows this call serves
  for (int64_t r = 0; r < count; ++r) {
    if (in_step != nullptr && in_step->request_of_row[first + r] >= 0) continue;
    rest.push_back(r);
  }
  if (rest.empty()) return;
  // After the sync the argmax words are on the host already; the host copies below read the
  // step's rows.
  if (!step_done) MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> row_logits;
  std::vector<GpuSampleRequest> gpu_rows;
  std::vector<size_t> gpu_sequences;
  for (int64_t r : rest) {  // host copies first: the GPU sampler edits rows
    const LogitRow& row = plan.logit_rows[first + r];
    const SequenceStep& step = inputs.sequences[row.sequence_index];
    SequenceResult& result = outputs->results[row.sequence_index];
    ServeOnHost(logits + r * vocab_, vocab_, step, row.token_in_sequence, row.needs, row_logits,
                result);
    if (row.needs.gpu_sample) {
      gpu_rows.push_back({r, &step});
      gpu_sequences.push_back(row.sequence_index);
    } else if (row.needs.sample && !row.needs.host_sample) {
      result.token_id = argmax.host()[r];
    }
  }
  if (gpu_rows.empty()) return;
  if (!gpu_sampler_) gpu_sampler_ = std::make_unique<GpuSampler>(vocab_);
  fill(gpu_sequences, gpu_sampler_->Sample(logits, count, gpu_rows, stream));
}

}  // namespace mkserve::cuda
