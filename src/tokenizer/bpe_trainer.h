// A small deterministic byte-level BPE trainer: split text with a regex, map bytes with GPT-2's
// byte table, then repeatedly merge the most frequent adjacent pair (ties broken by the pair's
// strings) until the requested number of merges exist. Same input -> same merges, always.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mkserve::tokenizer {

struct TrainedBpe {
  // The 256 byte tokens in byte order, then one token per merge, in merge order.
  std::vector<std::string> tokens;
  // Merges as (left, right) token strings; merge i creates tokens[256 + i].
  std::vector<std::pair<std::string, std::string>> merges;
};

// Throws mkserve::Error when the text cannot support `num_merges` distinct merges.
TrainedBpe TrainByteLevelBpe(std::string_view text, size_t num_merges,
                             std::string_view split_regex);

}  // namespace mkserve::tokenizer
