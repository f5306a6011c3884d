#include "grammar/numeric_range.h"

#include <algorithm>
#include <string>
#include <vector>

#include "grammar/json_prelude.h"

namespace mkserve::grammar {
namespace {

using Seq = std::vector<Element>;

class RangeWriter {
 public:
  explicit RangeWriter(Grammar& grammar) : g_(grammar) {}

  // Sequences spelling each integer in [lo, hi] (hi none: unbounded) exactly once.
  std::vector<Seq> Magnitudes(uint64_t lo, std::optional<uint64_t> hi) {
    std::vector<Seq> out;
    const int lo_digits = Digits(lo);
    const int hi_digits = hi ? Digits(*hi) : lo_digits;
    for (int n = lo_digits; n <= hi_digits; ++n) {
      const uint64_t first = n == 1 ? 0 : Power10(n - 1), last = Power10(n) - 1;
      const uint64_t begin = std::max(lo, first), end = hi ? std::min(*hi, last) : last;
      if (begin <= end) SameLength(std::to_string(begin), std::to_string(end), {}, out);
    }
    if (!hi) {  // every longer spelling, up to the prelude's digit limit
      Seq longer{Digit('1', '9')};
      longer.push_back(
          Element::Rule(Repeat(g_, {Digit('0', '9')}, lo_digits, kMaxIntegerDigits - 1)));
      out.push_back(longer);
    }
    return out;
  }

  Element Digit(char first, char last) {
    ByteSet set;
    for (char c = first; c <= last; ++c) set.set(static_cast<unsigned char>(c));
    return Element::Bytes(g_.Intern(set));
  }

 private:
  static int Digits(uint64_t v) { return static_cast<int>(std::to_string(v).size()); }
  static uint64_t Power10(int n) {
    uint64_t p = 1;
    for (int i = 0; i < n; ++i) p *= 10;
    return p;
  }

  // a <= b, both of the same length: a common prefix digit by digit, then the part of a's first
  // digit above a, the whole digits between, and the part of b's first digit up to b.
  void SameLength(const std::string& a, const std::string& b, Seq prefix, std::vector<Seq>& out) {
    if (a.empty()) {
      out.push_back(prefix);
      return;
    }
    if (a[0] == b[0]) {
      prefix.push_back(Digit(a[0], a[0]));
      SameLength(a.substr(1), b.substr(1), prefix, out);
      return;
    }
    const std::string a_rest = a.substr(1), b_rest = b.substr(1);
    const size_t n = a_rest.size();
    char low = a[0], high = b[0];
    if (a_rest != std::string(n, '0')) {
      Seq lower = prefix;
      lower.push_back(Digit(a[0], a[0]));
      SameLength(a_rest, std::string(n, '9'), lower, out);
      ++low;
    }
    if (b_rest != std::string(n, '9')) {
      Seq upper = prefix;
      upper.push_back(Digit(b[0], b[0]));
      SameLength(std::string(n, '0'), b_rest, upper, out);
      --high;
    }
    if (low <= high) {
      Seq middle = prefix;
      middle.push_back(Digit(low, high));
      for (size_t i = 0; i < n; ++i) middle.push_back(Digit('0', '9'));
      out.push_back(middle);
    }
  }

  Grammar& g_;
};

// One side of a number's range, as an interval of its magnitude m = |x| with integer ends.
struct MagnitudeInterval {
  int64_t lo = 0;
  bool lo_exclusive = false;
  std::optional<int64_t> hi;
  bool hi_exclusive = false;
};

class NumberWriter {
 public:
  NumberWriter(Grammar& grammar, int max_fraction_digits)
      : g_(grammar), digits_(grammar), most_(max_fraction_digits) {}

  // Alternatives for sign + m, m in `interval`: an integer part I strictly inside the interval
  // takes any fraction; I at an exclusive lower end needs a fraction that is not zero, I at an
  // inclusive upper end one that is.
  void Add(const Seq& sign, const MagnitudeInterval& m, std::vector<Seq>& out) {
    const int64_t core_lo = m.lo_exclusive ? m.lo + 1 : m.lo;
    if (!m.hi || core_lo <= *m.hi - 1) {
      const std::optional<uint64_t> core_hi =
          m.hi ? std::optional<uint64_t>(*m.hi - 1) : std::nullopt;
      AddWith(sign, digits_.Magnitudes(core_lo, core_hi), Fraction(kAny), out);
    }
    if (m.lo_exclusive && (!m.hi || m.lo < *m.hi)) {
      AddWith(sign, digits_.Magnitudes(m.lo, m.lo), Fraction(kNonZero), out);
    }
    if (m.hi && !m.hi_exclusive && (*m.hi > m.lo || (*m.hi == m.lo && !m.lo_exclusive))) {
      AddWith(sign, digits_.Magnitudes(*m.hi, *m.hi), Fraction(kZero), out);
    }
  }

 private:
  enum FractionKind { kAny, kZero, kNonZero };

  static void AddWith(const Seq& sign, const std::vector<Seq>& magnitudes, int32_t fraction,
                      std::vector<Seq>& out) {
    for (const Seq& magnitude : magnitudes) {
      Seq alternative = sign;
      Append(alternative, magnitude);
      alternative.push_back(Element::Rule(fraction));
      out.push_back(alternative);
    }
  }

