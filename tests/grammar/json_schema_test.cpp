#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/utf8.h"
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
  // A \u escape of a surrogate only as a high and low pair: strict parsers refuse a lone one.
  ExpectCase({R"({"type": "string"})",
              {R"("\ud83d\ude00")", R"("\uD83D\uDE00x")", R"("\ud7ff\ue000")"},
              {R"("\udD79")", R"("\ud800")", R"("\ud800x")", R"("\ude00\ud83d")"}});
  ExpectCase({R"({})", {R"(["\ud83d\ude00"])"}, {R"({"\udc00": 1})", R"(["\udbff"])"}});
  ExpectCase({R"({"type": "integer"})",
              {"0", "-0", "7", "-12", "12345678901234567890"},
              {"", "01", "1.5", "+1", "-", "1e5", "123456789012345678901"}});
  // Two exponent digits: every number fits a double (17e634 is an error to nlohmann).
  ExpectCase({R"({"type": "number"})",
              {"0", "-1.25", "3e10", "2.5E-3", "1e+2", "99999999999999999999.5e99", "1e-99"},
              {"1.", ".5", "1e", "--1", "0x10", "1.2.3", "17e634", "1e100", "1e-100"}});
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

// A type beside enum or const keeps the values it allows (1.0 is an integer).
TEST(JsonSchemaTest, TypeBesideEnumKeepsItsValues) {
  ExpectCase({R"({"type": "string", "enum": [1, "a", null]})", {R"("a")"}, {"1", "null"}});
  ExpectCase({R"({"type": ["integer", "null"], "enum": [1.0, 2.5, null, "x"]})",
              {"1.0", "null"},
              {"2.5", R"("x")"}});
  ExpectCase({R"({"allOf": [{"type": "string"}, {"enum": ["a", 2]}]})", {R"("a")"}, {"2"}});
  // const and enum of several parts: the values in all of them.
  ExpectCase({R"({"allOf": [{"enum": ["a", "b", 1]}, {"enum": [1.0, "b", "c"]}]})",
              {R"("b")", "1"},
              {R"("a")", R"("c")"}});
  ExpectCase({R"({"allOf": [{"enum": ["a", "b"]}, {"const": "b"}]})", {R"("b")"}, {R"("a")"}});
  // Equal as JSON Schema compares: numbers by value, objects whatever their key order.
  ExpectCase(
      {R"({"allOf": [{"enum": [100, {"x": 1, "y": [2.0]}]}, {"enum": [1e2, {"y": [2], "x": 1}]}]})",
       {"100", R"({"x":1,"y":[2.0]})"},
       {"1e2", R"({"y":[2],"x":1})"}});
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

// Positional item schemas: prefixItems (2020-12) and the earlier drafts' tuple `items`, then the
// rest by `items` / `additionalItems` (false: none), counted by minItems and maxItems in all.
TEST(JsonSchemaTest, TuplesByPosition) {
  // pydantic's tuple[int, str]: exactly two items, each of its own schema.
  ExpectCase({R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                 "minItems": 2, "maxItems": 2})",
              {R"([1,"a"])", R"([ 1 , "a" ])"},
              {"[]", "[1]", R"(["a",1])", R"([1,"a",2])", R"([1,2])", R"([1,"a",])"}});
  // Without counts a tuple may stop early, and any values follow it.
  ExpectCase({R"({"prefixItems": [{"type": "integer"}, {"type": "string"}]})",
              {"[]", "[1]", R"([1,"a"])", R"([1,"a",null,{}])"},
              {R"(["a"])", R"([1,2])", "[1,]"}});
  // The rest by `items`, or none.
  ExpectCase({R"({"type": "array", "prefixItems": [{"type": "string"}],
                 "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3})",
              {R"(["a"])", R"(["a",true])", R"(["a",true,false])"},
              {"[]", "[true]", R"(["a",1])", R"(["a",true,false,true])"}});
  ExpectCase({R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"},
                 {"const": "end"}], "items": false, "minItems": 1})",
              {"[1]", "[1,2]", R"([1,2,"end"])"},
              {"[]", "[1,2,3]", R"([1,2,"end",4])"}});
  ExpectCase({R"({"type": "array", "items": false})", {"[]", "[ ]"}, {"[1]"}});
  // maxItems inside the prefix cuts it.
  ExpectCase({R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"},
                 {"type": "null"}], "maxItems": 2})",
              {"[]", "[1]", R"([1,"a"])"},
              {R"([1,"a",null])"}});
  // Draft 4-2019: `items` as an array, `additionalItems` for the rest.
  ExpectCase({R"({"type": "array", "items": [{"type": "integer"}, {"type": "string"}],
                 "additionalItems": false, "minItems": 2})",
              {R"([1,"a"])"},
              {"[1]", R"([1,"a",3])"}});
  ExpectCase({R"({"type": "array", "items": [{"type": "integer"}],
                 "additionalItems": {"type": "string"}})",
              {"[]", "[1]", R"([1,"a","b"])"},
              {R"([1,2])", R"(["a"])"}});
  // additionalItems beside a single `items` schema means nothing (as the drafts say).
  ExpectCase({R"({"type": "array", "items": {"type": "integer"}, "additionalItems": false})",
              {"[]", "[1,2,3]"},
              {R"(["a"])"}});
  // A recursive tuple: a pair of a value and its (optional) rest.
  ExpectCase({R"({"$defs": {"list": {"type": "array", "prefixItems": [{"type": "integer"},
                   {"anyOf": [{"$ref": "#/$defs/list"}, {"type": "null"}]}],
                   "minItems": 2, "maxItems": 2}}, "$ref": "#/$defs/list"})",
              {"[1,null]", "[1,[2,[3,null]]]"},
              {"[1]", "[1,[2]]"}});
}

// allOf, and $ref beside other keywords, as one schema: every part holds.
TEST(JsonSchemaTest, ConjunctionsMergeTheirParts) {
  // pydantic v1's wrapped reference, and a model extending another.
  ExpectCase({R"({"$defs": {"Pet": {"type": "object", "properties": {"name": {"type": "string"}},
                   "required": ["name"]}},
                 "type": "object", "properties": {"pet": {"allOf": [{"$ref": "#/$defs/Pet"}],
                   "description": "the pet"}}, "required": ["pet"]})",
              {R"({"pet":{"name":"Rex"}})"},
              {R"({"pet":{}})", R"({"pet":"Rex"})", R"({})"}});
  ExpectCase({R"({"$defs": {"Pet": {"type": "object", "properties": {"name": {"type": "string"}},
                   "required": ["name"]}},
                 "allOf": [{"$ref": "#/$defs/Pet"}, {"properties": {"age": {"type": "integer"}},
                   "required": ["age"]}]})",
              {R"({"name":"Rex","age":3})"},
              {R"({"name":"Rex"})", R"({"age":3})", R"({"name":"Rex","age":"3"})"}});
  // A name in two parts must meet both; the tighter bound wins; types intersect.
  ExpectCase({R"({"allOf": [{"type": "object", "properties": {"n": {"type": "number",
                   "minimum": 0}}, "required": ["n"]},
                 {"properties": {"n": {"type": "integer", "maximum": 10, "minimum": 2}}}]})",
              {R"({"n":2})", R"({"n":10})"},
              {R"({"n":1})", R"({"n":11})", R"({"n":2.5})"}});
  ExpectCase({R"({"allOf": [{"type": ["string", "null"]}, {"type": "string", "maxLength": 2}]})",
              {R"("ab")"},
              {"null", R"("abc")"}});
  // A part's additionalProperties holds for the properties the others list: false drops them,
  // a schema joins theirs.
  ExpectCase({R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
                   "additionalProperties": false},
                 {"properties": {"b": {"type": "integer"}}}]})",
              {R"({})", R"({"a":1})"},
              {R"({"b":1})", R"({"a":1,"b":2})"}});
  ExpectCase({R"({"allOf": [{"type": "object", "additionalProperties": {"type": "integer"}},
                 {"properties": {"b": {}}, "required": ["b"]}]})",
              {R"({"b":1})"},
              {R"({"b":"x"})"}});
  // $ref beside other keywords: the target and the keywords both hold.
  ExpectCase({R"({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s", "maxLength": 3})",
              {R"("abc")"},
              {R"("abcd")", "1"}});
  // Recursion through a merged part ends in a rule that refers to itself.
  ExpectCase(
      {R"({"$defs": {"node": {"type": "object", "properties": {
                   "child": {"allOf": [{"$ref": "#/$defs/node"}], "description": "next"},
                   "v": {"type": "integer"}}, "required": ["v"]}},
                 "$ref": "#/$defs/node"})",
       {R"({"v":1})", R"({"child":{"v":2},"v":1})", R"({"child":{"child":{"v":3},"v":2},"v":1})"},
       {R"({"child":{},"v":1})"}});
}

