// GpuSampler's host half: checks each request, turns its penalties, bias and min_tokens masking
// into per-token edits (the CPU sampler's ApplyPenalties, token by token), draws the uniform with
// the engine's own SampleUniform, uploads everything in one copy per array, launches the kernel
// and copies back only the per-row outputs.
#include "backends/cuda/sampling/gpu_sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "common/error.h"
#include "engine/sampler.h"

namespace mkserve::cuda {
namespace {

void CheckFinite(float value, const char* name) {
  if (!std::isfinite(value)) {
    throw Error(std::string("GPU sampler: ") + name + " must be finite, got " +
                std::to_string(value));
  }
}

void CheckParams(const SamplingParams& p) {
  CheckFinite(p.temperature, "temperature");
  CheckFinite(p.top_p, "top_p");
  CheckFinite(p.min_p, "min_p");
  CheckFinite(p.frequency_penalty, "frequency_penalty");
  CheckFinite(p.presence_penalty, "presence_penalty");
  CheckFinite(p.repetition_penalty, "repetition_penalty");
  if (p.repetition_penalty <= 0.0f) {
    throw Error("GPU sampler: repetition_penalty must be greater than 0, got " +
                std::to_string(p.repetition_penalty));
  }
  for (const auto& [token_id, bias] : p.logit_bias) CheckFinite(bias, "logit_bias value");
}

const SamplingParams& ParamsOf(const SequenceStep& step) {
  static const SamplingParams kDefaults;
  return step.sampling != nullptr ? *step.sampling : kDefaults;
}

// A DeviceBuffer or HostMappedBuffer of at least `count` elements (grown between steps only: the
// last step's kernel and the host's reads of its outputs are done).
template <class Buffer>
void Reserve(Buffer& buffer, size_t count) {
  if (buffer.count() >= static_cast<int64_t>(count)) return;
  buffer = Buffer(std::max<int64_t>(static_cast<int64_t>(count), 2 * buffer.count()));
}

template <typename T>
void CopyUp(const std::vector<T>& host, DeviceBuffer<T>& device, cudaStream_t stream) {
  Reserve(device, std::max<size_t>(host.size(), 1));
  if (host.empty()) return;
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(device.data(), host.data(), host.size() * sizeof(T),
                                     cudaMemcpyHostToDevice, stream));
}

// Edits change a row in place, so a row with edits must belong to one request alone.
void CheckSharedRows(const std::vector<SampleRowParams>& rows) {
  std::vector<std::pair<int64_t, bool>> keyed;
  for (const SampleRowParams& row : rows) {
    keyed.emplace_back(row.logits_row, row.edit_end > row.edit_begin || row.allowed_begin >= 0);
  }
  std::sort(keyed.begin(), keyed.end());
  for (size_t i = 1; i < keyed.size(); ++i) {
    if (keyed[i].first == keyed[i - 1].first && (keyed[i].second || keyed[i - 1].second)) {
      throw Error("GPU sampler: logits row " + std::to_string(keyed[i].first) +
                  " is shared by requests and changed by penalties or bias");
    }
  }
}

}  // namespace

GpuSampler::GpuSampler(int64_t vocab) : vocab_(vocab) {
  if (vocab <= 0 || vocab > kGpuSamplerMaxVocab) {
    throw Error("GPU sampler: vocabulary of " + std::to_string(vocab) + " entries; supported 1.." +
                std::to_string(kGpuSamplerMaxVocab));
  }
  edit_of_token_.assign(vocab, -1);
}

bool IsPlainGreedy(const SamplingParams* p) {
  return p != nullptr && p->is_greedy() && p->num_logprobs < 0 && p->presence_penalty == 0.0f &&
         p->frequency_penalty == 0.0f && p->repetition_penalty == 1.0f && p->logit_bias.empty();
}

bool SampledOnGpu(const SamplingParams* params, int64_t vocab) {
  return IsPlainGreedy(params) || (vocab <= kGpuSamplerMaxVocab && GpuSampler::CanSample(params));
}

bool GpuSampler::CanSample(const SamplingParams* params) {
  return params == nullptr || params->num_logprobs <= kGpuMaxTopLogprobs;
}

// Every touched token gets one edit; ids outside the vocabulary are ignored, as on the CPU.
void GpuSampler::AddEdits(const SequenceStep& step, const SamplingParams& params) {
  const size_t first = edits_.size();
  auto edit_of = [&](int32_t id) -> LogitEdit* {
    if (id < 0 || id >= vocab_) return nullptr;
    if (edit_of_token_[id] < 0) {
      edit_of_token_[id] = static_cast<int32_t>(edits_.size());
      edits_.push_back(LogitEdit{id});
      edit_biases_.emplace_back();
    }
    return &edits_[edit_of_token_[id]];
  };
  if (params.repetition_penalty != 1.0f) {
    for (auto ids : {step.prompt_token_ids, step.output_token_ids}) {
      for (int32_t id : ids) {
        if (LogitEdit* e = edit_of(id)) e->flags |= kEditRepeated;
      }
    }
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    for (int32_t id : step.output_token_ids) {
      if (LogitEdit* e = edit_of(id)) ++e->output_count;
    }
  }
  for (const auto& [id, bias] : params.logit_bias) {
    if (edit_of(id) != nullptr) edit_biases_[edit_of_token_[id]].push_back(bias);
  }
  if (static_cast<int64_t>(step.output_token_ids.size()) < params.min_tokens) {
    for (int32_t id : params.min_tokens_suppressed_ids) {
      if (LogitEdit* e = edit_of(id)) e->flags |= kEditSuppressed;
    }
  }
  // Sort this row's edits by token id (the kernel binary-searches them), then flatten the biases.
  std::vector<size_t> order(edits_.size() - first);
  for (size_t i = 0; i < order.size(); ++i) order[i] = first + i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return edits_[a].token_id < edits_[b].token_id; });
  std::vector<LogitEdit> sorted;
  sorted.reserve(order.size());
  for (size_t index : order) {
    LogitEdit edit = edits_[index];
    edit_of_token_[edit.token_id] = -1;
    edit.bias_begin = static_cast<int32_t>(bias_values_.size());
    for (float bias : edit_biases_[index]) bias_values_.push_back(bias);
    edit.bias_end = static_cast<int32_t>(bias_values_.size());
    sorted.push_back(edit);
  }
  std::copy(sorted.begin(), sorted.end(), edits_.begin() + first);
  edit_biases_.clear();
  edit_biases_.resize(edits_.size());
}

