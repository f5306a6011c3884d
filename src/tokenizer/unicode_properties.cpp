#include "tokenizer/unicode_properties.h"

#include <unicode/uchar.h>

namespace mkserve::tokenizer {

bool IsWhitespace(char32_t c) { return u_isUWhiteSpace(static_cast<UChar32>(c)); }

bool IsNumeric(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0; }

bool IsWordChar(char32_t c) {
  auto ch = static_cast<UChar32>(c);
  uint32_t mask = U_GET_GC_MASK(ch);
  return u_hasBinaryProperty(ch, UCHAR_ALPHABETIC) ||
         (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0 ||
         u_hasBinaryProperty(ch, UCHAR_JOIN_CONTROL);
}

bool IsPunctuation(char32_t c) {
  // ASCII symbols such as '$' and '+' count as punctuation too, as in Rust's is_ascii_punctuation.
  if (c < 0x80)
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}

}  // namespace mkserve::tokenizer
