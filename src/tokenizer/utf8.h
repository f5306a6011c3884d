// UTF-8 helpers shared by the tokenizer: decoding code points, validation, and the lossy
// conversion that the HF decoders apply to byte strings (one U+FFFD per maximal invalid run).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mkserve::tokenizer {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes the code point at `pos` of valid UTF-8 and advances `pos` past it.
char32_t NextCodePoint(std::string_view text, size_t& pos);

// Byte length of the UTF-8 sequence that starts with `lead` (1 for continuation bytes).
size_t Utf8SequenceLength(unsigned char lead);

void AppendUtf8(std::string& out, char32_t code_point);

// Length of the longest prefix of `text` that is valid UTF-8.
size_t ValidUtf8PrefixLength(std::string_view text);
inline bool IsValidUtf8(std::string_view text) {
  return ValidUtf8PrefixLength(text) == text.size();
}

// Appends `bytes` to `out`, replacing each maximal ill-formed subsequence by U+FFFD, as Rust's
// String::from_utf8_lossy does.
void AppendUtf8Lossy(std::string& out, std::string_view bytes);

// Unicode properties used by pre-tokenizers and added-token matching (ICU backed).
bool IsWhitespace(char32_t c);   // White_Space
bool IsNumeric(char32_t c);      // general category N*
bool IsWordChar(char32_t c);     // \w: Alphabetic, M, Nd, Pc, Join_Control
bool IsPunctuation(char32_t c);  // general category P*

}  // namespace mkserve::tokenizer
