// Scheduler: decides which sequences run each step and how many tokens each computes.
//
// Policy (continuous batching, FCFS):
//   1. Running sequences that are decoding get one token each, oldest first, so prefills never
//      starve them. When KV runs out the newest running sequence is preempted by recompute: its
//      blocks are freed (full ones stay in the prefix cache) and it goes to the FRONT of the
//      waiting queue; re-admitted, it re-prefills prompt + generated tokens.
//   2. Running sequences still prefilling continue their prompt in chunks, oldest first.
//   3. Waiting sequences are admitted in order while the batch has room (max_batch), the step has
//      token budget left and KV fits; the first that does not fit stops admission (no overtaking,
//      except around prompts that wait for the chunk stream, below).
// Every step computes at most max_step_tokens tokens (chunked prefill). While any sequence decodes,
// steps 2 and 3 together get at most max_prefill_tokens_while_decoding of them: a long prompt then
// arrives in small chunks, so each step, and with it every running stream's next token, stays
// short; with nobody decoding a prompt gets the whole step. A sequence that cannot grow even when
// it runs alone is reported in Batch::out_of_memory and dropped.
//
// Chunks beside the steps (prompt_chunk_tokens > 0, a backend that runs them): while any sequence
// decodes, a prompt with more uncomputed tokens than that cap does not run inside steps at all.
// The oldest such prompt gets a chunk of up to prompt_chunk_tokens (leaving each running sequence
// a block to grow into) that the backend computes beside the next steps (Batch::chunk), before
// any admission, so it is not starved of slots and blocks. The other long prompts wait for it in
// order, siblings wait for their first sibling's prompt, and shorter requests queued behind
// either are admitted past them (they only use the steps). One chunk runs at a time; the
// prompt's last token always runs in a step, which samples the first token. A sequence whose
// chunk is in flight is neither scheduled nor preempted, and when it is removed (cancelled,
// failed) its blocks stay held until the chunk has finished (FinishChunk): the chunk may still be
// writing them.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace mkserve {

struct SchedulerOptions {
  int64_t max_batch = 64;          // running sequences
  int64_t max_step_tokens = 2048;  // tokens computed per step, prefill chunks included
  int64_t max_prefill_tokens_while_decoding = 1024;  // prompt tokens in a step with decode rows
  int64_t prompt_chunk_tokens = 0;  // chunks beside the steps (see above); 0: inside steps only
};

struct Batch {
  std::vector<Sequence*> sequences;      // each with num_scheduled_tokens > 0; decodes first
  std::vector<Sequence*> preempted;      // sent back to waiting this step
  std::vector<Sequence*> out_of_memory;  // removed: the KV cache cannot hold them even alone
  int64_t num_tokens = 0;
  // To start beside this step: num_scheduled_tokens prompt tokens of this sequence.
  Sequence* chunk = nullptr;
  bool empty() const { return sequences.empty(); }
};

class Scheduler {
 public:
  Scheduler(BlockManager& blocks, SchedulerOptions options);

  void Add(Sequence* seq);     // to the back of the waiting queue
  void Remove(Sequence* seq);  // finished or cancelled: frees its KV and forgets it
  Batch Schedule();
  // The engine's decode lookahead took the step: `sequences` (running, decoding, with room for
  // one more token; every running sequence among them) each decode one token, and nothing is
  // admitted this step.
  Batch ScheduleAhead(const std::vector<Sequence*>& sequences);
  // The chunk of Batch::chunk has finished (or failed): returns its sequence, which the caller
  // advances (or fails), or null when the sequence was removed meanwhile (its blocks go now).
  Sequence* FinishChunk();

  bool has_work() const { return !waiting_.empty() || !running_.empty() || chunk_running_; }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  const SchedulerOptions& options() const { return options_; }

 private:
  void ScheduleDecodes(Batch& batch, int64_t& budget);
  void SchedulePrefills(Batch& batch, int64_t& budget, bool chunks_beside);
  void AdmitWaiting(Batch& batch, int64_t& budget, bool chunks_beside);
  void StartChunk(Batch& batch);
  // Attaches a waiting sequence's cached prefix (`num_cached` tokens); false, attaching nothing,
  // when it waits for its sibling's prompt. Detach undoes the attach; Admit makes it running.
  bool Attach(Sequence* seq, int64_t& num_cached);
  void Detach(Sequence* seq);
  void Admit(Sequence* seq, int64_t num_cached);
  // Whether, while others decode, this prompt runs as chunks beside the steps.
  bool RunsBeside(const Sequence& seq) const;
  Sequence* NewestPreemptible() const;  // the newest running sequence without a chunk in flight
  bool MakeRoomForDecode(Sequence* seq, Batch& batch);
  void Take(Sequence* seq, int64_t num_tokens, Batch& batch, int64_t& budget);
  void Preempt(Sequence* seq, Batch& batch);
  void DropOutOfMemory(Sequence* seq, Batch& batch);
  void EraseRunning(Sequence* seq);
  void PushWaiting(Sequence* seq, bool front);
  void EraseWaiting(Sequence* seq);  // a no-op when it is not waiting

  BlockManager& blocks_;
  SchedulerOptions options_;
  // A list with each entry's place: cancelling a request of many sequences among many waiting
  // ones removes each in constant time.
  std::list<Sequence*> waiting_;
  std::unordered_map<const Sequence*, std::list<Sequence*>::iterator> waiting_at_;
  std::vector<Sequence*> running_;  // in admission order, oldest first
  bool chunk_running_ = false;
  Sequence* chunk_sequence_ = nullptr;  // null once removed while its chunk runs
  Sequence chunk_orphan_;               // the blocks of that removed sequence
};

}  // namespace mkserve
