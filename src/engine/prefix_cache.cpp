#include "engine/prefix_cache.h"

#include <algorithm>

#include "common/mix64.h"
namespace mkserve {
namespace {

constexpr uint64_t kPrime1 = 0x9e3779b185ebca87ull;  // xxhash64's primes
constexpr uint64_t kPrime2 = 0xc2b2ae3d27d4eb4full;

uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

uint64_t HashBlock(uint64_t parent_hash, std::span<const int32_t> token_ids) {
  uint64_t h = Mix64(parent_hash ^ kPrime2);
  for (int32_t id : token_ids) {
    h = Rotl(h ^ (static_cast<uint64_t>(static_cast<uint32_t>(id)) * kPrime2), 31) * kPrime1;
  }
  return Mix64(h ^ static_cast<uint64_t>(token_ids.size()));
}

PrefixCache::PrefixCache(int64_t num_blocks) : entries_(num_blocks) {}

int32_t PrefixCache::Find(uint64_t hash, uint64_t parent_hash,
                          std::span<const int32_t> token_ids) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const Entry& entry = entries_[it->second];
  bool same =
      entry.parent_hash == parent_hash && std::equal(entry.token_ids.begin(), entry.token_ids.end(),
                                                     token_ids.begin(), token_ids.end());
  return same ? it->second : -1;
}

void PrefixCache::Insert(int32_t block, uint64_t hash, uint64_t parent_hash,
                         std::span<const int32_t> token_ids) {
  Entry& entry = entries_[block];
  if (entry.cached || by_hash_.count(hash)) return;
  entry.cached = true;
  entry.hash = hash;
  entry.parent_hash = parent_hash;
  entry.token_ids.assign(token_ids.begin(), token_ids.end());
  by_hash_[hash] = block;
}

void PrefixCache::Erase(int32_t block) {
  Entry& entry = entries_[block];
  if (entry.parked) Unpark(block);
  if (!entry.cached) return;
  by_hash_.erase(entry.hash);
  entry.cached = false;
  entry.token_ids.clear();
}

void PrefixCache::Park(int32_t block) {
  Entry& entry = entries_[block];
  if (entry.parked) return;
  entry.parked = true;
  entry.lru_position = lru_.insert(lru_.end(), block);
}

void PrefixCache::Unpark(int32_t block) {
  Entry& entry = entries_[block];
  if (!entry.parked) return;
  lru_.erase(entry.lru_position);
  entry.parked = false;
}

int32_t PrefixCache::EvictOldest() {
  if (lru_.empty()) return -1;
  int32_t block = lru_.front();
  Erase(block);
  return block;
}

}  // namespace mkserve
