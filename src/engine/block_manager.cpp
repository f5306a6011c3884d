#include "engine/block_manager.h"

#include <algorithm>
#include <span>

#include "common/error.h"

namespace mkserve {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::span<const int32_t> BlockTokens(const Sequence& seq, int64_t block) {
  return std::span<const int32_t>(seq.token_ids).subspan(block * kBlockTokens, kBlockTokens);
}

}  // namespace

BlockManager::BlockManager(const KvLayout& layout) {
  for (const KvGroup& group : layout.groups) {
    Pool& pool = pools_.emplace_back(Pool{group, {}, {}, PrefixCache(group.num_blocks)});
    pool.ref_counts.assign(group.num_blocks, 0);
    // Reversed so blocks are handed out 0, 1, 2, ...: easier to read in logs and tests.
    for (int64_t b = group.num_blocks - 1; b >= 0; --b) pool.free_blocks.push_back(b);
  }
}

bool BlockManager::is_sliding(const Pool& pool) const {
  return pool.group.attention == AttentionKind::kSliding && pool.group.window_tokens > 0;
}

int64_t BlockManager::FirstNeededBlock(const Pool& pool, int64_t next_position) const {
  if (!is_sliding(pool)) return 0;
  return FirstKeyInWindow(next_position, pool.group.window_tokens) / kBlockTokens;
}

int64_t BlockManager::num_available_blocks(int64_t group) const {
  const Pool& pool = pools_[group];
  return static_cast<int64_t>(pool.free_blocks.size()) + pool.cache.num_parked();
}

int64_t BlockManager::MaxAllocatableTokens(const Sequence& seq, int64_t num_tokens,
                                           int64_t reserve_blocks) const {
  int64_t max_tokens = num_tokens;
  for (int64_t g = 0; g < num_groups(); ++g) {
    const Pool& pool = pools_[g];
    static const std::vector<int32_t> kNoBlocks;
    const std::vector<int32_t>& table = seq.block_tables.empty() ? kNoBlocks : seq.block_tables[g];
    int64_t available = num_available_blocks(g) - reserve_blocks;
    int64_t first_needed = FirstNeededBlock(pool, seq.num_computed_tokens);
    for (int64_t b = 0; b < std::min<int64_t>(first_needed, table.size()); ++b) {
      if (table[b] >= 0 && pool.ref_counts[table[b]] == 1) ++available;
    }
    int64_t coverable = (static_cast<int64_t>(table.size()) + available) * kBlockTokens;
    max_tokens = std::min(max_tokens, coverable - seq.num_computed_tokens);
  }
  return std::max<int64_t>(max_tokens, 0);
}

void BlockManager::Allocate(Sequence& seq, int64_t num_tokens) {
  if (!CanAllocate(seq, num_tokens)) throw Error("BlockManager::Allocate without room (bug)");
  seq.block_tables.resize(pools_.size());
  int64_t num_blocks = CeilDiv(seq.num_computed_tokens + num_tokens, kBlockTokens);
  for (size_t g = 0; g < pools_.size(); ++g) {
    Pool& pool = pools_[g];
    std::vector<int32_t>& table = seq.block_tables[g];
    int64_t first_needed = FirstNeededBlock(pool, seq.num_computed_tokens);
    for (int64_t b = 0; b < std::min<int64_t>(first_needed, table.size()); ++b) {
      if (table[b] >= 0) Release(pool, table[b]);
      table[b] = -1;
    }
    while (static_cast<int64_t>(table.size()) < num_blocks) table.push_back(TakeBlock(pool));
  }
}

