// PositionCache: for one terminal element of a grammar, the ordinary tokens that match starting
// there regardless of what lies below it on the stack (`accepted`), and the few whose verdict
// depends on it because they run past the end of the element's rule (`undecided`, in the
// vocabulary's sorted order). Every other token is rejected. Built once per element by walking
// the sorted vocabulary; a mask then costs one OR per stack plus a check of the undecided tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace mkserve::grammar {

struct PositionCache {
  std::vector<uint32_t> accepted;  // bitmask over the vocabulary, 32 ids a word
  std::vector<int32_t> undecided;
};

// Caches by element position, filled on first use; safe to share between threads.
class PositionCacheTable {
 public:
  template <typename Build>
  std::shared_ptr<const PositionCache> Get(int32_t position, Build build) {
    {
      std::lock_guard lock(mutex_);
      auto it = entries_.find(position);
      if (it != entries_.end()) return it->second;
    }
    auto entry = std::make_shared<const PositionCache>(build());
    std::lock_guard lock(mutex_);
    return entries_.emplace(position, std::move(entry)).first->second;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<int32_t, std::shared_ptr<const PositionCache>> entries_;
};

}  // namespace mkserve::grammar