// An anyOf beside other keywords: each alternative with them.
TEST(JsonSchemaTest, KeywordsBesideAnyOfHoldInEveryAlternative) {
  // An alternative no type beside it allows is left out.
  ExpectCase({R"({"type": "string", "anyOf": [{"maxLength": 3}, {"type": "null"}]})",
              {R"("abc")"},
              {"null", R"("abcd")"}});
  ExpectCase(
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                 "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})",
       {R"({"a":1})", R"({"b":2})", R"({"a":1,"b":2})"},
       {R"({})", R"({"a":"x"})"}});
  ExpectCase({R"({"type": "string", "anyOf": [{"maxLength": 1}, {"format": "date"}]})",
              {R"("a")", R"("2024-01-31")"},
              {R"("ab")", "1"}});
}

// oneOf where the alternatives exclude each other: by type, or by a required property's values.
TEST(JsonSchemaTest, ExclusiveOneOf) {
  ExpectCase({R"({"oneOf": [{"type": "string"}, {"type": "null"}, {"type": "array",
                 "items": {"type": "integer"}}]})",
              {R"("a")", "null", "[1,2]"},
              {"1", R"(["a"])"}});
  // pydantic's discriminated union.
  ExpectCase(
      {R"({"$defs": {
                   "Cat": {"type": "object", "properties": {"pet_type": {"const": "cat",
                     "type": "string"}, "meows": {"type": "integer"}},
                     "required": ["pet_type", "meows"], "title": "Cat"},
                   "Dog": {"type": "object", "properties": {"pet_type": {"enum": ["dog", "wolf"]},
                     "barks": {"type": "number"}}, "required": ["pet_type", "barks"]}},
                 "type": "object", "properties": {"pet": {"oneOf": [{"$ref": "#/$defs/Cat"},
                   {"$ref": "#/$defs/Dog"}], "discriminator": {"propertyName": "pet_type",
                   "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"}}}},
                 "required": ["pet"]})",
       {R"({"pet":{"pet_type":"cat","meows":3}})", R"({"pet":{"pet_type":"wolf","barks":1.5}})"},
       {R"({"pet":{"pet_type":"cat","barks":1}})", R"({"pet":{"pet_type":"cow","meows":1}})"}});
  // Keywords beside a oneOf hold in each alternative.
  ExpectCase({R"({"maxLength": 2, "oneOf": [{"type": "string"}, {"type": "integer"}]})",
              {R"("ab")", "7"},
              {R"("abc")"}});
}

// An alternative that can never end is dropped: its first byte is refused, not a trap.
TEST(JsonSchemaTest, AlternativesThatCannotEndAreDropped) {
  auto grammar = CompileSchema(Json::parse(R"({"anyOf": [{"type": "object", "properties": {
      "a": {"$ref": "#/anyOf/0"}}, "required": ["a"]}, {"type": "null"}]})"));
  EXPECT_TRUE(Matches(grammar, "null"));
  GrammarMatcher matcher(grammar);
  EXPECT_FALSE(matcher.Accept('{'));
}

// uniqueItems over an enum (pydantic's set[Enum]): distinct values in the enum's order.
TEST(JsonSchemaTest, DistinctItemsOfAnEnum) {
  ExpectCase({R"({"$defs": {"Tag": {"enum": ["red", "green", "blue"], "type": "string"}},
                 "type": "array", "items": {"$ref": "#/$defs/Tag"}, "uniqueItems": true})",
              {"[]", R"(["red"])", R"(["green","blue"])", R"([ "red" , "green" , "blue" ])"},
              {R"(["red","red"])", R"(["blue","red"])", R"(["red","green","blue","red"])",
               R"(["pink"])"}});
  ExpectCase({R"({"type": "array", "items": {"enum": [1, 2, 3, 1.0]}, "uniqueItems": true,
                 "minItems": 2, "maxItems": 2})",
              {"[1,2]", "[1,3]", "[2,3]"},
              {"[1]", "[1,2,3]", "[2,1]", "[1,1]", "[1,1.0]"}});
  // At most one item is always distinct; uniqueItems false asks nothing.
  ExpectCase({R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true,
                 "maxItems": 1})",
              {"[]", R"(["a"])"},
              {R"(["a","b"])"}});
  ExpectCase(
      {R"({"type": "array", "items": {"type": "integer"}, "uniqueItems": false})", {"[1,1]"}, {}});
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

TEST(JsonSchemaTest, NonEmptyStrings) {
  ExpectCase({R"({"type": "string", "minLength": 1})",
              {R"("a")", R"("\n")", "\"\xc3\xa9\"", R"("ab c")"},
              {R"("")", "a"}});
  ExpectCase({R"({"type": ["string", "null"], "minLength": 1})", {R"("x")", "null"}, {R"("")"}});
  ExpectCase({R"({"minLength": 1})", {R"("x")"}, {R"("")", "1"}});  // strings only: each valid
  ExpectCase({R"({"type": "string", "minLength": 0})", {R"("")", R"("a")"}, {"a"}});
  ExpectCase(
      {R"({"type": "string", "minLength": 1, "format": "date"})", {R"("2024-01-31")"}, {R"("")"}});
}

// minLength and maxLength count code points, as JSON Schema does: an escape is one, a UTF-8
// character is one, a surrogate pair written as two \u escapes is one, and a lone surrogate
// escape (no code point) is not written.
TEST(JsonSchemaTest, StringLengthsCountCodePoints) {
  ExpectCase({R"({"type": "string", "minLength": 2, "maxLength": 3})",
              {R"("ab")", R"("abc")", R"("a\n")", R"("\"\\/")", "\"\xc3\xa9t\xc3\xa9\"",
               "\"\xe2\x82\xac\xf0\x9f\x98\x80\"", R"("\u00e9\ud83d\ude00")", R"("\uD83D\uDE00x")",
               R"("\ud7ffa")"},
              {R"("a")", R"("")", R"("abcd")", R"("a\n\tb")", "\"\xc3\xa9\"", R"("\ud83d\ude00")",
               R"("\ud83da")", R"("\ude00ab")", R"("a\ud83d")",
               "\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\xf0\x9f\x98\x80\""}});
  ExpectCase({R"({"type": "string", "maxLength": 0})", {R"("")"}, {R"("a")", R"("\n")"}});
  ExpectCase({R"({"type": "string", "minLength": 4})",
              {R"("abcd")", R"("abcdefghijklmnopqrstuvwxyz")"},
              {R"("abc")", R"("")"}});
  // JSON Schema's integers include a zero fraction and an exponent.
  ExpectCase({R"({"type": "string", "maxLength": 2.0})", {R"("ab")"}, {R"("abc")"}});
  ExpectCase({R"({"type": "array", "maxItems": 1e0})", {"[1]"}, {"[1,2]"}});
  // Without a type only strings are written; with a list, the string branch counts.
  ExpectCase({R"({"maxLength": 2})", {R"("ab")"}, {R"("abc")", "1", "null"}});
  ExpectCase({R"({"type": ["string", "null"], "minLength": 2, "maxLength": 2})",
              {R"("ab")", "null"},
              {R"("a")", R"("abc")"}});
  // A maximum far above what a test writes, and one of exactly 300 characters.
  const std::string three_hundred(300, 'x');
  auto grammar = CompileSchema(Json::parse(R"({"type": "string", "maxLength": 300})"));
  EXPECT_TRUE(Matches(grammar, "\"" + three_hundred + "\""));
  EXPECT_FALSE(Matches(grammar, "\"" + three_hundred + "y\""));
  auto wide = CompileSchema(Json::parse(R"({"type": "string", "maxLength": 1048574})"));
  EXPECT_TRUE(Matches(wide, "\"" + three_hundred + "\""));
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
  const std::string long_label = "\"x@" + std::string(63, 'a') + ".io\"";
  const std::string too_long_label = "\"x@" + std::string(64, 'a') + ".io\"";
  ExpectCase({R"({"type": "string", "format": "email"})",
              {R"("a@b.io")", R"("x@a-b.c0")", long_label.c_str()},
              {R"("x@-a.io")", R"("x@a-.io")", R"("x@a..io")", too_long_label.c_str()}});
}

