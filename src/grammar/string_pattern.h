// A JSON Schema `pattern` (an ECMA-262 regular expression) as a grammar rule: the JSON strings,
// quotes included, whose value the pattern matches. Like JSON Schema, a pattern matches anywhere
// in the value unless it is anchored with ^ at its start and $ at its end.
//
// Supported: literal characters (UTF-8 too), escaped metacharacters, \d \D \w \W \s \S, \t \n \r
// \f \v \0, \xHH, \uXXXX; classes [a-z0-9_] and [^...] of characters, ranges and those escapes
// (non-ASCII ones written as UTF-8, a range as byte sets a position: [à-ÿ], [\u4e00-\u9fff]); the
// dot; groups ( ) and (?: ); alternatives |; quantifiers * + ? {n} {n,} {n,m} (counts up to
// kMaxCountedItems; a lazy ? after one changes nothing here). Anything else (backreferences,
// lookaround, \b, named groups, \p{...}, anchors inside the pattern) is refused by name.
//
// The pattern becomes an automaton and the automaton a right-linear grammar (string_pattern.cpp
// says why). What is generated always matches; not every match is generated: a class writes its
// printable ASCII characters and its non-ASCII ones, or, holding none, its short escapes
// (\" \\ \b \f \n \r \t); a negated class, the dot and \W write only ASCII (so [^a] writes
// no non-ASCII character) and \s only the space.
#pragma once

#include <optional>
#include <string_view>

#include "common/error.h"
#include "grammar/grammar.h"
#include "grammar/json_prelude.h"

namespace mkserve::grammar {

// Thrown for a pattern the compiler refuses; the message says what and where (a character index).
class PatternError : public Error {
 public:
  using Error::Error;
};

// Places reading a class of more than 22 characters (the dot, \w, [a-z], ...) that the patterns
// of one grammar may hold in all: each costs a token cache build over the whole vocabulary, about
// 0.1 s for 262K entries, the first time a generation reaches it.
inline constexpr int kMaxWidePatternPositions = 32;

// minLength and maxLength beside a pattern, in characters (code points); max -1: none.
struct PatternLengths {
  int min = 0, max = -1;
};

// The rule of the JSON strings whose value `pattern` matches; takes its wide places from
// `wide_positions_left` (start it at kMaxWidePatternPositions). With `lengths`, the pattern must
// be anchored at both ends, and all of it but one repetition must have a fixed length (as in
// ^[a-z][a-z0-9_]*$): the lengths then bound that repetition's count. Throws PatternError.
int32_t StringPatternRule(Grammar& grammar, const JsonRules& rules, std::string_view pattern,
                          int& wide_positions_left,
                          std::optional<PatternLengths> lengths = std::nullopt);

}  // namespace mkserve::grammar
