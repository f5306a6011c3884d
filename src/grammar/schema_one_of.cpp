#include "grammar/schema_one_of.h"

#include <cmath>
#include <optional>
#include <vector>

namespace mkserve::grammar {
namespace {

// JSON Schema's types as bits; "number" is both integer and fraction (1.0 is an integer).
enum TypeBit : unsigned {
  kNull = 1,
  kBoolean = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,
  kFraction = 64,
};
constexpr unsigned kAnyType = 127;
constexpr int kMaxDepth = 64;                      // $ref chains followed; deeper: any type
constexpr size_t kMaxExclusiveAlternatives = 256;  // pairs checked: its square

unsigned TypeOfName(const Json& name) {
  if (!name.is_string()) return kAnyType;
  const std::string text = name.get<std::string>();
  if (text == "null") return kNull;
  if (text == "boolean") return kBoolean;
  if (text == "object") return kObject;
  if (text == "array") return kArray;
  if (text == "string") return kString;
  if (text == "integer") return kInteger;
  if (text == "number") return kInteger | kFraction;
  return kAnyType;  // an unknown name is the compiler's error to report
}

unsigned TypeOfValue(const Json& value) {
  if (value.is_null()) return kNull;
  if (value.is_boolean()) return kBoolean;
  if (value.is_object()) return kObject;
  if (value.is_array()) return kArray;
  if (value.is_string()) return kString;
  if (value.is_number_integer()) return kInteger;
  const double number = value.get<double>();
  return std::floor(number) == number ? kInteger : kFraction;
}

// `schema`'s local $ref target, or null (no $ref, or one the compiler will report).
const Json* RefTargetOf(const Json& schema, const Json& document) {
  const auto ref = schema.find("$ref");
  if (ref == schema.end() || !ref->is_string()) return nullptr;
  try {
    return ResolveRef(document, "", ref->get<std::string>(), "").schema;
  } catch (const SchemaError&) {
    return nullptr;
  }
}

// The JSON types `schema` may accept (a superset where it cannot tell).
unsigned AcceptedTypes(const Json& schema, const Json& document, int depth) {
  if (schema.is_boolean()) return schema.get<bool>() ? kAnyType : 0;
  if (!schema.is_object() || depth > kMaxDepth) return kAnyType;
  unsigned types = kAnyType;
  if (const auto type = schema.find("type"); type != schema.end()) {
    unsigned named = 0;
    if (type->is_array()) {
      for (const Json& name : *type) named |= TypeOfName(name);
    } else {
      named = TypeOfName(*type);
    }
    types &= named;
  }
  if (const auto value = schema.find("const"); value != schema.end()) types &= TypeOfValue(*value);
  if (const auto values = schema.find("enum"); values != schema.end() && values->is_array()) {
    unsigned listed = 0;
    for (const Json& value : *values) listed |= TypeOfValue(value);
    types &= listed;
  }
  if (const Json* target = RefTargetOf(schema, document)) {
    types &= AcceptedTypes(*target, document, depth + 1);
  }
  if (const auto all = schema.find("allOf"); all != schema.end() && all->is_array()) {
    for (const Json& part : *all) types &= AcceptedTypes(part, document, depth + 1);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    const auto alternatives = schema.find(key);
    if (alternatives == schema.end() || !alternatives->is_array()) continue;
    unsigned any = 0;
    for (const Json& alternative : *alternatives) {
      any |= AcceptedTypes(alternative, document, depth + 1);
    }
    types &= any;
  }
  return types;
}

// `schema` through $refs that stand alone (beside annotations at most).
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

// The values a property's schema names (const, or enum), if it names them.
std::optional<std::vector<Json>> NamedValues(const Json& schema, const Json& document) {
  const Json& at = Dereferenced(schema, document);
  if (!at.is_object()) return std::nullopt;
  if (const auto value = at.find("const"); value != at.end()) return std::vector<Json>{*value};
  if (const auto values = at.find("enum"); values != at.end() && values->is_array()) {
    return std::vector<Json>(values->begin(), values->end());
  }
  return std::nullopt;
}

bool Requires(const Json& schema, const std::string& name) {
  const auto required = schema.find("required");
  if (required == schema.end() || !required->is_array()) return false;
  for (const Json& entry : *required) {
    if (entry.is_string() && entry.get<std::string>() == name) return true;
  }
  return false;
}

// Whether both alternatives require a property whose named values have none in common: a value
// of one then fails the other's schema for that property (JSON equality: 1 equals 1.0).
bool ToldApartByProperty(const Json& a, const Json& b, const Json& document) {
  const Json& first = Dereferenced(a, document);
  const Json& second = Dereferenced(b, document);
  if (!first.is_object() || !second.is_object()) return false;
  const auto first_properties = first.find("properties");
  const auto second_properties = second.find("properties");
  if (first_properties == first.end() || second_properties == second.end() ||
      !first_properties->is_object() || !second_properties->is_object()) {
    return false;
  }
  for (const auto& [name, subschema] : first_properties->items()) {
    if (!Requires(first, name) || !Requires(second, name) || !second_properties->contains(name)) {
      continue;
    }
    const auto mine = NamedValues(subschema, document);
    const auto theirs = NamedValues(second_properties->at(name), document);
    if (!mine || !theirs) continue;
    bool shared = false;
    for (const Json& value : *mine) {
      for (const Json& other : *theirs) shared = shared || value == other;
    }
    if (!shared) return true;
  }
  return false;
}

}  // namespace

void CheckAlternativesExclusive(const Json& alternatives, const Json& document,
                                const std::string& where) {
  if (!alternatives.is_array() || alternatives.empty()) {
    throw SchemaError(where, "must be a non-empty array of schemas");
  }
  if (alternatives.size() > kMaxExclusiveAlternatives) {
    throw SchemaError(where, "more than " + std::to_string(kMaxExclusiveAlternatives) +
                                 " alternatives are not supported");
  }
  std::vector<unsigned> types;
  for (const Json& alternative : alternatives) {
    types.push_back(AcceptedTypes(alternative, document, 0));
  }
  for (size_t i = 0; i < alternatives.size(); ++i) {
    for (size_t j = i + 1; j < alternatives.size(); ++j) {
      if ((types[i] & types[j]) == 0) continue;
      if (ToldApartByProperty(alternatives[i], alternatives[j], document)) continue;
      throw SchemaError(where, "alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                                   " may both accept one value (a JSON type in common, and no "
                                   "property both require with different const or enum values); "
                                   "oneOf is supported where that shows them exclusive: use "
                                   "anyOf if either may hold");
    }
  }
}

}  // namespace mkserve::grammar
