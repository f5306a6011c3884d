#include "server/json_fields.h"

#include <gtest/gtest.h>

#include "server/api_error_matcher.h"

namespace mkserve::server {
namespace {

TEST(JsonFieldsTest, MalformedBodyIs400WithParserDetail) {
  ApiError error = ExpectApiError([] { ParseJsonBody("{\"a\": 1,"); });
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidRequest);
  EXPECT_NE(std::string(error.what()).find("malformed JSON"), std::string::npos);
}

// JSON allows a lone surrogate escape (a JS client slicing a string inside an emoji writes one):
// it reads as U+FFFD; pairs, escaped backslashes and other escapes stay as they are.
TEST(JsonFieldsTest, LoneSurrogateEscapesReadAsReplacementCharacters) {
  const std::string replacement = "\xef\xbf\xbd";
  EXPECT_EQ(ParseJsonBody(R"({"s": "a\ud83d"})")["s"], "a" + replacement);
  EXPECT_EQ(ParseJsonBody(R"({"s": "\ude00b", "t": "\ud83d\ude00"})")["s"], replacement + "b");
  EXPECT_EQ(ParseJsonBody(R"({"s": "\ud83d\ude00", "t": "\ud800"})")["s"], "\xf0\x9f\x98\x80");
  EXPECT_EQ(ParseJsonBody(R"({"s": "\\ud800\"\ud800", "u": 1})")["s"], "\\ud800\"" + replacement);
  EXPECT_EQ(ParseJsonBody(R"({"s": "\ud83d\u0041"})")["s"], replacement + "A");
  EXPECT_EQ(ParseJsonBody(R"({"s": "x\ud83d)"
                          "\"}")["s"],
            "x" + replacement);
  // Still malformed: the repair touches surrogates only.
  EXPECT_EQ(ExpectApiError([] { ParseJsonBody(R"({"s": "\ud800", )"); }).kind(),
            ErrorKind::kInvalidRequest);
  EXPECT_EQ(ExpectApiError([] { ParseJsonBody(R"({"s": "\ud8")"); }).kind(),
            ErrorKind::kInvalidRequest);
}

// A number no double holds is malformed input too, not a server error.
TEST(JsonFieldsTest, NumberOverflowIs400) {
  ApiError error = ExpectApiError([] { ParseJsonBody("{\"max_tokens\": 1e400}"); });
  EXPECT_EQ(error.kind(), ErrorKind::kInvalidRequest);
  EXPECT_NE(std::string(error.what()).find("malformed JSON"), std::string::npos);
  EXPECT_NE(std::string(error.what()).find("1e400"), std::string::npos);
}

TEST(JsonFieldsTest, NonObjectBodyIsRejected) {
  ApiError error = ExpectApiError([] { ParseJsonBody("[1, 2]"); });
  EXPECT_NE(std::string(error.what()).find("an array"), std::string::npos);
}

TEST(JsonFieldsTest, NullReadsAsAbsent) {
  Json object = {{"a", nullptr}};
  JsonFields fields(object, "");
  EXPECT_FALSE(fields.Number("a", 0, 1).has_value());
  EXPECT_FALSE(fields.Number("missing", 0, 1).has_value());
}

TEST(JsonFieldsTest, WrongTypeNamesTheNestedParam) {
  Json object = {{"flag", "yes"}};
  JsonFields fields(object, "stream_options");
  ApiError error = ExpectApiError([&] { fields.Bool("flag"); });
  EXPECT_EQ(error.param(), "stream_options.flag");
  EXPECT_NE(std::string(error.what()).find("expected a boolean, got a string"), std::string::npos);
}

TEST(JsonFieldsTest, RangeChecksBothEnds) {
  Json object = {{"low", -0.5}, {"high", 2.5}, {"ok", 1.5}};
  JsonFields fields(object, "");
  EXPECT_EQ(ExpectApiError([&] { fields.Number("low", 0, 2); }).param(), "low");
  EXPECT_EQ(ExpectApiError([&] { fields.Number("high", 0, 2); }).param(), "high");
  EXPECT_DOUBLE_EQ(*fields.Number("ok", 0, 2), 1.5);
}

// OpenAI's metadata rule, one reader for chat, responses and conversations.
TEST(JsonFieldsTest, MetadataIsAtMostSixteenShortStrings) {
  Json body = {{"metadata", {{"k", "v"}}}};
  EXPECT_EQ(JsonFields(body, "").Metadata("metadata"), body["metadata"]);
  EXPECT_EQ(JsonFields(Json::object(), "").Metadata("metadata"), Json::object());
  body["metadata"] = nullptr;
  EXPECT_EQ(JsonFields(body, "").Metadata("metadata"), Json::object());
  auto culprit = [](const Json& metadata) {
    Json request = {{"metadata", metadata}};
    return ExpectApiError([&] { JsonFields(request, "").Metadata("metadata"); }).param();
  };
  Json many = Json::object();
  for (int i = 0; i < 16; ++i) many["k" + std::to_string(i)] = "v";
  EXPECT_EQ(JsonFields(Json{{"metadata", many}}, "").Metadata("metadata").size(), 16u);
  many["k16"] = "v";
  EXPECT_EQ(culprit(many), "metadata");
  EXPECT_EQ(culprit({{std::string(65, 'k'), "v"}}), "metadata");
  EXPECT_EQ(culprit({{"n", 3}}), "metadata.n");
  EXPECT_EQ(culprit({{"s", std::string(513, 'v')}}), "metadata.s");
  EXPECT_EQ(culprit("text"), "metadata");
}

TEST(JsonFieldsTest, IntegerAcceptsWholeDoublesOnly) {
  Json object = {{"whole", 3.0}, {"fraction", 3.5}, {"big", 1e30}};
  JsonFields fields(object, "");
  EXPECT_EQ(*fields.Integer("whole", 0, 10), 3);
  EXPECT_NE(std::string(ExpectApiError([&] { fields.Integer("fraction", 0, 10); }).what())
                .find("expected an integer"),
            std::string::npos);
  EXPECT_EQ(ExpectApiError([&] { fields.Integer("big", 0, 10); }).param(), "big");
  // Integer bounds are written in full, whatever their size.
  EXPECT_NE(std::string(ExpectApiError([&] { fields.Integer("big", 0, INT32_MAX); }).what())
                .find("between 0 and 2147483647, got 1e+30"),
            std::string::npos);
}

}  // namespace
}  // namespace mkserve::server