void GpuSampler::AddRow(const GpuSampleRequest& request, int64_t num_logit_rows) {
  if (request.step == nullptr) throw Error("GPU sampler: a request without its sequence step");
  if (request.logits_row < 0 || request.logits_row >= num_logit_rows) {
    throw Error("GPU sampler: logits row " + std::to_string(request.logits_row) +
                " outside the buffer of " + std::to_string(num_logit_rows) + " rows");
  }
  const SequenceStep& step = *request.step;
  const SamplingParams& params = ParamsOf(step);
  if (!CanSample(&params)) {
    throw Error("GPU sampler: " + std::to_string(params.num_logprobs) +
                " top logprobs requested; the GPU path returns at most " +
                std::to_string(kGpuMaxTopLogprobs));
  }
  CheckParams(params);
  SampleRowParams row;
  row.logits_row = request.logits_row;
  row.uniform = SampleUniform(SamplingSeed(params, step.sequence_id), step.sample_index);
  row.temperature = params.temperature;
  row.top_k = (params.top_k > 0 && params.top_k < vocab_) ? params.top_k : 0;
  row.top_p = params.top_p;
  row.min_p = params.min_p;
  row.repetition_penalty = params.repetition_penalty;
  row.frequency_penalty = params.frequency_penalty;
  row.presence_penalty = params.presence_penalty;
  row.num_logprobs = std::max(params.num_logprobs, -1);
  row.edit_begin = static_cast<int32_t>(edits_.size());
  AddEdits(step, params);
  row.edit_end = static_cast<int32_t>(edits_.size());
  if (!step.allowed_tokens.empty()) {
    step.WaitForAllowedTokens();  // the engine computes masks during the forward pass
    row.allowed_begin = static_cast<int64_t>(allowed_masks_.size());
    row.allowed_words = static_cast<int32_t>(step.allowed_tokens.size());
    allowed_masks_.insert(allowed_masks_.end(), step.allowed_tokens.begin(),
                          step.allowed_tokens.end());
  }
  rows_.push_back(row);
}

StagedSamples GpuSampler::Stage(int64_t num_logit_rows, std::span<const GpuSampleRequest> requests,
                                cudaStream_t stream) {
  rows_.clear();
  edits_.clear();
  bias_values_.clear();
  edit_biases_.clear();
  allowed_masks_.clear();
  for (const GpuSampleRequest& request : requests) AddRow(request, num_logit_rows);
  CheckSharedRows(rows_);
  CopyUp(rows_, device_rows_, stream);
  CopyUp(edits_, device_edits_, stream);
  CopyUp(bias_values_, device_bias_values_, stream);
  CopyUp(allowed_masks_, device_allowed_masks_, stream);
  Reserve(device_originals_, std::max<size_t>(edits_.size(), 1));
  Reserve(outputs_, std::max<size_t>(rows_.size(), 1));
  return StagedSamples{static_cast<int64_t>(rows_.size()),
                       device_rows_.data(),
                       device_edits_.data(),
                       device_bias_values_.data(),
                       device_originals_.data(),
                       device_allowed_masks_.data(),
                       outputs_.device()};
}

std::vector<SequenceResult> GpuSampler::Collect(cudaStream_t stream, bool step_done) {
  std::vector<SequenceResult> results(rows_.size());
  if (rows_.empty()) return results;
  // The kernel wrote outputs_ on the host.
  if (!step_done) MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (size_t r = 0; r < rows_.size(); ++r) {
    const SampleRowOutput& out = outputs_.host()[r];
    if (out.token_id < 0 || out.token_id >= vocab_ || out.num_top < 0 ||
        out.num_top > kGpuMaxTopLogprobs) {
      throw Error("GPU sampler: row " + std::to_string(r) + " came back with token " +
                  std::to_string(out.token_id) + " (internal error)");
    }
    results[r].token_id = out.token_id;
    if (rows_[r].num_logprobs < 0) continue;
    results[r].logprobs.chosen = {out.token_id, out.chosen_logprob};
    for (int32_t i = 0; i < out.num_top; ++i) {
      results[r].logprobs.top.push_back({out.top_ids[i], out.top_logprobs[i]});
    }
  }
  return results;
}

std::vector<SequenceResult> GpuSampler::Sample(float* logits, int64_t num_logit_rows,
                                               std::span<const GpuSampleRequest> requests,
                                               cudaStream_t stream) {
  const StagedSamples staged = Stage(num_logit_rows, requests, stream);
  if (staged.count == 0) return {};
  LaunchSampleRows(logits, vocab_, staged, stream);
  return Collect(stream);
}

}  // namespace mkserve::cuda
