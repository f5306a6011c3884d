#include "chat/jinja/value_ops.h"

#include <algorithm>
#include <cmath>

#include "chat/jinja/python_format.h"
#include "chat/jinja/template_error.h"
#include "common/utf8.h"

namespace mkserve::chat::jinja {

namespace {

[[noreturn]] void Unsupported(const std::string& op, const Value& left, const Value& right) {
  if (left.IsUndefined() || right.IsUndefined()) {
    const Value& undefined = left.IsUndefined() ? left : right;
    throw TemplateError("'" + undefined.UndefinedName() + "' is undefined (used with '" + op +
                        "')");
  }
  throw TemplateError("unsupported operand types for " + op + ": '" + left.TypeName() + "' and '" +
                      right.TypeName() + "'");
}

// Bounds `x * n` so a template cannot exhaust memory: a string to the longest text, a list to
// 2^20 items (a list of 2^26 dicts took gigabytes and a minute to build and print).
constexpr int64_t kMaxRepeatedItems = int64_t{1} << 20;

Value Repeat(const Value& sequence, int64_t count) {
  const int64_t length = sequence.IsString() ? static_cast<int64_t>(sequence.AsString().size())
                                             : static_cast<int64_t>(sequence.AsArray().size());
  const int64_t max = sequence.IsString() ? static_cast<int64_t>(kMaxTextBytes) : kMaxRepeatedItems;
  if (length == 0 || count < 0) count = 0;  // `'' * 10**18` is empty, without 10**18 appends
  if (count > 0 && length > max / count) throw TemplateError("sequence repetition is too large");
  if (sequence.IsString()) {
    std::string out;
    out.reserve(length * count);
    for (int64_t i = 0; i < count; ++i) out += sequence.AsString();
    return Value(out);
  }
  Array out;
  out.reserve(length * count);
  for (int64_t i = 0; i < count; ++i) {
    out.insert(out.end(), sequence.AsArray().begin(), sequence.AsArray().end());
  }
  return Value(std::move(out));
}

Value Arithmetic(const std::string& op, const Value& left, const Value& right) {
  bool as_float = left.IsFloat() || right.IsFloat() || op == "/";
  if (op == "/" || op == "//" || op == "%") {
    if (right.AsDouble() == 0.0) throw TemplateError("division by zero");
  }
  if (as_float) {
    double a = left.AsDouble(), b = right.AsDouble();
    if (op == "+") return Value(a + b);
    if (op == "-") return Value(a - b);
    if (op == "*") return Value(a * b);
    if (op == "/") return Value(a / b);
    if (op == "//") return Value(std::floor(a / b));
    if (op == "%") return Value(a - b * std::floor(a / b));
    return Value(std::pow(a, b));
  }
  const int64_t a = left.AsInt(), b = right.AsInt();
  int64_t result = 0;
  bool overflow = false;
  if (op == "+") {
    overflow = __builtin_add_overflow(a, b, &result);
  } else if (op == "-") {
    overflow = __builtin_sub_overflow(a, b, &result);
  } else if (op == "*") {
    overflow = __builtin_mul_overflow(a, b, &result);
  } else if (op == "//" || op == "%") {
    if (b == -1) {  // the one quotient that can overflow: INT64_MIN // -1 (and x % -1 is 0)
      overflow = op == "//" && __builtin_sub_overflow(int64_t{0}, a, &result);
    } else {
      // Python rounds the quotient down and gives the remainder the divisor's sign.
      const int64_t remainder = a % b;
      const bool adjust = remainder != 0 && (remainder < 0) != (b < 0);
      result = op == "//" ? a / b - adjust : remainder + (adjust ? b : 0);
    }
  } else if (b < 0) {
    return Value(std::pow(static_cast<double>(a), static_cast<double>(b)));
  } else {  // a ** b by squaring: a huge exponent overflows in a few rounds, never loops long
    result = 1;
    int64_t base = a;
    for (int64_t e = b; e > 0 && !overflow; e >>= 1) {
      if (e & 1) overflow = __builtin_mul_overflow(result, base, &result);
      if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
    }
  }
  // Python's integers have no bound; these are 64-bit, so the template gets a named error.
  if (overflow) throw TemplateError("integer overflow in '" + op + "' (64-bit integers)");
  return Value(result);
}

bool IsSequence(const Value& v) { return v.IsString() || v.IsArray(); }

}  // namespace

Value BinaryOp(const std::string& op, const Value& left, const Value& right) {
  if (op == "~") return Value(PythonStr(left) + PythonStr(right));
  if (left.IsNumber() && right.IsNumber()) return Arithmetic(op, left, right);
  if (op == "+" && left.IsString() && right.IsString())
    return Value(left.AsString() + right.AsString());
  if (op == "+" && left.IsArray() && right.IsArray()) {
    Array out = left.AsArray();
    out.insert(out.end(), right.AsArray().begin(), right.AsArray().end());
    return Value(std::move(out));
  }
  if (op == "*" && IsSequence(left) && (right.IsInt() || right.IsBool()))
    return Repeat(left, right.AsInt());
  if (op == "*" && IsSequence(right) && (left.IsInt() || left.IsBool()))
    return Repeat(right, left.AsInt());
  Unsupported(op, left, right);
}

int CompareValues(const Value& left, const Value& right) {
  if (left.IsNumber() && right.IsNumber()) {
    double a = left.AsDouble(), b = right.AsDouble();
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (left.IsString() && right.IsString())
    return left.AsString().compare(right.AsString()) < 0 ? -1
           : left.AsString() == right.AsString()         ? 0
                                                         : 1;
  if (left.IsArray() && right.IsArray()) {
    const Array& a = left.AsArray();
    const Array& b = right.AsArray();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!a[i].Equals(b[i])) return CompareValues(a[i], b[i]);
    }
    return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
  }
  Unsupported("<", left, right);
}

