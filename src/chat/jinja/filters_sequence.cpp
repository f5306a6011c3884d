// Filters on lists and dicts: selection, mapping, sorting, aggregation, defaults.
#include <algorithm>

#include "chat/jinja/builtins.h"
#include "chat/jinja/python_format.h"
#include "chat/jinja/string_ops.h"
#include "chat/jinja/value_ops.h"

namespace mkserve::chat::jinja {

namespace {

// The arguments after the first `skip` positional ones, e.g. a test's own arguments.
CallArgs Rest(const ArgReader& a, size_t skip) {
  CallArgs rest;
  const auto& positional = a.args().positional;
  if (positional.size() > skip) rest.positional.assign(positional.begin() + skip, positional.end());
  return rest;
}

Value Default(const Value& v, const ArgReader& a) {
  bool use_default = v.IsUndefined() || (a.Bool(1, "boolean", false) && !v.Truthy());
  return use_default ? a.Get(0, "default_value", Value("")) : v;
}

Value LengthFilter(const Value& v, const ArgReader&) { return Value(Length(v)); }
Value List(const Value& v, const ArgReader&) { return Value(Iterate(v)); }

Value First(const Value& v, const ArgReader&) {
  std::vector<Value> items = Iterate(v);
  return items.empty() ? Value::MakeUndefined("first") : items.front();
}

Value Last(const Value& v, const ArgReader&) {
  std::vector<Value> items = Iterate(v);
  return items.empty() ? Value::MakeUndefined("last") : items.back();
}

Value Items(const Value& v, const ArgReader&) {
  Array pairs;
  if (v.IsUndefined()) return Value(std::move(pairs));
  if (!v.IsObject()) throw TemplateError("items: expected a mapping, got " + v.TypeName());
  for (const auto& [key, value] : v.AsObject().entries)
    pairs.push_back(Value::MakeTuple({Value(key), value}));
  return Value(std::move(pairs));
}

Value Join(const Value& v, const ArgReader& a) {
  std::string separator = PythonStr(a.Get(0, "d", Value(""))),
              attribute = a.String(1, "attribute", "");
  std::string out;
  bool first = true;
  for (const Value& item : Iterate(v)) {
    if (!first) out += separator;
    out += PythonStr(attribute.empty() ? item : ResolveAttributePath(item, attribute));
    first = false;
  }
  return out;
}

// Sort key: the attribute if given, lowercased strings unless case_sensitive.
Value SortKey(const Value& item, const std::string& attribute, bool case_sensitive) {
  Value key = attribute.empty() ? item : ResolveAttributePath(item, attribute);
  return (!case_sensitive && key.IsString()) ? Value(ToLower(key.AsString())) : key;
}

Value Unique(const Value& v, const ArgReader& a) {
  bool case_sensitive = a.Bool(0, "case_sensitive", false);
  std::string attribute = a.String(1, "attribute", "");
  Array out, seen;
  for (const Value& item : Iterate(v)) {
    Value key = SortKey(item, attribute, case_sensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return s.Equals(key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value(std::move(out));
}

Value Sort(const Value& v, const ArgReader& a) {
  bool reverse = a.Bool(0, "reverse", false), case_sensitive = a.Bool(1, "case_sensitive", false);
  std::string attribute = a.String(2, "attribute", "");
  std::vector<Value> items = Iterate(v);
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    int order =
        CompareValues(SortKey(x, attribute, case_sensitive), SortKey(y, attribute, case_sensitive));
    return reverse ? order > 0 : order < 0;
  });
  return Value(std::move(items));
}

Value Dictsort(const Value& v, const ArgReader& a) {
  bool case_sensitive = a.Bool(0, "case_sensitive", false), reverse = a.Bool(2, "reverse", false);
  std::string by = a.String(1, "by", "key");
  if (by != "key" && by != "value") throw TemplateError("dictsort: 'by' must be 'key' or 'value'");
  Array pairs = Items(v, a).AsArray();
  size_t index = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    int order = CompareValues(SortKey(x.AsArray()[index], "", case_sensitive),
                              SortKey(y.AsArray()[index], "", case_sensitive));
    return reverse ? order > 0 : order < 0;
  });
  return Value(std::move(pairs));
}

Value Reverse(const Value& v, const ArgReader&) {
  if (v.IsString()) return Slice(v, Value(), Value(), Value(-1));
  std::vector<Value> items = Iterate(v);
  std::reverse(items.begin(), items.end());
  return Value(std::move(items));
}

// select/reject/selectattr/rejectattr share this: keep items whose test result equals `keep`.
Value Filtered(const Value& v, const ArgReader& a, bool by_attribute, bool keep) {
  size_t test_index = by_attribute ? 1 : 0;
  std::string attribute = by_attribute ? a.String(0, "attribute", "") : "";
  std::string test = a.String(test_index, "test", "");
  CallArgs test_args = Rest(a, test_index + 1);
  Array out;
  if (!v.Truthy()) return Value(std::move(out));  // jinja2 yields nothing for None or empty
  for (const Value& item : Iterate(v)) {
    Value subject = by_attribute ? ResolveAttributePath(item, attribute) : item;
    bool passed = test.empty() ? subject.Truthy() : ApplyTest(test, subject, test_args);
    if (passed == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value Select(const Value& v, const ArgReader& a) { return Filtered(v, a, false, true); }
Value Reject(const Value& v, const ArgReader& a) { return Filtered(v, a, false, false); }
Value Selectattr(const Value& v, const ArgReader& a) { return Filtered(v, a, true, true); }
Value Rejectattr(const Value& v, const ArgReader& a) { return Filtered(v, a, true, false); }

// map(attribute='x', default=...) or map('filter', args...).
Value Map(const Value& v, const ArgReader& a) {
  Array out;
  if (!v.Truthy()) return Value(std::move(out));  // jinja2 yields nothing for None or empty
  if (a.args().positional.empty()) {
    std::string attribute = a.String(99, "attribute", "");
    if (attribute.empty()) throw TemplateError("map: give a filter name or attribute=");
    Value fallback = a.Get(99, "default");
    for (const Value& item : Iterate(v)) {
      Value mapped = ResolveAttributePath(item, attribute);
      out.push_back(mapped.IsUndefined() && !fallback.IsUndefined() ? fallback : mapped);
    }
    return Value(std::move(out));
  }
  std::string filter = a.String(0, "filter", "");
  CallArgs filter_args = Rest(a, 1);
  filter_args.keyword = a.args().keyword;
  for (const Value& item : Iterate(v)) out.push_back(ApplyFilter(filter, item, filter_args));
  return Value(std::move(out));
}

Value Extreme(const Value& v, const ArgReader& a, bool want_max) {
  bool case_sensitive = a.Bool(0, "case_sensitive", false);
  std::string attribute = a.String(1, "attribute", "");
  std::vector<Value> items = Iterate(v);
  if (items.empty()) return Value::MakeUndefined(want_max ? "max" : "min");
  Value best = items[0];
  for (const Value& item : items) {
    int order = CompareValues(SortKey(item, attribute, case_sensitive),
                              SortKey(best, attribute, case_sensitive));
    if (want_max ? order > 0 : order < 0) best = item;
  }
  return best;
}

Value Min(const Value& v, const ArgReader& a) { return Extreme(v, a, false); }
Value Max(const Value& v, const ArgReader& a) { return Extreme(v, a, true); }

Value Sum(const Value& v, const ArgReader& a) {
  std::string attribute = a.String(0, "attribute", "");
  Value total = a.Get(1, "start", Value(0));
  for (const Value& item : Iterate(v)) {
    total = BinaryOp("+", total, attribute.empty() ? item : ResolveAttributePath(item, attribute));
  }
  return total;
}

Value Attr(const Value& v, const ArgReader& a) {
  return ResolveAttributePath(v, a.String(0, "name", ""));
}

}  // namespace

void AddSequenceFilters(FilterTable& table) {
  table.insert({{"default", Default},
                {"d", Default},
                {"length", LengthFilter},
                {"count", LengthFilter},
                {"list", List},
                {"first", First},
                {"last", Last},
                {"items", Items},
                {"join", Join},
                {"unique", Unique},
                {"sort", Sort},
                {"dictsort", Dictsort},
                {"reverse", Reverse},
                {"select", Select},
                {"reject", Reject},
                {"selectattr", Selectattr},
                {"rejectattr", Rejectattr},
                {"map", Map},
                {"min", Min},
                {"max", Max},
                {"sum", Sum},
                {"attr", Attr}});
}

}  // namespace mkserve::chat::jinja
