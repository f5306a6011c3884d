// StartedStep: a decode step the CUDA backend enqueued on one of its two slots and returned from
// before the GPU finished it (CudaBackend::StartStep). Every row is picked on the device (the
// argmax, or the kernel's in-step sample), so the next step can take its tokens from there
// (DecodePath::Start's pick rows) while the host has not read them yet. Wait finishes the path's
// step (its watchdog) and reads the picks; destroying an unread step reads it first.
#pragma once

#include <cstdint>
#include <exception>
#include <optional>

#include "backends/cuda/core/host_mapped_buffer.h"
#include "backends/cuda/core/step_plan.h"
#include "backends/cuda/decode/decode_path.h"
#include "backends/cuda/sampling/step_sampler.h"
#include "engine/backend.h"

namespace mkserve::cuda {

class StartedStep : public PendingStep {
 public:
  // `path` has enqueued `plan` on `slot`, its argmax rows going to `argmax`; `*in_flight` is the
  // backend's record of the slot's step, cleared once the step is read.
  StartedStep(const StepInputs& inputs, const StepPlan& plan, std::optional<InStepSamples> in_step,
              DecodePath& path, int slot, const HostMappedBuffer<int32_t>& argmax,
              StartedStep** in_flight);
  ~StartedStep() override;

  const StepOutputs& Wait() override;
  // Reads the step (once): its outputs, or what finishing it threw, are kept for Wait.
  void Read();

  int slot() const { return slot_; }
  // The logits row whose pick is the next token of `sequence_id`, or -1.
  int32_t PickRowOf(int64_t sequence_id) const;

 private:
  std::vector<int32_t> sequence_of_row_;  // per logits row: its StepInputs sequence
  std::optional<InStepSamples> in_step_;
  DecodePath& path_;
  int slot_;
  const HostMappedBuffer<int32_t>& argmax_;
  StartedStep** in_flight_;
  bool read_ = false;
  StepOutputs outputs_;
  std::exception_ptr error_;
};

}  // namespace mkserve::cuda
