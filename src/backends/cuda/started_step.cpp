#include "backends/cuda/started_step.h"

#include <utility>

namespace mkserve::cuda {

StartedStep::StartedStep(const StepInputs& inputs, const StepPlan& plan,
                         std::optional<InStepSamples> in_step, DecodePath& path, int slot,
                         const HostMappedBuffer<int32_t>& argmax, StartedStep** in_flight)
    : PendingStep(inputs),
      in_step_(std::move(in_step)),
      path_(path),
      slot_(slot),
      argmax_(argmax),
      in_flight_(in_flight) {
  for (const LogitRow& row : plan.logit_rows) {
    sequence_of_row_.push_back(static_cast<int32_t>(row.sequence_index));
  }
  outputs_.results.resize(inputs.sequences.size());
  outputs_.decode_path = std::string(path.name());
  *in_flight_ = this;
}

StartedStep::~StartedStep() { Read(); }

void StartedStep::Read() {
  if (read_) return;
  read_ = true;
  *in_flight_ = nullptr;
  try {
    path_.Finish(slot_);
    const bool staged = in_step_ && in_step_->staged.count > 0;
    if (staged) {
      std::vector<SequenceResult> samples = in_step_->sampler->Collect(nullptr, true);
      for (size_t i = 0; i < samples.size(); ++i) {
        outputs_.results[in_step_->sequences[i]] = std::move(samples[i]);
      }
    }
    for (size_t r = 0; r < sequence_of_row_.size(); ++r) {
      if (staged && in_step_->request_of_row[r] >= 0) continue;
      outputs_.results[sequence_of_row_[r]].token_id = argmax_.host()[r];
    }
  } catch (...) {
    error_ = std::current_exception();
  }
}

const StepOutputs& StartedStep::Wait() {
  Read();
  if (error_) std::rethrow_exception(error_);
  return outputs_;
}

int32_t StartedStep::SourceOf(int64_t row) const {
  if (in_step_ && in_step_->staged.count > 0 && in_step_->request_of_row.at(row) >= 0) {
    return 2 * in_step_->request_of_row[row] + 1;
  }
  return static_cast<int32_t>(2 * row);
}

DeviceTokens StartedStep::Picks() const {
  DeviceTokens picks;
  picks.argmax = argmax_.device();
  if (in_step_ && in_step_->staged.count > 0) picks.samples = in_step_->staged.outputs;
  return picks;
}

}  // namespace mkserve::cuda
