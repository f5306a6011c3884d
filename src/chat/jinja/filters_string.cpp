// Filters on scalars and strings: text transforms, conversions, JSON.
#include <cmath>
#include <cstdio>

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

// jinja2 indent: every line but the first (unless `first`), blank lines only with `blank`.
Value Indent(const Value& v, const ArgReader& a) {
  Value width = a.Get(0, "width", Value(4));
  std::string indention =
      width.IsString() ? width.AsString() : std::string(a.Int(0, "width", 4), ' ');
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

Value Int(const Value& v, const ArgReader& a) {
  Value fallback = a.Get(0, "default", Value(0));
  if (v.IsNumber())
    return Value(static_cast<int64_t>(v.IsFloat() ? std::trunc(v.AsDouble()) : v.AsInt()));
  if (!v.IsString()) return fallback;
  std::string text = StripString(v.AsString(), Value(), true, true);
  try {
    size_t used = 0;
    int64_t parsed = std::stoll(text, &used, static_cast<int>(a.Int(1, "base", 10)));
    if (used == text.size()) return Value(parsed);
    double as_float = std::stod(text, &used);
    if (used == text.size()) return Value(static_cast<int64_t>(std::trunc(as_float)));
  } catch (const std::exception&) {
  }
  return fallback;
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
  if (indent.IsString()) options.indent = indent.AsString();
  if (indent.IsInt()) options.indent = std::string(std::max<int64_t>(indent.AsInt(), 0), ' ');
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
