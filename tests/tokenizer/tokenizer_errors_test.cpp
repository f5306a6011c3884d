// Malformed or unsupported tokenizer.json and bad inputs give mkserve::Error naming the problem.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "tokenizer/test_util.h"

namespace mkserve::tokenizer {
namespace {

using testing::FromJson;
using testing::SmallBpeJson;

// Asserts that loading `json_text` fails with a message containing `needle`.
void ExpectLoadError(const std::string& json_text, const std::string& needle) {
  try {
    Tokenizer::FromJsonText(json_text);
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

TEST(TokenizerErrorsTest, MalformedJson) {
  ExpectLoadError("{\"model\": ", "not valid JSON");
  ExpectLoadError("[1, 2]", "must be a JSON object");
  ExpectLoadError("{}", "no \"model\"");
}

TEST(TokenizerErrorsTest, UnsupportedComponentsAreNamed) {
  nlohmann::json json = SmallBpeJson();
  json["model"]["type"] = "Unigram";
  ExpectLoadError(json.dump(), "Unigram");
  json = SmallBpeJson();
  json["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  ExpectLoadError(json.dump(), "UnicodeScripts");
  json = SmallBpeJson();
  json["post_processor"] = {{"type", "Fancy"}};
  ExpectLoadError(json.dump(), "Fancy");
  json = SmallBpeJson();
  json["decoder"] = {{"type", "CTC"}};
  ExpectLoadError(json.dump(), "CTC");
}

TEST(TokenizerErrorsTest, WrongFieldTypes) {
  nlohmann::json json = SmallBpeJson();
  json["model"]["vocab"]["a"] = "zero";
  ExpectLoadError(json.dump(), "vocab entry 'a'");
  json = SmallBpeJson();
  json["added_tokens"] = nlohmann::json::parse(R"([{"content": "<x>"}])");
  ExpectLoadError(json.dump(), "\"id\"");
  // An id past any vocabulary (or negative, or past int32) would size tables by it, in the
  // vocabulary, the added tokens and the post-processor alike.
  for (const char* text : {"5000000000", "2147483647", "16777216", "-1", "1.5", "\"7\""}) {
    const nlohmann::json id = nlohmann::json::parse(text);
    json = SmallBpeJson();
    json["added_tokens"] = {{{"content", "<x>"}, {"id", id}}};
    ExpectLoadError(json.dump(), "is not a token id (0..2^24)");
    json = SmallBpeJson();
    json["model"]["vocab"]["a"] = id;
    ExpectLoadError(json.dump(), "vocab entry 'a': " + id.dump() + " is not a token id");
    json = SmallBpeJson();
    json["post_processor"] = {
        {"type", "BertProcessing"}, {"cls", {"<cls>", id}}, {"sep", {"<sep>", 1}}};
    ExpectLoadError(json.dump(), "field \"cls\": " + id.dump() + " is not a token id");
    json = SmallBpeJson();
    json["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", nlohmann::json::parse(R"([{"SpecialToken": {"id": "<cls>"}}])")},
        {"special_tokens", {{"<cls>", {{"id", "<cls>"}, {"ids", {id}}}}}}};
    ExpectLoadError(json.dump(), "special token '<cls>': " + id.dump() + " is not a token id");
  }
  // A count that is a float or negative would convert to size_t as another number.
  for (const char* stop : {"1.1e104", "-1", "2.5", "\"3\""}) {
    json = SmallBpeJson();
    json["decoder"] = {
        {"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", nlohmann::json::parse(stop)}};
    ExpectLoadError(json.dump(), "Strip decoder: field \"stop\" must be a non-negative integer");
  }
  // A valid id that is not in the vocabulary: encodings would carry it to the model.
  json = SmallBpeJson();
  json["post_processor"] = {
      {"type", "BertProcessing"}, {"cls", {"<cls>", 5000}}, {"sep", {"<sep>", 1}}};
  ExpectLoadError(json.dump(), "post_processor adds token id 5000, outside the vocabulary of");
  json = SmallBpeJson();
  json["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Glob", "*"}}}, {"content", ""}};
  ExpectLoadError(json.dump(), "pattern");
  json = SmallBpeJson();
  json["post_processor"] = nlohmann::json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<cls>"}}, {"Sequence": {"id": "A"}}],
      "special_tokens": {}})");
  ExpectLoadError(json.dump(), "<cls>");
}

TEST(TokenizerErrorsTest, MissingFilesAreNamed) {
  try {
    Tokenizer::Load("/nonexistent/dir/for/mkserve");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/dir/for/mkserve"), std::string::npos);
  }
}

TEST(TokenizerErrorsTest, BadInputs) {
  Tokenizer tokenizer = FromJson(SmallBpeJson());
  EXPECT_THROW(tokenizer.Encode("ab\xFF", false), Error);
  std::vector<int32_t> out_of_range = {0, 999};
  EXPECT_THROW(tokenizer.Decode(out_of_range, false), Error);
  std::vector<int32_t> negative = {-1};
  EXPECT_THROW(tokenizer.Decode(negative, false), Error);
}

}  // namespace
}  // namespace mkserve::tokenizer
