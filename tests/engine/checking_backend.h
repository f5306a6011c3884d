// Test backends that wrap another Backend:
//  - CheckingBackend simulates the paged KV cache: every written slot records (token, position),
//    and every key a query reads must hold this sequence's own token at that position in a block
//    the table still maps. It catches two sequences writing one slot in a step, reads of released
//    blocks, and shared or reused blocks holding the wrong content.
//  - The step hook lets tests pace steps or inject failures.
//  - Prompt chunks beside the steps (enable_prompt_chunks): a chunk writes its KV only when it
//    finishes, which the test decides (release_chunks, or after `steps` further steps), so a
//    sequence scheduled while its chunk is in flight, or a block reused before the chunk is done,
//    shows up as a violation.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
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

  // Chunks of up to `max_tokens`; each finishes `steps` steps after it started (-1: only once
  // released, or when the engine drops it). `hook` (may be empty) runs when a chunk starts and
  // when it finishes, and may throw to fail it there.
  enum class ChunkPhase { kStart, kFinish };
  void enable_prompt_chunks(int64_t max_tokens, int64_t steps,
                            std::function<void(ChunkPhase)> hook = {}) {
    max_chunk_tokens_ = max_tokens;
    chunk_steps_ = steps;
    chunk_hook_ = std::move(hook);
  }
  void release_chunks() { chunks_released_ = true; }
  int64_t num_chunks() const { return num_chunks_; }
  // The most prompt tokens a step held beside decode rows.
  int64_t max_prompt_tokens_beside_decode() const { return max_prompt_beside_decode_; }

  std::string name() const override { return "checking(" + inner_->name() + ")"; }
  const ModelConfig& config() const override { return inner_->config(); }
  const KvLayout& kv_layout() const override { return inner_->kv_layout(); }

  StepOutputs Step(const StepInputs& inputs) override {
    int64_t step = num_steps_++;
    if (hook_) hook_(step);
    std::set<std::pair<size_t, int64_t>> written;  // (group, slot) this step
    int64_t decode_rows = 0, prompt_tokens = 0;
    for (const SequenceStep& step : inputs.sequences) {
      if (chunk_ && step.sequence_id == chunk_->step.sequence_id) {
        Violation(step, "scheduled while its prompt chunk is in flight");
      }
      (step.token_ids.size() == 1 ? decode_rows : prompt_tokens) +=
          static_cast<int64_t>(step.token_ids.size());
      Write(step, written);
    }
    if (decode_rows > 0) {
      max_prompt_beside_decode_ = std::max<int64_t>(max_prompt_beside_decode_, prompt_tokens);
    }
    for (const SequenceStep& step : inputs.sequences) Read(step);
    return inner_->Step(inputs);
  }

  int64_t max_prompt_chunk_tokens() const override { return max_chunk_tokens_; }

  std::unique_ptr<PendingChunk> StartPromptChunk(const SequenceStep& chunk) override {
    if (chunk_) Violation(chunk, "a prompt chunk started while another was in flight");
    if (chunk.sample || static_cast<int64_t>(chunk.token_ids.size()) > max_chunk_tokens_) {
      Violation(chunk, "a prompt chunk that samples or is too long");
    }
    if (chunk_hook_) chunk_hook_(ChunkPhase::kStart);
    ++num_chunks_;
    chunk_ = std::make_unique<Chunk>(chunk, num_steps_ + chunk_steps_);
    return std::make_unique<Pending>(this);
  }

 private:
  // A chunk's inputs, copied: the engine's spans may change once StartPromptChunk returns.
  struct Chunk {
    Chunk(const SequenceStep& from, int64_t done_at) : done_at_step(done_at) {
      tokens.assign(from.token_ids.begin(), from.token_ids.end());
      prompt.assign(from.prompt_token_ids.begin(), from.prompt_token_ids.end());
      output.assign(from.output_token_ids.begin(), from.output_token_ids.end());
      for (auto table : from.block_tables) tables.emplace_back(table.begin(), table.end());
      step.sequence_id = from.sequence_id;
      step.start_position = from.start_position;
      step.token_ids = tokens;
      step.prompt_token_ids = prompt;
      step.output_token_ids = output;
      for (const auto& table : tables) step.block_tables.push_back(table);
    }
    std::vector<int32_t> tokens, prompt, output;
    std::vector<std::vector<int32_t>> tables;
    SequenceStep step;
    int64_t done_at_step;
  };
  class Pending : public PendingChunk {
   public:
    explicit Pending(CheckingBackend* backend) : backend_(backend) {}
    ~Pending() override {
      if (backend_->chunk_) backend_->FinishChunk();
    }
    // Time passes in steps here; a wait with a timeout is the engine having nothing else to run,
    // which lets a chunk timed in steps finish (one timed by release only waits for it).
    bool Wait(std::chrono::microseconds timeout) override {
      const Chunk& chunk = *backend_->chunk_;
      bool done = backend_->chunks_released_ ||
                  (backend_->chunk_steps_ >= 0 &&
                   (backend_->num_steps_ >= chunk.done_at_step || timeout.count() > 0));
      if (!done) return false;
      backend_->FinishChunk();
      if (backend_->chunk_hook_) backend_->chunk_hook_(ChunkPhase::kFinish);
      return true;
    }

   private:
    CheckingBackend* backend_;
  };

  // The chunk's KV lands now (a late write into a reused block corrupts its new owner's KV).
  void FinishChunk() {
    std::set<std::pair<size_t, int64_t>> written;
    Write(chunk_->step, written);
    Read(chunk_->step);
    chunk_.reset();
  }

  struct Slot {
    int32_t token_id;
    int64_t position;
  };

  // The step's own tokens, then the sequence's (a decode lookahead row's output_token_ids lack
  // its own token, the one sampled before).
  static int32_t ExpectedToken(const SequenceStep& step, int64_t position) {
    if (position >= step.start_position) return step.token_ids[position - step.start_position];
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
  int64_t max_chunk_tokens_ = 0;
  int64_t chunk_steps_ = -1;
  std::function<void(ChunkPhase)> chunk_hook_;
  std::atomic<bool> chunks_released_{false};
  std::unique_ptr<Chunk> chunk_;  // the chunk in flight
  std::atomic<int64_t> num_chunks_{0};
  std::atomic<int64_t> max_prompt_beside_decode_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> violations_;
};

}  // namespace mkserve::testing
