#include "grammar/schema_shape.h"

#include <cmath>
#include <map>
#include <set>

namespace mkserve::grammar {
namespace {

// What the meta-schema allows as a keyword's value.
enum class Shape {
  kSchema,            // additionalProperties, not, ...
  kSchemaOrSchemas,   // items: a schema, or (before 2020-12) an array of them
  kSchemaMap,         // properties, $defs, ...: an object of schemas
  kSchemaList,        // anyOf, allOf, ...: a non-empty array of schemas
  kType,              // a type name or a non-empty array of distinct ones
  kCount,             // a non-negative integer
  kNumber,            // minimum, maximum
  kNumberOrBool,      // exclusiveMinimum, exclusiveMaximum (booleans in draft 4)
  kPositiveNumber,    // multipleOf
  kString,            // $ref, format, pattern, ...
  kArray,             // enum
  kNames,             // required: an array of distinct strings
  kBool,              // uniqueItems
  kNamesMap,          // dependentRequired: an object of name arrays
  kSchemaOrNamesMap,  // dependencies (before 2019-09): an object of schemas or name arrays
};

// Annotations (title, description, examples, readOnly, ...) are left out: a wrong type there
// changes no schema's meaning, and the compiler ignores them too.
const std::map<std::string, Shape>& KeywordShapes() {
  static const std::map<std::string, Shape> kShapes = {
      {"additionalProperties", Shape::kSchema},
      {"additionalItems", Shape::kSchema},
      {"contains", Shape::kSchema},
      {"propertyNames", Shape::kSchema},
      {"not", Shape::kSchema},
      {"if", Shape::kSchema},
      {"then", Shape::kSchema},
      {"else", Shape::kSchema},
      {"unevaluatedItems", Shape::kSchema},
      {"unevaluatedProperties", Shape::kSchema},
      {"items", Shape::kSchemaOrSchemas},
      {"properties", Shape::kSchemaMap},
      {"patternProperties", Shape::kSchemaMap},
      {"$defs", Shape::kSchemaMap},
      {"definitions", Shape::kSchemaMap},
      {"dependentSchemas", Shape::kSchemaMap},
      {"allOf", Shape::kSchemaList},
      {"anyOf", Shape::kSchemaList},
      {"oneOf", Shape::kSchemaList},
      {"prefixItems", Shape::kSchemaList},
      {"type", Shape::kType},
      {"minLength", Shape::kCount},
      {"maxLength", Shape::kCount},
      {"minItems", Shape::kCount},
      {"maxItems", Shape::kCount},
      {"minProperties", Shape::kCount},
      {"maxProperties", Shape::kCount},
      {"minContains", Shape::kCount},
      {"maxContains", Shape::kCount},
      {"minimum", Shape::kNumber},
      {"maximum", Shape::kNumber},
      {"exclusiveMinimum", Shape::kNumberOrBool},
      {"exclusiveMaximum", Shape::kNumberOrBool},
      {"multipleOf", Shape::kPositiveNumber},
      {"$ref", Shape::kString},
      {"$id", Shape::kString},
      {"$schema", Shape::kString},
      {"$anchor", Shape::kString},
      {"$dynamicRef", Shape::kString},
      {"$dynamicAnchor", Shape::kString},
      {"format", Shape::kString},
      {"pattern", Shape::kString},
      {"enum", Shape::kArray},
      {"required", Shape::kNames},
      {"uniqueItems", Shape::kBool},
      {"dependentRequired", Shape::kNamesMap},
      {"dependencies", Shape::kSchemaOrNamesMap},
  };
  return kShapes;
}

const std::set<std::string>& TypeNames() {
  static const std::set<std::string> kNames = {"object",  "array",   "string", "number",
                                               "integer", "boolean", "null"};
  return kNames;
}

std::string Index(const std::string& where, size_t i) {
  return where + "[" + std::to_string(i) + "]";
}

void CheckNames(const Json& value, const std::string& where) {
  if (!value.is_array()) throw SchemaError(where, "must be an array of property names");
  std::set<std::string> seen;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) throw SchemaError(Index(where, i), "must be a property name");
    if (!seen.insert(value[i].get<std::string>()).second) {
      throw SchemaError(Index(where, i), "repeats '" + value[i].get<std::string>() + "'");
    }
  }
}

