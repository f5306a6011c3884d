#include "grammar/schema_one_of.h"

#include <map>
#include <optional>
#include <unordered_set>
#include <vector>

#include "grammar/schema_types.h"

namespace mkserve::grammar {
namespace {

constexpr size_t kMaxExclusiveAlternatives = 256;  // pairs checked: its square
constexpr size_t kMaxNamedValues = 1 << 16;        // const/enum values those pairs compare

bool Requires(const Json& schema, const std::string& name) {
  const auto required = schema.find("required");
  if (required == schema.end() || !required->is_array()) return false;
  for (const Json& entry : *required) {
    if (entry.is_string() && entry.get<std::string>() == name) return true;
  }
  return false;
}

// An alternative's required properties whose schemas name their values (const or enum), each
// with those values as CanonicalValue text.
using Discriminators = std::map<std::string, std::unordered_set<std::string>>;

Discriminators DiscriminatorsOf(const Json& alternative, const Json& document, size_t& values_left,
                                const std::string& where) {
  Discriminators found;
  const Json& schema = Dereferenced(alternative, document);
  if (!schema.is_object()) return found;
  const auto properties = schema.find("properties");
  if (properties == schema.end() || !properties->is_object()) return found;
  for (const auto& [name, subschema] : properties->items()) {
    if (!Requires(schema, name)) continue;
    const auto values = ListedValues(Dereferenced(subschema, document));
    if (!values) continue;
    if (values->size() > values_left) {
      throw SchemaError(where, "more than " + std::to_string(kMaxNamedValues) +
                                   " const and enum values of required properties in one oneOf "
                                   "are not supported");
    }
    values_left -= values->size();
    auto& set = found[name];
    for (const Json& value : *values) set.insert(CanonicalValue(value));
  }
  return found;
}

// Whether the two require a property whose named values have none in common: a value of one
// then fails the other's schema for that property.
bool ToldApart(const Discriminators& a, const Discriminators& b) {
  for (const auto& [name, mine] : a) {
    const auto theirs = b.find(name);
    if (theirs == b.end()) continue;
    const auto& [small, large] = mine.size() <= theirs->second.size()
                                     ? std::pair(&mine, &theirs->second)
                                     : std::pair(&theirs->second, &mine);
    bool shared = false;
    for (const std::string& value : *small) shared = shared || large->count(value) != 0;
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
  std::vector<Discriminators> discriminators;
  size_t values_left = kMaxNamedValues;
  for (const Json& alternative : alternatives) {
    types.push_back(AcceptedTypes(alternative, document));
    discriminators.push_back(DiscriminatorsOf(alternative, document, values_left, where));
  }
  for (size_t i = 0; i < alternatives.size(); ++i) {
    for (size_t j = i + 1; j < alternatives.size(); ++j) {
      if ((types[i] & types[j]) == 0) continue;
      if (ToldApart(discriminators[i], discriminators[j])) continue;
      throw SchemaError(where, "alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                                   " may both accept one value (a JSON type in common, and no "
                                   "property both require with different const or enum values); "
                                   "oneOf is supported where that shows them exclusive: use "
                                   "anyOf if either may hold");
    }
  }
}

}  // namespace mkserve::grammar
