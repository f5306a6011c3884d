// A compiled PCRE2 pattern (UTF + UCP, JIT) for the regexes that tokenizer.json carries.
// Thread-safe: match data lives in a per-thread scratch buffer, the compiled code is shared and
// immutable.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mkserve::tokenizer {

struct Span {
  size_t begin = 0;
  size_t end = 0;
};

class Regex {
 public:
  // Throws mkserve::Error naming the pattern and PCRE2's message when it does not compile.
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // All non-overlapping matches, left to right. Empty matches are skipped (the search advances
  // one code point), as the HF Split pattern drops them. `text` must be valid UTF-8.
  std::vector<Span> FindAll(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
};

// Escapes `literal` so that it matches itself.
std::string RegexEscape(std::string_view literal);

}  // namespace mkserve::tokenizer
