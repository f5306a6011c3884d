// TokenizerTextDecoder: the engine's text stream over the tokenizer. A model whose vocabulary is
// larger than its tokenizer's (padded embedding rows, or random weights over a small tokenizer)
// can sample ids the tokenizer does not have: they must decode to no text, never throw (an
// exception here ended the engine thread and the process).
#include "server/tokenizer_text_decoder.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tokenizer/tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::server {
namespace {

TEST(TokenizerTextDecoderTest, IdsBeyondTheTokenizerDecodeToNothing) {
  const auto dir = std::filesystem::temp_directory_path() / "mkserve_text_decoder_test";
  std::filesystem::create_directories(dir);
  tokenizer::WriteTinyTokenizer(dir);
  auto tok = std::make_shared<const tokenizer::Tokenizer>(tokenizer::Tokenizer::Load(dir));
  const std::vector<int32_t> ids = tok->Encode("hello world", /*add_special_tokens=*/false);
  TokenizerTextDecoder decoder(tok);
  auto stream = decoder.NewStream({});
  std::string text;
  for (int32_t id : ids) {
    text += stream->Append(id);
    EXPECT_EQ(stream->Append(tok->vocab_size() + 7), "");
    EXPECT_EQ(stream->Append(-1), "");
  }
  text += stream->Flush();
  EXPECT_EQ(text, "hello world");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mkserve::server
