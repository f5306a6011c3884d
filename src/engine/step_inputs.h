// Marshaling: turns the scheduler's Batch into the backend's StepInputs (spans into each
// Sequence, valid until the sequences change after the step).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/scheduler.h"

namespace mkserve {

// Whether this step ends with a sampled token for `seq`: its last chunk, unless max_tokens is 0.
bool SamplesThisStep(const Sequence& seq);

// `scratch` backs the prompt-logprob targets (next_token_ids) and must outlive the result.
StepInputs PrepareStepInputs(const Batch& batch, std::vector<std::vector<int32_t>>& scratch);

}  // namespace mkserve
