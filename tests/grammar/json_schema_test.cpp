#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include "grammar/grammar_matcher.h"
#include "grammar_test_util.h"

namespace mkserve::grammar {
namespace {

struct Case {
  const char* schema;
  std::vector<const char*> accepted;
  std::vector<const char*> rejected;
};

void ExpectCase(const Case& c) {
  auto grammar = CompileSchema(Json::parse(c.schema));
  for (const char* text : c.accepted) {
    EXPECT_TRUE(Matches(grammar, text)) << c.schema << " should accept " << text;
  }
  for (const char* text : c.rejected) {
    EXPECT_FALSE(Matches(grammar, text)) << c.schema << " should reject " << text;
  }
}

TEST(JsonSchemaTest, ScalarTypes) {
  ExpectCase({R"({"type": "string"})",
              {R"("")", R"("abc")", R"("a\"b\\c\n\u00e9")",
               "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
              {R"(abc)", R"("abc)", R"("a"b")", R"("\x")", R"("\u12")", "\"\x01\"", "\"\xc3\"",
               "\"\xed\xa0\x80\"", R"( "a")"}});
  ExpectCase({R"({"type": "integer"})",
              {"0", "-0", "7", "-12", "12345678901234567890"},
              {"", "01", "1.5", "+1", "-", "1e5", "123456789012345678901"}});
  ExpectCase({R"({"type": "number"})",
              {"0", "-1.25", "3e10", "2.5E-3", "1e+2"},
              {"1.", ".5", "1e", "--1", "0x10", "1.2.3"}});
  ExpectCase({R"({"type": "boolean"})", {"true", "false"}, {"True", "tru", "1", "null"}});
  ExpectCase({R"({"type": "null"})", {"null"}, {"nul", "None", "\"null\""}});
  ExpectCase({R"({"type": ["string", "null"]})", {"null", R"("x")"}, {"1", "true"}});
}

TEST(JsonSchemaTest, Objects) {
  const char* schema = R"({"type": "object",
      "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
      "required": ["name", "age"], "additionalProperties": false})";
  ExpectCase({schema,
              {R"({"name":"Ann","age":3})", R"({ "name" : "Ann" , "age" : 3 })",
               "{\n  \"name\": \"Ann\",\n  \"age\": 3\n}"},
              {R"({"age":3,"name":"Ann"})", R"({"name":"Ann"})", R"({"name":"Ann","age":3,})",
               R"({"name":"Ann","age":"3"})", R"({"name":"Ann","age":3,"x":1})", R"({})"}});
  // Optional properties may be left out, in any combination, keeping the order.
  ExpectCase({R"({"type": "object", "properties": {"a": {"type": "integer"},
                 "b": {"type": "integer"}, "c": {"type": "integer"}}, "required": ["b"]})",
              {R"({"b":1})", R"({"a":1,"b":2})", R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"},
              {R"({})", R"({"a":1})", R"({"a":1,,"b":2})", R"({,"b":2})", R"({"b":2,})"}});
  ExpectCase({R"({"type": "object", "properties": {"a": {"type": "integer"}}})",
              {R"({})", R"({"a":1})"},
              {R"({"a":1,})"}});
  ExpectCase({R"({"type": "object"})", {R"({})", R"({"x":[1,{"y":null}]})"}, {"[]", R"({"x"})"}});
  ExpectCase({R"({"type": "object", "additionalProperties": {"type": "integer"}})",
              {R"({})", R"({"x":1,"y":2})"},
              {R"({"x":"1"})"}});
  ExpectCase({R"({"type": "object", "properties": {}, "additionalProperties": false})",
              {R"({})", R"({ })"},
              {R"({"a":1})"}});
}

TEST(JsonSchemaTest, ArraysEnumsConstAnyOf) {
  ExpectCase({R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
              {"[1]", "[1,2]", "[ 1 , 2 , 3 ]"},
              {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]"}});
  ExpectCase({R"({"type": "array"})", {"[]", R"([1,"a",null,[],{}])"}, {"[", "[1 2]"}});
  ExpectCase({R"({"enum": ["red", "green", 3, null]})",
              {R"("red")", R"("green")", "3", "null"},
              {R"("blue")", R"("re")", "4"}});
  ExpectCase({R"({"const": {"a": [1, "x"]}})", {R"({"a":[1,"x"]})"}, {R"({"a":[1]})"}});
  ExpectCase({R"({"anyOf": [{"type": "integer"}, {"type": "object", "properties":
                 {"k": {"type": "boolean"}}, "required": ["k"]}]})",
              {"12", R"({"k":true})"},
              {R"("12")", R"({"k":1})"}});
}

