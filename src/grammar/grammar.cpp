#include "grammar/grammar.h"

#include <algorithm>

namespace mkserve::grammar {

int32_t Grammar::RuleOf(const std::vector<std::vector<Element>>& alternatives) {
  const int32_t rule = NewRule();
  for (const std::vector<Element>& alternative : alternatives) AddAlternative(rule, alternative);
  return rule;
}

int32_t Grammar::NewRule() {
  rules_.emplace_back();
  return static_cast<int32_t>(rules_.size()) - 1;
}

void Grammar::AddAlternative(int32_t rule, const std::vector<Element>& sequence) {
  rules_[rule].push_back(static_cast<int32_t>(elements_.size()));
  elements_.insert(elements_.end(), sequence.begin(), sequence.end());
  elements_.push_back(Element{});  // kEnd
}

int32_t Grammar::Intern(const ByteSet& set) {
  auto it = std::find(byte_sets_.begin(), byte_sets_.end(), set);
  if (it != byte_sets_.end()) return static_cast<int32_t>(it - byte_sets_.begin());
  byte_sets_.push_back(set);
  return static_cast<int32_t>(byte_sets_.size()) - 1;
}

std::vector<Element> Grammar::Literal(std::string_view text) {
  std::vector<Element> out;
  for (char c : text) out.push_back(Byte(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace mkserve::grammar
