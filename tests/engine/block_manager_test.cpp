#include "engine/block_manager.h"

#include <gtest/gtest.h>

namespace mkserve {
namespace {

KvLayout Layout(int64_t full_blocks, int64_t sliding_blocks = 0, int64_t window = 128) {
  KvLayout layout;
  layout.groups.push_back({AttentionKind::kFull, 0, {0}, full_blocks});
  if (sliding_blocks > 0) {
    layout.groups.push_back({AttentionKind::kSliding, window, {1}, sliding_blocks});
  }
  return layout;
}

Sequence MakeSequence(int64_t num_tokens, int32_t first_token = 0) {
  Sequence seq;
  for (int64_t i = 0; i < num_tokens; ++i) seq.token_ids.push_back(first_token + i);
  seq.num_prompt_tokens = num_tokens;
  return seq;
}

// Computes the whole sequence in chunks, as the scheduler and engine would.
void RunAll(BlockManager& manager, Sequence& seq, int64_t chunk) {
  while (seq.num_computed_tokens < seq.num_tokens()) {
    int64_t n = std::min(chunk, seq.num_uncomputed_tokens());
    ASSERT_TRUE(manager.CanAllocate(seq, n));
    manager.Allocate(seq, n);
    seq.num_computed_tokens += n;
    manager.CacheFullBlocks(seq);
  }
}

TEST(BlockManagerTest, AllocatesWholeBlocksAndFreesThem) {
  BlockManager manager(Layout(4));
  Sequence seq = MakeSequence(100);
  EXPECT_TRUE(manager.CanAllocate(seq, 100));
  manager.Allocate(seq, 100);
  EXPECT_EQ(seq.block_tables[0].size(), 2u);
  EXPECT_EQ(manager.num_used_blocks(0), 2);
  Sequence other = MakeSequence(200, 1000);
  EXPECT_FALSE(manager.CanAllocate(other, 200));
  EXPECT_EQ(manager.MaxAllocatableTokens(other, 200), 128);
  manager.Free(seq);
  EXPECT_EQ(manager.num_used_blocks(0), 0);
  EXPECT_TRUE(manager.CanAllocate(other, 200));
}

TEST(BlockManagerTest, SlidingGroupReleasesBlocksBehindTheNextWindow) {
  BlockManager manager(Layout(16, 16, 128));
  Sequence seq = MakeSequence(400);
  manager.Allocate(seq, 320);  // blocks 0..4 in both groups
  seq.num_computed_tokens = 320;
  manager.Allocate(seq, 1);  // next query at 320 reads keys 193..320: blocks 3, 4, 5
  const std::vector<int32_t>& sliding = seq.block_tables[1];
  ASSERT_EQ(sliding.size(), 6u);
  EXPECT_EQ(sliding[0], -1);
  EXPECT_EQ(sliding[1], -1);
  EXPECT_EQ(sliding[2], -1);
  for (int b = 3; b < 6; ++b) EXPECT_GE(sliding[b], 0) << b;
  EXPECT_EQ(manager.num_used_blocks(1), 3);
  EXPECT_EQ(manager.num_used_blocks(0), 6);  // full attention keeps everything
}

TEST(BlockManagerTest, SlidingReleaseCountsTowardRoom) {
  BlockManager manager(Layout(16, 3, 64));  // window of one block
  Sequence seq = MakeSequence(400);
  RunAll(manager, seq, 64);  // only possible because released blocks are reused
  EXPECT_LE(manager.num_used_blocks(1), 2);
}

TEST(BlockManagerTest, PrefixAttachReusesFullBlocksAndLeavesTheLastToken) {
  BlockManager manager(Layout(16));
  Sequence a = MakeSequence(200);
  RunAll(manager, a, 64);
  std::vector<int32_t> a_blocks = a.block_tables[0];
  manager.Free(a);
  EXPECT_EQ(manager.num_used_blocks(0), 0);  // cached blocks are parked, not used

  Sequence b = MakeSequence(150);
  b.token_ids.push_back(7);
  EXPECT_EQ(manager.AttachCachedPrefix(b), 128);
  EXPECT_EQ(b.block_tables[0], (std::vector<int32_t>{a_blocks[0], a_blocks[1]}));
  EXPECT_EQ(manager.ref_count(0, a_blocks[0]), 1);

  Sequence c = MakeSequence(192);                 // exactly three full cached blocks
  EXPECT_EQ(manager.AttachCachedPrefix(c), 128);  // the last token must be computed
  EXPECT_EQ(manager.ref_count(0, a_blocks[0]), 2);
  Sequence d = MakeSequence(150, 1);  // different first token: nothing matches
  EXPECT_EQ(manager.AttachCachedPrefix(d), 0);
}

TEST(BlockManagerTest, SharedBlocksStayUntilTheLastReferenceGoes) {
  BlockManager manager(Layout(8));
  Sequence a = MakeSequence(129);
  RunAll(manager, a, 129);
  Sequence b = MakeSequence(129);
  ASSERT_EQ(manager.AttachCachedPrefix(b), 128);
  manager.Free(a);
  EXPECT_EQ(manager.ref_count(0, b.block_tables[0][0]), 1);
  EXPECT_EQ(manager.num_used_blocks(0), 2);  // a's tail block went back; b holds two
  manager.Free(b);
  EXPECT_EQ(manager.num_used_blocks(0), 0);
}

TEST(BlockManagerTest, EvictsLeastRecentlyUsedCachedBlocks) {
  BlockManager manager(Layout(4));
  Sequence a = MakeSequence(128);
  RunAll(manager, a, 128);
  manager.Free(a);  // parked first: oldest
  Sequence b = MakeSequence(128, 500);
  RunAll(manager, b, 128);
  manager.Free(b);
  Sequence c = MakeSequence(128, 900);
  manager.Allocate(c, 128);  // no free blocks left: evicts a's two blocks
  manager.Free(c);
  Sequence a2 = MakeSequence(129);
  EXPECT_EQ(manager.AttachCachedPrefix(a2), 0);
  Sequence b2 = MakeSequence(129, 500);
  EXPECT_EQ(manager.AttachCachedPrefix(b2), 128);
}

TEST(BlockManagerTest, SlidingAttachNeedsOnlyTheWindowAndSlidBlocksStayCached) {
  BlockManager manager(Layout(32, 32, 128));
  Sequence a = MakeSequence(640);
  RunAll(manager, a, 64);
  std::vector<int32_t> a_sliding = a.block_tables[1];
  EXPECT_EQ(manager.num_used_blocks(1), 3);  // the window; slid-out blocks are parked, not used
  manager.Free(a);

  Sequence b = MakeSequence(641);  // the first uncached position 640 needs keys 513..640
  EXPECT_EQ(manager.AttachCachedPrefix(b), 640);
  ASSERT_EQ(b.block_tables[1].size(), 10u);
  for (int blk = 0; blk < 8; ++blk) EXPECT_EQ(b.block_tables[1][blk], -1) << blk;
  EXPECT_EQ(b.block_tables[1][8], a_sliding[8]);
  EXPECT_EQ(b.block_tables[1][9], a_sliding[9]);
  manager.Free(b);

  // A shorter shared prefix needs sliding blocks 4 and 5, which `a` released while sliding.
  Sequence c = MakeSequence(400);
  c.token_ids.push_back(99999);
  ASSERT_EQ(manager.AttachCachedPrefix(c), 384);
  EXPECT_EQ(c.block_tables[1][3], -1);
  EXPECT_GE(c.block_tables[1][4], 0);
  EXPECT_GE(c.block_tables[1][5], 0);
}

TEST(BlockManagerTest, SlidingAttachFailsWhenAWindowBlockWasEvicted) {
  BlockManager manager(Layout(32, 6, 128));
  Sequence a = MakeSequence(640);
  RunAll(manager, a, 64);  // the sliding pool of 6 evicted slid-out blocks 0..3 on the way
  manager.Free(a);
  Sequence b = MakeSequence(641);
  EXPECT_EQ(manager.AttachCachedPrefix(b), 640);  // the window blocks 8, 9 are still there
  manager.Free(b);
  Sequence c = MakeSequence(300);  // position 256 would need sliding blocks 2 and 3: evicted
  c.token_ids.push_back(99999);
  EXPECT_EQ(manager.AttachCachedPrefix(c), 0);
}

TEST(BlockManagerTest, EvictionTakesAPrefixTailBeforeItsHead) {
  BlockManager manager(Layout(3));
  Sequence a = MakeSequence(128);
  RunAll(manager, a, 128);
  manager.Free(a);
  Sequence c = MakeSequence(128, 900);
  manager.Allocate(c, 128);  // one free block plus one eviction
  Sequence a2 = MakeSequence(129);
  EXPECT_EQ(manager.AttachCachedPrefix(a2), 64);
}

}  // namespace
}  // namespace mkserve
