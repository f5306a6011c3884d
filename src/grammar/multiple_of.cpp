#include "grammar/multiple_of.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <vector>

#include "grammar/json_prelude.h"

namespace mkserve::grammar {
namespace {

// 10^n mod m.
int64_t Power10Mod(int n, int64_t m) {
  int64_t p = 1 % m;
  for (int i = 0; i < n; ++i) p = p * 10 % m;
  return p;
}

// The automaton's states, each a rule once reached: Int(r, n) after n integer digits with
// remainder r, After(r) after the integer part, Frac(r, j) after j fraction digits. Only states
// from which a multiple can still end get a rule (live), so no parse runs into a dead end.
class RemainderWriter {
 public:
  // fraction_digits: the step's (0.25: 2); a number writes at most kMaxFractionDigits of them.
  RemainderWriter(Grammar& g, int64_t modulus, int fraction_digits, bool fractions)
      : g_(g),
        m_(modulus),
        s_(fraction_digits),
        j_max_(std::min(fraction_digits, kMaxFractionDigits)),
        fractions_(fractions && fraction_digits > 0) {
    const int64_t m = m_;
    frac_live_.assign(static_cast<size_t>(j_max_ + 1), std::vector<bool>(m, false));
    for (int j = j_max_; j >= 0; --j) {
      for (int64_t r = 0; r < m; ++r) {
        bool live = FracEnds(r, j);
        for (int d = 0; d <= 9 && !live && j < j_max_; ++d) live = frac_live_[j + 1][Next(r, d)];
        frac_live_[j][r] = live;
      }
    }
    after_live_.assign(m, false);
    for (int64_t r = 0; r < m; ++r)
      after_live_[r] = AfterEnds(r) || (fractions_ && frac_live_[0][r]);
    int_live_.assign(kMaxIntegerDigits + 1, std::vector<bool>(m, false));
    for (int n = kMaxIntegerDigits; n >= 1; --n) {
      for (int64_t r = 0; r < m; ++r) {
        bool live = after_live_[r];
        for (int d = 0; d <= 9 && !live && n < kMaxIntegerDigits; ++d)
          live = int_live_[n + 1][Next(r, d)];
        int_live_[n][r] = live;
      }
    }
    int_rule_.assign(kMaxIntegerDigits + 1, std::vector<int32_t>(m, -1));
    after_rule_.assign(m, -1);
    frac_rule_.assign(static_cast<size_t>(j_max_ + 1), std::vector<int32_t>(m, -1));
  }

  int32_t Root() {
    const int32_t magnitude = g_.NewRule();
    g_.AddAlternative(magnitude, {Digits(1u << 0), Element::Rule(After(0))});  // 0, 0.25, ...
    AddDigitSteps(
        magnitude, 0, /*first=*/true, [&](int64_t r) { return Int(r, 1); },
        [&](int64_t r) { return int_live_[1][r]; });
    const int32_t root = g_.NewRule();
    g_.AddAlternative(root, {Element::Rule(magnitude)});
    g_.AddAlternative(root, {g_.Byte('-'), Element::Rule(magnitude)});
    return root;
  }

 private:
  int64_t Next(int64_t r, int d) const { return (r * 10 + d) % m_; }
  // A number ends here: its digits, padded to s_ fraction digits, are a multiple.
  bool AfterEnds(int64_t r) const { return r * Power10Mod(s_, m_) % m_ == 0; }
  bool FracEnds(int64_t r, int j) const { return j >= 1 && r * Power10Mod(s_ - j, m_) % m_ == 0; }

  // The digits whose bits are set in `digits` (bit d: digit d).
  Element Digits(uint32_t digits) {
    ByteSet set;
    for (int d = 0; d <= 9; ++d) {
      if (digits & (1u << d)) set.set(static_cast<unsigned char>('0' + d));
    }
    return Element::Bytes(g_.Intern(set));
  }

