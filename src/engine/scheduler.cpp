#include "engine/scheduler.h"

#include <algorithm>

namespace mkserve {

Scheduler::Scheduler(BlockManager& blocks, SchedulerOptions options)
    : blocks_(blocks), options_(options) {}

void Scheduler::Add(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_back(seq);
}

void Scheduler::Remove(Sequence* seq) {
  blocks_.Free(*seq);
  EraseRunning(seq);
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
  seq->status = SequenceStatus::kFinished;
  seq->num_scheduled_tokens = 0;
}

Batch Scheduler::Schedule() {
  Batch batch;
  int64_t budget = options_.max_step_tokens;
  for (Sequence* seq : running_) seq->num_scheduled_tokens = 0;
  ScheduleDecodes(batch, budget);
  if (!batch.sequences.empty()) {
    budget = std::min(budget, options_.max_prefill_tokens_while_decoding);
  }
  SchedulePrefills(batch, budget);
  // Admitting right after a preemption would only hand the freed blocks to someone newer.
  if (batch.preempted.empty()) AdmitWaiting(batch, budget);
  if (batch.empty() && !running_.empty()) {
    // Every running sequence is a stalled prefill: free the newest so the others can move.
    if (running_.size() == 1) {
      DropOutOfMemory(running_.front(), batch);
    } else {
      Preempt(running_.back(), batch);
    }
  }
  return batch;
}

void Scheduler::ScheduleDecodes(Batch& batch, int64_t& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* seq = running_[i];
    if (!seq->is_decoding()) continue;
    if (!MakeRoomForDecode(seq, batch)) {
      --i;  // seq left running_; the next one moved into slot i
      continue;
    }
    Take(seq, 1, batch, budget);
  }
}

// Preempts newer sequences until `seq` can grow by one token. False when `seq` itself had to go.
bool Scheduler::MakeRoomForDecode(Sequence* seq, Batch& batch) {
  while (!blocks_.CanAllocate(*seq, 1)) {
    if (running_.back() != seq) {
      Preempt(running_.back(), batch);
    } else if (running_.size() == 1) {
      DropOutOfMemory(seq, batch);
      return false;
    } else {
      Preempt(seq, batch);
      return false;
    }
  }
  return true;
}

void Scheduler::SchedulePrefills(Batch& batch, int64_t& budget) {
  for (Sequence* seq : running_) {
    if (budget == 0) return;
    if (seq->num_scheduled_tokens > 0 || seq->is_decoding()) continue;
    int64_t wanted = std::min(seq->num_uncomputed_tokens(), budget);
    int64_t num_tokens = blocks_.MaxAllocatableTokens(*seq, wanted);
    if (num_tokens > 0) Take(seq, num_tokens, batch, budget);
  }
}

void Scheduler::AdmitWaiting(Batch& batch, int64_t& budget) {
  while (!waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < options_.max_batch) {
    Sequence* seq = waiting_.front();
    if (seq->prompt_ready && !*seq->prompt_ready) return;  // its sibling is still prefilling
    int64_t num_cached = blocks_.AttachCachedPrefix(*seq);
    int64_t wanted = std::min(seq->num_uncomputed_tokens(), budget);
    int64_t num_tokens = blocks_.MaxAllocatableTokens(*seq, wanted);
    if (num_tokens == 0) {
      blocks_.Free(*seq);
      seq->num_computed_tokens = 0;
      return;
    }
    blocks_.RecordPrefixLookup(seq->num_tokens(), num_cached);
    if (!seq->was_admitted) seq->num_cached_tokens = std::min(num_cached, seq->num_prompt_tokens);
    seq->was_admitted = true;
    seq->status = SequenceStatus::kRunning;
    waiting_.pop_front();
    running_.push_back(seq);
    Take(seq, num_tokens, batch, budget);
  }
}

void Scheduler::Take(Sequence* seq, int64_t num_tokens, Batch& batch, int64_t& budget) {
  blocks_.Allocate(*seq, num_tokens);
  seq->num_scheduled_tokens = num_tokens;
  batch.sequences.push_back(seq);
  batch.num_tokens += num_tokens;
  budget -= num_tokens;
}

void Scheduler::Preempt(Sequence* seq, Batch& batch) {
  blocks_.Free(*seq);
  seq->num_computed_tokens = 0;
  seq->num_scheduled_tokens = 0;
  seq->status = SequenceStatus::kWaiting;
  EraseRunning(seq);
  waiting_.push_front(seq);
  batch.preempted.push_back(seq);
}

void Scheduler::DropOutOfMemory(Sequence* seq, Batch& batch) {
  Remove(seq);
  batch.out_of_memory.push_back(seq);
}

void Scheduler::EraseRunning(Sequence* seq) {
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
}

}  // namespace mkserve
