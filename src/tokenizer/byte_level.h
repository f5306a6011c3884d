// GPT-2's reversible byte <-> code point mapping: printable bytes map to themselves, the others
// to code points from U+0100 up, so every byte string becomes printable text.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mkserve::tokenizer {

// The regex GPT-2 (and the ByteLevel pre-tokenizer with use_regex) splits words with.
inline constexpr std::string_view kGpt2SplitRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelMap {
 public:
  static const ByteLevelMap& Get();

  char32_t ToCodePoint(unsigned char byte) const { return byte_to_code_point_[byte]; }
  // The UTF-8 of ToCodePoint(byte), precomputed for the hot path.
  std::string_view ToUtf8(unsigned char byte) const { return byte_to_utf8_[byte]; }
  std::optional<unsigned char> ToByte(char32_t code_point) const;

  // Maps every byte of `text` to its code point, appending UTF-8 to `out`.
  void Encode(std::string_view text, std::string& out) const;
  // Inverse of Encode; nullopt when some code point is not in the mapping.
  std::optional<std::string> Decode(std::string_view text) const;

 private:
  ByteLevelMap();
  std::array<char32_t, 256> byte_to_code_point_{};
  std::array<std::string, 256> byte_to_utf8_;
  std::array<int16_t, 0x200> code_point_to_byte_{};  // -1 where no byte maps to it
};

}  // namespace mkserve::tokenizer
