#include "engine/backend.h"

#include <exception>

namespace mkserve {
namespace {

// A step that ran inside StartStep: its outputs, or what it threw.
class FinishedStep : public PendingStep {
 public:
  FinishedStep(const StepInputs& inputs, StepOutputs outputs)
      : PendingStep(inputs), outputs_(std::move(outputs)) {}
  FinishedStep(const StepInputs& inputs, std::exception_ptr error)
      : PendingStep(inputs), error_(std::move(error)) {}
  const StepOutputs& Wait() override {
    if (error_) std::rethrow_exception(error_);
    return outputs_;
  }

 private:
  StepOutputs outputs_;
  std::exception_ptr error_;
};

bool DecodesTokenSampledBefore(const SequenceStep& step) {
  for (int32_t token : step.token_ids) {
    if (token == kTokenSampledBefore) return true;
  }
  return false;
}

}  // namespace

PendingStep::PendingStep(const StepInputs& inputs) {
  for (const SequenceStep& step : inputs.sequences) sequence_ids_.push_back(step.sequence_id);
}

int64_t PendingStep::RowOf(int64_t sequence_id) const {
  for (size_t i = 0; i < sequence_ids_.size(); ++i) {
    if (sequence_ids_[i] == sequence_id) return static_cast<int64_t>(i);
  }
  return -1;
}

std::unique_ptr<PendingStep> Backend::StartStep(const StepInputs& inputs, PendingStep* after) {
  try {
    std::vector<int32_t> tokens;
    return std::make_unique<FinishedStep>(inputs,
                                          Step(ResolveTokensSampledBefore(inputs, after, tokens)));
  } catch (...) {
    return std::make_unique<FinishedStep>(inputs, std::current_exception());
  }
}

void CheckTokensSampledBefore(const StepInputs& inputs, const PendingStep* after) {
  for (const SequenceStep& step : inputs.sequences) {
    if (!DecodesTokenSampledBefore(step)) continue;
    const std::string who = "sequence " + std::to_string(step.sequence_id);
    if (step.token_ids.size() != 1) {
      throw Error(who + ": a row that decodes the token sampled before runs that token only");
    }
    if (after == nullptr || after->RowOf(step.sequence_id) < 0) {
      throw Error(who + ": decodes the token a previous step sampled, and no step given runs it");
    }
    const SamplingParams* p = step.sampling;
    if (p != nullptr && (p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f ||
                         p->repetition_penalty != 1.0f ||
                         static_cast<int64_t>(step.output_token_ids.size()) + 1 < p->min_tokens)) {
      throw Error(who +
                  ": its sampling reads the output tokens (penalties or min_tokens), which lack "
                  "the token sampled before");
    }
  }
}

StepInputs ResolveTokensSampledBefore(const StepInputs& inputs, PendingStep* after,
                                      std::vector<int32_t>& tokens) {
  CheckTokensSampledBefore(inputs, after);
  StepInputs resolved = inputs;
  tokens.clear();
  tokens.reserve(inputs.sequences.size());  // no reallocation: the spans point into it
  for (SequenceStep& step : resolved.sequences) {
    if (!DecodesTokenSampledBefore(step)) continue;
    const StepOutputs& before = after->Wait();
    const int32_t token = before.results.at(after->RowOf(step.sequence_id)).token_id;
    if (token < 0) {
      throw Error("sequence " + std::to_string(step.sequence_id) +
                  ": decodes the token a previous step sampled, and that step sampled none");
    }
    tokens.push_back(token);
    step.token_ids = std::span<const int32_t>(&tokens.back(), 1);
  }
  return resolved;
}

void CheckPromptChunk(const SequenceStep& chunk, int64_t max_tokens) {
  if (chunk.sample || chunk.return_logits || !chunk.next_token_ids.empty()) {
    throw Error(
        "a prompt chunk beside the steps computes KV only: no sampling, logits or logprobs");
  }
  if (static_cast<int64_t>(chunk.token_ids.size()) > max_tokens) {
    throw Error("a prompt chunk of " + std::to_string(chunk.token_ids.size()) +
                " tokens is longer than the " + std::to_string(max_tokens) + " this backend takes");
  }
}

}  // namespace mkserve
