// Grammar: a context-free grammar over bytes and special tokens, the form every constraint
// (JSON schema, tool-call block) is compiled to before matching.
//
// A rule is a list of alternatives; an alternative is a sequence of elements, stored flat in
// `elements` and closed by a kEnd element. An element matches one byte from a set, one special
// token (by id), a whole rule, or a counted loop (a loop rule gone round between a minimum and a
// maximum number of times: a JSON string's length). Rules must not be left-recursive (every
// recursion consumes a byte or token first); the builders in this folder only write right
// recursion.
//
// Grammars that start from JsonPrelude() share its first elements, so per-position token caches
// of those elements are valid for every such grammar (token_masker.h).
#pragma once

#include <bitset>
#include <cstdint>
#include <string_view>
#include <vector>

namespace mkserve::grammar {

using ByteSet = std::bitset<256>;

struct Element {
  enum class Kind : uint8_t { kBytes, kToken, kRule, kEnd, kCounted };
  Kind kind = Kind::kEnd;
  // kBytes: index into byte_sets; kToken: token id; kRule: rule id; kCounted: counted loop index
  int32_t value = 0;

  static Element Bytes(int32_t set) { return {Kind::kBytes, set}; }
  static Element Token(int32_t id) { return {Kind::kToken, id}; }
  static Element Rule(int32_t rule) { return {Kind::kRule, rule}; }
};

// A loop rule gone round at least `min` and at most `max` times (kMaxLoopRounds: no maximum; the
// count stops there). The loop rule's alternatives are
// empty (the way out) or bytes and special tokens ending in a reference to the rule itself (a
// round). A round counts from its first byte, so a count is the rounds begun (grammar/stack_set.h
// keeps it on the stack). `probe` is a loop of the same rule with no bounds, whose count the token
// caches read (grammar_matcher.h). What follows a counted element must never begin a round: a
// counted cache judges a token that can stay in the loop by those parses alone, so a parse that
// leaves the loop within the token and goes on would be lost (the mask would refuse a token the
// grammar accepts).
struct CountedLoop {
  int32_t rule = -1;
  int32_t min = 0;
  int32_t max = 0;
  int32_t probe = -1;
};

// Counted loops of one grammar, and the most rounds one counts (a stack entry holds both).
inline constexpr int32_t kMaxCountedLoops = 2047;
inline constexpr int32_t kMaxLoopRounds = (1 << 20) - 1;

class Grammar {
 public:
  // A rule with no alternatives yet; fill it with AddAlternative (it may refer to itself).
  int32_t NewRule();
  void AddAlternative(int32_t rule, const std::vector<Element>& sequence);
  // Keeps only the alternatives of `rule` that start at the elements in `firsts` (a subset of
  // alternatives(rule)): the ones that can still end.
  void KeepAlternatives(int32_t rule, std::vector<int32_t> firsts) {
    rules_[rule] = std::move(firsts);
  }
  // A new rule with these alternatives (a recursive rule needs NewRule and AddAlternative).
  int32_t RuleOf(const std::vector<std::vector<Element>>& alternatives);
  // The index of `set` in byte_sets (equal sets share one index).
  int32_t Intern(const ByteSet& set);
  Element Byte(unsigned char byte) { return Element::Bytes(Intern(ByteSet().set(byte))); }
  // One kBytes element per byte of `text`.
  std::vector<Element> Literal(std::string_view text);
  // A kCounted element: `loop_rule` (of the shape CountedLoop describes) between `min` and `max`
  // rounds, 0 <= min <= max <= kMaxLoopRounds. Throws mkserve::Error on another shape or range,
  // or past kMaxCountedLoops loops.
  Element Counted(int32_t loop_rule, int32_t min, int32_t max);

  void set_root(int32_t rule) { root_ = rule; }
  int32_t root() const { return root_; }
  const std::vector<Element>& elements() const { return elements_; }
  const std::vector<int32_t>& alternatives(int32_t rule) const { return rules_[rule]; }
  const ByteSet& byte_set(int32_t index) const { return byte_sets_[index]; }
  const CountedLoop& counted_loop(int32_t index) const { return counted_loops_[index]; }
  int32_t num_counted_loops() const { return static_cast<int32_t>(counted_loops_.size()); }
  int32_t num_byte_sets() const { return static_cast<int32_t>(byte_sets_.size()); }
  int32_t num_rules() const { return static_cast<int32_t>(rules_.size()); }
  // Elements below this index are JsonPrelude()'s, identical in every grammar built on it.
  int32_t prelude_size() const { return prelude_size_; }
  void set_prelude_size(int32_t size) { prelude_size_ = size; }

 private:
  std::vector<Element> elements_;
  std::vector<std::vector<int32_t>> rules_;  // per rule: the first element of each alternative
  std::vector<ByteSet> byte_sets_;
  std::vector<CountedLoop> counted_loops_;
  int32_t root_ = -1;
  int32_t prelude_size_ = 0;
};

// Appends `more` to `sequence` (grammar builders concatenate pieces of sequences).
inline void Append(std::vector<Element>& sequence, const std::vector<Element>& more) {
  sequence.insert(sequence.end(), more.begin(), more.end());
}

}  // namespace mkserve::grammar
