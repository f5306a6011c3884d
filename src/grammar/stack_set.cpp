#include "grammar/stack_set.h"

#include <algorithm>

namespace mkserve::grammar {
namespace {

using Kind = Element::Kind;

// Guards against a grammar that loops without consuming (the builders never write one).
constexpr int kMaxExpansionDepth = 4096;

void Expand(const Grammar& grammar, Stack& stack, std::vector<Stack>& out, int depth);

// A counted loop's counter on top: a round may begin (each round alternative, below `max`) or the
// loop end (at `min` or more), continuing below the counter.
void ExpandRounds(const Grammar& grammar, Stack& stack, std::vector<Stack>& out, int depth) {
  const int32_t counter = stack.back();
  const CountedLoop& loop = grammar.counted_loop(CounterLoop(counter));
  const int32_t rounds = CounterRounds(counter);
  for (int32_t first : grammar.alternatives(loop.rule)) {
    if (grammar.elements()[first].kind == Kind::kEnd) {
      if (rounds < loop.min) continue;
      stack.pop_back();
      Expand(grammar, stack, out, depth + 1);
      stack.push_back(counter);
    } else if (rounds < loop.max || loop.max == kMaxLoopRounds) {
      stack.push_back(first);
      Expand(grammar, stack, out, depth + 1);
      stack.pop_back();
    }
  }
}

// Replaces the top of `stack` by the terminal tops it can start with, appending to `out`.
// `stack` is restored before returning.
void Expand(const Grammar& grammar, Stack& stack, std::vector<Stack>& out, int depth) {
  if (stack.empty()) {
    out.push_back(stack);
    return;
  }
  if (stack.size() > kMaxStackDepth || depth > kMaxExpansionDepth) return;
  const int32_t position = stack.back();
  if (IsCounter(position)) return ExpandRounds(grammar, stack, out, depth);
  const Element& element = grammar.elements()[position];
  switch (element.kind) {
    case Kind::kBytes:
    case Kind::kToken:
      out.push_back(stack);
      return;
    case Kind::kEnd:  // this alternative is done: continue with the level below
      stack.pop_back();
      Expand(grammar, stack, out, depth + 1);
      stack.push_back(position);
      return;
    case Kind::kRule:
    case Kind::kCounted: {
      // A reference last in its alternative leaves nothing to return to: a tail call, so
      // right recursion does not grow the stack.
      const bool tail = grammar.elements()[position + 1].kind == Kind::kEnd;
      if (tail) {
        stack.pop_back();
      } else {
        stack.back() = position + 1;
      }
      if (element.kind == Kind::kCounted) {  // enter the loop: its counter, no round yet
        stack.push_back(CounterEntry(element.value, 0));
        ExpandRounds(grammar, stack, out, depth + 1);
        stack.pop_back();
      } else if (!stack.empty() && IsCounter(stack.back()) &&
                 grammar.counted_loop(CounterLoop(stack.back())).rule == element.value) {
        ExpandRounds(grammar, stack, out, depth + 1);  // a round ended: the loop goes on
      } else {
        for (int32_t first : grammar.alternatives(element.value)) {
          stack.push_back(first);
          Expand(grammar, stack, out, depth + 1);
          stack.pop_back();
        }
      }
      if (tail) {
        stack.push_back(position);
      } else {
        stack.back() = position;
      }
      return;
    }
  }
}

// `stack` after its top matched: one element on, and a round counted where the top began one.
bool Advance(const Grammar& grammar, Stack& stack) {
  const int32_t position = stack.back();
  if (const int32_t at = CounterBelowTop(stack);
      at >= 0 && (position == 0 || grammar.elements()[position - 1].kind == Kind::kEnd)) {
    const int32_t counter = stack[at];
    const int32_t max = grammar.counted_loop(CounterLoop(counter)).max;
    int32_t rounds = CounterRounds(counter) + 1;
    if (rounds > max) {
      if (max != kMaxLoopRounds) return false;
      rounds = max;  // no maximum: the count stops
    }
    stack[at] = CounterEntry(CounterLoop(counter), rounds);
  }
  ++stack.back();
  return true;
}

}  // namespace

StackSet StackSet::Start(const Grammar& grammar) {
  StackSet set;
  for (int32_t first : grammar.alternatives(grammar.root())) {
    Stack stack{first};
    Expand(grammar, stack, set.stacks_, 0);
  }
  set.Normalize();
  return set;
}

StackSet StackSet::At(const Grammar& grammar, int32_t position) {
  StackSet set;
  Stack stack{position};
  Expand(grammar, stack, set.stacks_, 0);
  set.Normalize();
  return set;
}

StackSet StackSet::Of(Stack stack) {
  StackSet set;
  set.stacks_.push_back(std::move(stack));
  return set;
}

StackSet StackSet::AdvanceByte(const Grammar& grammar, unsigned char byte) const {
  StackSet next;
  for (const Stack& stack : stacks_) {
    if (stack.empty()) continue;
    const Element& top = grammar.elements()[stack.back()];
    if (top.kind != Kind::kBytes || !grammar.byte_set(top.value).test(byte)) continue;
    Stack moved = stack;
    if (Advance(grammar, moved)) Expand(grammar, moved, next.stacks_, 0);
  }
  next.Normalize();
  return next;
}

StackSet StackSet::AdvanceToken(const Grammar& grammar, int32_t token_id) const {
  StackSet next;
  for (const Stack& stack : stacks_) {
    if (stack.empty()) continue;
    const Element& top = grammar.elements()[stack.back()];
    if (top.kind != Kind::kToken || top.value != token_id) continue;
    Stack moved = stack;
    if (Advance(grammar, moved)) Expand(grammar, moved, next.stacks_, 0);
  }
  next.Normalize();
  return next;
}

void StackSet::Normalize() {
  if (stacks_.size() < 2) return;
  std::sort(stacks_.begin(), stacks_.end());
  stacks_.erase(std::unique(stacks_.begin(), stacks_.end()), stacks_.end());
}

}  // namespace mkserve::grammar
