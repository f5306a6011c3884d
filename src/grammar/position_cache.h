// PositionCache: for one terminal element of a grammar, the ordinary tokens that match starting
// there regardless of what lies below it on the stack (`accepted`), and the few whose verdict
// depends on it because they run past the end of the element's rule (`undecided`, in the
// vocabulary's sorted order). Every other token is rejected. Built once per element by walking
// the sorted vocabulary; a mask then costs one OR per stack plus a check of the undecided tokens.
// An element inside a counted loop's round has a second cache (its key: ~position) that also
// says how many rounds each accepted token begins, so a mask keeps only the tokens the loop's
// count leaves room for.
#pragma once

#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace mkserve::grammar {

// Counted caches keep one bitmask for each count of rounds up to this.
inline constexpr int32_t kRoundBuckets = 16;

struct PositionCache {
  std::vector<uint32_t> accepted;  // bitmask over the vocabulary, 32 ids a word
  std::vector<int32_t> undecided;
  // Counted caches only. within_rounds[r]: the accepted tokens that begin at most r rounds, for
  // r < kRoundBuckets; long_tokens: (rounds, id) of those that begin more, most rounds first.
  std::vector<std::vector<uint32_t>> within_rounds;
  std::vector<std::pair<int32_t, int32_t>> long_tokens;
  // The most stack entries any accepted token's parses open above the element's own: on a real
  // stack within that many of the matcher's depth limit the accepted set may not hold (a parse
  // there is cut off), and the mask tries every token on that stack instead.
  int32_t max_growth = 0;
};

// Caches by element position, filled on first use; safe to share between threads. One thread
// builds an entry (seconds for a large vocabulary); others asking for it meanwhile wait for that
// build instead of repeating it. A build that throws is not kept: its waiters get the exception
// and the next request builds again.
class PositionCacheTable {
 public:
  // Positions held (or being built).
  size_t size() const {
    std::lock_guard lock(mutex_);
    return entries_.size();
  }

  template <typename Build>
  std::shared_ptr<const PositionCache> Get(int32_t position, Build build) {
    std::optional<std::promise<std::shared_ptr<const PositionCache>>> promise;  // when building
    std::shared_future<std::shared_ptr<const PositionCache>> entry;
    {
      std::lock_guard lock(mutex_);
      auto [it, inserted] = entries_.try_emplace(position);
      if (inserted) it->second = promise.emplace().get_future().share();
      entry = it->second;
    }
    if (promise) {
      try {
        promise->set_value(std::make_shared<const PositionCache>(build()));
      } catch (...) {
        {
          std::lock_guard lock(mutex_);
          entries_.erase(position);
        }
        promise->set_exception(std::current_exception());
      }
    }
    return entry.get();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<int32_t, std::shared_future<std::shared_ptr<const PositionCache>>> entries_;
};

}  // namespace mkserve::grammar