TEST(JsonSchemaTest, RefsAndRecursion) {
  ExpectCase({R"({"$defs": {"node": {"type": "object", "properties": {
                   "value": {"type": "integer"},
                   "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                   "required": ["value", "children"], "additionalProperties": false}},
                 "$ref": "#/$defs/node"})",
              {R"({"value":1,"children":[]})",
               R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]}]})"},
              {R"({"value":1,"children":[{"value":2}]})"}});
  ExpectCase({R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"},
                 {"type": "null"}]}}, "required": ["next"]})",
              {R"({"next":null})", R"({"next":{"next":{"next":null}}})"},
              {R"({"next":{}})"}});
}

TEST(JsonSchemaTest, Formats) {
  ExpectCase({R"({"type": "string", "format": "date"})",
              {R"("2024-02-29")", R"("1999-12-31")"},
              {R"("2024-13-01")", R"("2024-1-01")", R"("2024-01-32")", R"("x")"}});
  ExpectCase({R"({"type": "string", "format": "time"})",
              {R"("13:45:00Z")", R"("23:59:59.123Z")", R"("00:00:00+05:30")"},
              {R"("13:45:00")", R"("24:00:00Z")", R"("1:00:00Z")"}});
  ExpectCase({R"({"type": "string", "format": "date-time"})",
              {R"("2024-01-31T13:45:00Z")"},
              {R"("2024-01-31 13:45:00")"}});
  ExpectCase({R"({"type": "string", "format": "email"})",
              {R"("ann.lee+x@example.co.uk")"},
              {R"("ann@localhost")", R"("@example.com")", R"("a b@x.io")"}});
  ExpectCase({R"({"type": "string", "format": "uuid"})",
              {R"("123e4567-e89b-12d3-a456-426614174000")"},
              {R"("123e4567e89b12d3a456426614174000")"}});
}

void ExpectError(const char* schema, const std::string& where, const std::string& fragment) {
  JsonGrammarBuilder builder;
  try {
    int32_t root = builder.AddSchema(Json::parse(schema), "schema");
    std::move(builder).Finish(root);
    ADD_FAILURE() << schema << " compiled";
  } catch (const SchemaError& e) {
    EXPECT_EQ(e.where(), where) << schema;
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << schema << ": " << e.what();
  }
}

TEST(JsonSchemaTest, UnsupportedFeaturesAreNamed) {
  ExpectError(R"({"type": "object", "patternProperties": {"x": {}}})", "schema",
              "'patternProperties' is not supported");
  ExpectError(R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "a+"}}})",
              "schema.properties.s", "'pattern' is not supported");
  ExpectError(R"({"type": "string", "minLength": 2})", "schema", "'minLength' is not supported");
  ExpectError(R"({"type": "integer", "minimum": 0})", "schema", "'minimum' is not supported");
  ExpectError(R"({"oneOf": [{"type": "integer"}]})", "schema", "'oneOf' is not supported");
  ExpectError(R"({"type": "string", "format": "hostname"})", "schema.format",
              "format 'hostname' is not supported");
  ExpectError(R"({"type": "decimal"})", "schema.type", "unknown type 'decimal'");
  ExpectError(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})",
              "schema.required", "'b', which is not in 'properties'");
  ExpectError(R"({"$ref": "#/$defs/missing"})", "schema.$ref", "points to nothing");
  ExpectError(R"({"$ref": "https://example.com/s.json"})", "schema.$ref", "only references");
  ExpectError(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})", "schema.$ref",
              "refers to itself");
  ExpectError(R"({"type": "array", "items": [{"type": "integer"}]})", "schema.items",
              "tuple 'items'");
  ExpectError(R"({"type": "array", "maxItems": 100000})", "schema.maxItems", "above 256");
  ExpectError(R"({"$ref": "#", "type": "object"})", "schema", "'$ref' together with 'type'");
  ExpectError("false", "schema", "matches nothing");
  ExpectError("[1]", "schema", "must be an object or a boolean");
}

}  // namespace
}  // namespace mkserve::grammar
