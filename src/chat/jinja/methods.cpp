#include "chat/jinja/methods.h"

#include <unordered_map>

#include "chat/jinja/arg_reader.h"
#include "chat/jinja/python_format.h"
#include "chat/jinja/string_ops.h"
#include "chat/jinja/template_error.h"
#include "chat/jinja/value_ops.h"

namespace mkserve::chat::jinja {

namespace {

using Method = Value (*)(const Value& self, const ArgReader& args);

bool MatchesAffix(const std::string& text, const Value& affix, bool prefix) {
  auto matches = [&](const Value& candidate) {
    if (!candidate.IsString())
      throw TemplateError("startswith/endswith take a string or a tuple of strings");
    const std::string& a = candidate.AsString();
    if (a.size() > text.size()) return false;
    return prefix ? text.compare(0, a.size(), a) == 0
                  : text.compare(text.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.IsArray()) {
    for (const Value& candidate : affix.AsArray()) {
      if (matches(candidate)) return true;
    }
    return false;
  }
  return matches(affix);
}

Value StrStrip(const Value& s, const ArgReader& a) {
  return StripString(s.AsString(), a.Get(0, "chars"), true, true);
}
Value StrLstrip(const Value& s, const ArgReader& a) {
  return StripString(s.AsString(), a.Get(0, "chars"), true, false);
}
Value StrRstrip(const Value& s, const ArgReader& a) {
  return StripString(s.AsString(), a.Get(0, "chars"), false, true);
}
Value StrSplit(const Value& s, const ArgReader& a) {
  return SplitString(s.AsString(), a.Get(0, "sep"), a.Int(1, "maxsplit", -1));
}
Value StrUpper(const Value& s, const ArgReader&) { return ToUpper(s.AsString()); }
Value StrLower(const Value& s, const ArgReader&) { return ToLower(s.AsString()); }
Value StrTitle(const Value& s, const ArgReader&) { return TitleCase(s.AsString()); }
Value StrCapitalize(const Value& s, const ArgReader&) { return Capitalize(s.AsString()); }
Value StrStartswith(const Value& s, const ArgReader& a) {
  return MatchesAffix(s.AsString(), a.Required(0, "prefix"), true);
}
Value StrEndswith(const Value& s, const ArgReader& a) {
  return MatchesAffix(s.AsString(), a.Required(0, "suffix"), false);
}
Value StrFormat(const Value& s, const ArgReader& a) { return FormatString(s.AsString(), a.args()); }
Value StrReplace(const Value& s, const ArgReader& a) {
  return ReplaceString(s.AsString(), a.String(0, "old", ""), a.String(1, "new", ""),
                       a.Int(2, "count", -1));
}
Value StrFind(const Value& s, const ArgReader& a) {
  size_t found = s.AsString().find(a.String(0, "sub", ""));
  if (found == std::string::npos) return Value(-1);
  return Value(Length(Value(s.AsString().substr(0, found))));
}
Value StrCount(const Value& s, const ArgReader& a) {
  std::string sub = a.String(0, "x", "");
  if (sub.empty()) return Value(Length(s) + 1);
  int64_t count = 0;
  for (size_t at = s.AsString().find(sub); at != std::string::npos;
       at = s.AsString().find(sub, at + sub.size()))
    ++count;
  return Value(count);
}
Value StrJoin(const Value& s, const ArgReader& a) {
  std::string out;
  bool first = true;
  for (const Value& item : Iterate(a.Required(0, "iterable"))) {
    if (!first) out += s.AsString();
    out += PythonStr(item);
    first = false;
  }
  return Value(out);
}
Value StrSplitlines(const Value& s, const ArgReader&) {
  Array lines = SplitString(s.AsString(), Value("\n"), -1);
  if (!lines.empty() && lines.back().AsString().empty()) lines.pop_back();
  for (Value& line : lines) {
    std::string text = line.AsString();
    if (!text.empty() && text.back() == '\r') text.pop_back();
    line = Value(text);
  }
  return Value(std::move(lines));
}
Value StrIsdigit(const Value& s, const ArgReader&) {
  const std::string& t = s.AsString();
  return !t.empty() && t.find_first_not_of("0123456789") == std::string::npos;
}
Value StrIsspace(const Value& s, const ArgReader&) {
  const std::string& t = s.AsString();
  return !t.empty() && StripString(t, Value(), true, true).empty();
}

Value DictItems(const Value& d, const ArgReader&) {
  Array items;
  for (const auto& [key, value] : d.AsObject().entries)
    items.push_back(Value::MakeTuple({Value(key), value}));
  return Value(std::move(items));
}
Value DictKeys(const Value& d, const ArgReader&) { return Value(Iterate(d)); }
Value DictValues(const Value& d, const ArgReader&) {
  Array values;
  for (const auto& entry : d.AsObject().entries) values.push_back(entry.second);
  return Value(std::move(values));
}
Value DictGet(const Value& d, const ArgReader& a) {
  Value key = a.Required(0, "key");
  const Value* found = key.IsString() ? d.AsObject().Find(key.AsString()) : nullptr;
  return found ? *found : a.Get(1, "default", Value(nullptr));
}

// Mutating list methods: transformers' ImmutableSandboxedEnvironment refuses these; we accept
// them because @huggingface/jinja and llama.cpp do and some templates rely on that.
Value ListAppend(const Value& l, const ArgReader& a) {
  l.AsArray().push_back(a.Required(0, "object"));
  return Value(nullptr);
}
Value ListPop(const Value& l, const ArgReader& a) {
  Array& items = l.AsArray();
  if (items.empty()) throw TemplateError("pop from empty list");
  int64_t index = a.Int(0, "index", -1);
  if (index < 0) index += static_cast<int64_t>(items.size());
  if (index < 0 || index >= static_cast<int64_t>(items.size()))
    throw TemplateError("pop index out of range");
  Value value = items[index];
  items.erase(items.begin() + index);
  return value;
}
Value ListIndex(const Value& l, const ArgReader& a) {
  Value wanted = a.Required(0, "value");
  for (size_t i = 0; i < l.AsArray().size(); ++i) {
    if (l.AsArray()[i].Equals(wanted)) return Value(static_cast<int64_t>(i));
  }
  throw TemplateError(PythonRepr(wanted) + " is not in list");
}

const std::unordered_map<std::string, Method>& MethodsFor(Value::Kind kind) {
  static const std::unordered_map<std::string, Method> kString = {{"strip", StrStrip},
                                                                  {"lstrip", StrLstrip},
                                                                  {"rstrip", StrRstrip},
                                                                  {"split", StrSplit},
                                                                  {"upper", StrUpper},
                                                                  {"lower", StrLower},
                                                                  {"title", StrTitle},
                                                                  {"capitalize", StrCapitalize},
                                                                  {"startswith", StrStartswith},
                                                                  {"endswith", StrEndswith},
                                                                  {"replace", StrReplace},
                                                                  {"format", StrFormat},
                                                                  {"find", StrFind},
                                                                  {"count", StrCount},
                                                                  {"join", StrJoin},
                                                                  {"splitlines", StrSplitlines},
                                                                  {"isdigit", StrIsdigit},
                                                                  {"isspace", StrIsspace}};
  static const std::unordered_map<std::string, Method> kDict = {
      {"items", DictItems}, {"keys", DictKeys}, {"values", DictValues}, {"get", DictGet}};
  static const std::unordered_map<std::string, Method> kList = {
      {"append", ListAppend}, {"pop", ListPop}, {"index", ListIndex}};
  static const std::unordered_map<std::string, Method> kNone;
  if (kind == Value::Kind::kString) return kString;
  if (kind == Value::Kind::kObject) return kDict;
  if (kind == Value::Kind::kArray) return kList;
  return kNone;
}

}  // namespace

Value GetAttribute(const Value& object, const std::string& name) {
  if (object.IsUndefined()) {
    throw TemplateError("'" + object.UndefinedName() + "' is undefined (reading attribute '" +
                        name + "')");
  }
  bool is_namespace = object.IsObject() && object.AsObject().is_namespace;
  if (!is_namespace) {
    const auto& methods = MethodsFor(object.kind());
    auto it = methods.find(name);
    if (it != methods.end()) {
      Method method = it->second;
      std::string callee = name;
      return Value(Function([object, method, callee](CallArgs& args) {
        return method(object, ArgReader(callee, args));
      }));
    }
  }
  if (object.IsObject()) {
    const Value* found = object.AsObject().Find(name);
    if (found) return *found;
  }
  return Value::MakeUndefined(name);
}

}  // namespace mkserve::chat::jinja
