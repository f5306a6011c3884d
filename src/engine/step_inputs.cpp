#include "engine/step_inputs.h"

#include <span>

namespace mkserve {
namespace {

// For each position p of the chunk, the prompt token p + 1 whose logprob is still unreported,
// or -1. Positions already reported before a preemption are not reported twice.
void PromptLogprobTargets(const Sequence& seq, std::vector<int32_t>& out) {
  out.clear();
  for (int64_t p = seq.num_computed_tokens; p < seq.num_computed_tokens + seq.num_scheduled_tokens;
       ++p) {
    bool wanted = p + 1 < seq.num_prompt_tokens && p + 1 > seq.num_prompt_logprobs_done;
    out.push_back(wanted ? seq.token_ids[p + 1] : -1);
  }
}

}  // namespace

bool SamplesThisStep(const Sequence& seq) {
  return seq.num_computed_tokens + seq.num_scheduled_tokens == seq.num_tokens() &&
         seq.sampling.max_tokens > 0;
}

StepInputs PrepareStepInputs(const Batch& batch, std::vector<std::vector<int32_t>>& scratch) {
  StepInputs inputs;
  scratch.resize(batch.sequences.size());
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const Sequence& seq = *batch.sequences[i];
    std::span<const int32_t> tokens(seq.token_ids);
    SequenceStep& step = inputs.sequences.emplace_back();
    step.sequence_id = seq.id;
    step.token_ids = tokens.subspan(seq.num_computed_tokens, seq.num_scheduled_tokens);
    step.start_position = seq.num_computed_tokens;
    for (const std::vector<int32_t>& table : seq.block_tables) step.block_tables.push_back(table);
    step.sample = SamplesThisStep(seq);
    step.sampling = &seq.sampling;
    // Always set, so backends and checkers can see the whole sequence.
    step.prompt_token_ids = tokens.first(seq.num_prompt_tokens);
    step.output_token_ids = tokens.subspan(seq.num_prompt_tokens);
    step.sample_index = seq.num_output_tokens();
    if (seq.sampling.num_prompt_logprobs >= 0) {
      PromptLogprobTargets(seq, scratch[i]);
      step.next_token_ids = scratch[i];
    }
  }
  return inputs;
}

}  // namespace mkserve