void CheckTypeName(const Json& value, const std::string& where) {
  if (!value.is_string()) throw SchemaError(where, "must be a type name");
  if (!TypeNames().count(value.get<std::string>())) {
    throw SchemaError(where, "unknown type '" + value.get<std::string>() +
                                 "'; expected object, array, string, number, integer, boolean "
                                 "or null");
  }
}

void CheckKeyword(Shape shape, const Json& value, const std::string& where) {
  switch (shape) {
    case Shape::kSchema:
      return CheckSchemaShape(value, where);
    case Shape::kSchemaOrSchemas:
      if (!value.is_array()) return CheckSchemaShape(value, where);
      for (size_t i = 0; i < value.size(); ++i) CheckSchemaShape(value[i], Index(where, i));
      return;
    case Shape::kSchemaMap:
      if (!value.is_object()) throw SchemaError(where, "must be an object of schemas");
      for (const auto& [name, schema] : value.items()) CheckSchemaShape(schema, where + "." + name);
      return;
    case Shape::kSchemaList:
      if (!value.is_array() || value.empty()) {
        throw SchemaError(where, "must be a non-empty array of schemas");
      }
      for (size_t i = 0; i < value.size(); ++i) CheckSchemaShape(value[i], Index(where, i));
      return;
    case Shape::kType:
      if (!value.is_array()) return CheckTypeName(value, where);
      if (value.empty())
        throw SchemaError(where, "must be a type name or a non-empty array of them");
      for (size_t i = 0; i < value.size(); ++i) {
        CheckTypeName(value[i], Index(where, i));
        for (size_t j = 0; j < i; ++j) {
          if (value[j] == value[i]) {
            throw SchemaError(Index(where, i), "repeats '" + value[i].get<std::string>() + "'");
          }
        }
      }
      return;
    case Shape::kCount:
      // JSON Schema's integers include 8.0 and 1e3 (a zero fraction).
      if (!value.is_number() || value.get<double>() < 0 ||
          value.get<double>() != std::floor(value.get<double>())) {
        throw SchemaError(where, "must be a non-negative integer");
      }
      return;
    case Shape::kNumber:
      if (!value.is_number()) throw SchemaError(where, "must be a number");
      return;
    case Shape::kNumberOrBool:
      if (!value.is_number() && !value.is_boolean()) throw SchemaError(where, "must be a number");
      return;
    case Shape::kPositiveNumber:
      if (!value.is_number() || !(value.get<double>() > 0)) {
        throw SchemaError(where, "must be a number greater than 0");
      }
      return;
    case Shape::kString:
      if (!value.is_string()) throw SchemaError(where, "must be a string");
      return;
    case Shape::kArray:
      if (!value.is_array()) throw SchemaError(where, "must be an array");
      return;
    case Shape::kNames:
      return CheckNames(value, where);
    case Shape::kBool:
      if (!value.is_boolean()) throw SchemaError(where, "must be true or false");
      return;
    case Shape::kNamesMap:
      if (!value.is_object()) throw SchemaError(where, "must be an object of name arrays");
      for (const auto& [name, names] : value.items()) CheckNames(names, where + "." + name);
      return;
    case Shape::kSchemaOrNamesMap:
      if (!value.is_object()) throw SchemaError(where, "must be an object");
      for (const auto& [name, entry] : value.items()) {
        if (entry.is_array()) {
          CheckNames(entry, where + "." + name);
        } else {
          CheckSchemaShape(entry, where + "." + name);
        }
      }
      return;
  }
}

}  // namespace

void CheckSchemaShape(const Json& schema, const std::string& where) {
  if (schema.is_boolean()) return;
  if (!schema.is_object()) {
    throw SchemaError(where, "a schema must be an object or a boolean");
  }
  for (const auto& [key, value] : schema.items()) {
    const auto shape = KeywordShapes().find(key);
    if (shape != KeywordShapes().end()) CheckKeyword(shape->second, value, where + "." + key);
  }
}

}  // namespace mkserve::grammar
