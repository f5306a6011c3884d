#include "backends/cuda/started_step.h"

#include <algorithm>
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

int32_t StartedStep::PickRowOf(int64_t sequence_id) const {
  const int64_t sequence = RowOf(sequence_id);
  const auto row = std::find(sequence_of_row_.begin(), sequence_of_row_.end(), sequence);
  return sequence < 0 || row == sequence_of_row_.end()
             ? -1
             : static_cast<int32_t>(row - sequence_of_row_.begin());
}

}  // namespace mkserve::cuda
