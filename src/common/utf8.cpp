#include "common/utf8.h"

namespace mkserve {

size_t Utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

char32_t NextCodePoint(std::string_view text, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  const size_t length = Utf8SequenceLength(lead);
  bool complete = length > 1 && pos + length <= text.size();
  for (size_t i = 1; complete && i < length; ++i) complete = (byte(pos + i) & 0xC0) == 0x80;
  if (!complete) {
    ++pos;
    return lead;
  }
  static constexpr unsigned char kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  char32_t code_point = lead & kLeadMask[length];
  for (size_t i = 1; i < length; ++i) code_point = (code_point << 6) | (byte(pos + i) & 0x3F);
  pos += length;
  return code_point;
}

void AppendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::u32string DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) out.push_back(NextCodePoint(text, pos));
  return out;
}

std::string EncodeUtf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t cp : code_points) AppendUtf8(out, cp);
  return out;
}

size_t CodePointCount(std::string_view text) {
  size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

namespace {

// Number of bytes of a well-formed sequence starting at `pos` (0 when the sequence is
// ill-formed); `valid_prefix` receives how many bytes form a valid but possibly truncated prefix.
size_t WellFormedLength(std::string_view text, size_t pos, size_t& valid_prefix) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  unsigned char lead = byte(pos);
  valid_prefix = 1;
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte (Unicode Table 3-7)
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  for (size_t i = 1; i < length; ++i) {
    if (pos + i >= text.size()) return 0;
    unsigned char b = byte(pos + i);
    bool ok = i == 1 ? (b >= low && b <= high) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return 0;
    valid_prefix = i + 1;
  }
  return length;
}

}  // namespace

size_t ValidUtf8PrefixLength(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t prefix = 0;
    size_t length = WellFormedLength(text, pos, prefix);
    if (length == 0) return pos;
    pos += length;
  }
  return pos;
}

void AppendUtf8Lossy(std::string& out, std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t prefix = 0;
    size_t length = WellFormedLength(bytes, pos, prefix);
    if (length > 0) {
      out.append(bytes.substr(pos, length));
      pos += length;
    } else {
      AppendUtf8(out, kReplacementChar);
      pos += prefix;
    }
  }
}

}  // namespace mkserve
