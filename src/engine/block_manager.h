// BlockManager: hands out the paged KV blocks of every group (KvLayout) to sequences.
//
// Each group has its own pool of ref-counted blocks and its own PrefixCache. A sequence holds one
// block table per group; block i covers tokens [64i, 64i + 64). Sliding groups release blocks that
// lie wholly before the window of the next token to compute, FirstKeyInWindow(next, window): the
// query at `next` and every later one never read them again. Every released block that is cached
// (slid out of a window, or held when its sequence finished or was preempted) stays in the prefix
// cache, parked in an LRU list, and is evicted only when a fresh block is needed: a parked block
// counts as available, so keeping it costs running sequences nothing. Without that, the blocks a
// sliding group released while prefilling and decoding would be gone, and neither the next turn
// of a conversation nor an exact replay of a prompt longer than the window could attach.
//
// Prefix attach: a new sequence takes the longest run of cached full blocks such that (a) every
// full-attention group holds all of them and (b) every sliding group holds the blocks inside the
// window of the first uncached position (earlier ones are not needed; they stay -1). At least the
// last token is always left to compute, so the step that finishes the prompt produces logits.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/kv_layout.h"
#include "engine/prefix_cache.h"
#include "engine/sequence.h"

namespace mkserve {

class BlockManager {
 public:
  explicit BlockManager(const KvLayout& layout);

  // The most of `num_tokens` further tokens of `seq` whose KV fits now, counting blocks that the
  // sliding release will hand back, and leaving `reserve_blocks` of each group for others; 0 when
  // none fits.
  int64_t MaxAllocatableTokens(const Sequence& seq, int64_t num_tokens,
                               int64_t reserve_blocks = 0) const;
  bool CanAllocate(const Sequence& seq, int64_t num_tokens) const {
    return MaxAllocatableTokens(seq, num_tokens) >= num_tokens;
  }
  // Releases sliding blocks behind the next token's window, then grows every table to cover
  // num_computed_tokens + num_tokens. Only after CanAllocate said yes.
  void Allocate(Sequence& seq, int64_t num_tokens);
  // On admission (tables empty): attaches the cached prefix and sets num_computed_tokens to it.
  int64_t AttachCachedPrefix(Sequence& seq);
  // After a step: hashes the blocks that became full and computed, and indexes them.
  void CacheFullBlocks(Sequence& seq);
  // Releases every block of `seq`, last block first (cached ones stay parked for reuse, the tail
  // evicted first), and clears its tables.
  void Free(Sequence& seq);

  int64_t num_groups() const { return static_cast<int64_t>(pools_.size()); }
  int64_t num_total_blocks(int64_t group) const { return pools_[group].group.num_blocks; }
  // Free plus parked (cached but unreferenced): what a new sequence can get.
  int64_t num_available_blocks(int64_t group) const;
  int64_t num_used_blocks(int64_t group) const {
    return num_total_blocks(group) - num_available_blocks(group);
  }
  int32_t ref_count(int64_t group, int32_t block) const { return pools_[group].ref_counts[block]; }
  // Usage statistics: the scheduler records each admitted sequence's lookup once (a sequence
  // blocked at the head of the queue is looked up every step).
  void RecordPrefixLookup(int64_t num_query_tokens, int64_t num_hit_tokens) {
    num_prefix_query_tokens_ += num_query_tokens;
    num_prefix_hit_tokens_ += num_hit_tokens;
  }
  int64_t num_prefix_query_tokens() const { return num_prefix_query_tokens_; }
  int64_t num_prefix_hit_tokens() const { return num_prefix_hit_tokens_; }

 private:
  struct Pool {
    KvGroup group;
    std::vector<int32_t> ref_counts;
    std::vector<int32_t> free_blocks;  // never cached or evicted; used as a stack
    PrefixCache cache;
  };
  bool is_sliding(const Pool& pool) const;
  int64_t FirstNeededBlock(const Pool& pool, int64_t next_position) const;
  int32_t TakeBlock(Pool& pool);
  void Reference(Pool& pool, int32_t block);
  void Release(Pool& pool, int32_t block);
  bool WindowsPresent(const std::vector<std::vector<int32_t>>& found, int64_t num_blocks) const;

  std::vector<Pool> pools_;
  int64_t num_prefix_query_tokens_ = 0;
  int64_t num_prefix_hit_tokens_ = 0;
};

}  // namespace mkserve
