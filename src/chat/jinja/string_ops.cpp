#include "chat/jinja/string_ops.h"

#include <cctype>

#include "chat/jinja/python_format.h"
#include "chat/jinja/template_error.h"
#include "chat/jinja/utf8.h"

namespace mkserve::chat::jinja {

std::string StripString(const std::string& text, const Value& chars, bool left, bool right) {
  std::u32string cps = DecodeUtf8(text);
  std::u32string strip_set;
  bool whitespace = chars.IsUndefined() || chars.IsNone();
  if (!whitespace) {
    if (!chars.IsString()) throw TemplateError("strip arg must be None or str");
    strip_set = DecodeUtf8(chars.AsString());
  }
  auto strip = [&](char32_t cp) { return whitespace ? IsSpace(cp) : strip_set.find(cp) != std::u32string::npos; };
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

std::string ReplaceString(const std::string& text, const std::string& old_text, const std::string& new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {  // Python inserts between every code point
    std::u32string cps = DecodeUtf8(text);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      if (i < cps.size()) AppendUtf8(cps[i], out);
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

std::string ToUpper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

std::string ToLower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string TitleCase(const std::string& text) {
  std::string out = text;
  bool previous_cased = false;
  for (char& c : out) {
    unsigned char byte = static_cast<unsigned char>(c);
    bool cased = std::isalpha(byte);
    if (cased) c = static_cast<char>(previous_cased ? std::tolower(byte) : std::toupper(byte));
    previous_cased = cased;
  }
  return out;
}

std::string Capitalize(const std::string& text) {
  std::string out = ToLower(text);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
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
    if (field.find_first_of(":!") != std::string::npos) throw TemplateError("format(): format specs are not supported");
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
