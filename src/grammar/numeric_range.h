// Numeric ranges as grammar rules: the JSON spellings of the integers, or of the numbers, that lie
// between two bounds (JSON Schema's minimum, maximum, exclusiveMinimum, exclusiveMaximum).
//
// Integers are split into runs of digit ranges ([123, 4567] is 12[3-9], 1[3-9][0-9], [2-9][0-9]
// [0-9], [1-3][0-9][0-9][0-9], 4[0-4][0-9][0-9], 45[0-5][0-9], 456[0-7]), so each value is spelled
// exactly one way: no leading zeros, no "-0". Numbers take integer bounds only: a number's
// integer part decides the comparison except at a bound itself, where only its fraction (zero or
// not) matters; bounded numbers have no exponent. Spellings stay within the JSON prelude's digit
// limits (kMaxIntegerDigits, kMaxFractionDigits).
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/grammar.h"
#include "grammar/json_prelude.h"

namespace mkserve::grammar {

// The largest bound magnitude a range takes: 10^18 - 1. A looser bound (a minimum below -10^18,
// a maximum above 10^18) bounds nothing the prelude's 20 digits could not spell anyway.
inline constexpr int64_t kMaxRangeBound = 999'999'999'999'999'999;

struct NumericBound {
  int64_t value = 0;  // |value| <= kMaxRangeBound
  bool exclusive = false;
};

struct NumericRange {
  std::optional<NumericBound> lower, upper;  // none: unbounded on that side
};

// A rule matching the JSON integers in `range`, or -1 when none lies in it.
int32_t IntegerRangeRule(Grammar& grammar, const NumericRange& range);

// A rule matching the JSON numbers (integer part, optional fraction of at most
// `max_fraction_digits` digits: multipleOf 0.01 is 2, no exponent) in `range`, or -1 when none
// lies in it.
int32_t NumberRangeRule(Grammar& grammar, const NumericRange& range,
                        int max_fraction_digits = kMaxFractionDigits);

// A rule matching the JSON integers in `range` that are multiples of 10^zeros (zeros >= 1:
// multipleOf 10, 100, ...): a multiple's spelling is its quotient's and the zeros, so each is
// spelled one way. -1 when none lies in the range.
int32_t ScaledIntegerRule(Grammar& grammar, const NumericRange& range, int zeros);

// The most multiples MultiplesRule spells out.
inline constexpr int64_t kMaxSpelledMultiples = 4096;

// A rule matching the JSON numbers in `range`, which must have both bounds, that are multiples
// of step x 10^-fraction_digits (step >= 1, any step: multipleOf 3, 25, 1000007, or 0.25 as 25
// and 2), each spelled out with the fraction digits it needs (1.5 and 2, not 1.50 or 2.0), the
// spellings sharing their prefixes (a trie: a parse holds one stack per next digit, not one per
// value). -1 when none lies in the range; nullopt when more than kMaxSpelledMultiples do.
std::optional<int32_t> MultiplesRule(Grammar& grammar, const NumericRange& range, int64_t step,
                                     int fraction_digits = 0);

}  // namespace mkserve::grammar
