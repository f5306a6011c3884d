#include "grammar/string_pattern.h"

#include <algorithm>
#include <bitset>
#include <cctype>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/utf8.h"
#include "grammar/json_schema.h"

namespace mkserve::grammar {
namespace {

using Seq = std::vector<Element>;
using CharSet = std::bitset<128>;  // the ASCII characters of a class

// Each part of a pattern is a grammar position whose token cache is built on first use.
constexpr size_t kMaxPatternBytes = 1024;
constexpr int kMaxGroupDepth = 32;

using CodeRanges = std::vector<std::pair<int32_t, int32_t>>;  // inclusive, all >= 0x80

CharSet Single(unsigned char c) { return CharSet().set(c); }

// A code point's UTF-8 bytes.
std::string Utf8(int32_t code) {
  std::string out;
  AppendUtf8(out, static_cast<char32_t>(code));
  return out;
}

// The UTF-8 spellings of the code points [lo, hi] (lo >= 0x80) as sequences of byte ranges, one
// byte set a position: the range is split where the encoding's length changes, around the
// surrogates, and wherever a continuation byte would not run over its whole span.
void Utf8Sequences(int32_t lo, int32_t hi, std::vector<std::vector<ByteSet>>& out) {
  for (int32_t max : {0x7ff, 0xffff}) {
    if (lo <= max && hi > max) {
      Utf8Sequences(lo, max, out);
      Utf8Sequences(max + 1, hi, out);
      return;
    }
  }
  if (lo <= 0xdfff && hi >= 0xd800) {
    if (lo < 0xd800) Utf8Sequences(lo, 0xd7ff, out);
    if (hi > 0xdfff) Utf8Sequences(0xe000, hi, out);
    return;
  }
  for (int i = 1; i < 4; ++i) {
    const int32_t mask = (1 << (6 * i)) - 1;
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        Utf8Sequences(lo, lo | mask, out);
        Utf8Sequences((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        Utf8Sequences(lo, (hi & ~mask) - 1, out);
        Utf8Sequences(hi & ~mask, hi, out);
        return;
      }
    }
  }
  const std::string a = Utf8(lo), b = Utf8(hi);
  std::vector<ByteSet> sequence(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    for (int x = static_cast<unsigned char>(a[k]); x <= static_cast<unsigned char>(b[k]); ++x) {
      sequence[k].set(x);
    }
  }
  out.push_back(std::move(sequence));
}

// The characters JSON writes as themselves inside a string.
CharSet Plain(const CharSet& set) {
  CharSet plain = set;
  for (int c = 0; c < 0x20; ++c) plain.reset(c);
  plain.reset('"');
  plain.reset('\\');
  return plain;
}

struct Node {
  enum class Kind { kSet, kBytes, kSequence, kAlternatives, kRepeat };
  Kind kind = Kind::kSequence;
  CharSet set;                 // kSet
  CodeRanges wide;             // kSet: its non-ASCII characters (a class's), as ranges
  std::string bytes;           // kBytes: a non-ASCII character's UTF-8
  std::vector<Node> children;  // kSequence, kAlternatives; kRepeat: the one repeated
  int min = 0, max = 0;        // kRepeat; max -1: unbounded
};

class Parser {
 public:
  explicit Parser(std::string_view pattern) : p_(pattern) {}

  // The whole pattern; ^ may only open it and $ only close it.
  Node Parse(bool& anchored_start, bool& anchored_end) {
    anchored_start = !p_.empty() && p_[0] == '^';
    if (anchored_start) i_ = 1;
    anchored_end = false;
    if (p_.size() > i_ && p_.back() == '$') {
      size_t backslashes = 0;  // an escaped \$ is a character
      while (p_.size() - 1 - backslashes > i_ && p_[p_.size() - 2 - backslashes] == '\\') {
        ++backslashes;
      }
      anchored_end = backslashes % 2 == 0;
      if (anchored_end) p_.remove_suffix(1);
    }
    Node root = Alternation(0);
    if (i_ < p_.size()) Fail("unmatched ')'");
    if ((anchored_start || anchored_end) && root.kind == Node::Kind::kAlternatives) {
      Fail("with ^ or $, alternatives must be inside a group, as in ^(a|b)$");
    }
    return root;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw PatternError(what + " (at character " + std::to_string(i_) + ")");
  }
  bool More() const { return i_ < p_.size(); }
  char Peek() const { return p_[i_]; }