bool Contains(const Value& container, const Value& item) {
  if (container.IsString()) {
    if (!item.IsString())
      throw TemplateError("'in <string>' requires string as left operand, not " + item.TypeName());
    return container.AsString().find(item.AsString()) != std::string::npos;
  }
  if (container.IsObject())
    return item.IsString() && container.AsObject().Find(item.AsString()) != nullptr;
  if (container.IsArray()) {
    for (const Value& element : container.AsArray()) {
      if (element.Equals(item)) return true;
    }
    return false;
  }
  if (container.IsUndefined()) return false;
  throw TemplateError("argument of type '" + container.TypeName() + "' is not iterable");
}

bool CompareOp(const std::string& op, const Value& left, const Value& right) {
  if (op == "==") return left.Equals(right);
  if (op == "!=") return !left.Equals(right);
  if (op == "in") return Contains(right, left);
  if (op == "not in") return !Contains(right, left);
  int order = CompareValues(left, right);
  if (op == "<") return order < 0;
  if (op == ">") return order > 0;
  if (op == "<=") return order <= 0;
  return order >= 0;
}

std::vector<Value> Iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kArray:
      return value.AsArray();
    case Value::Kind::kObject: {
      std::vector<Value> keys;
      for (const auto& entry : value.AsObject().entries) keys.emplace_back(entry.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char32_t cp : DecodeUtf8(value.AsString()))
        chars.emplace_back(EncodeUtf8(std::u32string(1, cp)));
      return chars;
    }
    default:
      throw TemplateError("'" + value.TypeName() + "' object is not iterable");
  }
}

int64_t Length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(value.AsString()));
    case Value::Kind::kArray:
      return static_cast<int64_t>(value.AsArray().size());
    case Value::Kind::kObject:
      return static_cast<int64_t>(value.AsObject().entries.size());
    default:
      throw TemplateError("object of type '" + value.TypeName() + "' has no len()");
  }
}

Value GetItem(const Value& object, const Value& key) {
  if (object.IsUndefined()) throw TemplateError("'" + object.UndefinedName() + "' is undefined");
  if (object.IsObject()) {
    const Value* found = key.IsString() ? object.AsObject().Find(key.AsString()) : nullptr;
    return found ? *found : Value::MakeUndefined(key.IsString() ? key.AsString() : PythonRepr(key));
  }
  if ((object.IsArray() || object.IsString()) && (key.IsInt() || key.IsBool())) {
    int64_t size = Length(object);
    int64_t index = key.AsInt() < 0 ? key.AsInt() + size : key.AsInt();
    if (index < 0 || index >= size) {
      std::string name = "[";  // appended, not "[" + ...: GCC 12 -O3 warns (-Wrestrict) on that
      name += std::to_string(key.AsInt());
      name += ']';
      return Value::MakeUndefined(name);
    }
    if (object.IsArray()) return object.AsArray()[index];
    return Value(EncodeUtf8(std::u32string(1, DecodeUtf8(object.AsString())[index])));
  }
  if (object.IsNone()) throw TemplateError("'NoneType' object is not subscriptable");
  return Value::MakeUndefined(PythonRepr(key));
}

namespace {

// Python slice index normalisation for one bound.
int64_t SliceBound(const Value& bound, int64_t size, int64_t step, bool is_start) {
  if (bound.IsUndefined() || bound.IsNone()) {
    if (step > 0) return is_start ? 0 : size;
    return is_start ? size - 1 : -1;
  }
  if (!bound.IsInt() && !bound.IsBool()) throw TemplateError("slice indices must be integers");
  int64_t index = bound.AsInt();
  if (index < 0) index += size;
  if (step > 0) return std::clamp<int64_t>(index, 0, size);
  return std::clamp<int64_t>(index, -1, size - 1);
}

}  // namespace

Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step_value) {
  if (!object.IsString() && !object.IsArray()) {
    throw TemplateError("'" + object.TypeName() + "' object is not sliceable");
  }
  int64_t step = step_value.IsUndefined() || step_value.IsNone() ? 1 : step_value.AsInt();
  if (step == 0) throw TemplateError("slice step cannot be zero");
  std::vector<int64_t> indices;
  int64_t size = Length(object);
  int64_t begin = SliceBound(start, size, step, true);
  int64_t end = SliceBound(stop, size, step, false);
  for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) indices.push_back(i);
  if (object.IsArray()) {
    Array out;
    for (int64_t i : indices) out.push_back(object.AsArray()[i]);
    return Value(std::move(out));
  }
  std::u32string chars = DecodeUtf8(object.AsString()), out;
  for (int64_t i : indices) out.push_back(chars[i]);
  return Value(EncodeUtf8(out));
}

}  // namespace mkserve::chat::jinja
