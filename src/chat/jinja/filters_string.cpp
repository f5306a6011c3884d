// Filters on scalars and strings: text transforms, conversions, JSON.
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "chat/jinja/builtins.h"
#include "chat/jinja/json_dump.h"
#include "chat/jinja/python_format.h"
#include "chat/jinja/python_space.h"
#include "chat/jinja/string_ops.h"
#include "chat/jinja/value_ops.h"
#include "common/utf8.h"

namespace mkserve::chat::jinja {

namespace {

Value Trim(const Value& v, const ArgReader& a) {
  return StripString(PythonStr(v), a.Get(0, "chars"), true, true);
}
Value Upper(const Value& v, const ArgReader&) { return ToUpper(PythonStr(v)); }
Value Lower(const Value& v, const ArgReader&) { return ToLower(PythonStr(v)); }
Value Title(const Value& v, const ArgReader&) { return TitleCase(PythonStr(v)); }
Value CapitalizeFilter(const Value& v, const ArgReader&) { return Capitalize(PythonStr(v)); }
Value String(const Value& v, const ArgReader&) { return PythonStr(v); }
Value Safe(const Value& v, const ArgReader&) { return v; }  // autoescape is off in transformers

Value Replace(const Value& v, const ArgReader& a) {
  return ReplaceString(PythonStr(v), PythonStr(a.Required(0, "old")),
                       PythonStr(a.Required(1, "new")), a.Int(2, "count", -1));
}

Value Escape(const Value& v, const ArgReader&) {
  std::string out;
  for (char c : PythonStr(v)) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// The indent of indent and tojson: the text itself, or a count of spaces (none when negative).
// Bounded, since every line repeats it: jinja2 would build whatever Python's memory holds.
constexpr int64_t kMaxIndent = 1024;
std::string IndentText(const std::string& filter, const Value& width) {
  const int64_t size =
      width.IsString() ? static_cast<int64_t>(width.AsString().size()) : width.AsInt();
  if (size > kMaxIndent)
    throw TemplateError(filter + ": an indent of more than " + std::to_string(kMaxIndent) +
                        " characters");
  return width.IsString() ? width.AsString() : std::string(std::max<int64_t>(size, 0), ' ');
}

// jinja2 indent: every line but the first (unless `first`), blank lines only with `blank`.
Value Indent(const Value& v, const ArgReader& a) {
  const Value width = a.Get(0, "width", Value(4));
  const std::string indention =
      IndentText("indent", width.IsString() ? width : Value(a.Int(0, "width", 4)));
  Array lines = SplitString(ReplaceString(PythonStr(v), "\r\n", "\n", -1), Value("\n"), -1);
  bool blank = a.Bool(2, "blank", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].AsString();
    if (i > 0) {
      out += '\n';
      if (blank || !line.empty()) out += indention;
    }
    out += line;
  }
  if (a.Bool(1, "first", false)) out = indention + out;
  return out;
}

Value Wordcount(const Value& v, const ArgReader&) {
  int64_t count = 0;
  bool in_word = false;
  for (char32_t cp : DecodeUtf8(PythonStr(v))) {
    bool word_char = cp == '_' || (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') ||
                     (cp >= 'A' && cp <= 'Z') || (cp >= 0x80 && !IsSpace(cp));
    if (word_char && !in_word) ++count;
    in_word = word_char;
  }
  return Value(count);
}

// jinja2's int: int(value), else int(float(value)), else the default.
Value Int(const Value& v, const ArgReader& a) {
  Value fallback = a.Get(0, "default", Value(0));
  if (v.IsNumber() && !v.IsFloat()) return Value(v.AsInt());
  if (!v.IsFloat() && !v.IsString()) return fallback;
  double as_float = v.IsFloat() ? v.AsDouble() : 0;
  if (v.IsString()) {
    const std::string text = StripString(v.AsString(), Value(), true, true);
    const int base = static_cast<int>(a.Int(1, "base", 10));
    size_t used = 0;
    try {
      const int64_t parsed = std::stoll(text, &used, base);
      if (used == text.size()) return Value(parsed);
    } catch (const std::exception&) {  // not an integer, or one past 64 bits: try a float
    }
    try {
      as_float = std::stod(text, &used);
    } catch (const std::exception&) {
      return fallback;
    }
    if (used != text.size()) return fallback;
  }
  if (std::isnan(as_float)) return fallback;  // Python's ValueError, which jinja2 catches
  // Python's OverflowError for infinity; finite values past 64 bits would be Python ints.
  if (!(as_float >= -0x1p63 && as_float < 0x1p63))
    throw TemplateError("int: " + PythonStr(Value(as_float)) + " is past 64-bit integers");
  return Value(static_cast<int64_t>(std::trunc(as_float)));
}

Value Float(const Value& v, const ArgReader& a) {
  Value fallback = a.Get(0, "default", Value(0.0));
  if (v.IsNumber()) return Value(v.AsDouble());
  if (!v.IsString()) return fallback;
  try {
    size_t used = 0;
    std::string text = StripString(v.AsString(), Value(), true, true);
    double parsed = std::stod(text, &used);
    if (used == text.size()) return Value(parsed);
  } catch (const std::exception&) {
  }
  return fallback;
}

Value Abs(const Value& v, const ArgReader&) {
  if (v.IsFloat()) return Value(std::fabs(v.AsDouble()));
  if (v.IsNumber() && v.AsInt() == std::numeric_limits<int64_t>::min())
    throw TemplateError("integer overflow in abs() (64-bit integers)");
  if (v.IsNumber()) return Value(v.AsInt() < 0 ? -v.AsInt() : v.AsInt());
  throw TemplateError("bad operand type for abs(): '" + v.TypeName() + "'");
}

Value Round(const Value& v, const ArgReader& a) {
  if (!v.IsNumber()) throw TemplateError("round: '" + v.TypeName() + "' is not a number");
  double scale = std::pow(10.0, static_cast<double>(a.Int(0, "precision", 0)));
  std::string method = a.String(1, "method", "common");
  double x = v.AsDouble() * scale;
  if (method == "ceil") return Value(std::ceil(x) / scale);
  if (method == "floor") return Value(std::floor(x) / scale);
  if (method != "common") throw TemplateError("round: method must be common, ceil or floor");
  return Value(std::nearbyint(x) / scale);  // Python round(): ties go to the even neighbour
}

// transformers' tojson: json.dumps(x, ensure_ascii, indent, separators, sort_keys).
Value ToJson(const Value& v, const ArgReader& a) {
  JsonDumpOptions options;
  options.ensure_ascii = a.Bool(0, "ensure_ascii", false);
  Value indent = a.Get(1, "indent");
  if (indent.IsString() || indent.IsInt()) options.indent = IndentText("tojson", indent);
  Value separators = a.Get(2, "separators");
  if (separators.IsArray()) {
    if (separators.AsArray().size() != 2) throw TemplateError("tojson: separators must be a pair");
    options.item_separator = PythonStr(separators.AsArray()[0]);
    options.key_separator = PythonStr(separators.AsArray()[1]);
  }
  options.sort_keys = a.Bool(3, "sort_keys", false);
  return DumpJson(v, options);
}

// printf-style `"%s, %d" | format(a, b)` for the conversions templates use.
Value Format(const Value& v, const ArgReader& a) {
  std::string format = PythonStr(v), out;
  size_t next = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 == format.size()) {
      out += format[i];
      continue;
    }
    char conversion = format[++i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (conversion != 's' && conversion != 'd' && conversion != 'r')
      throw TemplateError("format: unsupported conversion %" + std::string(1, conversion));
    if (next >= a.args().positional.size()) throw TemplateError("format: not enough arguments");
    const Value& arg = a.args().positional[next++];
    out += conversion == 'r'   ? PythonRepr(arg)
           : conversion == 'd' ? std::to_string(arg.AsInt())
                               : PythonStr(arg);
  }
  return out;
}

}  // namespace

void AddStringFilters(FilterTable& table) {
  table.insert({{"trim", Trim},
                {"upper", Upper},
                {"lower", Lower},
                {"title", Title},
                {"capitalize", CapitalizeFilter},
                {"string", String},
                {"safe", Safe},
                {"replace", Replace},
                {"escape", Escape},
                {"e", Escape},
                {"indent", Indent},
                {"wordcount", Wordcount},
                {"int", Int},
                {"float", Float},
                {"abs", Abs},
                {"round", Round},
                {"tojson", ToJson},
                {"format", Format}});
}

}  // namespace mkserve::chat::jinja