  Node Alternation(int depth) {
    Node first = Sequence(depth);
    if (!More() || Peek() != '|') return first;
    Node node;
    node.kind = Node::Kind::kAlternatives;
    node.children.push_back(std::move(first));
    while (More() && Peek() == '|') {
      ++i_;
      node.children.push_back(Sequence(depth));
    }
    return node;
  }

  Node Sequence(int depth) {
    Node node;
    while (More() && Peek() != '|' && Peek() != ')') {
      Node atom = Atom(depth);
      Quantify(atom);
      node.children.push_back(std::move(atom));
    }
    return node;
  }

  void Quantify(Node& atom) {
    if (!More()) return;
    int min = 0, max = 0;
    const char c = Peek();
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      min = c == '+' ? 1 : 0;
      max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      ++i_;
      min = max = Count();
      if (More() && Peek() == ',') {
        ++i_;
        max = More() && Peek() == '}' ? -1 : Count();
      }
      if (!More() || Peek() != '}') Fail("'{' must start a count {n}, {n,} or {n,m}; escape it");
      ++i_;
      if (max >= 0 && max < min) Fail("a count {n,m} needs n <= m");
    } else {
      return;
    }
    if (More() && Peek() == '?') ++i_;  // lazy: the same strings
    if (More() && std::string_view("*+?{").find(Peek()) != std::string_view::npos) {
      Fail("a quantifier cannot follow a quantifier");
    }
    Node repeat;
    repeat.kind = Node::Kind::kRepeat;
    repeat.min = min;
    repeat.max = max;
    repeat.children.push_back(std::move(atom));
    atom = std::move(repeat);
  }

  int Count() {
    if (!More() || !std::isdigit(static_cast<unsigned char>(Peek()))) {
      Fail("'{' must start a count {n}, {n,} or {n,m}; escape it");
    }
    int n = 0;
    while (More() && std::isdigit(static_cast<unsigned char>(Peek()))) {
      n = n * 10 + (Peek() - '0');
      if (n > kMaxCountedItems) {
        Fail("counts above " + std::to_string(kMaxCountedItems) + " are not supported");
      }
      ++i_;
    }
    return n;
  }

  Node Atom(int depth) {
    const char c = Peek();
    switch (c) {
      case '(': {
        if (depth >= kMaxGroupDepth) {
          Fail("groups nest deeper than " + std::to_string(kMaxGroupDepth));
        }
        ++i_;
        if (More() && Peek() == '?') {
          if (i_ + 1 >= p_.size() || p_[i_ + 1] != ':') {
            Fail("lookaround and named groups are not supported (only ( ) and (?: ))");
          }
          i_ += 2;
        }
        Node inner = Alternation(depth + 1);
        if (!More() || Peek() != ')') Fail("unmatched '('");
        ++i_;
        return inner;
      }
      case '[':
        ++i_;
        return Class();
      case '.':
        ++i_;
        return SetNode(~(Single('\n') | Single('\r')));
      case '\\':
        ++i_;
        return Escape(false);
      case '*':
      case '+':
      case '?':
        Fail("nothing to repeat");
      case '{':
        Fail("nothing to repeat ('{' starts a count; escape it)");
      case '^':
      case '$':
        Fail("anchors are supported only at the start (^) and the end ($) of the pattern");
      default:
        break;
    }
    if (static_cast<unsigned char>(c) < 0x80) {
      ++i_;
      return SetNode(Single(static_cast<unsigned char>(c)));
    }
    Node node;
    node.kind = Node::Kind::kBytes;
    node.bytes = Utf8(NonAsciiCharacter());
    return node;
  }

