// Test backends that wrap another Backend:
//  - CheckingBackend simulates the paged KV cache: every written slot records (token, position),
//    and every key a query reads must hold this sequence's own token at that position in a block
//    the table still maps. It catches two sequences writing one slot in a step, reads of released
//    blocks, and shared or reused blocks holding the wrong content.
//  - The step hook lets tests pace steps or inject failures.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"

namespace mkserve::testing {

class CheckingBackend : public Backend {
 public:
  explicit CheckingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {
    for (const KvGroup& group : inner_->kv_layout().groups) {
      slots_.emplace_back(group.num_blocks * kBlockTokens, Slot{-1, -1});
    }
  }
  // Called before each step with the step number; may throw to simulate a backend failure.
  void set_step_hook(std::function<void(int64_t)> hook) { hook_ = std::move(hook); }
  std::vector<std::string> violations() const {
    std::lock_guard lock(mutex_);
    return violations_;
  }
  int64_t num_steps() const { return num_steps_; }

  std::string name() const override { return "checking(" + inner_->name() + ")"; }
  const ModelConfig& config() const override { return inner_->config(); }
  const KvLayout& kv_layout() const override { return inner_->kv_layout(); }

  StepOutputs Step(const StepInputs& inputs) override {
    int64_t step = num_steps_++;
    if (hook_) hook_(step);
    std::set<std::pair<size_t, int64_t>> written;  // (group, slot) this step
    for (const SequenceStep& step : inputs.sequences) Write(step, written);
    for (const SequenceStep& step : inputs.sequences) Read(step);
    return inner_->Step(inputs);
  }

 private:
  struct Slot {
    int32_t token_id;
    int64_t position;
  };

  static int32_t ExpectedToken(const SequenceStep& step, int64_t position) {
    int64_t num_prompt = static_cast<int64_t>(step.prompt_token_ids.size());
    return position < num_prompt ? step.prompt_token_ids[position]
                                 : step.output_token_ids[position - num_prompt];
  }

  // The slot of `position`, or -1 (recording a violation) when its block is not mapped.
  int64_t SlotOf(const SequenceStep& step, size_t group, int64_t position, const char* what) {
    auto table = step.block_tables[group];
    int64_t block = position / kBlockTokens;
    if (block >= static_cast<int64_t>(table.size()) || table[block] < 0) {
      Violation(step, std::string(what) + " of unmapped/released block at position " +
                          std::to_string(position) + " group " + std::to_string(group));
      return -1;
    }
    return table[block] * kBlockTokens + position % kBlockTokens;
  }

  void Write(const SequenceStep& step, std::set<std::pair<size_t, int64_t>>& written) {
    for (size_t g = 0; g < slots_.size(); ++g) {
      for (size_t j = 0; j < step.token_ids.size(); ++j) {
        int64_t position = step.start_position + static_cast<int64_t>(j);
        int64_t slot = SlotOf(step, g, position, "write");
        if (slot < 0) continue;
        if (!written.insert({g, slot}).second) Violation(step, "two sequences wrote one slot");
        slots_[g][slot] = {step.token_ids[j], position};
      }
    }
  }

  // The widest key range any query of this chunk reads: from the first query's window start to
  // the last query.
  void Read(const SequenceStep& step) {
    int64_t last = step.start_position + static_cast<int64_t>(step.token_ids.size()) - 1;
    for (size_t g = 0; g < slots_.size(); ++g) {
      const KvGroup& group = inner_->kv_layout().groups[g];
      int64_t first = group.attention == AttentionKind::kSliding
                          ? FirstKeyInWindow(step.start_position, group.window_tokens)
                          : 0;
      for (int64_t key = first; key <= last; ++key) {
        int64_t slot = SlotOf(step, g, key, "read");
        if (slot < 0) return;
        Slot seen = slots_[g][slot];
        if (seen.token_id != ExpectedToken(step, key) || seen.position != key) {
          Violation(step, "slot for position " + std::to_string(key) + " holds token " +
                              std::to_string(seen.token_id) + "@" + std::to_string(seen.position));
          return;
        }
      }
    }
  }

  void Violation(const SequenceStep& step, const std::string& what) {
    std::lock_guard lock(mutex_);
    violations_.push_back("sequence " + std::to_string(step.sequence_id) + ": " + what);
  }

  std::unique_ptr<Backend> inner_;
  std::vector<std::vector<Slot>> slots_;  // per group, per physical slot
  std::function<void(int64_t)> hook_;
  std::atomic<int64_t> num_steps_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> violations_;
};

}  // namespace mkserve::testing
