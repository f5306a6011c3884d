#include "grammar/token_vocabulary.h"

#include <algorithm>

#include "common/error.h"

namespace mkserve::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> bytes, std::vector<bool> special)
    : bytes_(std::move(bytes)), special_(std::move(special)) {
  if (bytes_.size() != special_.size()) {
    throw Error("token vocabulary: " + std::to_string(bytes_.size()) + " token texts but " +
                std::to_string(special_.size()) + " special flags");
  }
  for (int32_t id = 0; id < size(); ++id) {
    if (!special_[id] && !bytes_[id].empty()) sorted_ids_.push_back(id);
  }
  std::sort(sorted_ids_.begin(), sorted_ids_.end(), [&](int32_t a, int32_t b) {
    return bytes_[a] < bytes_[b] || (bytes_[a] == bytes_[b] && a < b);
  });
}

}  // namespace mkserve::grammar
