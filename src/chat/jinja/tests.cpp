// The `is` tests, plus the filter and test lookups.
#include <algorithm>
#include <charconv>
#include <limits>

#include "chat/jinja/builtins.h"
#include "chat/jinja/methods.h"
#include "chat/jinja/string_ops.h"
#include "chat/jinja/value_ops.h"

namespace mkserve::chat::jinja {

namespace {

using TestTable = std::unordered_map<std::string, TestFunction>;

bool Defined(const Value& v, const ArgReader&) { return !v.IsUndefined(); }
bool IsUndefinedTest(const Value& v, const ArgReader&) { return v.IsUndefined(); }
bool None(const Value& v, const ArgReader&) { return v.IsNone(); }
bool Boolean(const Value& v, const ArgReader&) { return v.IsBool(); }
bool True(const Value& v, const ArgReader&) { return v.IsBool() && v.AsBool(); }
bool False(const Value& v, const ArgReader&) { return v.IsBool() && !v.AsBool(); }
bool Integer(const Value& v, const ArgReader&) { return v.IsInt(); }
bool FloatTest(const Value& v, const ArgReader&) { return v.IsFloat(); }
bool Number(const Value& v, const ArgReader&) { return v.IsNumber(); }
bool StringTest(const Value& v, const ArgReader&) { return v.IsString(); }
bool Mapping(const Value& v, const ArgReader&) { return v.IsObject(); }
bool Iterable(const Value& v, const ArgReader&) {
  return v.IsString() || v.IsArray() || v.IsObject() || v.IsUndefined();
}
bool Sequence(const Value& v, const ArgReader&) {
  return v.IsString() || v.IsArray() || v.IsObject();
}
bool Callable(const Value& v, const ArgReader&) { return v.IsFunction(); }
bool In(const Value& v, const ArgReader& a) { return Contains(a.Required(0, "seq"), v); }
bool Eq(const Value& v, const ArgReader& a) { return v.Equals(a.Required(0, "other")); }
bool Ne(const Value& v, const ArgReader& a) { return !v.Equals(a.Required(0, "other")); }
bool Lt(const Value& v, const ArgReader& a) { return CompareValues(v, a.Required(0, "other")) < 0; }
bool Le(const Value& v, const ArgReader& a) {
  return CompareValues(v, a.Required(0, "other")) <= 0;
}
bool Gt(const Value& v, const ArgReader& a) { return CompareValues(v, a.Required(0, "other")) > 0; }
bool Ge(const Value& v, const ArgReader& a) {
  return CompareValues(v, a.Required(0, "other")) >= 0;
}
bool Odd(const Value& v, const ArgReader&) { return v.IsNumber() && v.AsInt() % 2 != 0; }
bool Even(const Value& v, const ArgReader&) { return v.IsNumber() && v.AsInt() % 2 == 0; }
bool Lower(const Value& v, const ArgReader&) {
  return v.IsString() && ToLower(v.AsString()) == v.AsString();
}
bool Upper(const Value& v, const ArgReader&) {
  return v.IsString() && ToUpper(v.AsString()) == v.AsString();
}

bool Divisibleby(const Value& v, const ArgReader& a) {
  int64_t divisor = a.Int(0, "num", 0);
  if (divisor == 0) throw TemplateError("divisibleby: division by zero");
  return v.AsInt() % divisor == 0;
}

// `sameas` is Python identity; for the scalars templates compare (none, true, false) that is
// equality of kind and value.
bool Sameas(const Value& v, const ArgReader& a) {
  Value other = a.Required(0, "other");
  return v.kind() == other.kind() && v.Equals(other);
}

const TestTable& Tests() {
  static const TestTable kTests = {{"defined", Defined},
                                   {"undefined", IsUndefinedTest},
                                   {"none", None},
                                   {"boolean", Boolean},
                                   {"true", True},
                                   {"false", False},
                                   {"integer", Integer},
                                   {"float", FloatTest},
                                   {"number", Number},
                                   {"string", StringTest},
                                   {"mapping", Mapping},
                                   {"iterable", Iterable},
                                   {"sequence", Sequence},
                                   {"callable", Callable},
                                   {"in", In},
                                   {"eq", Eq},
                                   {"equalto", Eq},
                                   {"==", Eq},
                                   {"ne", Ne},
                                   {"!=", Ne},
                                   {"lt", Lt},
                                   {"lessthan", Lt},
                                   {"<", Lt},
                                   {"le", Le},
                                   {"<=", Le},
                                   {"gt", Gt},
                                   {"greaterthan", Gt},
                                   {">", Gt},
                                   {"ge", Ge},
                                   {">=", Ge},
                                   {"odd", Odd},
                                   {"even", Even},
                                   {"divisibleby", Divisibleby},
                                   {"sameas", Sameas},
                                   {"lower", Lower},
                                   {"upper", Upper}};
  return kTests;
}

const FilterTable& Filters() {
  static const FilterTable kFilters = [] {
    FilterTable table;
    AddStringFilters(table);
    AddSequenceFilters(table);
    return table;
  }();
  return kFilters;
}

}  // namespace

Value ApplyFilter(const std::string& name, const Value& input, const CallArgs& args) {
  auto it = Filters().find(name);
  if (it == Filters().end()) throw TemplateError("unknown filter '" + name + "'");
  return it->second(input, ArgReader(name, args));
}

bool ApplyTest(const std::string& name, const Value& input, const CallArgs& args) {
  auto it = Tests().find(name);
  if (it == Tests().end()) throw TemplateError("unknown test '" + name + "'");
  return it->second(input, ArgReader(name, args));
}

Value ResolveAttributePath(const Value& object, const std::string& path) {
  Value current = object;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (current.IsUndefined()) return current;
    // jinja2 takes a part of only digits as an index (past 64 bits it is past any list).
    const bool is_index = !part.empty() && std::all_of(part.begin(), part.end(),
                                                       [](char c) { return c >= '0' && c <= '9'; });
    int64_t index = std::numeric_limits<int64_t>::max();
    if (is_index) std::from_chars(part.data(), part.data() + part.size(), index);
    current = is_index             ? GetItem(current, Value(index))
              : current.IsObject() ? GetItem(current, Value(part))
                                   : GetAttribute(current, part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return current;
}

}  // namespace mkserve::chat::jinja
