// The JSON types a schema accepts, as bits: what oneOf's exclusivity, an enum beside a type and
// keywords beside alternatives are judged by. JSON Schema's "number" is an integer or a fraction,
// and 1.0 is an integer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "grammar/json_schema.h"

namespace mkserve::grammar {

enum TypeBit : unsigned {
  kNullType = 1,
  kBooleanType = 2,
  kObjectType = 4,
  kArrayType = 8,
  kStringType = 16,
  kIntegerType = 32,
  kFractionType = 64,
};
inline constexpr unsigned kAnyType = 127;

// A "type" keyword's value (a name or a list of them); kAnyType for a name it does not know.
unsigned TypesNamed(const Json& type);
// The type of one JSON value.
unsigned TypeOfValue(const Json& value);

// Text that two JSON values share exactly when JSON Schema calls them equal (1 and 1.0 are, an
// object's key order does not matter): const and enum values compared by hashing.
std::string CanonicalValue(const Json& value);

// The values `schema`'s const or enum lists, of those a `type` beside it allows (in the listed
// order, repeats kept); nullopt when it has neither.
std::optional<std::vector<Json>> ListedValues(const Json& schema);

// `schema`'s local $ref target in `document`, or null (no $ref, or one the compiler will refuse).
const Json* RefTargetOf(const Json& schema, const Json& document);

// `schema` through $refs that stand alone (beside annotations at most): the schema they name.
const Json& Dereferenced(const Json& schema, const Json& document);

// The types `schema` may accept (a superset where it cannot tell): its type, const and enum, and
// what its $ref (into `document`), allOf, anyOf and oneOf allow.
unsigned AcceptedTypes(const Json& schema, const Json& document);

}  // namespace mkserve::grammar
