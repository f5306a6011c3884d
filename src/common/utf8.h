// UTF-8 encoding and decoding, shared by the tokenizer (byte strings from BPE merges, lossy
// decoding as HF's decoders do) and the Jinja engine (Python str semantics: code points).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mkserve {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Byte length of the UTF-8 sequence that starts with `lead` (1 for bytes that cannot start one).
size_t Utf8SequenceLength(unsigned char lead);

// Decodes the code point at `pos` and advances `pos` past it. A byte that does not start a
// complete sequence with continuation bytes decodes as its own value and advances by one.
char32_t NextCodePoint(std::string_view text, size_t& pos);

void AppendUtf8(std::string& out, char32_t code_point);

// All code points of `text` (NextCodePoint's treatment of invalid bytes), and back.
std::u32string DecodeUtf8(std::string_view text);
std::string EncodeUtf8(std::u32string_view code_points);

// Code points in valid UTF-8 `text` (bytes that are not continuation bytes).
size_t CodePointCount(std::string_view text);

// Length of the longest prefix of `text` that is valid UTF-8 (Unicode Table 3-7).
size_t ValidUtf8PrefixLength(std::string_view text);
inline bool IsValidUtf8(std::string_view text) {
  return ValidUtf8PrefixLength(text) == text.size();
}

// Appends `bytes` to `out`, replacing each maximal ill-formed subsequence by U+FFFD, as Rust's
// String::from_utf8_lossy does.
void AppendUtf8Lossy(std::string& out, std::string_view bytes);

}  // namespace mkserve
