// PrefixCache: which physical blocks of one KV group hold which full token blocks, so a new
// request (or the next turn of a conversation) attaches them instead of recomputing.
//
// Keys are chained hashes: HashBlock(parent, tokens) mixes the previous block's hash with this
// block's 64 token ids, so one key names the whole prefix up to the block's end. The hash is a
// 64-bit splitmix/xxhash-style mix (not cryptographic). A hit is confirmed by comparing the stored
// parent hash and token ids, so a false hit needs two distinct prefixes whose chain hashes collide
// in 64 bits AND share the block's exact tokens; we accept that ~2^-64 risk, as nano-vllm does.
//
// A block is either referenced by sequences (not "parked") or unreferenced but still cached
// ("parked" in an LRU list, evicted oldest first when a fresh block is needed). The BlockManager
// owns reference counts; this class only indexes and orders.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace mkserve {

inline constexpr uint64_t kRootBlockHash = 0x6d6b73657276650full;  // parent of block 0

uint64_t HashBlock(uint64_t parent_hash, std::span<const int32_t> token_ids);

class PrefixCache {
 public:
  explicit PrefixCache(int64_t num_blocks);

  // The cached block holding exactly (parent_hash, token_ids) under `hash`, or -1.
  int32_t Find(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> token_ids) const;
  // Indexes `block`; a no-op when the hash is already cached (another copy keeps it).
  void Insert(int32_t block, uint64_t hash, uint64_t parent_hash,
              std::span<const int32_t> token_ids);
  // Drops `block` from the index (and from the LRU if parked).
  void Erase(int32_t block);
  bool IsCached(int32_t block) const { return entries_[block].cached; }

  void Park(int32_t block);    // now unreferenced: evictable, most recently used
  void Unpark(int32_t block);  // referenced again
  // Evicts the least recently used parked block and returns it, or -1 when none is parked.
  int32_t EvictOldest();
  int64_t num_parked() const { return static_cast<int64_t>(lru_.size()); }
  int64_t num_cached() const { return static_cast<int64_t>(by_hash_.size()); }

 private:
  struct Entry {
    bool cached = false;
    bool parked = false;
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int32_t> token_ids;
    std::list<int32_t>::iterator lru_position;
  };
  std::vector<Entry> entries_;  // by physical block id
  std::unordered_map<uint64_t, int32_t> by_hash_;
  std::list<int32_t> lru_;  // parked blocks, oldest first
};

}  // namespace mkserve