  static Node SetNode(const CharSet& set) {
    Node node;
    node.kind = Node::Kind::kSet;
    node.set = set;
    return node;
  }

  // After a backslash: a class escape, an escaped character, or outside a class a non-ASCII
  // character (\u0080 and up) as bytes.
  Node Escape(bool in_class) {
    if (!More()) Fail("the pattern ends with a lone backslash");
    const char c = Peek();
    ++i_;
    CharSet set;
    auto add = [&](std::string_view chars) {
      for (char x : chars) set.set(static_cast<unsigned char>(x));
    };
    switch (c) {
      case 'd':
      case 'D':
        add("0123456789");
        return SetNode(c == 'd' ? set : ~set);
      case 'w':
      case 'W':
        add("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
        return SetNode(c == 'w' ? set : ~set);
      case 's':
      case 'S':
        add(" \t\n\r\f\v");
        return SetNode(c == 's' ? set : ~set);
      case 't':
        return SetNode(Single('\t'));
      case 'n':
        return SetNode(Single('\n'));
      case 'r':
        return SetNode(Single('\r'));
      case 'f':
        return SetNode(Single('\f'));
      case 'v':
        return SetNode(Single('\v'));
      case '0':
        if (More() && std::isdigit(static_cast<unsigned char>(Peek()))) {
          Fail("octal escapes are not supported");
        }
        return SetNode(Single('\0'));
      case 'x':
        return CodePoint(Hex(2), in_class);
      case 'u':
        return CodePoint(Hex(4), in_class);
      case 'b':
        if (in_class) return SetNode(Single('\b'));
        Fail("word boundaries (\\b, \\B) are not supported");
      case 'B':
        Fail("word boundaries (\\b, \\B) are not supported");
      case 'p':
      case 'P':
        Fail("Unicode property escapes (\\p{...}) are not supported");
      case 'k':
        Fail("named backreferences are not supported");
      default:
        if (c >= '1' && c <= '9') Fail("backreferences are not supported");
        if (std::string_view("^$\\.*+?()[]{}|/-\"'").find(c) == std::string_view::npos) {
          Fail(std::string("the escape \\") + c + " is not supported");
        }
        return SetNode(Single(static_cast<unsigned char>(c)));
    }
  }

  int Hex(int digits) {
    int value = 0;
    for (int d = 0; d < digits; ++d, ++i_) {
      if (!More() || !std::isxdigit(static_cast<unsigned char>(Peek()))) {
        Fail("\\x needs 2 hex digits and \\u 4");
      }
      const int h = std::tolower(static_cast<unsigned char>(Peek()));
      value = value * 16 + (h <= '9' ? h - '0' : h - 'a' + 10);
    }
    return value;
  }

  // A character written as an escape: in a class, a set of it; outside, its bytes.
  Node CodePoint(int code, bool in_class) {
    if (code < 0x80) return SetNode(Single(static_cast<unsigned char>(code)));
    if (code >= 0xd800 && code <= 0xdfff) Fail("surrogate escapes are not supported");
    Node node;
    if (in_class) {
      node.kind = Node::Kind::kSet;
      node.wide = {{code, code}};
      return node;
    }
    node.kind = Node::Kind::kBytes;
    node.bytes = Utf8(code);
    return node;
  }

  // After '[': members up to the closing ']', a leading '^' negating them. A negated class
  // keeps its ASCII complement only (it writes no non-ASCII character).
  Node Class() {
    const bool negated = More() && Peek() == '^';
    if (negated) ++i_;
    Node node = SetNode(CharSet());
    for (bool first = true;; first = false) {
      if (!More()) Fail("unmatched '['");
      if (Peek() == ']') {
        if (first && !negated) Fail("an empty class [] matches nothing");
        ++i_;
        break;
      }
      Node member;
      const int32_t low = Member(member);
      if (low >= 0 && i_ + 1 < p_.size() && Peek() == '-' && p_[i_ + 1] != ']') {
        ++i_;
        Node ignored;
        const int32_t high = Member(ignored);
        if (high < 0) Fail("a class range must end with a character");
        if (high < low) Fail("a class range must run upwards, as in a-z");
        for (int32_t x = low; x <= std::min<int32_t>(high, 0x7f); ++x) member.set.set(x);
        if (high >= 0x80) member.wide = {{std::max<int32_t>(low, 0x80), high}};
      }
      node.set |= member.set;
      node.wide.insert(node.wide.end(), member.wide.begin(), member.wide.end());
    }
    if (negated) {
      node.set = ~node.set;
      node.wide.clear();
    }
    return node;
  }

  // One class member into `member` (a set node); returns its character when it is a single one
  // (a range may start there), else -1.
  int32_t Member(Node& member) {
    const unsigned char c = static_cast<unsigned char>(Peek());
    if (c >= 0x80) {
      const int32_t code = NonAsciiCharacter();
      member = SetNode(CharSet());
      member.wide = {{code, code}};
      return code;
    }
    ++i_;
    if (c != '\\') {
      member = SetNode(Single(c));
      return c;
    }
    member = Escape(true);
    if (member.set.none() && member.wide.size() == 1 &&
        member.wide[0].first == member.wide[0].second) {
      return member.wide[0].first;
    }
    for (int x = 0; member.wide.empty() && member.set.count() == 1 && x < 128; ++x) {
      if (member.set[x]) return x;
    }
    return -1;
  }

  // The pattern's next character, non-ASCII and whole (the pattern is a JSON string's value:
  // valid UTF-8), as a code point.
  int32_t NonAsciiCharacter() {
    if (!IsValidUtf8(p_.substr(i_, Utf8SequenceLength(static_cast<unsigned char>(Peek()))))) {
      Fail("the pattern is not valid UTF-8");
    }
    return static_cast<int32_t>(NextCodePoint(p_, i_));
  }

  std::string_view p_;
  size_t i_ = 0;
};

// The pattern as a nondeterministic automaton (Thompson's construction): states with edges that
// read one character of a set, or a non-ASCII character's bytes, and empty edges.
class Automaton {
 public:
  struct Edge {
    CharSet set;        // one character of this set, or, when `bytes` is set, those bytes, or, when
    std::string bytes;  // `utf8` is, a byte of each of its sets in turn (one
    std::vector<ByteSet> utf8;  // spelling of a range of non-ASCII characters)
    int to = 0;
  };

