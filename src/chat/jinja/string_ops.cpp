#include "chat/jinja/string_ops.h"

#include <cctype>

#include "chat/jinja/python_format.h"
#include "chat/jinja/python_space.h"
#include "chat/jinja/template_error.h"
#include "common/utf8.h"

namespace mkserve::chat::jinja {

std::string StripString(const std::string& text, const Value& chars, bool left, bool right) {
  std::u32string cps = DecodeUtf8(text);
  std::u32string strip_set;
  bool whitespace = chars.IsUndefined() || chars.IsNone();
  if (!whitespace) {
    if (!chars.IsString()) throw TemplateError("strip arg must be None or str");
    strip_set = DecodeUtf8(chars.AsString());
  }
  auto strip = [&](char32_t cp) {
    return whitespace ? IsSpace(cp) : strip_set.find(cp) != std::u32string::npos;
  };
  size_t begin = 0, end = cps.size();
  while (left && begin < end && strip(cps[begin])) ++begin;
  while (right && end > begin && strip(cps[end - 1])) --end;
  return EncodeUtf8(std::u32string_view(cps).substr(begin, end - begin));
}

Array SplitString(const std::string& text, const Value& sep, int64_t maxsplit) {
  Array parts;
  if (sep.IsUndefined() || sep.IsNone()) {
    std::u32string cps = DecodeUtf8(text);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && IsSpace(cps[i])) ++i;
      if (i == cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        std::u32string rest = cps.substr(i);
        while (!rest.empty() && IsSpace(rest.back())) rest.pop_back();
        parts.emplace_back(EncodeUtf8(rest));
        break;
      }
      size_t start = i;
      while (i < cps.size() && !IsSpace(cps[i])) ++i;
      parts.emplace_back(EncodeUtf8(cps.substr(start, i - start)));
    }
    return parts;
  }
  if (!sep.IsString()) throw TemplateError("split(): separator must be a string");
  const std::string& separator = sep.AsString();
  if (separator.empty()) throw TemplateError("split(): empty separator");
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    size_t found = text.find(separator, start);
    if (found == std::string::npos) break;
    parts.emplace_back(text.substr(start, found - start));
    start = found + separator.size();
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

std::string ReplaceString(const std::string& text, const std::string& old_text,
                          const std::string& new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {  // Python inserts between every code point
    std::u32string cps = DecodeUtf8(text);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      if (i < cps.size()) AppendUtf8(out, cps[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t found = text.find(old_text, start);
    if (found == std::string::npos) break;
    out += text.substr(start, found - start) + new_text;
    start = found + old_text.size();
    ++done;
  }
  return out + text.substr(start);
}

namespace {

// Simple (one-to-one) case mapping for ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic and
// fullwidth Latin: the scripts chat content meets most. Other code points map to themselves.
char32_t UpperCodePoint(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17F) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    bool is_lower = odd_upper ? (c % 2 == 0) : (c % 2 == 1);
    return is_lower && c != 0x178 ? c - 1 : c;
  }
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0xFF41 && c <= 0xFF5A) return c - 32;
  return c;
}

char32_t LowerCodePoint(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 &&
      c != 0x17F) {
    bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    bool is_upper = odd_upper ? (c % 2 == 1) : (c % 2 == 0);
    return is_upper ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0xFF21 && c <= 0xFF3A) return c + 32;
  return c;
}

bool IsCased(char32_t c) { return UpperCodePoint(c) != c || LowerCodePoint(c) != c; }

template <typename Fn>
std::string MapCodePoints(const std::string& text, Fn&& fn) {
  std::string out;
  out.reserve(text.size());
  std::u32string cps = DecodeUtf8(text);
  for (size_t i = 0; i < cps.size(); ++i) AppendUtf8(out, fn(cps[i], i, cps));
  return out;
}

}  // namespace

std::string ToUpper(std::string text) {
  // U+00DF (sharp s) is the one full mapping chat text meets: Python uppers it to "SS".
  text = ReplaceString(text, "\xC3\x9F", "SS", -1);
  return MapCodePoints(text,
                       [](char32_t c, size_t, const std::u32string&) { return UpperCodePoint(c); });
}

std::string ToLower(std::string text) {
  return MapCodePoints(text,
                       [](char32_t c, size_t, const std::u32string&) { return LowerCodePoint(c); });
}

// Python str.title(): a cased letter after a cased letter is lowered, otherwise uppered.
std::string TitleCase(const std::string& text) {
  return MapCodePoints(text, [](char32_t c, size_t i, const std::u32string& all) {
    bool previous_cased = i > 0 && IsCased(all[i - 1]);
    return previous_cased ? LowerCodePoint(c) : UpperCodePoint(c);
  });
}

std::string Capitalize(const std::string& text) {
  return MapCodePoints(text, [](char32_t c, size_t i, const std::u32string&) {
    return i == 0 ? UpperCodePoint(c) : LowerCodePoint(c);
  });
}

std::string FormatString(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t next_auto = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    size_t close = format.find('}', i);
    if (close == std::string::npos) throw TemplateError("format(): unmatched '{'");
    std::string field = format.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos)
      throw TemplateError("format(): format specs are not supported");
    const Value* value = nullptr;
    if (field.empty() || std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t index = field.empty() ? next_auto++ : std::stoul(field);
      if (index < args.positional.size()) value = &args.positional[index];
    } else {
      for (const auto& [key, item] : args.keyword) {
        if (key == field) value = &item;
      }
    }
    if (!value) throw TemplateError("format(): no argument for field '{" + field + "}'");
    out += PythonStr(*value);
    i = close;
  }
  return out;
}

}  // namespace mkserve::chat::jinja
