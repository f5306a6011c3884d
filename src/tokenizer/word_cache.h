// A bounded, sharded cache from pre-tokenized word to its BPE ids, shared by concurrent Encode
// callers. Shards keep lock contention low; once a shard is full it stops inserting (as HF does)
// so memory stays bounded and hot words seen early stay cached.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mkserve::tokenizer {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

class WordCache {
 public:
  static constexpr size_t kNumShards = 16;
  static constexpr size_t kEntriesPerShard = 8192;
  // Longer words are rare and would make the cache's memory use unpredictable.
  static constexpr size_t kMaxWordBytes = 256;

  // Appends the cached ids of `word` to `out`; false when absent.
  bool Lookup(std::string_view word, std::vector<int32_t>& out) const {
    const Shard& shard = ShardFor(word);
    std::shared_lock lock(shard.mutex);
    auto it = shard.entries.find(word);
    if (it == shard.entries.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  void Insert(std::string_view word, std::vector<int32_t> ids) {
    if (word.size() > kMaxWordBytes) return;
    Shard& shard = ShardFor(word);
    std::unique_lock lock(shard.mutex);
    if (shard.entries.size() >= kEntriesPerShard) return;
    shard.entries.emplace(std::string(word), std::move(ids));
  }

 private:
  struct Shard {
    mutable std::shared_mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> entries;
  };
  Shard& ShardFor(std::string_view word) { return shards_[StringHash{}(word) % kNumShards]; }
  const Shard& ShardFor(std::string_view word) const {
    return shards_[StringHash{}(word) % kNumShards];
  }

  std::array<Shard, kNumShards> shards_;
};

}  // namespace mkserve::tokenizer