  // The rule of a fraction kind, made once: none or "." digits, "." zeros only, or "." digits
  // with a non-zero one among them; at most most_ digits.
  int32_t Fraction(FractionKind kind) {
    if (fractions_[kind] >= 0) return fractions_[kind];
    const Element dot = g_.Byte('.'), digit = digits_.Digit('0', '9'), zero = g_.Byte('0');
    const Element nonzero = digits_.Digit('1', '9');
    const int most = most_;
    if (kind == kAny) {
      fractions_[kind] = g_.RuleOf({{}, {dot, Element::Rule(Repeat(g_, {digit}, 1, most))}});
    } else if (kind == kZero) {
      fractions_[kind] = g_.RuleOf({{}, {dot, Element::Rule(Repeat(g_, {zero}, 1, most))}});
    } else {
      // Exactly: after i zeros, another zero, or the first non-zero digit and up to
      // most - 1 - i digits more. The runs of up to k digits are one chain (k = 0 .. most - 1).
      std::vector<int32_t> up_to(most);
      up_to[0] = g_.NewRule();
      g_.AddAlternative(up_to[0], {});
      for (int k = 1; k < most; ++k) {
        up_to[k] = g_.RuleOf({{}, {digit, Element::Rule(up_to[k - 1])}});
      }
      int32_t after_zeros = g_.RuleOf({{nonzero, Element::Rule(up_to[0])}});  // most - 1 zeros
      for (int i = most - 2; i >= 0; --i) {
        after_zeros = g_.RuleOf(
            {{zero, Element::Rule(after_zeros)}, {nonzero, Element::Rule(up_to[most - 1 - i])}});
      }
      fractions_[kind] = g_.RuleOf({{dot, Element::Rule(after_zeros)}});
    }
    return fractions_[kind];
  }

