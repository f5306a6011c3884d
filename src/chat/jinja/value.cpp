#include "chat/jinja/value.h"

namespace mkserve::chat::jinja {

const Value* Object::Find(std::string_view key) const {
  for (const auto& [name, value] : entries) {
    if (name == key) return &value;
  }
  return nullptr;
}

void Object::Set(const std::string& key, Value value) {
  for (auto& entry : entries) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries.emplace_back(key, std::move(value));
}

Value Value::FromJson(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value(nullptr);
    case nlohmann::ordered_json::value_t::boolean:
      return Value(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return Value(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(FromJson(item));
      return Value(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto object = std::make_shared<Object>();
      for (const auto& [key, item] : json.items())
        object->entries.emplace_back(key, FromJson(item));
      return Value(std::move(object));
    }
    default:
      return Value(nullptr);  // binary and discarded values do not occur in parsed JSON
  }
}

int64_t Value::AsInt() const {
  if (IsBool()) return AsBool() ? 1 : 0;
  return std::get<int64_t>(storage_);
}

double Value::AsDouble() const {
  if (IsFloat()) return std::get<double>(storage_);
  return static_cast<double>(AsInt());
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return AsBool();
    case Kind::kInt:
      return AsInt() != 0;
    case Kind::kFloat:
      return AsDouble() != 0.0;
    case Kind::kString:
      return !AsString().empty();
    case Kind::kArray:
      return !AsArray().empty();
    case Kind::kObject:
      return !AsObject().entries.empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

static bool ObjectsEqual(const Object& a, const Object& b) {
  if (a.entries.size() != b.entries.size()) return false;
  for (const auto& [key, value] : a.entries) {
    const Value* other = b.Find(key);
    if (other == nullptr || !value.Equals(*other)) return false;
  }
  return true;
}

bool Value::Equals(const Value& other) const {
  if (IsNumber() && other.IsNumber()) {
    if (IsFloat() || other.IsFloat()) return AsDouble() == other.AsDouble();
    return AsInt() == other.AsInt();
  }
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return AsString() == other.AsString();
    case Kind::kArray: {
      const Array& a = AsArray();
      const Array& b = other.AsArray();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].Equals(b[i])) return false;
      }
      return true;
    }
    case Kind::kObject:
      return ObjectsEqual(AsObject(), other.AsObject());
    case Kind::kFunction:
      return std::get<std::shared_ptr<Function>>(storage_) ==
             std::get<std::shared_ptr<Function>>(other.storage_);
    default:
      return false;
  }
}

std::string Value::TypeName() const {
  static const char* const kNames[] = {"Undefined", "NoneType", "bool", "int",     "float",
                                       "str",       "list",     "dict", "function"};
  return kNames[storage_.index()];
}

}  // namespace mkserve::chat::jinja