// Host names: RFC 1123 labels of 1-63 bytes, dot-separated, at most 253 bytes in all, the last
// label not all digits. The grammar writes a subset (json_prelude.cpp): labels of a letter or
// digit and up to 31 more, each maybe after one hyphen, within a budget that keeps the name
// under 240 bytes, the last label starting with a letter.
TEST(JsonSchemaTest, Hostnames) {
  auto repeat = [](const std::string& part, int count) {
    std::string out;
    for (int i = 0; i < count; ++i) out += part;
    return out;
  };
  const std::string label63 = "a" + repeat("-b", 31), label15 = "c" + repeat("-d", 7);
  const std::string label16 = repeat("e", 16);
  auto quoted = [](const std::string& name) { return "\"" + name + "\""; };
  auto join = [&](const std::string& label, int count, const std::string& last) {
    return repeat(label + ".", count) + last;
  };
  const std::vector<std::string> accepted = {
      quoted("localhost"),
      quoted("example.com"),
      quoted("a-b.c0.io"),
      quoted("x"),
      quoted("API.Example.COM"),
      quoted("1.2.3.host"),
      quoted("0a.b-c.d"),
      quoted("ec2-52-1-2-3.compute-1.amazonaws.com"),
      quoted(join(label63, 2, label63)),        // 191 bytes: three labels of 63
      quoted(join(label15, 14, label15)),       // 239 bytes: fifteen labels of 15
      quoted(join(label16, 6, "a" + label15)),  // 118 bytes: 2 units a label
      quoted(join(label63, 3, "a"))};           // 193 bytes
  const std::vector<std::string> rejected = {
      quoted(""),
      quoted("-a.com"),
      quoted("a-.com"),
      quoted("a..com"),
      quoted(".com"),
      quoted("com."),
      quoted("a_b.com"),
      quoted("a b.com"),
      quoted("10.0.0.1"),
      quoted("example.123"),
      quoted("caf\xc3\xa9.fr"),
      quoted("a" + label63 + ".com"),      // a label of 64
      quoted(join(label15, 15, label15)),  // 255 bytes: past 253
      quoted(join(label63, 4, "a")),       // four labels of 63 and one more: 257 bytes
      quoted("xn--bcher-kva.example"),     // valid, not written: "--"
      quoted(repeat("f", 40) + ".com")};   // valid, not written: 39 rounds without a hyphen
  auto grammar = CompileSchema(Json::parse(R"({"type": "string", "format": "hostname"})"));
  for (const std::string& text : accepted) EXPECT_TRUE(Matches(grammar, text)) << text;
  for (const std::string& text : rejected) EXPECT_FALSE(Matches(grammar, text)) << text;
  // Whatever the grammar writes, RFC 1123's rules hold: random walks through it that close the
  // quote rarely, so most run into the length budget.
  std::mt19937 random(7);
  std::vector<uint32_t> mask(MaskWords(256));
  int forced_ends = 0;  // walks that ran into the budget: only the quote was left
  for (int walk = 0; walk < 200; ++walk) {
    GrammarMatcher matcher(grammar);
    std::string name;
    while (!matcher.can_end()) {
      matcher.FillMask({}, mask);
      std::vector<int32_t> allowed;
      for (int32_t b = 0; b < 256; ++b) {
        if (MaskAllows(mask, b) && (b != '"' || name.empty() || random() % 50 == 0)) {
          allowed.push_back(b);
        }
      }
      if (allowed.empty()) {
        allowed.push_back('"');
        ++forced_ends;
      }
      const int32_t b = allowed[random() % allowed.size()];
      ASSERT_TRUE(matcher.Accept(b)) << name;
      name.push_back(static_cast<char>(b));
    }
    ASSERT_GE(name.size(), 3u) << name;
    const std::string host = name.substr(1, name.size() - 2);
    EXPECT_LE(host.size(), 253u) << host;
    size_t start = 0;
    while (true) {
      const size_t dot = host.find('.', start);
      const std::string label = host.substr(start, dot == std::string::npos ? dot : dot - start);
      ASSERT_GE(label.size(), 1u) << host;
      EXPECT_LE(label.size(), 63u) << host;
      EXPECT_NE(label.front(), '-') << host;
      EXPECT_NE(label.back(), '-') << host;
      for (char ch : label) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-');
      if (dot == std::string::npos) {
        EXPECT_TRUE(std::isalpha(static_cast<unsigned char>(label.front()))) << host;
        break;
      }
      start = dot + 1;
    }
  }
  EXPECT_GT(forced_ends, 100);
}

TEST(JsonSchemaTest, AddressesAndDurations) {
  ExpectCase({R"({"type": "string", "format": "ipv4"})",
              {R"("0.0.0.0")", R"("255.255.255.255")", R"("192.168.1.10")", R"("10.0.99.249")"},
              {R"("256.1.1.1")", R"("1.2.3")", R"("1.2.3.4.5")", R"("01.2.3.4")", R"("1.2.3.260")",
               R"("a.b.c.d")", R"("1..2.3")"}});
  ExpectCase({R"({"type": "string", "format": "ipv6"})",
              {R"("::")", R"("::1")", R"("1::")", R"("fe80::1:2")", R"("2001:db8::8a2e:370:7334")",
               R"("2001:0db8:85a3:0000:0000:8a2e:0370:7334")", R"("1:2:3:4:5:6:7::")",
               R"("::ffff:192.0.2.128")", R"("1:2:3:4:5:6:1.2.3.4")", R"("a::b:c:d:e:f:0")"},
              {R"("")", R"(":")", R"(":::")", R"("1:2:3:4:5:6:7")", R"("1:2:3:4:5:6:7:8:9")",
               R"("1::2::3")", R"("12345::")", R"("g::")", R"("1:2:3:4:5:6:7:1.2.3.4")",
               R"("::1.2.3")", R"("1:2:3:4:5:6:7:8::")"}});
  ExpectCase({R"({"type": "string", "format": "duration"})",
              {R"("P1Y")", R"("P1Y2M3D")", R"("P3D")", R"("PT4H5M6S")", R"("PT5M")", R"("PT36S")",
               R"("P1DT12H")", R"("P2W")", R"("P1M2D")"},
              {R"("P")", R"("PT")", R"("1Y")", R"("P1H")", R"("P1Y2W")", R"("PT1D")", R"("P1D2Y")",
               R"("P1.5Y")", R"("p1y")", R"("P1DT")"}});
}

// Random bounds of every kind on `type`: lower in [lo_min, lo_max], upper up to `span` above it,
// either side sometimes left out (by the round).
struct RandomBounds {
  int lo = 0, hi = 0;
  bool has_lo = false, has_hi = false, lo_exclusive = false, hi_exclusive = false;