  Grammar& g_;
  RangeWriter digits_;
  int most_;
  int32_t fractions_[3] = {-1, -1, -1};
};

int32_t RuleOrNone(Grammar& grammar, const std::vector<Seq>& alternatives) {
  if (alternatives.empty()) return -1;
  int32_t rule = grammar.NewRule();
  for (const Seq& alternative : alternatives) grammar.AddAlternative(rule, alternative);
  return rule;
}

// The range's integer bounds as inclusive ones (none: unbounded on that side).
struct InclusiveBounds {
  std::optional<int64_t> lo, hi;
  explicit InclusiveBounds(const NumericRange& range) {
    if (range.lower) lo = range.lower->value + (range.lower->exclusive ? 1 : 0);
    if (range.upper) hi = range.upper->value - (range.upper->exclusive ? 1 : 0);
  }
};

}  // namespace

int32_t IntegerRangeRule(Grammar& grammar, const NumericRange& range) {
  const auto [lo, hi] = InclusiveBounds(range);
  if (lo && hi && *lo > *hi) return -1;
  RangeWriter writer(grammar);
  std::vector<Seq> alternatives;
  if (!hi || *hi >= 0) {
    const std::optional<uint64_t> top = hi ? std::optional<uint64_t>(*hi) : std::nullopt;
    alternatives = writer.Magnitudes(lo ? std::max<int64_t>(*lo, 0) : 0, top);
  }
  if (!lo || *lo < 0) {  // "-" and a magnitude of at least 1: no "-0"
    const std::optional<uint64_t> top = lo ? std::optional<uint64_t>(-*lo) : std::nullopt;
    for (Seq magnitude : writer.Magnitudes(hi && *hi < 0 ? -*hi : 1, top)) {
      magnitude.insert(magnitude.begin(), grammar.Byte('-'));
      alternatives.push_back(magnitude);
    }
  }
  return RuleOrNone(grammar, alternatives);
}

int32_t NumberRangeRule(Grammar& grammar, const NumericRange& range, int max_fraction_digits) {
  NumberWriter writer(grammar, max_fraction_digits);
  std::vector<Seq> alternatives;
  // x >= 0: m = x from the lower bound (or 0) to the upper bound.
  const bool positive_empty = range.upper && (range.upper->value < 0 ||
                                              (range.upper->value == 0 && range.upper->exclusive));
  if (!positive_empty) {
    MagnitudeInterval m;
    if (range.lower && range.lower->value >= 0) {
      m.lo = range.lower->value;
      m.lo_exclusive = range.lower->exclusive;
    }
    if (range.upper) {
      m.hi = range.upper->value;
      m.hi_exclusive = range.upper->exclusive;
    }
    writer.Add({}, m, alternatives);
  }
  // x < 0: m = -x above 0 (no "-0"), from -upper (when negative) to -lower.
  if (!range.lower || range.lower->value < 0) {
    MagnitudeInterval m{0, true, std::nullopt, false};
    if (range.upper && range.upper->value < 0) {
      m.lo = -range.upper->value;
      m.lo_exclusive = range.upper->exclusive;
    }
    if (range.lower) {
      m.hi = -range.lower->value;
      m.hi_exclusive = range.lower->exclusive;
    }
    writer.Add({grammar.Byte('-')}, m, alternatives);
  }
  return RuleOrNone(grammar, alternatives);
}

int32_t ScaledIntegerRule(Grammar& grammar, const NumericRange& range, int zeros) {
  // Inclusive integer bounds, then those of q = x / 10^zeros (rounded inward).
  const auto [lo, hi] = InclusiveBounds(range);
  int64_t scale = 1;
  for (int i = 0; i < zeros; ++i) scale *= 10;
  auto floor_div = [&](int64_t v) { return v >= 0 ? v / scale : -((-v + scale - 1) / scale); };
  auto ceil_div = [&](int64_t v) { return v >= 0 ? (v + scale - 1) / scale : -(-v / scale); };
  std::optional<int64_t> q_lo, q_hi;
  if (lo) q_lo = ceil_div(*lo);
  if (hi) q_hi = floor_div(*hi);
  if (q_lo && q_hi && *q_lo > *q_hi) return -1;
  // q's spelling then the zeros, for q != 0; q = 0 is "0" alone. No q past the prelude's digits.
  const int64_t q_max = [&] {
    int64_t m = 1;
    for (int i = 0; i < kMaxIntegerDigits - zeros && m <= kMaxRangeBound / 10; ++i) m *= 10;
    return m - 1;
  }();
  std::vector<Seq> alternatives;
  Seq suffix;
  for (int i = 0; i < zeros; ++i) suffix.push_back(grammar.Byte('0'));
  auto add_side = [&](int64_t from, int64_t to) {  // q in [from, to], none 0
    if (from > to) return;
    const int32_t q =
        IntegerRangeRule(grammar, {NumericBound{from, false}, NumericBound{to, false}});
    if (q < 0) return;
    Seq alternative{Element::Rule(q)};
    Append(alternative, suffix);
    alternatives.push_back(alternative);
  };
  add_side(std::max<int64_t>(q_lo.value_or(1), 1), q_hi.value_or(q_max));
  add_side(q_lo.value_or(-q_max), std::min<int64_t>(q_hi.value_or(-1), -1));
  if (q_lo.value_or(0) <= 0 && q_hi.value_or(0) >= 0) alternatives.push_back({grammar.Byte('0')});
  return RuleOrNone(grammar, alternatives);
}

namespace {

// The rule of the trie node at `depth` of the sorted spellings [begin, end), which share their
// first `depth` characters: ending here (the shortest sorts first) or one alternative per next
// character.
int32_t TrieRule(Grammar& grammar, const std::vector<std::string>& sorted, size_t begin, size_t end,
                 size_t depth) {
  const int32_t rule = grammar.NewRule();
  size_t i = begin;
  if (sorted[i].size() == depth) {
    grammar.AddAlternative(rule, {});
    ++i;
  }
  while (i < end) {
    const char c = sorted[i][depth];
    size_t j = i;
    while (j < end && sorted[j][depth] == c) ++j;
    Seq alternative{grammar.Byte(static_cast<unsigned char>(c))};
    if (j > i + 1 || sorted[i].size() > depth + 1) {
      alternative.push_back(Element::Rule(TrieRule(grammar, sorted, i, j, depth + 1)));
    }
    grammar.AddAlternative(rule, alternative);
    i = j;
  }
  return rule;
}

}  // namespace

std::optional<int32_t> MultiplesRule(Grammar& grammar, const NumericRange& range, int64_t step,
                                     int fraction_digits) {
  // In units of 10^-fraction_digits: N = value * scale, a multiple when N % step == 0. The
  // bounds are integers, so an exclusive one only drops the bound itself. No overflow: |bound| <=
  // kMaxRangeBound and scale <= 10^18 in 128 bits.
  __int128 scale = 1;
  for (int i = 0; i < fraction_digits; ++i) scale *= 10;
  const __int128 lo =
      static_cast<__int128>(range.lower->value) * scale + (range.lower->exclusive ? 1 : 0);
  const __int128 hi =
      static_cast<__int128>(range.upper->value) * scale - (range.upper->exclusive ? 1 : 0);
  if (lo > hi) return -1;
  const __int128 remainder = ((lo % step) + step) % step;
  const __int128 first = remainder == 0 ? lo : lo + (step - remainder);
  if (first > hi) return -1;
  if ((hi - first) / step >= kMaxSpelledMultiples) return std::nullopt;
  std::vector<std::string> spellings;
  for (__int128 n = first; n <= hi; n += step) {
    const __int128 magnitude = n < 0 ? -n : n;
    std::string spelling =
        (n < 0 ? "-" : "") + std::to_string(static_cast<int64_t>(magnitude / scale));
    if (fraction_digits > 0) {
      std::string fraction = std::to_string(static_cast<int64_t>(magnitude % scale));
      fraction.insert(0, fraction_digits - fraction.size(), '0');
      while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
      if (!fraction.empty()) spelling += "." + fraction;
    }
    spellings.push_back(spelling);
  }
  std::sort(spellings.begin(), spellings.end());
  return TrieRule(grammar, spellings, 0, spellings.size(), 0);
}

}  // namespace mkserve::grammar
