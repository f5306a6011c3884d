#include "tokenizer/byte_level.h"

#include "common/utf8.h"

namespace mkserve::tokenizer {

namespace {

// Bytes GPT-2 keeps as themselves: '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF.
bool IsKeptByte(int byte) {
  return (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

constexpr char32_t kFirstShiftedCodePoint = 0x100;

}  // namespace

ByteLevelMap::ByteLevelMap() {
  code_point_to_byte_.fill(-1);
  char32_t next_shifted = kFirstShiftedCodePoint;
  for (int byte = 0; byte < 256; ++byte) {
    byte_to_code_point_[byte] = IsKeptByte(byte) ? static_cast<char32_t>(byte) : next_shifted++;
    AppendUtf8(byte_to_utf8_[byte], byte_to_code_point_[byte]);
    code_point_to_byte_[byte_to_code_point_[byte]] = static_cast<int16_t>(byte);
  }
}

const ByteLevelMap& ByteLevelMap::Get() {
  static const ByteLevelMap map;
  return map;
}

std::optional<unsigned char> ByteLevelMap::ToByte(char32_t code_point) const {
  if (code_point >= code_point_to_byte_.size() || code_point_to_byte_[code_point] < 0) {
    return std::nullopt;
  }
  return static_cast<unsigned char>(code_point_to_byte_[code_point]);
}

void ByteLevelMap::Encode(std::string_view text, std::string& out) const {
  for (char c : text) out.append(byte_to_utf8_[static_cast<unsigned char>(c)]);
}

std::optional<std::string> ByteLevelMap::Decode(std::string_view text) const {
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    char32_t c = NextCodePoint(text, pos);
    if (c < 0x80 && IsKeptByte(static_cast<int>(c))) {  // fast path for printable ASCII
      bytes.push_back(static_cast<char>(c));
      continue;
    }
    std::optional<unsigned char> byte = ToByte(c);
    if (!byte) return std::nullopt;
    bytes.push_back(static_cast<char>(*byte));
  }
  return bytes;
}

}  // namespace mkserve::tokenizer
