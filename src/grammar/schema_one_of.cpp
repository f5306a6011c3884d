#include "grammar/schema_one_of.h"

#include <optional>
#include <vector>

#include "grammar/schema_types.h"

namespace mkserve::grammar {
namespace {

constexpr int kMaxDepth = 64;                      // $ref chains followed
constexpr size_t kMaxExclusiveAlternatives = 256;  // pairs checked: its square
// Value comparisons one oneOf may spend telling its alternatives apart (enums of thousands of
// values in hundreds of alternatives would take minutes); past it the pair counts as not shown.
constexpr int64_t kMaxComparisons = 1 << 22;

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
bool ToldApartByProperty(const Json& a, const Json& b, const Json& document,
                         int64_t& comparisons_left) {
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
    comparisons_left -= static_cast<int64_t>(mine->size()) * static_cast<int64_t>(theirs->size());
    if (comparisons_left < 0) return false;
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
  int64_t comparisons_left = kMaxComparisons;
  std::vector<unsigned> types;
  for (const Json& alternative : alternatives) {
    types.push_back(AcceptedTypes(alternative, document));
  }
  for (size_t i = 0; i < alternatives.size(); ++i) {
    for (size_t j = i + 1; j < alternatives.size(); ++j) {
      if ((types[i] & types[j]) == 0) continue;
      if (ToldApartByProperty(alternatives[i], alternatives[j], document, comparisons_left)) {
        continue;
      }
      throw SchemaError(where, "alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                                   " may both accept one value (a JSON type in common, and no "
                                   "property both require with different const or enum values); "
                                   "oneOf is supported where that shows them exclusive: use "
                                   "anyOf if either may hold");
    }
  }
}

}  // namespace mkserve::grammar
