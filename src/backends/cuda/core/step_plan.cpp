#include "backends/cuda/core/step_plan.h"

#include <algorithm>
#include <string>

#include "backends/cuda/sampling/gpu_sampler.h"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

std::string Who(int64_t index, const SequenceStep& step) {
  return "CUDA backend: sequence " + std::to_string(step.sequence_id) + " (entry " +
         std::to_string(index) + "): ";
}

void ValidateTokens(const ModelConfig& config, const KvLayout& layout, const SequenceStep& step,
                    const std::string& who) {
  if (step.token_ids.empty()) throw Error(who + "no tokens to run");
  if (step.start_position < 0) throw Error(who + "negative start_position");
  for (int32_t id : step.token_ids) {
    if (id < 0 || id >= config.vocab_size) {
      throw Error(who + "token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(config.vocab_size));
    }
  }
  if (static_cast<int64_t>(step.block_tables.size()) != layout.num_groups()) {
    throw Error(who + std::to_string(step.block_tables.size()) + " block tables for " +
                std::to_string(layout.num_groups()) + " KV groups");
  }
  if (step.sample && step.sampling == nullptr) throw Error(who + "sample set without sampling");
  if (!step.next_token_ids.empty() && step.next_token_ids.size() != step.token_ids.size()) {
    throw Error(who + "next_token_ids must have one entry per token");
  }
  for (int32_t id : step.next_token_ids) {
    if (id >= config.vocab_size)
      throw Error(who + "next token id " + std::to_string(id) + " is outside the vocabulary");
  }
}

// Every page the chunk reads or writes must be a live block of the pool.
void ValidateTable(const KvGroup& group, std::span<const int32_t> table, int64_t start, int64_t end,
                   const std::string& who) {
  const int64_t first =
      group.attention == AttentionKind::kSliding ? FirstKeyInWindow(start, group.window_tokens) : 0;
  const int64_t last_page = (end - 1) / kBlockTokens;
  if (static_cast<int64_t>(table.size()) <= last_page) {
    throw Error(who + "block table has " + std::to_string(table.size()) + " blocks, needs " +
                std::to_string(last_page + 1));
  }
  for (int64_t page = first / kBlockTokens; page <= last_page; ++page) {
    if (table[page] < 0 || table[page] >= group.num_blocks) {
      throw Error(who + "logical block " + std::to_string(page) + " maps to " +
                  std::to_string(table[page]) + ", outside the pool of " +
                  std::to_string(group.num_blocks) + " blocks (or released)");
    }
  }
}

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

void AddLogitRows(const SequenceStep& step, int32_t seq_index, int32_t first_token, int64_t vocab,
                  std::vector<LogitRow>* rows) {
  const int32_t count = static_cast<int32_t>(step.token_ids.size());
  for (int32_t i = 0; i < count; ++i) {
    const bool wanted = step.return_logits || (step.sample && i == count - 1) ||
                        (!step.next_token_ids.empty() && step.next_token_ids[i] >= 0);
    if (wanted) rows->push_back({first_token + i, seq_index, i, NeedsOf(step, i, vocab)});
  }
}

void AddSequence(const KvLayout& layout, const SequenceStep& step, int32_t seq_index, int64_t vocab,
                 StepPlan* plan) {
  const int32_t first_token = static_cast<int32_t>(plan->num_tokens);
  for (size_t i = 0; i < step.token_ids.size(); ++i) {
    const int64_t position = step.start_position + static_cast<int64_t>(i);
    plan->token_ids.push_back(step.token_ids[i]);
    plan->positions.push_back(static_cast<int32_t>(position));
    plan->seq_of_token.push_back(seq_index);
    for (int64_t g = 0; g < layout.num_groups(); ++g) {
      const int32_t block = step.block_tables[g][position / kBlockTokens];
      plan->slots[g].push_back(
          static_cast<int32_t>(block * kBlockTokens + position % kBlockTokens));
    }
  }
  plan->num_tokens += static_cast<int64_t>(step.token_ids.size());
  const int64_t end = step.start_position + static_cast<int64_t>(step.token_ids.size());
  plan->max_context_tokens = std::max(plan->max_context_tokens, end);
  AddLogitRows(step, seq_index, first_token, vocab, &plan->logit_rows);
}

// Tables are cut to the pages the step can touch (the rest of an engine's table is unused
// here), so the padded width follows the longest context, not the longest reservation.
void PadBlockTables(const StepInputs& inputs, StepPlan* plan) {
  std::vector<int64_t> needed;
  int64_t pages = 1;
  for (const SequenceStep& step : inputs.sequences) {
    const int64_t end = step.start_position + static_cast<int64_t>(step.token_ids.size());
    needed.push_back((end + kBlockTokens - 1) / kBlockTokens);
    pages = std::max(pages, needed.back());
  }
  for (size_t g = 0; g < plan->block_tables.size(); ++g) {
    plan->max_pages[g] = pages;
    plan->block_tables[g].assign(plan->num_sequences * pages, -1);
    for (int64_t s = 0; s < plan->num_sequences; ++s) {
      const auto& table = inputs.sequences[s].block_tables[g];
      std::copy(table.begin(), table.begin() + needed[s],
                plan->block_tables[g].begin() + s * pages);
    }
  }
}

}  // namespace

StepPlan BuildStepPlan(const ModelConfig& config, const KvLayout& layout, const StepInputs& inputs,
                       int64_t max_num_tokens) {
  StepPlan plan;
  plan.num_sequences = static_cast<int64_t>(inputs.sequences.size());
  plan.slots.resize(layout.num_groups());
  plan.max_pages.resize(layout.num_groups());
  plan.block_tables.resize(layout.num_groups());
  int64_t total = 0;
  for (size_t s = 0; s < inputs.sequences.size(); ++s) {
    const SequenceStep& step = inputs.sequences[s];
    const std::string who = Who(static_cast<int64_t>(s), step);
    ValidateTokens(config, layout, step, who);
    const int64_t end = step.start_position + static_cast<int64_t>(step.token_ids.size());
    if (end > config.max_position_embeddings || end > INT32_MAX) {
      throw Error(who + "position " + std::to_string(end - 1) + " is beyond the model's " +
                  std::to_string(config.max_position_embeddings) + " positions");
    }
    for (int64_t g = 0; g < layout.num_groups(); ++g) {
      ValidateTable(layout.groups[g], step.block_tables[g], step.start_position, end, who);
    }
    total += static_cast<int64_t>(step.token_ids.size());
  }
  if (total > max_num_tokens) {
    throw Error("CUDA backend: step has " + std::to_string(total) + " tokens, more than " +
                "max_num_tokens " + std::to_string(max_num_tokens) + " (chunk the prefill)");
  }
  plan.decode_only = !inputs.sequences.empty();
  for (size_t s = 0; s < inputs.sequences.size(); ++s) {
    AddSequence(layout, inputs.sequences[s], static_cast<int32_t>(s), config.vocab_size, &plan);
    plan.decode_only = plan.decode_only && inputs.sequences[s].token_ids.size() == 1;
  }
  PadBlockTables(inputs, &plan);
  return plan;
}

}  // namespace mkserve::cuda
