// TokenizerTextDecoder: the engine's text stream over the tokenizer. A model whose vocabulary is
// larger than its tokenizer's (padded embedding rows, or random weights over a small tokenizer)
// can sample ids the tokenizer does not have: they must decode to no text, never throw (an
// exception here ended the engine thread and the process). skip_special_tokens hides special
// tokens but, for chat, the markers the output parser reads.
#include "server/tokenizer_text_decoder.h"

#include <gtest/gtest.h>

#include "chat/command4_parser.h"
#include "server/tiny_tokenizer_for_test.h"

namespace mkserve::server {
namespace {

std::string DecodeStream(const TextDecoder& decoder, std::span<const int32_t> ids,
                         std::shared_ptr<const HiddenTokens> hidden) {
  auto stream = decoder.NewStream({}, std::move(hidden));
  std::string text;
  for (int32_t id : ids) text += stream->Append(id).text;
  return text + stream->Flush();
}

TEST(TokenizerTextDecoderTest, IdsBeyondTheTokenizerDecodeToNothing) {
  auto tok = TinyTokenizerForTest();
  const std::vector<int32_t> ids = tok->Encode("hello world", /*add_special_tokens=*/false);
  TokenizerTextDecoder decoder(tok, chat::Command4Markers());
  auto stream = decoder.NewStream({}, nullptr);
  std::string text;
  for (int32_t id : ids) {
    text += stream->Append(id).text;
    EXPECT_EQ(stream->Append(tok->vocab_size() + 7).text, "");
    EXPECT_EQ(stream->Append(-1).text, "");
  }
  text += stream->Flush();
  EXPECT_EQ(text, "hello world");
}

TEST(TokenizerTextDecoderTest, HiddenSpecialTokensLeaveTheParsersMarkers) {
  auto tok = TinyTokenizerForTest();
  std::vector<int32_t> ids = {tokenizer::kTinyEndThinkingId};
  for (int32_t id : tok->Encode("hello", false)) ids.push_back(id);
  ids.push_back(tokenizer::kTinyNewFileId);
  ids.push_back(tokenizer::kTinyStartTextId);  // not special in North's tokenizer
  for (int32_t id : tok->Encode(" wörld", false)) ids.push_back(id);
  ids.push_back(tokenizer::kTinyPadId);
  TokenizerTextDecoder decoder(tok, chat::Command4Markers());

  EXPECT_EQ(DecodeStream(decoder, ids, nullptr), tok->Decode(ids, false));
  auto all = HiddenSpecialTokens(*tok, {});
  EXPECT_EQ(DecodeStream(decoder, ids, all), tok->Decode(ids, true));
  EXPECT_EQ(DecodeStream(decoder, ids, all), "hello<|START_TEXT|> wörld");
  auto chat = HiddenSpecialTokens(*tok, chat::Command4Markers());
  EXPECT_EQ(DecodeStream(decoder, ids, chat), "<|END_THINKING|>hello<|START_TEXT|> wörld");
  int hidden = 0;
  for (int32_t id = 0; id < tok->vocab_size(); ++id) hidden += (*all)[id];
  EXPECT_EQ(hidden, 16 + 3);  // kTinySpecialTokens marked special, and the 3 reserved ones
}

// Special tokens and chat's markers (special or not) reach the stop checker as whole tokens, after
// whatever held-back text they release; ordinary tokens do not.
TEST(TokenizerTextDecoderTest, SpecialTokensAndMarkersAreWholeTokens) {
  auto tok = TinyTokenizerForTest();
  TokenizerTextDecoder decoder(tok, chat::Command4Markers());
  auto stream = decoder.NewStream({}, nullptr);
  const std::string euro = "\xE2\x82\xAC";  // three byte tokens
  std::vector<int32_t> bytes = tok->Encode(euro, false);
  ASSERT_GT(bytes.size(), 1u);
  bytes.pop_back();
  for (int32_t id : bytes) EXPECT_EQ(stream->Append(id).text, "");  // held back
  TokenText marker = stream->Append(tokenizer::kTinyStartTextId);   // not special: a marker
  EXPECT_EQ(marker.text, "\xEF\xBF\xBD<|START_TEXT|>");
  EXPECT_EQ(marker.whole_bytes, std::string("<|START_TEXT|>").size());
  TokenText special = stream->Append(tokenizer::kTinyNewFileId);  // special, not a marker
  EXPECT_EQ(special.text, "<|NEW_FILE|>");
  EXPECT_EQ(special.whole_bytes, special.text.size());
  for (int32_t id : tok->Encode("hello", false)) EXPECT_EQ(stream->Append(id).whole_bytes, 0u);

  TokenizerTextDecoder plain(tok, {});  // no markers named: only the special tokens are whole
  auto other = plain.NewStream({}, nullptr);
  EXPECT_EQ(other->Append(tokenizer::kTinyStartTextId).whole_bytes, 0u);
  EXPECT_EQ(other->Append(tokenizer::kTinyEndThinkingId).whole_bytes,
            std::string("<|END_THINKING|>").size());
}

}  // namespace
}  // namespace mkserve::server
