// RecentByBytes: values by key, kept while their sizes total at most a bound, the least recently
// used going first. Not thread-safe: the stores built on it (ResponseStore, ConversationStore)
// lock around it.
#pragma once

#include <cstdint>
#include <iterator>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace mkserve::server {

template <class Value>
class RecentByBytes {
 public:
  explicit RecentByBytes(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Keeps `value`, of `bytes`, under `key` as the most recent, in place of what the key held;
  // false (and nothing changed) when it alone is over the bound.
  bool Put(const std::string& key, Value value, int64_t bytes) {
    if (bytes > max_bytes_) return false;
    if (auto it = by_key_.find(key); it != by_key_.end()) Erase(it->second);
    while (!entries_.empty() && bytes_ + bytes > max_bytes_) Erase(std::prev(entries_.end()));
    entries_.push_front({key, std::move(value), bytes});
    by_key_[key] = entries_.begin();
    bytes_ += bytes;
    return true;
  }
  // The value under `key`, now the most recent, or null.
  Value* Find(const std::string& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &it->second->value;
  }
  // False when `key` was not kept.
  bool Erase(const std::string& key) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return false;
    Erase(it->second);
    return true;
  }

  int64_t max_bytes() const { return max_bytes_; }
  int64_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string key;
    Value value;
    int64_t bytes;
  };
  void Erase(typename std::list<Entry>::iterator it) {
    bytes_ -= it->bytes;
    by_key_.erase(it->key);
    entries_.erase(it);
  }

  const int64_t max_bytes_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> by_key_;
  int64_t bytes_ = 0;
};

}  // namespace mkserve::server
