#include "tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include "common/utf8.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tiny_tokenizer.h"

namespace mkserve::tokenizer {
namespace {

// Feeds every corpus case one id at a time and checks that the deltas are valid UTF-8 and
// concatenate to the full decode.
void CheckCorpus(const Tokenizer& tokenizer, bool skip_special_tokens) {
  for (const std::string& text : testing::CorpusCases()) {
    std::vector<int32_t> ids = tokenizer.Encode(text, true);
    IncrementalDetokenizer detokenizer(tokenizer, skip_special_tokens);
    std::string streamed;
    for (int32_t id : ids) {
      std::string delta = detokenizer.Next(id);
      ASSERT_TRUE(IsValidUtf8(delta)) << "invalid delta in: " << text.substr(0, 60);
      streamed += delta;
    }
    streamed += detokenizer.Flush();
    EXPECT_EQ(streamed, tokenizer.Decode(ids, skip_special_tokens)) << text.substr(0, 60);
  }
}

TEST(IncrementalDetokenizerTest, ByteLevelFamilies) {
  for (const char* family : {"qwen3", "deepseek_v3"}) {
    SCOPED_TRACE(family);
    Tokenizer tokenizer = Tokenizer::Load(testing::NpmTokenizerDir(family));
    CheckCorpus(tokenizer, false);
    CheckCorpus(tokenizer, true);
  }
}

TEST(IncrementalDetokenizerTest, ByteFallbackAndStripFamilies) {
  for (const char* family : {"llama2", "gemma3"}) {
    SCOPED_TRACE(family);
    Tokenizer tokenizer = Tokenizer::Load(testing::NpmTokenizerDir(family));
    CheckCorpus(tokenizer, false);
  }
}

TEST(IncrementalDetokenizerTest, HoldsBackIncompleteCharacters) {
  auto dir = std::filesystem::temp_directory_path() / "mkserve_detok_tiny";
  WriteTinyTokenizer(dir);
  Tokenizer tokenizer = Tokenizer::Load(dir);
  // A rare three-byte character (U+A4D0) that the tiny vocabulary splits into several tokens.
  const std::string character = "\xEA\x93\x90";
  std::vector<int32_t> ids = tokenizer.Encode(character, false);
  ASSERT_GE(ids.size(), 2u);
  IncrementalDetokenizer detokenizer(tokenizer, false);
  for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(detokenizer.Next(ids[i]), "");
  EXPECT_EQ(detokenizer.Next(ids.back()), character);
  // A sequence that never completes is released by Flush as U+FFFD.
  IncrementalDetokenizer truncated(tokenizer, false);
  EXPECT_EQ(truncated.Next(ids[0]), "");
  EXPECT_EQ(truncated.Flush(), "\xEF\xBF\xBD");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mkserve::tokenizer
