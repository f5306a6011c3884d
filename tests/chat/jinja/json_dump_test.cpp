#include "chat/jinja/json_dump.h"

#include <gtest/gtest.h>

#include "chat/jinja/render_helper.h"

namespace mkserve::chat::jinja {
namespace {

Value Parse(const char* json) { return Value::FromJson(nlohmann::ordered_json::parse(json)); }

// Expected strings are what Python's json.dumps prints for the same arguments.
TEST(JsonDumpTest, DefaultSeparatorsKeepKeyOrder) {
  EXPECT_EQ(DumpJson(Parse(R"({"z": 1, "a": [1, 2.5, true, null], "e": {}, "l": []})"), {}),
            R"({"z": 1, "a": [1, 2.5, true, null], "e": {}, "l": []})");
}

TEST(JsonDumpTest, IndentUsesCommaWithoutSpace) {
  JsonDumpOptions options;
  options.indent = "  ";
  EXPECT_EQ(DumpJson(Parse(R"({"a": [1, {"b": 2}], "c": []})"), options),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ],\n  \"c\": []\n}");
}

TEST(JsonDumpTest, EscapesAndUnicode) {
  EXPECT_EQ(DumpJson(Value("q\"\\\n\t\x01 é🦀/"), {}), "\"q\\\"\\\\\\n\\t\\u0001 é🦀/\"");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(DumpJson(Value("é🦀"), ascii), "\"\\u00e9\\ud83e\\udd80\"");
}

TEST(JsonDumpTest, SortKeysAndSeparators) {
  JsonDumpOptions options;
  options.sort_keys = true;
  options.item_separator = ",";
  options.key_separator = ":";
  EXPECT_EQ(DumpJson(Parse(R"({"b": 1, "a": {"d": 1, "c": 2}})"), options),
            R"({"a":{"c":2,"d":1},"b":1})");
}

TEST(JsonDumpTest, FiltersPassTransformersArguments) {
  nlohmann::ordered_json context = {{"x", {{"b", 1}, {"a", 1.0}}}};
  EXPECT_EQ(RenderText("{{ x | tojson }}", context), R"({"b": 1, "a": 1.0})");
  EXPECT_EQ(RenderText("{{ x | tojson(indent=2) }}", context), "{\n  \"b\": 1,\n  \"a\": 1.0\n}");
  EXPECT_EQ(RenderText("{{ x | tojson(sort_keys=true, separators=(',', ':')) }}", context),
            R"({"a":1.0,"b":1})");
  EXPECT_EQ(RenderText("{{ 'é' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
}

TEST(JsonDumpTest, UndefinedIsNotSerializable) {
  EXPECT_EQ(RenderError("{{ missing | tojson }}"),
            "chat template line 1: Object of type Undefined is not JSON serializable");
}

}  // namespace
}  // namespace mkserve::chat::jinja
