// The JSON rules every JSON grammar starts from: any value, object, array, string (non-empty, or
// of a format), number, integer, boolean and null, plus bounded whitespace and free text. They are
// written in the same order into every grammar, so their element positions (and the token caches of
// those positions) are the same everywhere.
#pragma once

#include <cstdint>

#include "grammar/grammar.h"

namespace mkserve::grammar {

// Whitespace between JSON tokens is at most this many bytes, so a model cannot pad forever.
inline constexpr int kMaxWhitespaceBytes = 20;
// Digits of an integer part, a fraction and an exponent. Two exponent digits keep every number
// inside a double's range (below 1e120): nlohmann refuses 17e634 (so a tool call holding it,
// sent back in the next turn, would reach the template as a string), others read infinity.
inline constexpr int kMaxIntegerDigits = 20;
inline constexpr int kMaxFractionDigits = 20;
inline constexpr int kMaxExponentDigits = 2;

struct JsonRules {
  int32_t text = -1;  // any bytes, no special token (e.g. free reasoning before a JSON answer)
  int32_t ws = -1;    // 0 to kMaxWhitespaceBytes of space, tab, newline, carriage return
  int32_t value = -1;
  int32_t object = -1;
  int32_t array = -1;
  int32_t string = -1;           // a whole string, quotes included
  int32_t characters = -1;       // any run of string characters (string's loop), no quotes
  int32_t nonempty_string = -1;  // a string of at least one character, quotes included
  // The characters of a string whose length counts (a loop for Grammar::Counted, no quotes): the
  // characters loop itself, whose round is one code point (a surrogate pair written as two \u
  // escapes is one round; a lone surrogate escape is never written).
  int32_t code_points = -1;
  int32_t code_points_probe = -1;  // its unbounded counted loop, whose counted caches it shares
  int32_t number = -1;
  int32_t integer = -1;
  int32_t boolean = -1;
  int32_t null = -1;
  // Strings of a format, quotes included.
  int32_t date = -1;       // 2024-01-31
  int32_t time = -1;       // 13:45:00Z: optional fraction, then Z or +hh:mm (RFC 3339)
  int32_t date_time = -1;  // date T time
  int32_t email = -1;
  int32_t hostname = -1;  // RFC 1123 labels, at most 239 bytes (json_prelude.cpp)
  int32_t uuid = -1;
  int32_t ipv4 = -1;
  int32_t ipv6 = -1;
  int32_t duration = -1;  // ISO 8601, as RFC 3339 appendix A: P1Y2M3DT4H5M6S, PT1H, P2W
};

// A grammar holding only the prelude (root unset), and its rules.
struct JsonPrelude {
  Grammar grammar;
  JsonRules rules;
};
const JsonPrelude& JsonPreludeGrammar();

// Matches `item` between `min` and `max` times (max < 0: unbounded) in a new rule.
int32_t Repeat(Grammar& grammar, const std::vector<Element>& item, int min, int max);

}  // namespace mkserve::grammar
