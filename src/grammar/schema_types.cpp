#include "grammar/schema_types.h"

#include <cmath>
#include <map>

namespace mkserve::grammar {
namespace {

constexpr int kMaxDepth = 64;  // $ref chains and nesting followed; deeper: any type
// Schemas one question may visit: anyOf of references to anyOf doubles them per level.
constexpr int kMaxVisits = 1 << 16;

unsigned TypeOfName(const Json& name) {
  if (!name.is_string()) return kAnyType;
  const std::string text = name.get<std::string>();
  if (text == "null") return kNullType;
  if (text == "boolean") return kBooleanType;
  if (text == "object") return kObjectType;
  if (text == "array") return kArrayType;
  if (text == "string") return kStringType;
  if (text == "integer") return kIntegerType;
  if (text == "number") return kIntegerType | kFractionType;
  return kAnyType;  // an unknown name is the compiler's error to report
}

unsigned Accepted(const Json& schema, const Json& document, int depth, int& visits_left) {
  if (schema.is_boolean()) return schema.get<bool>() ? kAnyType : 0;
  if (!schema.is_object() || depth > kMaxDepth || --visits_left < 0) return kAnyType;
  unsigned types = kAnyType;
  if (const auto type = schema.find("type"); type != schema.end()) types &= TypesNamed(*type);
  if (const auto values = ListedValues(schema)) {  // const or enum
    unsigned listed = 0;
    for (const Json& value : *values) listed |= TypeOfValue(value);
    types &= listed;
  }
  if (const Json* target = RefTargetOf(schema, document)) {
    types &= Accepted(*target, document, depth + 1, visits_left);
  }
  if (const auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
    for (const Json& part : *all) types &= Accepted(part, document, depth + 1, visits_left);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    const auto alternatives = schema.find(key);
    if (alternatives == schema.end() || !alternatives->is_array()) continue;
    unsigned any = 0;
    for (const Json& alternative : *alternatives)
      any |= Accepted(alternative, document, depth + 1, visits_left);
    types &= any;
  }
  return types;
}

}  // namespace

unsigned TypesNamed(const Json& type) {
  if (!type.is_array()) return TypeOfName(type);
  unsigned named = 0;
  for (const Json& name : type) named |= TypeOfName(name);
  return named;
}

unsigned TypeOfValue(const Json& value) {
  if (value.is_null()) return kNullType;
  if (value.is_boolean()) return kBooleanType;
  if (value.is_object()) return kObjectType;
  if (value.is_array()) return kArrayType;
  if (value.is_string()) return kStringType;
  if (value.is_number_integer()) return kIntegerType;
  const double number = value.get<double>();
  return std::floor(number) == number ? kIntegerType : kFractionType;
}

std::string CanonicalValue(const Json& value) {
  if (value.is_number()) {
    const double number = value.get<double>();
    if (value.is_number_float() && std::floor(number) == number && std::fabs(number) < 9.2e18) {
      return std::to_string(static_cast<int64_t>(number));  // 1.0 and 1e2 as the integers they are
    }
    return value.dump();
  }
  if (value.is_array()) {
    std::string text = "[";
    for (const Json& item : value) text += CanonicalValue(item) + ",";
    return text + "]";
  }
  if (value.is_object()) {
    std::map<std::string, std::string> members;
    for (const auto& [key, item] : value.items()) members[key] = CanonicalValue(item);
    std::string text = "{";
    for (const auto& [key, item] : members) text += Json(key).dump() + ":" + item + ",";
    return text + "}";
  }
  return value.dump();
}

std::optional<std::vector<Json>> ListedValues(const Json& schema) {
  if (!schema.is_object()) return std::nullopt;
  const auto value = schema.find("const");
  const auto values = schema.find("enum");
  if (value == schema.end() && (values == schema.end() || !values->is_array())) {
    return std::nullopt;
  }
  const Json listed = value != schema.end() ? Json::array({*value}) : *values;
  const auto type = schema.find("type");
  const unsigned types = type != schema.end() ? TypesNamed(*type) : kAnyType;
  std::vector<Json> allowed;
  for (const Json& item : listed) {
    if ((TypeOfValue(item) & types) != 0) allowed.push_back(item);
  }
  return allowed;
}

const Json* RefTargetOf(const Json& schema, const Json& document) {
  const auto ref = schema.find("$ref");
  if (ref == schema.end() || !ref->is_string()) return nullptr;
  try {
    return ResolveRef(document, "", ref->get<std::string>(), "").schema;
  } catch (const SchemaError&) {
    return nullptr;
  }
}

const Json& Dereferenced(const Json& schema, const Json& document) {
  const Json* at = &schema;
  for (int depth = 0; depth < kMaxDepth && at->is_object(); ++depth) {
    bool alone = true;
    for (const auto& [key, value] : at->items()) {
      if (key != "$ref" && !IsAnnotation(key)) alone = false;
    }
    const Json* target = alone ? RefTargetOf(*at, document) : nullptr;
    if (target == nullptr) break;
    at = target;
  }
  return *at;
}

unsigned AcceptedTypes(const Json& schema, const Json& document) {
  int visits_left = kMaxVisits;
  return Accepted(schema, document, 0, visits_left);
}

}  // namespace mkserve::grammar