  int NewState() {
    if (edges_.size() >= kMaxStates) {
      throw PatternError("the pattern needs more than " + std::to_string(kMaxStates) +
                         " automaton states (its counts repeat too much)");
    }
    edges_.emplace_back();
    empty_.emplace_back();
    return static_cast<int>(edges_.size()) - 1;
  }

  // States `begin` and `end` with `node` between them.
  void Build(const Node& node, int begin, int end) {
    switch (node.kind) {
      case Node::Kind::kSet: {
        edges_[begin].push_back({node.set, "", {}, end});
        std::vector<std::vector<ByteSet>> sequences;
        for (const auto& [lo, hi] : node.wide) Utf8Sequences(lo, hi, sequences);
        for (std::vector<ByteSet>& sequence : sequences) {
          edges_[begin].push_back({CharSet(), "", std::move(sequence), end});
        }
        return;
      }
      case Node::Kind::kBytes:
        edges_[begin].push_back({CharSet(), node.bytes, {}, end});
        return;
      case Node::Kind::kSequence: {
        int at = begin;
        for (const Node& child : node.children) {
          const int next = NewState();
          Build(child, at, next);
          at = next;
        }
        empty_[at].push_back(end);
        return;
      }
      case Node::Kind::kAlternatives:
        for (const Node& child : node.children) Build(child, begin, end);
        return;
      case Node::Kind::kRepeat: {
        const Node& child = node.children[0];
        int at = begin;
        for (int i = 0; i < node.min; ++i) {  // each copy its own states
          const int next = NewState();
          Build(child, at, next);
          at = next;
        }
        if (node.max < 0) {  // a loop through `at`
          const int back = NewState();
          Build(child, at, back);
          empty_[back].push_back(at);
        } else {
          for (int i = node.min; i < node.max; ++i) {  // optional copies, each may stop here
            empty_[at].push_back(end);
            const int next = NewState();
            Build(child, at, next);
            at = next;
          }
        }
        empty_[at].push_back(end);
        return;
      }
    }
  }

