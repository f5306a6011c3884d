#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>

namespace mkserve {
namespace {

KvLayout FullLayout(int64_t num_blocks) {
  KvLayout layout;
  layout.groups.push_back({AttentionKind::kFull, 0, {0}, num_blocks});
  return layout;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(int64_t num_blocks, SchedulerOptions options) {
    blocks_ = std::make_unique<BlockManager>(FullLayout(num_blocks));
    scheduler_ = std::make_unique<Scheduler>(*blocks_, options);
  }
  Sequence* Submit(int64_t prompt_tokens, int32_t first_token) {
    auto seq = std::make_unique<Sequence>();
    seq->id = static_cast<int64_t>(sequences_.size());
    for (int64_t i = 0; i < prompt_tokens; ++i) seq->token_ids.push_back(first_token + i);
    seq->num_prompt_tokens = prompt_tokens;
    scheduler_->Add(seq.get());
    sequences_.push_back(std::move(seq));
    return sequences_.back().get();
  }
  // What the engine does after the backend: advance, and sample at the end of the prompt.
  Batch Step() {
    Batch batch = scheduler_->Schedule();
    for (Sequence* seq : batch.sequences) {
      seq->num_computed_tokens += seq->num_scheduled_tokens;
      blocks_->CacheFullBlocks(*seq);
      if (seq->num_computed_tokens == seq->num_tokens()) seq->token_ids.push_back(7);
    }
    return batch;
  }
  // Chunks beside the steps (prompts over 32 tokens while others decode, chunks of 100), and a
  // first sequence decoding.
  Sequence* StartDecodingBesideChunks() {
    Init(64, {.max_batch = 8,
              .max_step_tokens = 1000,
              .max_prefill_tokens_while_decoding = 32,
              .prompt_chunk_tokens = 100});
    Sequence* decoding = Submit(10, 0);
    Step();
    return decoding;
  }
  // What the engine does when a chunk beside the steps has finished.
  void FinishChunk() {
    Sequence* seq = scheduler_->FinishChunk();
    ASSERT_NE(seq, nullptr);
    seq->num_computed_tokens += seq->num_scheduled_tokens;
    seq->num_scheduled_tokens = 0;
    blocks_->CacheFullBlocks(*seq);
  }
  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Sequence>> sequences_;
};

TEST_F(SchedulerTest, ChunksPrefillUnderTheTokenBudget) {
  Init(64, {.max_batch = 8, .max_step_tokens = 100});
  Sequence* a = Submit(150, 0);
  Sequence* b = Submit(150, 1000);
  Batch first = Step();
  ASSERT_EQ(first.sequences.size(), 1u);
  EXPECT_EQ(a->num_computed_tokens, 100);
  Batch second = Step();
  EXPECT_EQ(second.num_tokens, 100);
  EXPECT_EQ(a->num_computed_tokens, 150);
  EXPECT_EQ(b->num_computed_tokens, 50);
  EXPECT_EQ(a->num_output_tokens(), 1);
}

TEST_F(SchedulerTest, DecodesComeBeforePrefills) {
  Init(64, {.max_batch = 8, .max_step_tokens = 64});
  Sequence* a = Submit(10, 0);
  Step();
  ASSERT_TRUE(a->is_decoding());
  Sequence* b = Submit(500, 1000);
  for (int i = 0; i < 5; ++i) {
    Batch batch = Step();
    ASSERT_EQ(batch.sequences.front(), a);
    EXPECT_EQ(a->num_scheduled_tokens, 1);
    EXPECT_EQ(b->num_scheduled_tokens, 63);
  }
}

TEST_F(SchedulerTest, PromptsGetASmallerBudgetWhileOthersDecode) {
  Init(64, {.max_batch = 8, .max_step_tokens = 1000, .max_prefill_tokens_while_decoding = 100});
  Sequence* a = Submit(10, 0);
  Batch first = Step();
  EXPECT_EQ(first.num_tokens, 10);  // nothing decodes yet: the prompt may take the whole step
  ASSERT_TRUE(a->is_decoding());
  Sequence* b = Submit(900, 1000);
  Sequence* c = Submit(50, 2000);
  for (int i = 0; i < 3; ++i) {
    Batch batch = Step();
    EXPECT_EQ(batch.num_tokens, 1 + 100) << i;  // a's token, then 100 of b's prompt; c waits
    EXPECT_EQ(b->num_computed_tokens, 100 * (i + 1)) << i;
    EXPECT_EQ(c->status, SequenceStatus::kWaiting) << i;
  }
  scheduler_->Remove(a);
  Batch alone = Step();  // nobody decodes: b's rest and c's prompt fill the step
  EXPECT_EQ(b->num_computed_tokens, 900);
  EXPECT_EQ(c->num_computed_tokens, 50);
  EXPECT_EQ(alone.num_tokens, 650);
}

TEST_F(SchedulerTest, LongPromptsRunAsChunksBesideDecodesOneAtATime) {
  Sequence* a = StartDecodingBesideChunks();
  ASSERT_TRUE(a->is_decoding());
  Sequence* b = Submit(250, 1000);  // long: chunks beside the steps
  Sequence* c = Submit(200, 2000);  // long too: waits for b's chunks
  Batch batch = Step();
  ASSERT_EQ(batch.chunk, b);
  EXPECT_EQ(batch.sequences, std::vector<Sequence*>{a});  // no prompt tokens inside the step
  EXPECT_TRUE(b->chunk_in_flight);
  EXPECT_EQ(b->num_scheduled_tokens, 100);
  Sequence* d = Submit(20, 3000);  // short, behind c: admitted past it, since c waits for b
  for (int i = 0; i < 3; ++i) {
    batch = Step();  // b's chunk still runs: a decodes, d's prompt runs inside the step
    EXPECT_EQ(batch.chunk, nullptr);
    EXPECT_EQ(batch.sequences, (std::vector<Sequence*>{a, d}));
    EXPECT_EQ(b->num_scheduled_tokens, 100);
    EXPECT_EQ(b->num_computed_tokens, 0);
    EXPECT_EQ(c->status, SequenceStatus::kWaiting);
  }
  EXPECT_EQ(d->num_output_tokens(), 3);
  FinishChunk();
  EXPECT_EQ(b->num_computed_tokens, 100);
  batch = Step();
  ASSERT_EQ(batch.chunk, b);  // the oldest long prompt goes on
  EXPECT_EQ(b->num_scheduled_tokens, 100);
  FinishChunk();
  batch = Step();  // 50 left, more than the cap: all but the last token beside the step
  ASSERT_EQ(batch.chunk, b);
  EXPECT_EQ(b->num_scheduled_tokens, 49);
  FinishChunk();
  EXPECT_TRUE(b->is_decoding());
  batch = Step();  // b's last prompt token samples inside the step; c gets the next chunk
  EXPECT_EQ(batch.sequences, (std::vector<Sequence*>{a, b, d}));
  EXPECT_EQ(b->num_output_tokens(), 1);
  ASSERT_EQ(batch.chunk, c);
  EXPECT_EQ(c->num_scheduled_tokens, 100);
  FinishChunk();
  for (Sequence* done : {a, b, d}) scheduler_->Remove(done);
  batch = Step();  // nobody decodes: c's rest runs inside the step again
  EXPECT_EQ(batch.chunk, nullptr);
  EXPECT_EQ(batch.sequences, std::vector<Sequence*>{c});
  EXPECT_EQ(batch.num_tokens, 100);
}

TEST_F(SchedulerTest, ShortRequestsPassASiblingWaitingForALongPromptButNotTheChunkItself) {
  Sequence* a = StartDecodingBesideChunks();
  auto ready = std::make_shared<bool>(false);
  Sequence* first = Submit(250, 1000);  // n = 2: the first sibling's prompt runs as chunks
  Sequence* second = Submit(250, 1000);
  second->prompt_ready = ready;
  Sequence* short_one = Submit(20, 3000);
  Batch batch = Step();
  EXPECT_EQ(batch.chunk, first);
  EXPECT_EQ(second->status, SequenceStatus::kWaiting);  // until the first sibling's prompt is in
  EXPECT_EQ(short_one->status, SequenceStatus::kRunning);
  EXPECT_EQ(batch.sequences, (std::vector<Sequence*>{a, short_one}));
}

TEST_F(SchedulerTest, TheChunkTakesItsSlotBeforeShorterRequestsBehindIt) {
  Init(64, {.max_batch = 2,
            .max_step_tokens = 1000,
            .max_prefill_tokens_while_decoding = 32,
            .prompt_chunk_tokens = 100});
  Sequence* a = Submit(10, 0);
  Step();
  ASSERT_TRUE(a->is_decoding());
  Sequence* long_one = Submit(250, 1000);
  Sequence* short_one = Submit(20, 2000);
  Batch batch = Step();  // one slot left: the long prompt's, not the shorter one behind it
  EXPECT_EQ(batch.chunk, long_one);
  EXPECT_EQ(short_one->status, SequenceStatus::kWaiting);
}

TEST_F(SchedulerTest, PromptLogprobRequestsAndShortPromptsStayInsideSteps) {
  Sequence* a = StartDecodingBesideChunks();
  Sequence* echo = Submit(80, 1000);
  echo->sampling.num_prompt_logprobs = 0;  // needs every position's logits
  Sequence* small = Submit(20, 2000);
  Batch batch = Step();
  EXPECT_EQ(batch.chunk, nullptr);
  EXPECT_EQ(echo->num_computed_tokens, 32);  // under the cap, inside the step
  EXPECT_EQ(small->status, SequenceStatus::kWaiting);
  Step();
  Step();
  EXPECT_EQ(echo->num_computed_tokens, 80);
  EXPECT_EQ(small->num_computed_tokens, 16);
  EXPECT_EQ(a->num_output_tokens(), 4);
}

TEST_F(SchedulerTest, ASequenceWithItsChunkInFlightIsNeitherPreemptedNorFreed) {
  // 8 blocks. a decodes from 100 tokens; b's chunks leave a one block to grow into.
  Init(8, {.max_batch = 8,
           .max_step_tokens = 1000,
           .max_prefill_tokens_while_decoding = 16,
           .prompt_chunk_tokens = 128});
  Sequence* a = Submit(100, 0);
  Step();
  while (a->num_tokens() < 128) Step();
  Sequence* b = Submit(300, 1000);
  Batch batch = Step();
  ASSERT_EQ(batch.chunk, b);
  ASSERT_EQ(b->num_scheduled_tokens, 128);
  FinishChunk();
  batch = Step();  // a takes its 3rd block; b's chunk gets 2 of the 3 left, 1 stays for a
  ASSERT_EQ(batch.chunk, b);
  ASSERT_EQ(b->num_scheduled_tokens, 128);
  while (batch.preempted.empty() && a->status == SequenceStatus::kRunning) batch = Step();
  // a grew into the block left for it (position 192), then needed a 5th at 256: the pool is
  // full, and b, the newest, has its chunk in flight, so a itself goes back to waiting.
  EXPECT_EQ(batch.preempted, std::vector<Sequence*>{a});
  EXPECT_EQ(a->num_tokens(), 257);
  EXPECT_TRUE(b->chunk_in_flight);
  EXPECT_EQ(blocks_->num_used_blocks(0), 4);  // b's; a's are parked in the prefix cache
  scheduler_->Remove(b);  // cancelled while its chunk runs: the blocks stay held
  EXPECT_EQ(blocks_->num_used_blocks(0), 4);
  EXPECT_TRUE(scheduler_->has_work());
  EXPECT_EQ(scheduler_->FinishChunk(), nullptr);
  EXPECT_EQ(blocks_->num_used_blocks(0), 0);
}

TEST_F(SchedulerTest, RespectsMaxBatchAndAdmitsInOrder) {
  Init(64, {.max_batch = 2, .max_step_tokens = 1000});
  Sequence* a = Submit(10, 0);
  Sequence* b = Submit(10, 100);
  Sequence* c = Submit(10, 200);
  Step();
  EXPECT_EQ(scheduler_->num_running(), 2);
  EXPECT_EQ(c->status, SequenceStatus::kWaiting);
  scheduler_->Remove(a);
  Step();
  EXPECT_EQ(c->status, SequenceStatus::kRunning);
  EXPECT_EQ(b->status, SequenceStatus::kRunning);
}

TEST_F(SchedulerTest, PreemptsTheNewestAndRecomputesItLater) {
  Init(4, {.max_batch = 8, .max_step_tokens = 1000});
  Sequence* a = Submit(100, 0);     // 2 blocks
  Sequence* b = Submit(100, 1000);  // 2 blocks: the pool is full
  Step();
  for (int i = 0; i < 28; ++i) Step();  // both reach 128 tokens: a full block each
  ASSERT_EQ(a->num_tokens(), 129);
  Batch batch = Step();  // a needs a third block: b, the newest, is preempted
  ASSERT_EQ(batch.preempted.size(), 1u);
  EXPECT_EQ(batch.preempted[0], b);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  int64_t b_tokens = b->num_tokens();
  EXPECT_EQ(b_tokens, 129);  // generated tokens are kept for the re-prefill
  scheduler_->Remove(a);
  batch = Step();
  ASSERT_EQ(batch.sequences.size(), 1u);
  EXPECT_EQ(batch.sequences[0], b);
  // a's third block evicted b's parked tail block; b's first block is still cached, so only the
  // rest is recomputed, ending with a sample.
  EXPECT_EQ(b->num_scheduled_tokens, b_tokens - 64);
  EXPECT_EQ(b->num_tokens(), b_tokens + 1);
  EXPECT_EQ(b->num_cached_tokens, 0);  // usage counts only the first admission
}

TEST_F(SchedulerTest, ALoneSequenceThatOutgrowsTheCacheIsDropped) {
  Init(2, {.max_batch = 8, .max_step_tokens = 1000});
  Sequence* a = Submit(120, 0);
  Batch batch;
  for (int i = 0; i < 10 && batch.out_of_memory.empty(); ++i) batch = Step();
  ASSERT_EQ(batch.out_of_memory.size(), 1u);
  EXPECT_EQ(batch.out_of_memory[0], a);
  EXPECT_EQ(a->num_tokens(), 129);  // the token at position 128 has no block to go to
  EXPECT_FALSE(scheduler_->has_work());
  EXPECT_EQ(blocks_->num_used_blocks(0), 0);
}

TEST_F(SchedulerTest, SiblingWaitsForThePromptThenAttachesIt) {
  Init(16, {.max_batch = 8, .max_step_tokens = 100});
  auto ready = std::make_shared<bool>(false);
  Sequence* first = Submit(150, 0);
  Sequence* sibling = Submit(150, 0);
  first->prompt_ready = sibling->prompt_ready = ready;
  *ready = true;  // the first sibling is never blocked: the engine sets it after its prefill
  first->prompt_ready = nullptr;
  *ready = false;
  Step();
  EXPECT_EQ(sibling->status, SequenceStatus::kWaiting);
  Step();
  EXPECT_EQ(sibling->status, SequenceStatus::kWaiting);
  *ready = true;
  Step();
  EXPECT_EQ(sibling->num_cached_tokens, 128);
  EXPECT_EQ(sibling->block_tables[0][0], first->block_tables[0][0]);
  EXPECT_EQ(blocks_->ref_count(0, first->block_tables[0][0]), 2);
}

}  // namespace
}  // namespace mkserve
