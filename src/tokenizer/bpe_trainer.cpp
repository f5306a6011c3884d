#include "tokenizer/bpe_trainer.h"

#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace mkserve::tokenizer {

namespace {

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

std::vector<Word> CountWords(std::string_view text, std::string_view split_regex) {
  std::map<std::string_view, int64_t> counts;  // ordered, so word order is deterministic
  for (Span span : Regex(split_regex).FindAll(text)) {
    ++counts[text.substr(span.begin, span.end - span.begin)];
  }
  std::vector<Word> words;
  for (const auto& [word, count] : counts) {
    Word entry{{}, count};
    for (char byte : word) entry.symbols.push_back(static_cast<unsigned char>(byte));
    words.push_back(std::move(entry));
  }
  return words;
}

// The most frequent pair whose merged string is new; ties go to the smallest (left, right).
std::optional<std::pair<int32_t, int32_t>> BestPair(const std::vector<Word>& words,
                                                    const TrainedBpe& bpe,
                                                    const std::unordered_set<std::string>& known) {
  std::unordered_map<uint64_t, int64_t> counts;
  for (const Word& word : words) {
    for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
      counts[PairKey(word.symbols[i], word.symbols[i + 1])] += word.count;
    }
  }
  std::optional<std::pair<int32_t, int32_t>> best;
  int64_t best_count = 0;
  for (const auto& [key, count] : counts) {
    auto left = static_cast<int32_t>(key >> 32), right = static_cast<int32_t>(key & 0xFFFFFFFF);
    if (count < best_count) continue;
    if (known.contains(bpe.tokens[left] + bpe.tokens[right])) continue;
    bool better = !best || count > best_count ||
                  std::tie(bpe.tokens[left], bpe.tokens[right]) <
                      std::tie(bpe.tokens[best->first], bpe.tokens[best->second]);
    if (better) best = {left, right}, best_count = count;
  }
  return best;
}

void ApplyMerge(std::vector<Word>& words, int32_t left, int32_t right, int32_t merged) {
  for (Word& word : words) {
    std::vector<int32_t>& s = word.symbols;
    size_t out = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
        s[out++] = merged;
        ++i;
      } else {
        s[out++] = s[i];
      }
    }
    s.resize(out);
  }
}

}  // namespace

TrainedBpe TrainByteLevelBpe(std::string_view text, size_t num_merges,
                             std::string_view split_regex) {
  TrainedBpe bpe;
  std::unordered_set<std::string> known;
  for (int byte = 0; byte < 256; ++byte) {
    bpe.tokens.emplace_back(ByteLevelMap::Get().ToUtf8(static_cast<unsigned char>(byte)));
    known.insert(bpe.tokens.back());
  }
  std::vector<Word> words = CountWords(text, split_regex);
  while (bpe.merges.size() < num_merges) {
    auto best = BestPair(words, bpe, known);
    if (!best) {
      throw Error("BPE training text supports only " + std::to_string(bpe.merges.size()) +
                  " merges, " + std::to_string(num_merges) + " were requested");
    }
    auto [left, right] = *best;
    bpe.merges.emplace_back(bpe.tokens[left], bpe.tokens[right]);
    bpe.tokens.push_back(bpe.tokens[left] + bpe.tokens[right]);
    known.insert(bpe.tokens.back());
    ApplyMerge(words, left, right, static_cast<int32_t>(bpe.tokens.size() - 1));
  }
  return bpe;
}

}  // namespace mkserve::tokenizer