  // The states reachable from `state` by empty edges, itself included.
  std::vector<int> Closure(int state) const {
    std::vector<int> out{state};
    std::vector<bool> seen(edges_.size(), false);
    seen[state] = true;
    for (size_t i = 0; i < out.size(); ++i) {
      for (int next : empty_[out[i]]) {
        if (!seen[next]) {
          seen[next] = true;
          out.push_back(next);
        }
      }
    }
    return out;
  }

  const std::vector<Edge>& edges(int state) const { return edges_[state]; }
  const std::vector<int>& empties(int state) const { return empty_[state]; }
  int size() const { return static_cast<int>(edges_.size()); }

 private:
  static constexpr size_t kMaxStates = 2048;
  std::vector<std::vector<Edge>> edges_;
  std::vector<std::vector<int>> empty_;
};

// Writes the automaton as a right-linear grammar: a rule per state, an alternative per edge that
// reads its character and goes on to the edge's state, and, where the state may end, the rest
// of the string. So a token cache built at any position of the pattern runs on to the closing
// quote, as the JSON string rule's own loop does; a rule per part of the pattern would end the
// cache there, and every token running past that end would be checked again at each mask (for
// a one-character rule of a wide class nearly the whole vocabulary: tens of ms a token, measured
// with `mkserve bench-grammar`).
//
// A set is written as its plain characters, or when it holds none, as a backslash and the letters
// of its short escapes (\" \\ \b \f \n \r \t); other control characters are not written. Each
// position of a set wider than kMaxNarrowWidth costs a token cache build over most of the
// vocabulary (about 0.1 s for 262K entries), so the patterns of one grammar share a budget of
// them (kMaxWidePatternPositions).
class Writer {
 public:
  Writer(Grammar& grammar, const Automaton& automaton, Seq ending, int& wide_positions_left)
      : g_(grammar),
        a_(automaton),
        ending_(std::move(ending)),
        wide_positions_left_(wide_positions_left) {}

