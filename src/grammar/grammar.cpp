#include "grammar/grammar.h"

#include <algorithm>
#include <string>

#include "common/error.h"

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

Element Grammar::Counted(int32_t loop_rule, int32_t min, int32_t max) {
  if (min < 0 || min > max || max > kMaxLoopRounds) {
    throw Error("a counted loop of " + std::to_string(min) + " to " + std::to_string(max) +
                " rounds (at most " + std::to_string(kMaxLoopRounds) + ")");
  }
  // The shape the stack's counting relies on: a round is terminals, then the loop again.
  for (int32_t first : rules_.at(loop_rule)) {
    int32_t at = first;
    while (elements_[at].kind == Element::Kind::kBytes ||
           elements_[at].kind == Element::Kind::kToken) {
      ++at;
    }
    const bool way_out = at == first && elements_[at].kind == Element::Kind::kEnd;
    const bool round = at > first && elements_[at].kind == Element::Kind::kRule &&
                       elements_[at].value == loop_rule &&
                       elements_[at + 1].kind == Element::Kind::kEnd;
    if (!way_out && !round) {
      throw Error("rule " + std::to_string(loop_rule) + " is not a loop a count can follow");
    }
  }
  auto find = [&](int32_t lo, int32_t hi) {
    for (size_t i = 0; i < counted_loops_.size(); ++i) {
      const CountedLoop& loop = counted_loops_[i];
      if (loop.rule == loop_rule && loop.min == lo && loop.max == hi)
        return static_cast<int32_t>(i);
    }
    return int32_t{-1};
  };
  auto add = [&](int32_t lo, int32_t hi, int32_t probe) {
    if (static_cast<int32_t>(counted_loops_.size()) >= kMaxCountedLoops) {
      throw Error("more than " + std::to_string(kMaxCountedLoops) + " counted loops in a grammar");
    }
    counted_loops_.push_back(CountedLoop{loop_rule, lo, hi, probe});
    const int32_t index = static_cast<int32_t>(counted_loops_.size()) - 1;
    if (probe < 0) counted_loops_.back().probe = index;
    return index;
  };
  int32_t probe = find(0, kMaxLoopRounds);
  if (probe < 0) probe = add(0, kMaxLoopRounds, -1);
  int32_t index = find(min, max);
  if (index < 0) index = add(min, max, probe);
  return Element{Element::Kind::kCounted, index};
}

}  // namespace mkserve::grammar
