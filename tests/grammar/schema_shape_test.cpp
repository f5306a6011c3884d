#include "grammar/schema_shape.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace mkserve::grammar {
namespace {

// The path CheckSchemaShape blames, or "" when it accepts the schema.
std::string Culprit(const char* schema) {
  try {
    CheckSchemaShape(Json::parse(schema), "p");
  } catch (const SchemaError& e) {
    return e.where();
  }
  return "";
}

// Valid JSON Schema, including keywords the grammar compiler refuses (not,
// patternProperties, tuple items, draft-4 boolean exclusive bounds) and unknown keywords.
TEST(SchemaShapeTest, AcceptsValidSchemasWhateverTheCompilerSupports) {
  for (
      const char* schema : {
          R"(true)",
          R"(false)",
          R"({})",
          R"({"type": "object", "properties": {"city": {"type": "string", "minLength": 1}},
               "required": ["city"], "additionalProperties": false})",
          R"({"type": ["string", "null"], "description": "d", "title": "t", "default": null})",
          R"({"allOf": [{"type": "object"}], "oneOf": [true, {"enum": []}], "not": {"const": 1}})",
          R"({"patternProperties": {"^x": {"type": "integer"}}, "propertyNames": {"maxLength": 8}})",
          R"({"items": [{"type": "string"}, {"type": "number"}], "additionalItems": false})",
          R"({"prefixItems": [true], "items": false, "minItems": 1.0, "maxItems": 1e3})",
          R"({"type": "number", "minimum": -1.5, "exclusiveMaximum": true, "maximum": 2})",
          R"({"type": "number", "multipleOf": 0.5})",
          R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "definitions": {}, "$ref": "#/$defs/a"})",
          R"({"dependentRequired": {"a": ["b"]}, "dependencies": {"c": ["d"], "e": {}}})",
          R"({"if": {}, "then": {}, "else": false, "x-vendor": [1, {"type": 7}]})",
          R"({"description": 5, "title": ["t"], "examples": "e", "readOnly": "no"})",
          R"({"properties": {"type": {"type": "string"}, "required": {"type": "boolean"}}})",
      }) {
    EXPECT_EQ(Culprit(schema), "") << schema;
  }
}

TEST(SchemaShapeTest, NamesThePathOfWhatIsNoJsonSchema) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"(3)", "p"},
      {R"("object")", "p"},
      {R"({"type": "strnig"})", "p.type"},
      {R"({"type": 7})", "p.type"},
      {R"({"type": []})", "p.type"},
      {R"({"type": ["string", "string"]})", "p.type[1]"},
      {R"({"type": ["string", "text"]})", "p.type[1]"},
      {R"({"properties": {"a": {"type": "strnig"}}})", "p.properties.a.type"},
      {R"({"properties": ["a"]})", "p.properties"},
      {R"({"properties": {"a": 1}})", "p.properties.a"},
      {R"({"required": "a"})", "p.required"},
      {R"({"required": ["a", 1]})", "p.required[1]"},
      {R"({"required": ["a", "a"]})", "p.required[1]"},
      {R"({"required": true})", "p.required"},
      {R"({"items": {"items": {"minItems": -1}}})", "p.items.items.minItems"},
      {R"({"items": [{}, "x"]})", "p.items[1]"},
      {R"({"maxLength": 2.5})", "p.maxLength"},
      {R"({"maxLength": "3"})", "p.maxLength"},
      {R"({"minimum": "0"})", "p.minimum"},
      {R"({"exclusiveMinimum": "0"})", "p.exclusiveMinimum"},
      {R"({"multipleOf": 0})", "p.multipleOf"},
      {R"({"multipleOf": -2})", "p.multipleOf"},
      {R"({"anyOf": []})", "p.anyOf"},
      {R"({"anyOf": {}})", "p.anyOf"},
      {R"({"oneOf": [{}, 2]})", "p.oneOf[1]"},
      {R"({"enum": "a"})", "p.enum"},
      {R"({"$ref": 5})", "p.$ref"},
      {R"({"pattern": 5})", "p.pattern"},
      {R"({"uniqueItems": "yes"})", "p.uniqueItems"},
      {R"({"additionalProperties": "no"})", "p.additionalProperties"},
      {R"({"$defs": {"a": {"not": null}}})", "p.$defs.a.not"},
      {R"({"dependentRequired": {"a": "b"}})", "p.dependentRequired.a"},
      {R"({"dependencies": {"a": 1}})", "p.dependencies.a"},
  };
  for (const auto& [schema, path] : cases) EXPECT_EQ(Culprit(schema), path) << schema;
}

}  // namespace
}  // namespace mkserve::grammar