  // The rule of the strings from `start` to `final`, or PatternError when none can be written.
  int32_t Write(int start, int final) {
    // Which states can still reach the end by edges that can be written (dead ends are left out,
    // so a generation never walks into one): a search back from the end.
    std::vector<std::vector<int>> back(a_.size());
    for (int t = 0; t < a_.size(); ++t) {
      for (int u : a_.empties(t)) back[u].push_back(t);
      for (const Automaton::Edge& edge : a_.edges(t)) {
        if (!EdgeSeq(edge).empty()) back[edge.to].push_back(t);
      }
    }
    live_.assign(a_.size(), false);
    live_[final] = true;
    for (std::vector<int> frontier{final}; !frontier.empty();) {
      const int u = frontier.back();
      frontier.pop_back();
      for (int t : back[u]) {
        if (!live_[t]) {
          live_[t] = true;
          frontier.push_back(t);
        }
      }
    }
    if (!live_[start]) {
      throw PatternError(
          "the pattern matches no string whose characters JSON writes plainly or "
          "with a short escape");
    }
    rules_.assign(a_.size(), -1);
    const int32_t first = RuleOf(start);
    for (size_t i = 0; i < pending_.size(); ++i) {
      const int s = pending_[i];
      std::set<std::pair<std::string, int>> written;  // an edge reached through two closures once
      for (int t : a_.Closure(s)) {
        if (t == final) g_.AddAlternative(rules_[s], ending_);
        for (const Automaton::Edge& edge : a_.edges(t)) {
          Seq alternative = EdgeSeq(edge);
          if (alternative.empty() || !live_[edge.to]) continue;
          if (!written.insert({EdgeKey(edge), edge.to}).second) continue;
          if (edge.bytes.empty() && edge.utf8.empty() &&
              Plain(edge.set).count() > kMaxNarrowWidth && --wide_positions_left_ < 0) {
            throw PatternError("the schema's patterns read a class of more than " +
                               std::to_string(kMaxNarrowWidth) +
                               " characters (such as ., \\w or [a-z]) in more than " +
                               std::to_string(kMaxWidePatternPositions) +
                               " places; each costs a token cache over the whole vocabulary");
          }
          if (++alternatives_ > kMaxAlternatives) {
            throw PatternError("the pattern's grammar would have more than " +
                               std::to_string(kMaxAlternatives) + " alternatives");
          }
          alternative.push_back(Element::Rule(RuleOf(edge.to)));
          g_.AddAlternative(rules_[s], alternative);
        }
      }
    }
    return first;
  }

 private:
  static constexpr size_t kMaxNarrowWidth = 22;  // hex digits of both cases
  static constexpr int kMaxAlternatives = 16384;

  int32_t RuleOf(int state) {
    if (rules_[state] < 0) {
      rules_[state] = g_.NewRule();
      pending_.push_back(state);
    }
    return rules_[state];
  }

  static std::string EdgeKey(const Automaton::Edge& edge) {
    if (!edge.bytes.empty()) return "b" + edge.bytes;
    std::string key = "s" + edge.set.to_string();
    for (const ByteSet& set : edge.utf8) key += set.to_string();
    return key;
  }

  // The elements that write one crossing of `edge`; empty when JSON cannot write it here.
  Seq EdgeSeq(const Automaton::Edge& edge) {
    if (!edge.bytes.empty()) return g_.Literal(edge.bytes);
    if (!edge.utf8.empty()) {
      Seq out;
      for (const ByteSet& set : edge.utf8) out.push_back(Element::Bytes(g_.Intern(set)));
      return out;
    }
    const CharSet plain = Plain(edge.set);
    if (plain.any()) {
      ByteSet bytes;
      for (int c = 0; c < 128; ++c) bytes[c] = plain[c];
      return {Element::Bytes(g_.Intern(bytes))};
    }
    ByteSet letters;
    const std::pair<int, char> kShort[] = {{'"', '"'},  {'\\', '\\'}, {'\b', 'b'}, {'\f', 'f'},
                                           {'\n', 'n'}, {'\r', 'r'},  {'\t', 't'}};
    for (auto [c, letter] : kShort) {
      if (edge.set[c]) letters.set(static_cast<unsigned char>(letter));
    }
    if (letters.none()) return {};
    return {g_.Byte('\\'), Element::Bytes(g_.Intern(letters))};
  }

