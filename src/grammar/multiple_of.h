// multipleOf without bounds as a grammar rule: the JSON spellings of the multiples of a decimal
// step, whatever the step (5, 60, 0.25, 0.3). A number's digits are read as one integer N (its
// integer part, then its fraction digits, padded to the step's), and N's remainder modulo the
// step's digits is the rule's state: a finite automaton, one rule a state and a digit count.
// (Multiples between two bounds are numeric_range.h's MultiplesRule.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "grammar/grammar.h"

namespace mkserve::grammar {

// A decimal step: digits x 10^exponent, digits not ending in 0 (0.25: 25 and -2; 60: 6 and 1).
struct DecimalStep {
  int64_t digits = 0;
  int exponent = 0;
};

// The step a JSON number spells exactly ("0.25", "1e-3", "60"), or nullopt when its significant
// digits do not fit an int64_t or it is not above 0.
std::optional<DecimalStep> ParseDecimalStep(const std::string& json_number);

// The most remainders a rule tracks (the step's significant digits times any power of ten an
// integer step carries): the rules grow as remainders x (kMaxIntegerDigits + fraction digits).
inline constexpr int64_t kMaxMultipleOfRemainders = 100;

// The remainders MultipleOfRule would track for `step` (integral: integers only).
int64_t MultipleOfRemainders(const DecimalStep& step);

// A rule matching the JSON numbers that are multiples of `step`: an optional minus, an integer
// part of at most kMaxIntegerDigits digits without leading zeros, and (not `integral`, a step
// below 1) a fraction of at most the step's fraction digits; no exponent. Every multiple within
// those digits is spelled, each parse ends in a multiple. Call only with MultipleOfRemainders(step)
// at most kMaxMultipleOfRemainders.
int32_t MultipleOfRule(Grammar& grammar, const DecimalStep& step, bool integral);

}  // namespace mkserve::grammar