  RandomBounds(std::mt19937& random, int round, int lo_min, int lo_max, int below, int span) {
    lo = lo_min + static_cast<int>(random() % (lo_max - lo_min + 1));
    hi = lo - below + static_cast<int>(random() % span);
    has_lo = round % 5 != 4;
    has_hi = round % 5 != 3;
    lo_exclusive = random() % 2;
    hi_exclusive = random() % 2;
  }
  Json Schema(const char* type) const {
    Json schema = {{"type", type}};
    if (has_lo) schema[lo_exclusive ? "exclusiveMinimum" : "minimum"] = lo;
    if (has_hi) schema[hi_exclusive ? "exclusiveMaximum" : "maximum"] = hi;
    return schema;
  }
  bool Inside(double v) const {
    return (!has_lo || (lo_exclusive ? v > lo : v >= lo)) &&
           (!has_hi || (hi_exclusive ? v < hi : v <= hi));
  }
};

// Every integer in [-1100, 1100] against `schema`: the grammar accepts exactly those `wanted`
// says, each spelled one way, and none of `never`; a schema that wants none of them is refused.
void ExpectExactlyTheIntegers(const Json& schema, const std::function<bool(int)>& wanted,
                              std::initializer_list<const char*> never) {
  bool any = false;
  for (int v = -1100; v <= 1100; ++v) any = any || wanted(v);
  if (!any) {
    JsonGrammarBuilder builder;
    EXPECT_THROW(builder.AddSchema(schema, "schema"), SchemaError) << schema.dump();
    return;
  }
  auto grammar = CompileSchema(schema);
  for (int v = -1100; v <= 1100; ++v) {
    ASSERT_EQ(Matches(grammar, std::to_string(v)), wanted(v)) << schema.dump() << " at " << v;
  }
  for (const char* text : never) {
    EXPECT_FALSE(Matches(grammar, text)) << schema.dump() << " accepted " << text;
  }
}

// Random bounds: exactly the integers between them (no leading zeros, no "-0").
TEST(JsonSchemaTest, IntegerBoundsAcceptExactlyTheIntegersBetweenThem) {
  std::mt19937 random(7);
  for (int round = 0; round < 30; ++round) {
    const RandomBounds bounds(random, round, -1000, 1000, 100, 1200);
    ExpectExactlyTheIntegers(bounds.Schema("integer"), [&](int v) { return bounds.Inside(v); },
                             {"-0", "00", "007", "-07", "1.0", "1e2", "+5"});
  }
}

TEST(JsonSchemaTest, IntegerBoundsAtTheLimits) {
  ExpectCase({R"({"type": "integer", "minimum": 1})",
              {"1", "9", "10", "99999999999999999999"},
              {"0", "-1", "100000000000000000000"}});
  ExpectCase({R"({"type": "integer", "maximum": -1})",
              {"-1", "-10", "-99999999999999999999"},
              {"0", "1", "-0"}});
  ExpectCase({R"({"type": "integer", "minimum": 1.5, "exclusiveMaximum": 4.5})",
              {"2", "3", "4"},
              {"1", "5"}});
  ExpectCase({R"({"type": "integer", "minimum": 0, "exclusiveMinimum": 0, "maximum": 3,
                  "exclusiveMaximum": 9})",
              {"1", "3"},
              {"0", "4"}});
  ExpectCase({R"({"type": "integer", "minimum": 999999999999999999})",
              {"999999999999999999", "1000000000000000000", "99999999999999999999"},
              {"999999999999999998", "-1"}});
  ExpectCase({R"({"type": "integer", "minimum": -1e300, "maximum": 1e300})",
              {"0", "-99999999999999999999", "99999999999999999999"},
              {"01"}});
  ExpectCase({R"({"type": ["integer", "string"], "minimum": 5})", {"5", R"("3")"}, {"4"}});
}

// Numbers with integer bounds: the integer part decides, except at a bound, where the fraction
// (zero or not) does; no exponent.
TEST(JsonSchemaTest, NumberBoundsAcceptExactlyTheNumbersBetweenThem) {
  const std::vector<std::string> texts = {
      "0",    "0.0",   "0.5",  "-0.5", "1",    "1.0",   "1.00", "1.01", "-1",  "-1.0",  "-1.5",
      "2",    "2.5",   "2.0",  "-2",   "-2.0", "-2.01", "3",    "3.1",  "-3",  "9.999", "10",
      "10.5", "-10.5", "-9.5", "100",  "0.01", "-0.01", "-9",   "9",    "-10", "-10.0", "-11"};
  std::mt19937 random(11);
  for (int round = 0; round < 40; ++round) {
    const RandomBounds bounds(random, round, -6, 6, 0, 8);
    const Json schema = bounds.Schema("number");
    if (bounds.has_lo && bounds.has_hi && (bounds.lo_exclusive || bounds.hi_exclusive) &&
        bounds.lo == bounds.hi) {
      JsonGrammarBuilder builder;
      EXPECT_THROW(builder.AddSchema(schema, "schema"), SchemaError) << schema.dump();
      continue;
    }
    auto grammar = CompileSchema(schema);
    for (const std::string& text : texts) {
      EXPECT_EQ(Matches(grammar, text), bounds.Inside(std::stod(text)))
          << schema.dump() << " at " << text;
    }
    for (const char* text : {"1e1", "-0", "-0.0", "01", "1.", ".5"}) {
      EXPECT_FALSE(Matches(grammar, text)) << schema.dump() << " accepted " << text;
    }
  }
}

// multipleOf a power of ten, with random bounds: 10 and 100 on integers (every integer in
// [-1100, 1100] checked), 0.1 and 0.01 on numbers (fraction digits counted exactly), 1 making a
// number an integer.
TEST(JsonSchemaTest, MultipleOfPowersOfTenAcceptExactlyTheirMultiples) {
  std::mt19937 random(13);
  for (int round = 0; round < 40; ++round) {
    const RandomBounds bounds(random, round, -1000, 1000, 100, 1200);
    const int step = round % 2 == 0 ? 10 : 100;
    Json schema = bounds.Schema(round % 4 < 2 ? "integer" : "number");
    schema["multipleOf"] = step;
    ExpectExactlyTheIntegers(schema, [&](int v) { return bounds.Inside(v) && v % step == 0; },
                             {"-0", "00", "0100", "100.0", "1e2"});
  }
  ExpectCase({R"({"type": "integer", "multipleOf": 1000})",
              {"0", "1000", "-3000", "123000", "99999999999999999000"},
              {"100", "1500", "-0", "1000.0", "999999999999999999000"}});
  ExpectCase({R"({"type": "number", "multipleOf": 0.01})",
              {"0", "12", "-3.5", "0.07", "-0.01", "19.99", "1.50", "100.00"},
              {"0.001", "1.234", "1.005", "1e2", "-0", "0.000"}});
  ExpectCase({R"({"type": "number", "multipleOf": 0.1, "minimum": 0, "exclusiveMaximum": 2})",
              {"0", "0.1", "1.9", "1.0"},
              {"2", "2.0", "-0.1", "0.15", "1.99"}});
  ExpectCase(
      {R"({"type": "number", "multipleOf": 1, "maximum": 2.5})", {"2", "-7"}, {"2.5", "1.0", "3"}});
  ExpectCase({R"({"type": "integer", "multipleOf": 0.01})", {"3", "-4"}, {"3.5"}});
}

// A string schema of `pattern` accepts each of `accepted` (JSON texts) and rejects each of
// `rejected`.
void ExpectPattern(const std::string& pattern, std::vector<std::string> accepted,
                   std::vector<std::string> rejected) {
  auto grammar = CompileSchema(Json{{"type", "string"}, {"pattern", pattern}});
  for (const std::string& text : accepted) {
    EXPECT_TRUE(Matches(grammar, text)) << pattern << " should accept " << text;
  }
  for (const std::string& text : rejected) {
    EXPECT_FALSE(Matches(grammar, text)) << pattern << " should reject " << text;
  }
}