  Grammar& g_;
  const Automaton& a_;
  Seq ending_;
  std::vector<bool> live_;
  std::vector<int32_t> rules_;
  std::vector<int> pending_;
  int& wide_positions_left_;
  int alternatives_ = 0;
};

// The characters every string of `node` has, or -1 when they vary. A set or a non-ASCII
// character's bytes is one character (a JSON escape such as \n too).
int FixedLength(const Node& node) {
  switch (node.kind) {
    case Node::Kind::kSet:
    case Node::Kind::kBytes:
      return 1;
    case Node::Kind::kSequence: {
      int total = 0;
      for (const Node& child : node.children) {
        const int length = FixedLength(child);
        if (length < 0) return -1;
        total += length;
      }
      return total;
    }
    case Node::Kind::kAlternatives: {
      const int first = FixedLength(node.children[0]);
      for (const Node& child : node.children) {
        if (FixedLength(child) != first) return -1;
      }
      return first;
    }
    case Node::Kind::kRepeat: {
      const int child = FixedLength(node.children[0]);
      return node.min == node.max && child >= 0 ? node.min * child : -1;
    }
  }
  return -1;
}

// minLength and maxLength as the count of the pattern's one repetition of varying count (the rest
// fixed): a repetition of a part of c characters beside f fixed ones takes counts n with
// f + n * c inside the lengths. Anything else is refused.
void BoundLength(Node& root, bool anchored, const PatternLengths& lengths) {
  const char* kShape =
      "minLength or maxLength beside a pattern needs it anchored at both ends (^...$), with a "
      "fixed length but for one repetition, as in ^[a-z][a-z0-9_]*$";
  if (!anchored) throw PatternError(kShape);
  std::vector<Node*> parts;
  if (root.kind == Node::Kind::kSequence) {
    for (Node& child : root.children) parts.push_back(&child);
  } else {
    parts.push_back(&root);
  }
  int fixed = 0;
  Node* repeat = nullptr;
  for (Node* part : parts) {
    const int length = FixedLength(*part);
    if (length >= 0) {
      fixed += length;
    } else if (repeat == nullptr && part->kind == Node::Kind::kRepeat &&
               FixedLength(part->children[0]) > 0) {
      repeat = part;
    } else {
      throw PatternError(kShape);
    }
  }
  const auto outside = [] {
    return PatternError(
        "no string the pattern matches has a length within minLength and maxLength");
  };
  if (repeat == nullptr) {
    if (fixed < lengths.min || (lengths.max >= 0 && fixed > lengths.max)) throw outside();
    return;
  }
  const int each = FixedLength(repeat->children[0]);
  const int fewest = std::max(repeat->min, (std::max(lengths.min - fixed, 0) + each - 1) / each);
  int most = repeat->max;
  if (lengths.max >= 0) {
    if (lengths.max < fixed) throw outside();
    const int fit = (lengths.max - fixed) / each;
    most = most < 0 ? fit : std::min(most, fit);
  }
  if (most >= 0 && most < fewest) throw outside();
  if (most > kMaxCountedItems) {
    throw PatternError("maxLength beside a pattern allows a repetition of more than " +
                       std::to_string(kMaxCountedItems) + " counts");
  }
  repeat->min = fewest;
  repeat->max = most;
}

}  // namespace

int32_t StringPatternRule(Grammar& grammar, const JsonRules& rules, std::string_view pattern,
                          int& wide_positions_left, std::optional<PatternLengths> lengths) {
  if (pattern.size() > kMaxPatternBytes) {
    throw PatternError("patterns longer than " + std::to_string(kMaxPatternBytes) +
                       " bytes are not supported");
  }
  bool anchored_start = false, anchored_end = false;
  Node root = Parser(pattern).Parse(anchored_start, anchored_end);
  if (lengths) BoundLength(root, anchored_start && anchored_end, *lengths);
  Automaton automaton;
  const int start = automaton.NewState(), final = automaton.NewState();
  automaton.Build(root, start, final);
  // After the match: any characters unless anchored, then the closing quote.
  Seq ending;
  if (!anchored_end) ending.push_back(Element::Rule(rules.characters));
  Append(ending, grammar.Literal("\""));
  const int32_t match = Writer(grammar, automaton, ending, wide_positions_left).Write(start, final);
  Seq body = grammar.Literal("\"");
  if (!anchored_start) body.push_back(Element::Rule(rules.characters));
  body.push_back(Element::Rule(match));
  return grammar.RuleOf({body});
}

}  // namespace mkserve::grammar
