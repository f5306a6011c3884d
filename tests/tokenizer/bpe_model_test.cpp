#include <gtest/gtest.h>

#include "common/error.h"
#include "tokenizer/test_util.h"

namespace mkserve::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using testing::FromJson;
using testing::SmallBpeJson;

TEST(BpeModelTest, LowestRankMergesFirst) {
  Tokenizer tokenizer = FromJson(SmallBpeJson());
  EXPECT_EQ(tokenizer.Encode("abcd", false), (Ids{7, 3}));  // a+b, ab+c; c+d never applies
  EXPECT_EQ(tokenizer.Encode("bcd", false), (Ids{1, 8}));
  EXPECT_EQ(tokenizer.Encode("ababab", false), (Ids{6, 6, 6}));
  EXPECT_EQ(tokenizer.Encode("", false), Ids{});
}

TEST(BpeModelTest, UnknownCharactersBecomeUnk) {
  Tokenizer plain = FromJson(SmallBpeJson());
  EXPECT_EQ(plain.Encode("axyb", false), (Ids{0, 9, 9, 1}));
  nlohmann::json fused = SmallBpeJson();
  fused["model"]["fuse_unk"] = true;
  EXPECT_EQ(FromJson(fused).Encode("axyb", false), (Ids{0, 9, 1}));
  nlohmann::json no_unk = SmallBpeJson();
  no_unk["model"]["unk_token"] = nullptr;
  // Dropped, as HF does; a and b then become neighbours and merge.
  EXPECT_EQ(FromJson(no_unk).Encode("axyb", false), (Ids{6}));
}

TEST(BpeModelTest, ByteFallback) {
  nlohmann::json json = SmallBpeJson();
  json["model"]["byte_fallback"] = true;
  json["model"]["vocab"]["<0xC3>"] = 11;
  json["model"]["vocab"]["<0xA9>"] = 12;
  Tokenizer tokenizer = FromJson(json);
  EXPECT_EQ(tokenizer.Encode("a\xC3\xA9", false), (Ids{0, 11, 12}));
  EXPECT_EQ(tokenizer.Encode("\xC3\xA8", false), (Ids{9}));  // <0xA8> missing: unk
}

TEST(BpeModelTest, IgnoreMergesTakesWholeWordsFromVocab) {
  nlohmann::json json = SmallBpeJson();
  json["model"]["vocab"]["abcd"] = 11;
  EXPECT_EQ(FromJson(json).Encode("abcd", false), (Ids{7, 3}));
  json["model"]["ignore_merges"] = true;
  EXPECT_EQ(FromJson(json).Encode("abcd", false), (Ids{11}));
}

TEST(BpeModelTest, MergesAsPairsAndContinuingPrefix) {
  nlohmann::json json = SmallBpeJson();
  json["model"]["merges"] = nlohmann::json::parse(R"([["a", "b"], ["ab", "c"]])");
  EXPECT_EQ(FromJson(json).Encode("abc", false), (Ids{7}));
  nlohmann::json prefixed = nlohmann::json::parse(R"({"type": "BPE",
      "vocab": {"a": 0, "##b": 1, "a##b": 2, "ab": 3, "##a": 4},
      "merges": ["a ##b"], "continuing_subword_prefix": "##"})");
  nlohmann::json outer = SmallBpeJson();
  outer["model"] = prefixed;
  EXPECT_EQ(FromJson(outer).Encode("aba", false), (Ids{3, 4}));  // a ##b -> ab (prefix dropped)
}

TEST(BpeModelTest, RepeatedWordsHitTheCacheWithSameResult) {
  Tokenizer tokenizer = FromJson(SmallBpeJson());
  Ids first = tokenizer.Encode("abcab", false);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tokenizer.Encode("abcab", false), first);
  EXPECT_EQ(first, (Ids{7, 6}));
}

TEST(BpeModelTest, MalformedModelsAreErrors) {
  nlohmann::json bad_merge = SmallBpeJson();
  bad_merge["model"]["merges"] = {"a z"};
  EXPECT_THROW(FromJson(bad_merge), Error);
  nlohmann::json missing_result = SmallBpeJson();
  missing_result["model"]["merges"] = {"b a"};
  EXPECT_THROW(FromJson(missing_result), Error);
  nlohmann::json wordpiece = SmallBpeJson();
  wordpiece["model"]["type"] = "WordPiece";
  try {
    FromJson(wordpiece);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("WordPiece"), std::string::npos);
  }
}

}  // namespace
}  // namespace mkserve::tokenizer
