#include "engine/scheduler.h"

#include <algorithm>

namespace mkserve {

Scheduler::Scheduler(BlockManager& blocks, SchedulerOptions options)
    : blocks_(blocks), options_(options) {}

void Scheduler::Add(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  PushWaiting(seq, /*front=*/false);
}

void Scheduler::PushWaiting(Sequence* seq, bool front) {
  waiting_at_[seq] = waiting_.insert(front ? waiting_.begin() : waiting_.end(), seq);
}

void Scheduler::EraseWaiting(Sequence* seq) {
  const auto at = waiting_at_.find(seq);
  if (at == waiting_at_.end()) return;
  waiting_.erase(at->second);
  waiting_at_.erase(at);
}

void Scheduler::Remove(Sequence* seq) {
  if (seq->chunk_in_flight) {
    // The chunk may still write these blocks: FinishChunk frees them.
    chunk_orphan_.block_tables = std::move(seq->block_tables);
    seq->block_tables.clear();
    seq->block_hashes.clear();
    seq->chunk_in_flight = false;
    chunk_sequence_ = nullptr;
  }
  blocks_.Free(*seq);
  EraseRunning(seq);
  EraseWaiting(seq);
  seq->status = SequenceStatus::kFinished;
  seq->num_scheduled_tokens = 0;
}

Sequence* Scheduler::FinishChunk() {
  Sequence* seq = chunk_sequence_;
  if (seq != nullptr) seq->chunk_in_flight = false;
  blocks_.Free(chunk_orphan_);
  chunk_sequence_ = nullptr;
  chunk_running_ = false;
  return seq;
}

Batch Scheduler::Schedule() {
  Batch batch;
  int64_t budget = options_.max_step_tokens;
  for (Sequence* seq : running_) {
    if (!seq->chunk_in_flight) seq->num_scheduled_tokens = 0;
  }
  ScheduleDecodes(batch, budget);
  const bool decoding = !batch.sequences.empty();
  if (decoding) budget = std::min(budget, options_.max_prefill_tokens_while_decoding);
  const bool chunks_beside = decoding && options_.prompt_chunk_tokens > 0;
  SchedulePrefills(batch, budget, chunks_beside);
  // Admitting right after a preemption would only hand the freed blocks to someone newer. A chunk
  // goes first: shorter requests admitted past a long prompt must not take every slot and block
  // it needs.
  if (chunks_beside && !chunk_running_ && batch.preempted.empty()) StartChunk(batch);
  if (batch.preempted.empty()) AdmitWaiting(batch, budget, chunks_beside);
  if (batch.empty() && batch.chunk == nullptr) {
    // Every running sequence is a stalled prefill (or has its chunk in flight): free the newest
    // so the others can move. A chunk in flight will move on its own.
    Sequence* newest = NewestPreemptible();
    if (newest == nullptr) return batch;
    if (running_.size() == 1 && !chunk_running_) {
      DropOutOfMemory(newest, batch);
    } else {
      Preempt(newest, batch);
    }
  }
  return batch;
}

Batch Scheduler::ScheduleAhead(const std::vector<Sequence*>& sequences) {
  Batch batch;
  int64_t budget = options_.max_step_tokens;
  for (Sequence* seq : sequences) Take(seq, 1, batch, budget);
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
    Sequence* newest = NewestPreemptible();
    if (newest != seq) {
      Preempt(newest, batch);
    } else if (running_.size() == 1 && !chunk_running_) {
      DropOutOfMemory(seq, batch);
      return false;
    } else {
      Preempt(seq, batch);
      return false;
    }
  }
  return true;
}

Sequence* Scheduler::NewestPreemptible() const {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (!(*it)->chunk_in_flight) return *it;
  }
  return nullptr;
}

bool Scheduler::RunsBeside(const Sequence& seq) const {
  // Prompt logprobs need every position's logits, which only a step returns.
  return seq.num_uncomputed_tokens() > options_.max_prefill_tokens_while_decoding &&
         seq.sampling.num_prompt_logprobs < 0;
}