// `rejected` holds values the pattern does not match and, marked, matching ones the grammar does
// not write (string_pattern.h: a class writes its plain characters, or its short escapes when it
// holds none).
std::string Utf8Of(int32_t code) {
  std::string out;
  AppendUtf8(out, static_cast<char32_t>(code));
  return out;
}

// Classes of non-ASCII characters, written as their UTF-8: every code point around ranges that
// cross the encoding's lengths and the surrogates is accepted exactly when it is in the class.
TEST(JsonSchemaTest, PatternClassesOfNonAsciiCharacters) {
  // Escapes in the pattern (\u, \x), and the characters themselves (UTF-8 in the pattern).
  ExpectPattern(R"(^[\u00e0-\u00ff]+$)", {"\"\xc3\xa9\xc3\xbc\""}, {R"("e")", "\"\xc4\x80\""});
  ExpectPattern(R"(^[a-z\u00e0-\u00ff]+$)", {"\"caf\xc3\xa9\""}, {R"("Cafe")"});
  ExpectPattern(R"(^[\xe0-\xff]$)", {"\"\xc3\xa0\""}, {"\"\xc3\x9f\""});
  ExpectPattern("^[\u0430-\u044f\u0410-\u042f]+$",  // Cyrillic а-я А-Я, as UTF-8
                {"\"\xd0\x9f\xd1\x80\xd0\xb8\""}, {R"("Hello")"});
  ExpectPattern(
      "^[\xc3\xa9\xc3\xa8"
      "e]$",
      {"\"\xc3\xa9\"", "\"\xc3\xa8\"", R"("e")"}, {"\"\xc3\xaa\""});
  ExpectPattern(R"(^[^\u00e9]$)", {R"("a")"}, {/* not written: */ "\"\xc3\xa8\""});
  struct Range {
    int32_t lo, hi;
  };
  for (const Range range : {Range{0x80, 0x7ff}, Range{0x7f0, 0x810}, Range{0xfff0, 0x10010},
                            Range{0xd7f0, 0xe010}, Range{0x1f600, 0x1f64f}}) {
    char pattern[64];
    auto escape = [](int32_t code) {  // \uXXXX, or the character itself past the BMP
      char out[16];
      if (code < 0x10000) {
        std::snprintf(out, sizeof(out), "\\u%04x", code);
        return std::string(out);
      }
      return Utf8Of(code);
    };
    std::snprintf(pattern, sizeof(pattern), "^[%s-%s]$", escape(range.lo).c_str(),
                  escape(range.hi).c_str());
    auto grammar = CompileSchema(Json{{"type", "string"}, {"pattern", pattern}});
    for (int32_t code = range.lo - 40; code <= range.hi + 40; ++code) {
      if (code < 0x80 || (code >= 0xd800 && code <= 0xdfff)) continue;
      ASSERT_EQ(Matches(grammar, "\"" + Utf8Of(code) + "\""), code >= range.lo && code <= range.hi)
          << pattern << " at U+" << std::hex << code;
    }
  }
}

// minLength and maxLength beside an anchored pattern bound its one repetition (in characters:
// code points, a JSON escape one).
TEST(JsonSchemaTest, LengthsBesideAPatternBoundItsRepetition) {
  auto expect = [](const char* schema, std::vector<std::string> accepted,
                   std::vector<std::string> rejected) {
    auto grammar = CompileSchema(Json::parse(schema));
    for (const std::string& text : accepted) EXPECT_TRUE(Matches(grammar, text)) << schema << text;
    for (const std::string& text : rejected) EXPECT_FALSE(Matches(grammar, text)) << schema << text;
  };
  expect(R"({"type": "string", "pattern": "^[a-z0-9_]+$", "maxLength": 5})",
         {R"("abc")", R"("a_1b2")", R"("x")"}, {R"("abcdef")", R"("")"});
  expect(R"({"type": "string", "pattern": "^[A-Z][a-z]*$", "minLength": 3, "maxLength": 4})",
         {R"("Abc")", R"("Abcd")"}, {R"("Ab")", R"("Abcde")", R"("A")"});
  expect(R"({"type": "string", "pattern": "^(ab)+$", "maxLength": 5})", {R"("ab")", R"("abab")"},
         {R"("ababab")", R"("")"});
  expect(R"({"type": "string", "pattern": "^[a-z]{2,10}$", "minLength": 4})",
         {R"("abcd")", R"("abcdefghij")"}, {R"("abc")", R"("abcdefghijk")"});
  expect(R"({"type": "string", "pattern": "^a*$", "minLength": 1})", {R"("a")"}, {R"("")"});
  expect(R"({"type": "string", "pattern": "^x\\d*$", "maxLength": 3})", {R"("x12")"},
         {R"("x123")"});
  expect(R"({"type": "string", "pattern": "^\\u00e9+$", "maxLength": 2})", {"\"\xc3\xa9\xc3\xa9\""},
         {"\"\xc3\xa9\xc3\xa9\xc3\xa9\""});
  expect(R"({"type": "string", "pattern": "^(a|\\n){0,9}$", "maxLength": 2})", {R"("a\n")"},
         {R"("a\na")"});  // an escape is one character
}

