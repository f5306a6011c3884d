// Open-addressing hash map from a (left, right) token id pair to its merge; faster than
// std::unordered_map on the BPE hot path, where every adjacent pair is looked up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mkserve::tokenizer {

struct MergeTarget {
  int32_t rank = 0;
  int32_t new_id = 0;
};

class MergeTable {
 public:
  explicit MergeTable(size_t num_merges) {
    size_t capacity = 16;
    while (capacity < num_merges * 2) capacity *= 2;
    keys_.assign(capacity, kEmptyKey);
    values_.resize(capacity);
    mask_ = capacity - 1;
  }
  // Returns false when the pair is already present (HF keeps the first, best-ranked one).
  bool Insert(int32_t left, int32_t right, MergeTarget target) {
    uint64_t key = Key(left, right);
    size_t slot = Slot(key);
    while (keys_[slot] != kEmptyKey) {
      if (keys_[slot] == key) return false;
      slot = (slot + 1) & mask_;
    }
    keys_[slot] = key;
    values_[slot] = target;
    return true;
  }
  const MergeTarget* Find(int32_t left, int32_t right) const {
    uint64_t key = Key(left, right);
    for (size_t slot = Slot(key);; slot = (slot + 1) & mask_) {
      if (keys_[slot] == key) return &values_[slot];
      if (keys_[slot] == kEmptyKey) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  size_t Slot(uint64_t key) const { return ((key * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }

  std::vector<uint64_t> keys_;
  std::vector<MergeTarget> values_;
  size_t mask_ = 0;
};

}  // namespace mkserve::tokenizer