void Scheduler::SchedulePrefills(Batch& batch, int64_t& budget, bool chunks_beside) {
  for (Sequence* seq : running_) {
    if (budget == 0) return;
    if (seq->num_scheduled_tokens > 0 || seq->is_decoding()) continue;  // chunks in flight too
    if (chunks_beside && RunsBeside(*seq)) continue;                    // waits for StartChunk
    int64_t wanted = std::min(seq->num_uncomputed_tokens(), budget);
    int64_t num_tokens = blocks_.MaxAllocatableTokens(*seq, wanted);
    if (num_tokens > 0) Take(seq, num_tokens, batch, budget);
  }
}

void Scheduler::AdmitWaiting(Batch& batch, int64_t& budget, bool chunks_beside) {
  auto next = waiting_.begin();  // the first not yet passed over
  while (next != waiting_.end() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < options_.max_batch) {
    Sequence* seq = *next;
    int64_t num_cached = 0;
    const bool attached = Attach(seq, num_cached);
    // Beside a chunk, a long prompt waits for the chunk stream and a sibling for its first
    // sibling's prompt: shorter requests behind them go on.
    if (chunks_beside && (!attached || RunsBeside(*seq))) {
      if (attached) Detach(seq);
      ++next;
      continue;
    }
    if (!attached) return;  // no overtaking
    int64_t wanted = std::min(seq->num_uncomputed_tokens(), budget);
    int64_t num_tokens = blocks_.MaxAllocatableTokens(*seq, wanted);
    if (num_tokens == 0) return Detach(seq);
    ++next;  // Admit takes seq out of the queue
    Admit(seq, num_cached);
    Take(seq, num_tokens, batch, budget);
  }
}

// The oldest prompt that runs beside the steps gets the next chunk; the last prompt token is left
// for a step.
void Scheduler::StartChunk(Batch& batch) {
  Sequence* seq = nullptr;
  for (Sequence* running : running_) {
    if (running->num_scheduled_tokens == 0 && !running->is_decoding() && RunsBeside(*running)) {
      seq = running;
      break;
    }
  }
  int64_t num_cached = 0;
  const bool admitting = seq == nullptr;
  if (admitting && static_cast<int64_t>(running_.size()) < options_.max_batch) {
    for (Sequence* waiting : waiting_) {  // the first long one, in order
      // Not attached, its uncomputed tokens are all of them: a short one is passed over without
      // the prefix lookup (a long queue of short requests costs each step a walk, no more).
      if (!RunsBeside(*waiting)) continue;
      if (!Attach(waiting, num_cached)) continue;  // a sibling waiting for its first one
      if (RunsBeside(*waiting)) {
        seq = waiting;
        break;
      }
      Detach(waiting);
    }
  }
  if (seq == nullptr) return;
  // The chunk's sequence cannot be preempted: leave each running sequence a block to grow into
  // meanwhile, rather than make the streams preempt each other for the chunk's sake.
  const int64_t wanted = std::min(options_.prompt_chunk_tokens, seq->num_uncomputed_tokens() - 1);
  const int64_t reserve = static_cast<int64_t>(running_.size()) - (admitting ? 0 : 1);
  const int64_t num_tokens = blocks_.MaxAllocatableTokens(*seq, wanted, reserve);
  if (num_tokens == 0) {
    if (admitting) Detach(seq);
    return;
  }
  if (admitting) Admit(seq, num_cached);
  blocks_.Allocate(*seq, num_tokens);
  seq->num_scheduled_tokens = num_tokens;
  seq->chunk_in_flight = true;
  chunk_running_ = true;
  chunk_sequence_ = seq;
  batch.chunk = seq;
}

bool Scheduler::Attach(Sequence* seq, int64_t& num_cached) {
  if (seq->prompt_ready && !*seq->prompt_ready) return false;  // its sibling is still prefilling
  num_cached = blocks_.AttachCachedPrefix(*seq);
  return true;
}

void Scheduler::Detach(Sequence* seq) {
  blocks_.Free(*seq);
  seq->num_computed_tokens = 0;
}

void Scheduler::Admit(Sequence* seq, int64_t num_cached) {
  blocks_.RecordPrefixLookup(seq->num_tokens(), num_cached);
  if (!seq->was_admitted) seq->num_cached_tokens = std::min(num_cached, seq->num_prompt_tokens);
  seq->was_admitted = true;
  seq->status = SequenceStatus::kRunning;
  EraseWaiting(seq);
  running_.push_back(seq);
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
  PushWaiting(seq, /*front=*/true);
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