int64_t BlockManager::AttachCachedPrefix(Sequence& seq) {
  seq.block_tables.assign(pools_.size(), {});
  seq.block_hashes.clear();
  seq.num_computed_tokens = 0;
  if (!seq.use_prefix_cache || seq.num_tokens() == 0) return 0;
  int64_t max_blocks = (seq.num_tokens() - 1) / kBlockTokens;  // leave the last token to compute
  std::vector<std::vector<int32_t>> found(pools_.size());
  std::vector<uint64_t> hashes;
  uint64_t parent = kRootBlockHash;
  for (int64_t b = 0; b < max_blocks; ++b) {
    uint64_t hash = HashBlock(parent, BlockTokens(seq, b));
    bool all_full_hit = true;
    for (size_t g = 0; g < pools_.size(); ++g) {
      found[g].push_back(pools_[g].cache.Find(hash, parent, BlockTokens(seq, b)));
      if (!is_sliding(pools_[g]) && found[g].back() < 0) all_full_hit = false;
    }
    if (!all_full_hit) break;
    hashes.push_back(hash);
    parent = hash;
  }
  int64_t num_blocks = static_cast<int64_t>(hashes.size());
  while (num_blocks > 0 && !WindowsPresent(found, num_blocks)) --num_blocks;
  for (size_t g = 0; g < pools_.size(); ++g) {
    std::vector<int32_t>& table = seq.block_tables[g];
    table.assign(num_blocks, -1);
    for (int64_t b = FirstNeededBlock(pools_[g], num_blocks * kBlockTokens); b < num_blocks; ++b) {
      table[b] = found[g][b];
      Reference(pools_[g], table[b]);
    }
  }
  seq.block_hashes.assign(hashes.begin(), hashes.begin() + num_blocks);
  seq.num_computed_tokens = num_blocks * kBlockTokens;
  return seq.num_computed_tokens;
}

bool BlockManager::WindowsPresent(const std::vector<std::vector<int32_t>>& found,
                                  int64_t num_blocks) const {
  for (size_t g = 0; g < pools_.size(); ++g) {
    for (int64_t b = FirstNeededBlock(pools_[g], num_blocks * kBlockTokens); b < num_blocks; ++b) {
      if (found[g][b] < 0) return false;
    }
  }
  return true;
}

void BlockManager::CacheFullBlocks(Sequence& seq) {
  int64_t num_full = seq.num_computed_tokens / kBlockTokens;
  for (int64_t b = seq.block_hashes.size(); b < num_full; ++b) {
    uint64_t parent = b == 0 ? kRootBlockHash : seq.block_hashes[b - 1];
    uint64_t hash = HashBlock(parent, BlockTokens(seq, b));
    seq.block_hashes.push_back(hash);
    for (size_t g = 0; g < pools_.size() && g < seq.block_tables.size(); ++g) {
      const std::vector<int32_t>& table = seq.block_tables[g];
      if (b < static_cast<int64_t>(table.size()) && table[b] >= 0) {
        pools_[g].cache.Insert(table[b], hash, parent, BlockTokens(seq, b));
      }
    }
  }
}

void BlockManager::Free(Sequence& seq) {
  // Tail first, so the LRU evicts a prefix's later blocks before the ones every reuse needs.
  for (size_t g = 0; g < seq.block_tables.size(); ++g) {
    const std::vector<int32_t>& table = seq.block_tables[g];
    for (auto it = table.rbegin(); it != table.rend(); ++it) {
      if (*it >= 0) Release(pools_[g], *it);
    }
  }
  seq.block_tables.clear();
  seq.block_hashes.clear();
}

int32_t BlockManager::TakeBlock(Pool& pool) {
  int32_t block = -1;
  if (!pool.free_blocks.empty()) {
    block = pool.free_blocks.back();
    pool.free_blocks.pop_back();
  } else {
    block = pool.cache.EvictOldest();
  }
  if (block < 0) throw Error("KV block pool exhausted (bug: CanAllocate was not checked)");
  pool.ref_counts[block] = 1;
  return block;
}

void BlockManager::Reference(Pool& pool, int32_t block) {
  if (pool.ref_counts[block]++ == 0) pool.cache.Unpark(block);
}

void BlockManager::Release(Pool& pool, int32_t block) {
  if (--pool.ref_counts[block] > 0) return;
  if (pool.cache.IsCached(block)) {
    pool.cache.Park(block);
  } else {
    pool.cache.Erase(block);
    pool.free_blocks.push_back(block);
  }
}

}  // namespace mkserve
