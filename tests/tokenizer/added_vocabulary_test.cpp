#include <gtest/gtest.h>

#include "tokenizer/test_util.h"

namespace mkserve::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using testing::FromJson;
using testing::SmallBpeJson;

nlohmann::json Added(int id, const std::string& content, bool special, bool normalized = false) {
  return {{"id", id},        {"content", content},       {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", normalized}, {"special", special}};
}

TEST(AddedVocabularyTest, SpecialAndPlainAddedTokensAreCutOut) {
  nlohmann::json json = SmallBpeJson();
  json["added_tokens"] = {Added(20, "<s>", true), Added(21, "cab", false)};
  Tokenizer tokenizer = FromJson(json);
  EXPECT_EQ(tokenizer.Encode("ab<s>cabd", false), (Ids{6, 20, 21, 3}));
  EXPECT_TRUE(tokenizer.IsSpecial(20));
  EXPECT_FALSE(tokenizer.IsSpecial(21));
  EXPECT_EQ(tokenizer.TokenToId("<s>"), 20);  // added tokens win over the model's vocab entry
}

TEST(AddedVocabularyTest, LongestMatchWins) {
  nlohmann::json json = SmallBpeJson();
  json["added_tokens"] = {Added(20, "ab", true), Added(21, "abc", true)};
  EXPECT_EQ(FromJson(json).Encode("abcab", false), (Ids{21, 20}));
}

TEST(AddedVocabularyTest, LstripAndRstripAbsorbWhitespace) {
  nlohmann::json json = SmallBpeJson();
  nlohmann::json token = Added(20, "<s>", true);
  token["lstrip"] = true;
  token["rstrip"] = true;
  json["added_tokens"] = {token};
  EXPECT_EQ(FromJson(json).Encode("a  <s>  b", false), (Ids{0, 20, 1}));
  json["added_tokens"] = {Added(20, "<s>", true)};
  EXPECT_EQ(FromJson(json).Encode("a  <s>  b", false), (Ids{0, 5, 5, 20, 5, 5, 1}));
}

TEST(AddedVocabularyTest, SingleWordRejectsMatchesInsideWords) {
  nlohmann::json json = SmallBpeJson();
  nlohmann::json token = Added(20, "cd", false);
  token["single_word"] = true;
  json["added_tokens"] = {token};
  Tokenizer tokenizer = FromJson(json);
  EXPECT_EQ(tokenizer.Encode("a cd", false), (Ids{0, 5, 20}));
  EXPECT_EQ(tokenizer.Encode("acd", false), (Ids{0, 8}));  // inside a word: the model's cd
}

TEST(AddedVocabularyTest, NormalizedTokensMatchNormalizedText) {
  nlohmann::json json = SmallBpeJson();
  json["normalizer"] = {{"type", "Lowercase"}};
  json["added_tokens"] = {Added(20, "DE", false, /*normalized=*/true),
                          Added(21, "CE", false, /*normalized=*/false)};
  Tokenizer tokenizer = FromJson(json);
  EXPECT_EQ(tokenizer.Encode("aDEb", false), (Ids{0, 20, 1}));  // "de" after lowercasing
  EXPECT_EQ(tokenizer.Encode("ce", false), (Ids{2, 4}));        // raw match needs "CE"
  EXPECT_EQ(tokenizer.Encode("CE", false), (Ids{21}));
}

TEST(AddedVocabularyTest, SkipSpecialTokensOnDecode) {
  nlohmann::json json = SmallBpeJson();
  json["added_tokens"] = {Added(20, "<s>", true), Added(21, "<t>", false)};
  json["decoder"] = {{"type", "Fuse"}};
  Tokenizer tokenizer = FromJson(json);
  Ids ids = tokenizer.Encode("<s>ab<t>", false);
  EXPECT_EQ(tokenizer.Decode(ids, false), "<s>ab<t>");
  EXPECT_EQ(tokenizer.Decode(ids, true), "ab<t>");
}

}  // namespace
}  // namespace mkserve::tokenizer
