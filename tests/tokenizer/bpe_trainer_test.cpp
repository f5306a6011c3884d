#include "tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::tokenizer {
namespace {

constexpr std::string_view kWords = R"(\S+|\s+)";

TEST(BpeTrainerTest, MergesMostFrequentPairFirst) {
  TrainedBpe bpe = TrainByteLevelBpe("low low low lower lowest newer", 3, kWords);
  ASSERT_EQ(bpe.merges.size(), 3u);
  // "lo" and "ow" both occur 5 times; ties go to the smaller pair, so l+o comes first.
  EXPECT_EQ(bpe.merges[0], (std::pair<std::string, std::string>{"l", "o"}));
  EXPECT_EQ(bpe.merges[1], (std::pair<std::string, std::string>{"lo", "w"}));
  EXPECT_EQ(bpe.tokens.size(), 256u + 3u);
  EXPECT_EQ(bpe.tokens[256], "lo");
}

TEST(BpeTrainerTest, SameInputSameMerges) {
  std::string text = std::string(TinyTrainingText().substr(0, 6000));
  TrainedBpe first = TrainByteLevelBpe(text, 200, kTinySplitRegex);
  TrainedBpe second = TrainByteLevelBpe(text, 200, kTinySplitRegex);
  EXPECT_EQ(first.merges, second.merges);
  EXPECT_EQ(first.tokens, second.tokens);
}

TEST(BpeTrainerTest, TooLittleTextIsAnError) {
  EXPECT_THROW(TrainByteLevelBpe("ab", 5, kWords), Error);
}

class TinyTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test: ctest runs the tests of this suite in parallel processes.
    dir_ = std::filesystem::temp_directory_path() /
           (std::string("mkserve_tiny_tokenizer_test_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    WriteTinyTokenizer(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(TinyTokenizerTest, FixedIdsAndConfig) {
  Tokenizer tokenizer = Tokenizer::Load(dir_);
  EXPECT_EQ(tokenizer.vocab_size(), kTinyVocabSize);
  EXPECT_EQ(tokenizer.bos_id(), kTinyBosId);
  EXPECT_EQ(tokenizer.eos_id(), kTinyEosId);
  EXPECT_EQ(tokenizer.TokenToId("<PAD>"), kTinyPadId);
  EXPECT_EQ(tokenizer.TokenToId("<UNK>"), kTinyUnkId);
  EXPECT_EQ(tokenizer.TokenToId("!"), kTinyFirstByteId + '!');  // '!' is byte-level index 33
  EXPECT_EQ(tokenizer.TokenToId("<|NEW_FILE|>"), kTinyNewFileId);
  EXPECT_EQ(tokenizer.TokenToId("<|RESERVED_2|>"), kTinyVocabSize - 1);
  EXPECT_FALSE(tokenizer.IsSpecial(kTinyStartTextId));
  EXPECT_TRUE(tokenizer.IsSpecial(kTinyEndOfTurnId));
  EXPECT_FALSE(tokenizer.chat_template().has_value());
  std::ifstream in(dir_ / "tokenizer.json");
  nlohmann::json json = nlohmann::json::parse(in);
  EXPECT_EQ(json["model"]["merges"].size(), static_cast<size_t>(kTinyNumMerges));
  EXPECT_EQ(json["model"]["vocab"].size(), static_cast<size_t>(kTinyVocabSize));
}

// Each token's bytes join into the text, also where a character spans tokens (whose Decode
// alone gives U+FFFD); a special token gives its content, an id outside the vocabulary throws.
TEST_F(TinyTokenizerTest, TokenBytesJoinIntoTheText) {
  Tokenizer tokenizer = Tokenizer::Load(dir_);
  const std::string text = "Grüße, 你好 😀 — naïve ∑x²";
  const std::vector<int32_t> ids = tokenizer.Encode(text, false);
  std::string joined;
  int partial = 0;
  for (int32_t id : ids) {
    const std::string bytes = tokenizer.TokenBytes(id);
    const std::string alone = tokenizer.Decode(std::span<const int32_t>(&id, 1), false);
    partial += bytes != alone ? 1 : 0;
    joined += bytes;
  }
  EXPECT_EQ(joined, text);
  EXPECT_GT(partial, 0) << "no token of the text held part of a character: the test proves less";
  EXPECT_EQ(tokenizer.TokenBytes(kTinyEndOfTurnId), "<|END_OF_TURN_TOKEN|>");
  EXPECT_THROW(tokenizer.TokenBytes(kTinyVocabSize), Error);
}

TEST_F(TinyTokenizerTest, EncodesChatMarkersAndRoundTrips) {
  Tokenizer tokenizer = Tokenizer::Load(dir_);
  std::string text =
      "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello, world! 你好 😀<|END_OF_TURN_TOKEN|>";
  std::vector<int32_t> ids = tokenizer.Encode(text, true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], kTinyBosId);
  EXPECT_EQ(ids[1], kTinyStartOfTurnId);
  EXPECT_EQ(ids[2], kTinyUserId);
  EXPECT_EQ(ids.back(), kTinyEndOfTurnId);
  EXPECT_EQ(tokenizer.Decode(ids, false), "<BOS_TOKEN>" + text);
  std::string training(TinyTrainingText());
  std::vector<int32_t> training_ids = tokenizer.Encode(training, false);
  EXPECT_EQ(tokenizer.Decode(training_ids, false), training);
  // Trained merges compress the training text well below one token per byte.
  EXPECT_LT(training_ids.size(), training.size() / 2);
}

TEST_F(TinyTokenizerTest, WritingTwiceGivesIdenticalFiles) {
  auto read = [](const std::filesystem::path& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::string first = read(dir_ / "tokenizer.json");
  WriteTinyTokenizer(dir_);
  EXPECT_EQ(read(dir_ / "tokenizer.json"), first);
}

}  // namespace
}  // namespace mkserve::tokenizer
