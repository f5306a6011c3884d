// The dynamic value of the Jinja interpreter: Python-like (None, bool, int, float, str, list,
// dict, callable) plus jinja2's Undefined. Lists and dicts are shared by reference, as in Python,
// so a namespace or a list changed inside a loop is seen outside it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mkserve::chat::jinja {

class Value;
using Array = std::vector<Value>;

// A dict that keeps insertion order (Python 3.7+ semantics); keys are strings.
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  bool is_namespace = false;  // only namespace() objects accept `set ns.attr = ...`

  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value value);
};

// Arguments of a call, a filter or a test: positional first, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using Function = std::function<Value(CallArgs&)>;

// jinja2's default Undefined; `name` is only used in error messages.
struct Undefined {
  std::string name;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() : storage_(Undefined{}) {}
  Value(std::nullptr_t) : storage_(nullptr) {}
  Value(bool v) : storage_(v) {}
  Value(int v) : storage_(int64_t{v}) {}
  Value(int64_t v) : storage_(v) {}
  Value(double v) : storage_(v) {}
  Value(std::string v) : storage_(std::move(v)) {}
  Value(const char* v) : storage_(std::string(v)) {}
  Value(Array v) : storage_(std::make_shared<Array>(std::move(v))) {}
  Value(std::shared_ptr<Array> v) : storage_(std::move(v)) {}
  Value(std::shared_ptr<Object> v) : storage_(std::move(v)) {}
  Value(Function v) : storage_(std::make_shared<Function>(std::move(v))) {}

  static Value MakeUndefined(std::string name) { return Value(Undefined{std::move(name)}); }
  static Value MakeObject() { return Value(std::make_shared<Object>()); }
  // A Python tuple: a list that prints as (a, b); dict items and tuple literals are tuples.
  static Value MakeTuple(Array items) {
    Value value(std::move(items));
    value.is_tuple_ = true;
    return value;
  }
  static Value FromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return static_cast<Kind>(storage_.index()); }
  bool IsUndefined() const { return kind() == Kind::kUndefined; }
  bool IsNone() const { return kind() == Kind::kNone; }
  bool IsBool() const { return kind() == Kind::kBool; }
  bool IsInt() const { return kind() == Kind::kInt; }
  bool IsFloat() const { return kind() == Kind::kFloat; }
  bool IsNumber() const { return IsInt() || IsFloat() || IsBool(); }
  bool IsString() const { return kind() == Kind::kString; }
  bool IsArray() const { return kind() == Kind::kArray; }
  bool IsObject() const { return kind() == Kind::kObject; }
  bool IsFunction() const { return kind() == Kind::kFunction; }
  bool IsTuple() const { return is_tuple_; }

  bool AsBool() const { return std::get<bool>(storage_); }
  int64_t AsInt() const;    // bool or int
  double AsDouble() const;  // bool, int or float
  const std::string& AsString() const { return std::get<std::string>(storage_); }
  Array& AsArray() const { return *std::get<std::shared_ptr<Array>>(storage_); }
  Object& AsObject() const { return *std::get<std::shared_ptr<Object>>(storage_); }
  Function& AsFunction() const { return *std::get<std::shared_ptr<Function>>(storage_); }
  const std::string& UndefinedName() const { return std::get<Undefined>(storage_).name; }

  // Python truthiness; Undefined is false.
  bool Truthy() const;
  // Python ==: 1 == 1.0 == True, deep for lists and dicts.
  bool Equals(const Value& other) const;
  // Python type name for error messages ("str", "list", "dict", ...).
  std::string TypeName() const;

 private:
  explicit Value(Undefined u) : storage_(std::move(u)) {}

  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
               std::shared_ptr<Array>, std::shared_ptr<Object>, std::shared_ptr<Function>>
      storage_;
  bool is_tuple_ = false;
};

}  // namespace mkserve::chat::jinja
