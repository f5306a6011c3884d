#include "chat/json_stream_validator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace mkserve::chat {
namespace {

bool Validate(const std::string& text) {
  JsonStreamValidator validator;
  for (char c : text) {
    if (validator.Push(c) == JsonStreamValidator::Event::kError) return false;
  }
  return validator.Finish();
}

// nlohmann's parser is the oracle: the streaming check must accept exactly what it accepts.
TEST(JsonStreamValidatorTest, AgreesWithNlohmannOnACorpus) {
  const std::vector<std::string> corpus = {
      "{}",
      "[]",
      "[1, 2, 3]",
      R"({"a": {"b": [true, false, null]}})",
      "  [ ]  ",
      "0",
      "-0",
      "12",
      "-1.5e+10",
      "1.0E-3",
      R"("x")",
      R"("\u00e9\n\t\"\\\/")",
      R"({"k": "v", "k2": [{}, []]})",
      "[1,]",
      "[,1]",
      "{,}",
      R"({"a" 1})",
      R"({"a": 1,})",
      R"({a: 1})",
      "01",
      "1.",
      ".5",
      "-",
      "1e",
      "1e+",
      "tru",
      "truex",
      "nul",
      "[1 2]",
      "[1] [2]",
      R"("abc)",
      R"("bad \x escape")",
      R"("\u12g4")",
      "[",
      "]",
      "{",
      "}",
      R"({"a":})",
      "\"tab\tinside\"",
      "\"new\nline\"",
      "[\"ok\"] ",
      R"({"a": [1, {"b": "c}"}]})",
      "nan",
      "[-]",
      "[1.5e3]",
      R"({"emoji": "🦀", "cjk": "日本"})",
      "[[[[[]]]]]",
      "[[[[[]]]]",
      "true false",
      "",
  };
  for (const std::string& text : corpus) {
    EXPECT_EQ(Validate(text), nlohmann::json::accept(text)) << text;
  }
}

TEST(JsonStreamValidatorTest, ReportsWhatEachCharacterIs) {
  using Event = JsonStreamValidator::Event;
  JsonStreamValidator validator;
  std::string text = R"({"k": "v", "n": 12})";
  std::vector<Event> expected = {
      Event::kOpen,        Event::kKeyStart,    Event::kKeyChar,     Event::kKeyEnd,
      Event::kPunctuation, Event::kWhitespace,  Event::kStringStart, Event::kStringChar,
      Event::kStringEnd,   Event::kPunctuation, Event::kWhitespace,  Event::kKeyStart,
      Event::kKeyChar,     Event::kKeyEnd,      Event::kPunctuation, Event::kWhitespace,
      Event::kScalar,      Event::kScalar,      Event::kClose};
  ASSERT_EQ(text.size(), expected.size());
  for (size_t i = 0; i < text.size(); ++i)
    EXPECT_EQ(validator.Push(text[i]), expected[i]) << "at " << i;
  EXPECT_TRUE(validator.complete());
  EXPECT_EQ(validator.depth(), 0u);
}

TEST(JsonStreamValidatorTest, TracksDepthAndStrings) {
  JsonStreamValidator validator;
  for (char c : std::string(R"([{"a": ")")) validator.Push(c);
  EXPECT_EQ(validator.depth(), 2u);
  EXPECT_TRUE(validator.in_string());
  EXPECT_FALSE(validator.complete());
}

TEST(JsonStreamValidatorTest, ErrorNamesTheProblem) {
  JsonStreamValidator validator;
  for (char c : std::string("[1 2]")) validator.Push(c);
  EXPECT_NE(validator.error().find("expected ',' or a closing bracket, found '2'"),
            std::string::npos)
      << validator.error();
}

// The validator reads bytes: a multi-byte character outside a string is named by its first
// byte's value, never by half a character (the message must stay valid UTF-8).
TEST(JsonStreamValidatorTest, ErrorNamesAByteOfACharacterByItsValue) {
  JsonStreamValidator validator;
  for (char c : std::string("[1, \xc3\xa9]")) validator.Push(c);
  EXPECT_EQ(validator.error(), "expected a JSON value, found byte 195 (not JSON syntax)");
}

}  // namespace
}  // namespace mkserve::chat
