// StackSet: the state of matching text against a Grammar, as the set of every parse that is still
// possible (a pushdown automaton run nondeterministically, one stack per parse).
//
// A stack lists element positions, innermost last; each entry is the next element to match at that
// level. Tops are always kBytes or kToken elements. An empty stack is a complete match. A negative
// entry is the counter of a counted loop (Grammar::Counted) whose round is above it: the loop and
// the rounds begun. A round begins when the first byte (or token) of one of the loop's
// alternatives is matched; the loop may end only after `min` rounds and begins no round past `max`.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/grammar.h"

namespace mkserve::grammar {

using Stack = std::vector<int32_t>;

inline bool IsCounter(int32_t entry) { return entry < 0; }
inline int32_t CounterEntry(int32_t loop, int32_t rounds) {
  return static_cast<int32_t>(0x80000000u | (static_cast<uint32_t>(loop) << 20) |
                              static_cast<uint32_t>(rounds));
}
inline int32_t CounterLoop(int32_t entry) {
  return static_cast<int32_t>((static_cast<uint32_t>(entry) & 0x7fffffffu) >> 20);
}
inline int32_t CounterRounds(int32_t entry) {
  return static_cast<int32_t>(static_cast<uint32_t>(entry) & 0xfffffu);
}
// Where the stack's top is inside a counted loop's round: the index of its counter, else -1.
inline int32_t CounterBelowTop(const Stack& stack) {
  return stack.size() >= 2 && IsCounter(stack[stack.size() - 2])
             ? static_cast<int32_t>(stack.size()) - 2
             : -1;
}

// Nesting deeper than this is not followed (JSON nested 100 levels deep is not generated).
inline constexpr size_t kMaxStackDepth = 256;

class StackSet {
 public:
  StackSet() = default;
  // The parses of the grammar's root, before any text.
  static StackSet Start(const Grammar& grammar);
  // The parses that begin at `position` (a kBytes or kToken element) with nothing below it.
  static StackSet At(const Grammar& grammar, int32_t position);
  // One parse, as it is (its top must already be a terminal).
  static StackSet Of(Stack stack);

  // The parses that survive one more byte / special token; empty when none does.
  StackSet AdvanceByte(const Grammar& grammar, unsigned char byte) const;
  StackSet AdvanceToken(const Grammar& grammar, int32_t token_id) const;

  bool empty() const { return stacks_.empty(); }
  // Whether the text so far is a complete match.
  bool can_end() const { return !stacks_.empty() && stacks_.front().empty(); }
  const std::vector<Stack>& stacks() const { return stacks_; }

 private:
  void Normalize();  // sorted (an empty stack first) and without duplicates
  std::vector<Stack> stacks_;
};

}  // namespace mkserve::grammar
