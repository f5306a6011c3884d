#include "chat/jinja/python_format.h"

#include "chat/jinja/template_error.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace mkserve::chat::jinja {

namespace {

std::string ReprString(const std::string& text) {
  bool has_single = text.find('\'') != std::string::npos;
  bool has_double = text.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : text) {
    unsigned char byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7F) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", byte);
      out += buffer;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

std::string ReprArray(const Array& items, bool is_tuple) {
  std::string out = is_tuple ? "(" : "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += PythonRepr(items[i]);
    CheckTextBytes(out.size(), "a value prints as");  // `messages * 777782`
  }
  if (is_tuple && items.size() == 1) out += ",";
  return out + (is_tuple ? ")" : "]");
}

std::string ReprObject(const Object& object) {
  if (object.is_namespace) return "<Namespace>";
  std::string out = "{";
  for (size_t i = 0; i < object.entries.size(); ++i) {
    if (i > 0) out += ", ";
    out += ReprString(object.entries[i].first) + ": " + PythonRepr(object.entries[i].second);
    CheckTextBytes(out.size(), "a value prints as");
  }
  return out + "}";
}

}  // namespace

std::string FormatPythonFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  size_t e_pos = text.find('e');
  int exponent = std::stoi(text.substr(e_pos + 1));
  std::string mantissa = text.substr(0, e_pos);
  bool negative = mantissa[0] == '-';
  std::string digits;
  for (char c : mantissa) {
    if (c >= '0' && c <= '9') digits += c;
  }
  std::string sign = negative ? "-" : "";
  int point = exponent + 1;  // digits before the decimal point
  if (point > 16 || point <= -4) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char exp_buffer[16];
    std::snprintf(exp_buffer, sizeof(exp_buffer), "e%c%02d", exponent < 0 ? '-' : '+',
                  std::abs(exponent));
    return out + exp_buffer;
  }
  if (point <= 0) return sign + "0." + std::string(-point, '0') + digits;
  if (static_cast<size_t>(point) >= digits.size()) {
    return sign + digits + std::string(point - digits.size(), '0') + ".0";
  }
  return sign + digits.substr(0, point) + "." + digits.substr(point);
}

std::string PythonRepr(const Value& value) {
  // A list that contains itself (via append) would recurse forever.
  constexpr int kMaxNesting = 200;
  thread_local int depth = 0;
  struct DepthGuard {
    ~DepthGuard() { --depth; }
  } guard;
  if (++depth > kMaxNesting) throw TemplateError("value nested too deeply to print");
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return "";
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return value.AsBool() ? "True" : "False";
    case Value::Kind::kInt:
      return std::to_string(value.AsInt());
    case Value::Kind::kFloat:
      return FormatPythonFloat(value.AsDouble());
    case Value::Kind::kString:
      return ReprString(value.AsString());
    case Value::Kind::kArray:
      return ReprArray(value.AsArray(), value.IsTuple());
    case Value::Kind::kObject:
      return ReprObject(value.AsObject());
    case Value::Kind::kFunction:
      return "<function>";
  }
  return "";
}

std::string PythonStr(const Value& value) {
  if (value.IsString()) return value.AsString();
  return PythonRepr(value);
}

}  // namespace mkserve::chat::jinja