  // One alternative per next state: the digits that lead there, then that state's rule.
  template <typename RuleOf, typename LiveOf>
  void AddDigitSteps(int32_t rule, int64_t r, bool first, RuleOf rule_of, LiveOf live_of) {
    std::vector<uint32_t> to(m_, 0);
    for (int d = first ? 1 : 0; d <= 9; ++d) to[Next(r, d)] |= 1u << d;
    for (int64_t next = 0; next < m_; ++next) {
      if (to[next] != 0 && live_of(next)) {
        g_.AddAlternative(rule, {Digits(to[next]), Element::Rule(rule_of(next))});
      }
    }
  }

  int32_t Int(int64_t r, int n) {
    int32_t& rule = int_rule_[n][r];
    if (rule >= 0) return rule;
    rule = g_.NewRule();
    const int32_t made = rule;  // the vectors' references stay valid: they are never resized
    if (after_live_[r]) g_.AddAlternative(made, {Element::Rule(After(r))});
    if (n < kMaxIntegerDigits) {
      AddDigitSteps(
          made, r, false, [&](int64_t next) { return Int(next, n + 1); },
          [&](int64_t next) { return int_live_[n + 1][next]; });
    }
    return made;
  }

  int32_t After(int64_t r) {
    int32_t& rule = after_rule_[r];
    if (rule >= 0) return rule;
    rule = g_.NewRule();
    const int32_t made = rule;
    if (AfterEnds(r)) g_.AddAlternative(made, {});
    if (fractions_ && frac_live_[0][r]) {
      g_.AddAlternative(made, {g_.Byte('.'), Element::Rule(Frac(r, 0))});
    }
    return made;
  }

  int32_t Frac(int64_t r, int j) {
    int32_t& rule = frac_rule_[j][r];
    if (rule >= 0) return rule;
    rule = g_.NewRule();
    const int32_t made = rule;
    if (FracEnds(r, j)) g_.AddAlternative(made, {});
    if (j < j_max_) {
      AddDigitSteps(
          made, r, false, [&](int64_t next) { return Frac(next, j + 1); },
          [&](int64_t next) { return frac_live_[j + 1][next]; });
    }
    return made;
  }

  Grammar& g_;
  const int64_t m_;
  const int s_, j_max_;  // the step's fraction digits; the most a number writes
  const bool fractions_;
  std::vector<std::vector<bool>> frac_live_, int_live_;
  std::vector<bool> after_live_;
  std::vector<std::vector<int32_t>> int_rule_, frac_rule_;
  std::vector<int32_t> after_rule_;
};

}  // namespace

std::optional<DecimalStep> ParseDecimalStep(const std::string& json_number) {
  std::string digits;
  int exponent = 0;
  size_t i = 0;
  if (i < json_number.size() && json_number[i] == '-') return std::nullopt;
  bool fraction = false;
  for (; i < json_number.size(); ++i) {
    const char c = json_number[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (!(digits.empty() && c == '0')) digits.push_back(c);
      if (fraction) --exponent;
    } else if (c == '.' && !fraction) {
      fraction = true;
    } else {
      break;
    }
  }
  if (i < json_number.size()) {
    if (json_number[i] != 'e' && json_number[i] != 'E') return std::nullopt;
    const std::string rest = json_number.substr(i + 1);
    char* end = nullptr;
    const long power = std::strtol(rest.c_str(), &end, 10);
    if (rest.empty() || *end != '\0' || power < -400 || power > 400) return std::nullopt;
    exponent += static_cast<int>(power);
  }
  while (!digits.empty() && digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  return DecimalStep{std::stoll(digits), exponent};
}

int64_t MultipleOfRemainders(const DecimalStep& step) {
  int64_t m = step.digits;
  for (int e = 0; e < step.exponent; ++e) {
    if (m > kMaxMultipleOfRemainders) return m;  // already too many
    m *= 10;
  }
  return m;
}

int32_t MultipleOfRule(Grammar& grammar, const DecimalStep& step, bool integral) {
  const int fraction_digits = step.exponent < 0 ? -step.exponent : 0;
  RemainderWriter writer(grammar, MultipleOfRemainders(step), fraction_digits, !integral);
  return writer.Root();
}

}  // namespace mkserve::grammar
