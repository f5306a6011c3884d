// Unicode properties the pre-tokenizers and added-token matching ask about (ICU backed). UTF-8
// encoding itself lives in common/utf8.h.
#pragma once

namespace mkserve::tokenizer {

bool IsWhitespace(char32_t c);   // White_Space
bool IsNumeric(char32_t c);      // general category N*
bool IsWordChar(char32_t c);     // \w: Alphabetic, M, Nd, Pc, Join_Control
bool IsPunctuation(char32_t c);  // general category P*

}  // namespace mkserve::tokenizer