TEST(JsonSchemaTest, PatternsMatchTheirStrings) {
  ExpectPattern("^[a-z]+$", {R"("abc")", R"("z")"}, {R"("")", R"("aBc")", R"("abc1")", "abc"});
  ExpectPattern(R"(^\d{3}-\d{4}$)", {R"("555-1234")"}, {R"("55-1234")", R"("5555-12345")"});
  ExpectPattern("ab", {R"("ab")", R"("xxabyy")", R"("a\"ab\n")"}, {R"("a b")", R"("")"});
  ExpectPattern("^(foo|bar)+$", {R"("foobar")", R"("bar")"}, {R"("")", R"("fo")", R"("foox")"});
  ExpectPattern("^a.c$", {R"("abc")", R"("a c")", R"("a~c")"},
                {R"("a\nc")", R"("ac")", R"("abbc")",
                 /* not written: */ R"("a\"c")",
                 "\"a\xc3\xa9"
                 "c\""});
  ExpectPattern(R"(^[^"\\]*$)", {R"("abc")", R"("")"},
                {R"("a\"b")", R"("a\\b")", /* not written: */ "\"\xc3\xa9\""});
  ExpectPattern(R"(^\s+$)", {R"("  ")"}, {R"("a")", R"("")", /* not written: */ R"(" \t")"});
  ExpectPattern(R"(^\w+@\w+\.com$)", {R"("ann_1@example.com")"},
                {R"("ann@example.org")", R"("a@b@c.com")"});
  ExpectPattern(R"(^[\]\-]+$)", {R"("]-]")"}, {R"("a")"});
  ExpectPattern(R"(^\u00e9+$)", {"\"\xc3\xa9\xc3\xa9\""}, {R"("e")"});
  ExpectPattern("^colou?r$", {R"("color")", R"("colour")"}, {R"("colouur")"});
  ExpectPattern("^x{2,3}$", {R"("xx")", R"("xxx")"}, {R"("x")", R"("xxxx")"});
  ExpectPattern("^.{3}$", {R"("a-c")"}, {R"("ab")", R"("abcd")"});
  ExpectPattern("^(?:ab)*$", {R"("")", R"("abab")"}, {R"("aba")"});
  ExpectPattern("^[^a]$", {R"("b")"}, {R"("a")", R"("")"});
  ExpectPattern(R"(^\S+$)", {R"("abc")"}, {R"("a b")"});
  ExpectPattern(R"(^"$)", {R"("\"")"}, {R"(""")", R"("'")"});
  ExpectPattern(R"(^\\$)", {R"("\\")"}, {R"("\")"});
  ExpectPattern(R"(^\x41\t$)", {R"("A\t")"}, {R"("A")", "\"A\t\""});
  ExpectPattern(R"(^[\x00-\x02\n]$)", {R"("\n")"}, {R"("a")", /* not written: */ R"("\u0001")"});
  ExpectPattern("^(a|b.c)x$", {R"("ax")", R"("b-cx")"}, {R"("bcx")"});
  ExpectPattern("^(a?)*b$", {R"("b")", R"("aab")"}, {R"("a")"});
  ExpectPattern("^[a-z]{1,3}.?$", {R"("a")", R"("abc!")", R"("ab")"}, {R"("")", R"("abcd!")"});
  ExpectPattern(R"(^(\x01|a)+$)", {R"("aa")"}, {R"("")", /* not written: */ R"("\u0001")"});
  ExpectPattern("", {R"("")", R"("anything")"}, {"1"});
  ExpectPattern("^$", {R"("")"}, {R"("a")"});
  ExpectPattern(R"(^(a|[^\x00-\x7f]b)$)", {R"("a")"}, {R"("b")", R"("ab")"});  // a dead branch
}

TEST(JsonSchemaTest, PatternsOutsideTheSubsetAreNamed) {
  const std::pair<std::string, std::string> kRefused[] = {
      {"(a", "unmatched '('"},
      {"a)", "unmatched ')'"},
      {"(?=a)", "lookaround"},
      {R"((a)\1)", "backreferences"},
      {R"(\bword)", "word boundaries"},
      {"a**", "cannot follow a quantifier"},
      {"*a", "nothing to repeat"},
      {"a{3,2}", "n <= m"},
      {"a{1000}", "above 256"},
      {"a{x}", "must start a count"},
      {"^a|b$", "inside a group"},
      {"a^b", "anchors are supported only"},
      {"[]", "empty class"},
      {"[z-a]", "run upwards"},
      {R"(\p{L})", "property escapes"},
      {R"(\q)", "the escape \\q"},
      {std::string(40, '(') + "a" + std::string(40, ')'), "nest deeper"},
      {std::string(2000, 'a'), "longer than 1024"},
      {"^.{33}$", "in more than 32 places"},
      {"^(a{256}){256}$", "automaton states"},
      {"^(a?b?c?d?){200}$", "more than 16384 alternatives"},
      {R"(^[\x01-\x02]$)", "matches no string"},
  };
  for (const auto& [pattern, fragment] : kRefused) {
    JsonGrammarBuilder builder;
    try {
      builder.AddSchema(Json{{"type", "string"}, {"pattern", pattern}}, "schema");
      ADD_FAILURE() << pattern << " compiled";
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.where(), "schema.pattern") << pattern;
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << pattern << ": " << e.what();
    }
  }
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

// The JSON spellings an unbounded multipleOf should write: an optional minus, an integer part
// without leading zeros, at most `fraction_digits` fraction digits; true when the value (its
// digits as N / 10^fraction_digits) is a multiple, N a multiple of `modulus`.
bool SpellsAMultiple(const std::string& text, int64_t modulus, int fraction_digits) {
  size_t i = text[0] == '-' ? 1 : 0;
  const size_t dot = text.find('.');
  const std::string whole = text.substr(i, dot == std::string::npos ? dot : dot - i);
  const std::string fraction = dot == std::string::npos ? "" : text.substr(dot + 1);
  if (whole.empty() || (whole.size() > 1 && whole[0] == '0')) return false;
  if (dot != std::string::npos &&
      (fraction.empty() || static_cast<int>(fraction.size()) > fraction_digits)) {
    return false;
  }
  const std::string digits = whole + fraction + std::string(fraction_digits - fraction.size(), '0');
  return std::stoll(digits) % modulus == 0;
}

// multipleOf without bounds, any step (multiple_of.h): exactly the multiples, checked over every
// integer in [-1100, 1100] and every number with up to one fraction digit more than the step's
// between -12 and 12; a whole-number step writes integers for a number too.
TEST(JsonSchemaTest, MultipleOfWithoutBoundsAcceptsExactlyTheMultiples) {
  struct Step {
    const char* value;
    int64_t modulus;
    int fraction_digits;
  };
  const Step steps[] = {{"5", 5, 0},    {"60", 60, 0},  {"7", 7, 0},     {"0.25", 25, 2},
                        {"0.3", 3, 1},  {"2.5", 25, 1}, {"0.75", 75, 2}, {"1.5", 15, 1},
                        {"0.07", 7, 2}, {"6e-3", 6, 3}, {"0.5", 5, 1},   {"99", 99, 0}};
  for (const Step& step : steps) {
    for (const char* type : {"integer", "number"}) {
      const Json schema = Json::parse(std::string(R"({"type": ")") + type + R"(", "multipleOf": )" +
                                      step.value + "}");
      auto grammar = CompileSchema(schema);
      const bool integral = std::string(type) == "integer" || step.fraction_digits == 0;
      const int fraction_digits = integral ? 0 : step.fraction_digits;
      for (int v = -1100; v <= 1100; ++v) {
        const std::string text = std::to_string(v);
        const bool wanted =
            std::stoll(text + std::string(step.fraction_digits, '0')) % step.modulus == 0;
        ASSERT_EQ(Matches(grammar, text), wanted) << schema.dump() << " at " << text;
      }
      if (integral) {
        for (const char* never : {"-0.0", "5.0", "00", "05", "1e1"}) {
          EXPECT_FALSE(Matches(grammar, never)) << schema.dump() << " accepted " << never;
        }
        continue;
      }
      int checked = 0;
      for (int whole = -12; whole <= 12; ++whole) {
        for (int places = 1; places <= step.fraction_digits + 1; ++places) {
          int64_t count = 1;
          for (int p = 0; p < places; ++p) count *= 10;
          for (int64_t f = 0; f < count; ++f) {
            std::string fraction = std::to_string(f);
            fraction = std::string(places - fraction.size(), '0') + fraction;
            const std::string text =
                (whole < 0 ? "-" : "") + std::to_string(std::abs(whole)) + "." + fraction;
            ASSERT_EQ(Matches(grammar, text), SpellsAMultiple(text, step.modulus, fraction_digits))
                << schema.dump() << " at " << text;
            ++checked;
          }
        }
      }
      EXPECT_GT(checked, 0);
      for (const char* never : {"-", ".25", "0.", "1e-1", "00.5", "+1"}) {
        EXPECT_FALSE(Matches(grammar, never)) << schema.dump() << " accepted " << never;
      }
    }
  }
  // 21 digits are past the prelude's integer limit, as for every number.
  auto fives = CompileSchema(Json::parse(R"({"type": "integer", "multipleOf": 5})"));
  EXPECT_TRUE(Matches(fives, std::string(19, '9') + "5"));
  EXPECT_FALSE(Matches(fives, std::string(20, '9') + "5"));
}

// multipleOf a fraction other than a power of ten between two bounds: each multiple spelled once,
// with the fraction digits it needs (1.5, 2; not 1.50, 2.0), every spelling on a grid checked;
// an integer takes the integers among the multiples.
TEST(JsonSchemaTest, MultipleOfFractionsBetweenBoundsAcceptExactlyTheirMultiples) {
  struct Step {
    const char* value;
    int64_t digits;
    int fraction_digits;
  };
  std::mt19937 random(19);
  const Step steps[] = {{"0.25", 25, 2}, {"0.3", 3, 1}, {"2.5", 25, 1}, {"0.07", 7, 2}};
  for (int round = 0; round < 16; ++round) {
    const Step& step = steps[round % 4];
    RandomBounds bounds(random, round, -20, 20, 5, 30);
    bounds.has_lo = bounds.has_hi = true;
    const bool integer = round % 8 >= 4;
    Json schema = bounds.Schema(integer ? "integer" : "number");
    schema["multipleOf"] = Json::parse(step.value);
    int64_t scale = 1;
    for (int i = 0; i < step.fraction_digits; ++i) scale *= 10;
    auto wanted = [&](int64_t n) {  // n / scale, when written as the grammar should
      return (integer ? n % scale == 0 : true) && n % step.digits == 0 &&
             bounds.Inside(static_cast<double>(n) / static_cast<double>(scale));
    };
    bool any = false;
    for (int64_t n = -40 * scale; n <= 40 * scale; ++n) any = any || wanted(n);
    if (!any) {
      JsonGrammarBuilder builder;
      EXPECT_THROW(builder.AddSchema(schema, "schema"), SchemaError) << schema.dump();
      continue;
    }
    auto grammar = CompileSchema(schema);
    for (int64_t n = -40 * scale; n <= 40 * scale; ++n) {
      const int64_t magnitude = n < 0 ? -n : n;
      std::string fraction = std::to_string(magnitude % scale);
      fraction.insert(0, step.fraction_digits - fraction.size(), '0');
      const std::string whole = (n < 0 ? "-" : "") + std::to_string(magnitude / scale);
      std::string trimmed = fraction;
      while (!trimmed.empty() && trimmed.back() == '0') trimmed.pop_back();
      const std::string canonical = trimmed.empty() ? whole : whole + "." + trimmed;
      ASSERT_EQ(Matches(grammar, canonical), wanted(n)) << schema.dump() << " at " << canonical;
      if (trimmed.size() < fraction.size()) {  // padded spellings are never written
        EXPECT_FALSE(Matches(grammar, whole + "." + fraction)) << schema.dump();
      }
    }
    EXPECT_FALSE(Matches(grammar, "-0")) << schema.dump();
  }
}

// multipleOf a whole number other than a power of ten (3, 7, 25, 250), with random bounds on both
// sides: the multiples between them spelled out, every integer in [-1100, 1100] checked; a number
// takes them as integers. Without both bounds, or with more than 4096 multiples, a 400.
TEST(JsonSchemaTest, MultipleOfWholeNumbersBetweenBoundsAcceptExactlyTheirMultiples) {
  std::mt19937 random(17);
  const int steps[] = {3, 7, 25, 250};
  for (int round = 0; round < 40; ++round) {
    RandomBounds bounds(random, round, -1000, 1000, 100, 1200);
    bounds.has_lo = bounds.has_hi = true;
    const int step = steps[round % 4];
    Json schema = bounds.Schema(round % 8 < 4 ? "integer" : "number");
    schema["multipleOf"] = round % 3 == 0 ? Json(static_cast<double>(step)) : Json(step);
    ExpectExactlyTheIntegers(schema, [&](int v) { return bounds.Inside(v) && v % step == 0; },
                             {"-0", "00", "03", "3.0", "3e0"});
  }
  ExpectCase({R"({"type": "integer", "multipleOf": 1000007, "minimum": 0, "maximum": 5000000})",
              {"0", "1000007", "4000028"},
              {"1000006", "5000035", "2000013"}});
  ExpectError(R"({"type": "integer", "multipleOf": 3, "minimum": 0})", "schema.multipleOf",
              "needs a lower and an upper bound");
  ExpectError(R"({"type": "integer", "multipleOf": 3, "minimum": 0, "maximum": 12291})",
              "schema.multipleOf", "more than 4096 multiples");
  auto widest = CompileSchema(Json::parse(
      R"({"type": "integer", "multipleOf": 3, "minimum": 0, "maximum": 12287})"));  // 4096 of them
  EXPECT_TRUE(Matches(widest, "12285"));
  EXPECT_FALSE(Matches(widest, "12288"));
  ExpectError(R"({"type": "integer", "multipleOf": 7, "minimum": 1, "maximum": 6})", "schema",
              "no multiple");
}

TEST(JsonSchemaTest, UnsupportedFeaturesAreNamed) {
  ExpectError(R"({"type": "object", "patternProperties": {"x": {}}})", "schema",
              "'patternProperties' is not supported");
  ExpectError(R"({"type": "object", "properties": {"s": {"type": "string", "pattern": 5}}})",
              "schema.properties.s.pattern", "must be a string");
  ExpectError(R"({"type": "string", "pattern": "a", "format": "date"})", "schema",
              "'pattern' together with 'format'");
  ExpectError(R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "^.{20}$"},
                  "b": {"type": "string", "pattern": "^\\w{20}$"}}})",
              "schema.properties.a.pattern", "in more than 32 places");  // compiled last
  ExpectError(R"({"type": "string", "minLength": 3, "maxLength": 2})", "schema.maxLength",
              "less than minLength");
  ExpectError(R"({"type": "string", "maxLength": 1048575})", "schema.maxLength",
              "values above 1048574");
  ExpectError(R"({"type": "string", "minLength": 1e30})", "schema.minLength",
              "values above 1048574");
  ExpectError(R"({"type": "string", "maxLength": "8"})", "schema.maxLength",
              "non-negative integer");
  Json many = Json::parse(R"({"type": "object", "properties": {}})");
  for (int i = 0; i <= kMaxCountedLoops; ++i) {
    many["properties"]["p" + std::to_string(i)] = Json::parse(R"({"type": "string"})");
    many["properties"]["p" + std::to_string(i)]["maxLength"] = i;
  }
  try {  // the property whose length is one too many, wherever the compiler meets it
    JsonGrammarBuilder builder;
    builder.AddSchema(many, "schema");
    ADD_FAILURE() << kMaxCountedLoops + 1 << " distinct lengths compiled";
  } catch (const SchemaError& e) {
    EXPECT_TRUE(e.where().starts_with("schema.properties.p")) << e.where();
    EXPECT_NE(std::string(e.what()).find("more than 2047 counted loops"), std::string::npos);
  }
  ExpectError(R"({"type": "string", "maxLength": -1})", "schema.maxLength", "non-negative integer");
  ExpectError(R"({"type": "string", "maxLength": 2.5})", "schema.maxLength",
              "non-negative integer");
  ExpectError(R"({"type": "string", "maxLength": 8, "pattern": "a*"})", "schema.pattern",
              "needs it anchored at both ends");
  ExpectError(R"({"type": "string", "maxLength": 8, "pattern": "^a+b+$"})", "schema.pattern",
              "a fixed length but for one repetition");
  ExpectError(R"({"type": "string", "maxLength": 2, "pattern": "^abc$"})", "schema.pattern",
              "no string the pattern matches has a length within");
  ExpectError(R"({"type": "string", "maxLength": 300, "pattern": "^a+$"})", "schema.pattern",
              "more than 256 counts");
  ExpectError(R"({"type": "string", "minLength": 2, "format": "date"})", "schema",
              "'minLength' together with 'format'");
  ExpectError(R"({"type": "string", "minLength": 1, "pattern": "a*"})", "schema.pattern",
              "needs it anchored at both ends");
  ExpectError(R"({"type": "integer", "multipleOf": 2, "maximum": 9})", "schema.multipleOf",
              "needs a lower and an upper bound");
  ExpectError(R"({"type": "number", "multipleOf": 0.25, "minimum": 0})", "schema.multipleOf",
              "needs a lower and an upper bound");
  ExpectError(R"({"type": "number", "multipleOf": 0.003, "minimum": 0, "maximum": 1000})",
              "schema.multipleOf", "more than 4096 multiples");
  ExpectError(R"({"type": "number", "multipleOf": 0.3, "minimum": 1, "maximum": 1})", "schema",
              "no multiple");
  ExpectError(R"({"type": "number", "multipleOf": 0.125})", "schema.multipleOf", "0.125 has 125");
  ExpectError(R"({"type": "integer", "multipleOf": 1000007})", "schema.multipleOf",
              "takes a lower and an upper bound instead");
  ExpectError(R"({"type": "number", "multipleOf": 0})", "schema.multipleOf", "greater than 0");
  ExpectError(R"({"type": "number", "multipleOf": "1"})", "schema.multipleOf", "greater than 0");
  ExpectError(R"({"type": "integer", "multipleOf": 1e18})", "schema.multipleOf", "above 1e17");
  ExpectError(R"({"multipleOf": 10})", "schema", "'multipleOf' need 'type'");
  ExpectError(R"({"type": "integer", "multipleOf": 100, "minimum": 1, "maximum": 99})", "schema",
              "no integer multiple");
  ExpectError(R"({"oneOf": [{"type": "integer"}, {"type": "number"}]})", "schema.oneOf",
              "alternatives 0 and 1 may both accept one value");
  ExpectError(R"({"oneOf": [{"type": "string"}, {"properties": {"a": {}}}]})", "schema.oneOf",
              "alternatives 0 and 1");
  // The same discriminating value in both, or a discriminator one side does not require.
  ExpectError(R"({"oneOf": [
                  {"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
                  {"type": "object", "properties": {"k": {"enum": ["b", "a"]}}, "required": ["k"]}]})",
              "schema.oneOf", "alternatives 0 and 1");
  ExpectError(R"({"oneOf": [
                  {"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                  {"type": "object", "properties": {"k": {"const": 1.0}}, "required": ["k"]}]})",
              "schema.oneOf", "alternatives 0 and 1");
  ExpectError(R"({"oneOf": [
                  {"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
                  {"type": "object", "properties": {"k": {"const": "b"}}}]})",
              "schema.oneOf", "alternatives 0 and 1");
  ExpectError(R"({"oneOf": [{"type": "string"}], "anyOf": [{"type": "string"}]})", "schema",
              "'oneOf' together with 'anyOf'");
  // Objects told apart by values equal as JSON Schema compares them are not told apart.
  ExpectError(R"({"oneOf": [
                  {"type": "object", "properties": {"k": {"const": {"a": 1, "b": 2}}}, "required": ["k"]},
                  {"type": "object", "properties": {"k": {"const": {"b": 2.0, "a": 1}}}, "required": ["k"]}]})",
              "schema.oneOf", "alternatives 0 and 1");
  {
    Json many = Json::parse(R"({"oneOf": []})");
    for (int i = 0; i < 2; ++i) {
      Json values = Json::array();
      for (int v = 0; v < 40000; ++v) values.push_back(std::to_string(i) + "_" + std::to_string(v));
      many["oneOf"].push_back(
          {{"type", "object"}, {"properties", {{"k", {{"enum", values}}}}}, {"required", {"k"}}});
    }
    JsonGrammarBuilder builder;
    try {
      builder.AddSchema(many, "schema");
      ADD_FAILURE() << "80,000 discriminating values compiled";
    } catch (const SchemaError& e) {
      EXPECT_EQ(e.where(), "schema.oneOf");
      EXPECT_NE(std::string(e.what()).find("more than 65536 const and enum values"),
                std::string::npos)
          << e.what();
    }
  }
  ExpectError(R"({"type": "string", "format": "uri"})", "schema.format",
              "format 'uri' is not supported");
  ExpectError(R"({"type": "string", "format": "idn-hostname"})", "schema.format",
              "format 'idn-hostname' is not supported");
  ExpectError(R"({"type": "decimal"})", "schema.type", "unknown type 'decimal'");
  ExpectError(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})",
              "schema.required", "'b', which is not in 'properties'");
  ExpectError(R"({"$ref": "#/$defs/missing"})", "schema.$ref", "points to nothing");
  ExpectError(R"({"$ref": "https://example.com/s.json"})", "schema.$ref", "only references");
  ExpectError(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})", "schema.$ref",
              "refers to itself");
  // Every value holds another: no finite value (a required self, a non-empty array of itself).
  ExpectError(R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})",
              "schema", "no finite value");
  ExpectError(R"({"type": "array", "items": {"$ref": "#"}, "minItems": 1})", "schema",
              "no finite value");
  ExpectError(R"({"anyOf": [{"type": "array", "items": {"$ref": "#"}, "minItems": 2}]})",
              "schema.anyOf", "no finite value");
  ExpectError(R"({"type": "array", "items": {"$ref": "#"}, "minItems": 1, "maxItems": 3})",
              "schema", "no finite value");
  ExpectError(R"({"type": "array", "prefixItems": [{}], "items": [{}]})", "schema",
              "mixes two drafts");
  ExpectError(R"({"type": "array", "prefixItems": [{}, {}], "items": false, "minItems": 3})",
              "schema.minItems", "more items than the 2 positional schemas");
  ExpectError(R"({"type": "array", "items": [{"type": "integer"}], "minItems": 2,
                  "additionalItems": false})",
              "schema.minItems", "'additionalItems' is false");
  ExpectError(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "bogus"}]})",
              "schema.prefixItems[1].type", "unknown type 'bogus'");
  ExpectError(R"({"type": "array", "prefixItems": [{"$ref": "#"}], "minItems": 1})", "schema",
              "no finite value");
  ExpectError(R"({"type": "array", "maxItems": 100000})", "schema.maxItems", "above 256");
  ExpectError(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", "schema.allOf[1].type",
              "leaves no type");
  ExpectError(R"({"allOf": [{"format": "date"}, {"format": "email"}]})", "schema.allOf[1].format",
              "differs from another part's 'format'");
  ExpectError(
      R"({"allOf": [{"type": "object", "properties": {"a": {}}, "additionalProperties": false},
                  {"properties": {"b": {}}, "required": ["b"]}]})",
      "schema.allOf[0].additionalProperties", "requires 'b'");
  ExpectError(R"({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}, {"type": "object"}]}},
                  "$ref": "#/$defs/a"})",
              "schema.$defs.a.allOf[0]", "nest more than 64 deep");
  ExpectError(R"({"allOf": [false]})", "schema.allOf[0]", "matches nothing");
  ExpectError(R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})",
              "schema.uniqueItems", "items of one enum or const schema");
  ExpectError(R"({"type": "array", "items": {"enum": ["a"], "maxLength": 1}, "uniqueItems": true})",
              "schema.uniqueItems", "not 'maxLength' beside them");
  ExpectError(R"({"type": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true,
                  "minItems": 3})",
              "schema.uniqueItems", "asks for 3 distinct items of 2 values");
  ExpectError(R"({"type": "array", "prefixItems": [{}], "items": {"enum": [1]},
                  "uniqueItems": true})",
              "schema.uniqueItems", "not beside positional schemas");
  ExpectError(R"({"allOf": [{"const": "a"}, {"enum": ["b"]}]})", "schema.allOf[1].enum",
              "leaves no value that every part allows");
  {  // 300 parts whose additionalProperties reach each other's 300 names: 90,000 merged parts
    Json parts = Json::array();
    for (int i = 0; i < 300; ++i) {
      parts.push_back({{"properties", {{"p" + std::to_string(i), Json::object()}}},
                       {"additionalProperties", {{"type", "string"}}}});
    }
    JsonGrammarBuilder builder;
    try {
      builder.AddSchema(Json{{"allOf", parts}}, "schema");
      ADD_FAILURE() << "90,000 merged parts compiled";
    } catch (const SchemaError& e) {
      EXPECT_NE(std::string(e.what()).find("merges more than 65536 parts"), std::string::npos)
          << e.what();
    }
  }
  ExpectError(R"({"type": "string", "enum": [1, 2]})", "schema.enum", "no value here has a type");
  ExpectError(R"({"type": "boolean", "const": "true"})", "schema.const",
              "no value here has a type");
  ExpectError(R"({"type": "string", "anyOf": [{"type": "null"}, {"type": "integer"}]})",
              "schema.anyOf", "no alternative of 'anyOf' allows a JSON type");
  ExpectError("false", "schema", "matches nothing");
  ExpectError(R"({"type": "integer", "minimum": 5, "maximum": 4})", "schema",
              "no integer lies between its bounds");
  ExpectError(R"({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1})", "schema",
              "no number lies between its bounds");
  ExpectError(R"({"type": "number", "maximum": 0.5})", "schema.maximum",
              "a fractional bound on a number");
  ExpectError(R"({"type": "integer", "minimum": true})", "schema.minimum", "must be a number");
  ExpectError(R"({"type": "integer", "minimum": 1e19})", "schema.minimum",
              "a bound beyond +-999999999999999999");
  ExpectError(R"({"minimum": 0})", "schema", "numeric bounds and 'multipleOf' need 'type'");
  ExpectError("[1]", "schema", "must be an object or a boolean");
}

}  // namespace
}  // namespace mkserve::grammar
