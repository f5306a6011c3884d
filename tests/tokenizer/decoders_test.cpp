#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/decoder.h"

namespace mkserve::tokenizer {
namespace {

using nlohmann::json;
using Tokens = std::vector<std::string>;

std::string Decode(const json& spec, Tokens tokens) {
  MakeDecoder(spec)->DecodeChain(tokens);
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

const std::string kMeta = "\xE2\x96\x81";  // ▁

TEST(DecodersTest, ByteLevelMapsBackToBytes) {
  json spec = {{"type", "ByteLevel"}};
  EXPECT_EQ(Decode(spec, {"Hello", "\xC4\xA0world", "\xC4\x8A"}), "Hello world\n");
  EXPECT_EQ(Decode(spec, {"\xC3\xA4\xC2\xB8", "\xC5\x83"}), "\xE4\xB8\xAD");  // 中 over 2 tokens
  EXPECT_EQ(Decode(spec, {"\xC3\xA4\xC2\xB8"}), "\xEF\xBF\xBD");              // incomplete
  EXPECT_EQ(Decode(spec, {"<\xEF\xBD\x9C>"}), "<\xEF\xBD\x9C>");              // not byte-level: raw
}

TEST(DecodersTest, ByteFallbackFuseStripReplace) {
  json spec = {{"type", "Sequence"},
               {"decoders",
                {{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                 {{"type", "ByteFallback"}},
                 {{"type", "Fuse"}},
                 {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(Decode(spec, {kMeta + "Hi", "<0xE4>", "<0xB8>", "<0xAD>", kMeta + "x"}),
            "Hi\xE4\xB8\xAD x");
  // Invalid byte runs give one U+FFFD per byte.
  EXPECT_EQ(Decode(spec, {"a", "<0xE4>", "<0xB8>", "b"}),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b");
}

// A token's own bytes, before the UTF-8 check: a byte-level or byte-fallback token that is part
// of a character gives its bytes, not U+FFFD; decoders that work on text give none.
TEST(DecodersTest, TokenBytesBeforeTheUtf8Check) {
  auto byte_level = MakeDecoder({{"type", "ByteLevel"}});
  EXPECT_EQ(byte_level->TokenBytes("\xC3\xA4\xC2\xB8"), "\xE4\xB8");  // 2 of 中's 3 bytes
  EXPECT_EQ(byte_level->TokenBytes("\xC4\xA0world"), " world");
  EXPECT_EQ(byte_level->TokenBytes("<\xEF\xBD\x9C>"), std::nullopt);  // not byte-level
  json llama = {{"type", "Sequence"},
                {"decoders",
                 {{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                  {{"type", "ByteFallback"}},
                  {{"type", "Fuse"}}}}};
  auto sequence = MakeDecoder(llama);
  EXPECT_EQ(sequence->TokenBytes("<0xE4>"), "\xE4");
  EXPECT_EQ(sequence->TokenBytes(kMeta + "Hi"), std::nullopt);  // text: Decode serves it
  EXPECT_EQ(MakeDecoder({{"type", "Fuse"}})->TokenBytes("<0xE4>"), std::nullopt);
}

TEST(DecodersTest, StripCountsFromBothEnds) {
  json spec = {{"type", "Strip"}, {"content", "x"}, {"start", 2}, {"stop", 1}};
  EXPECT_EQ(Decode(spec, {"xxxaxx"}), "xax");
}

TEST(DecodersTest, MetaspaceDropsMarkersOfFirstToken) {
  json spec = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "always"}};
  EXPECT_EQ(Decode(spec, {kMeta + "Hey", kMeta + "you"}), "Hey you");
  json never = {{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "never"}};
  EXPECT_EQ(Decode(never, {kMeta + "Hey"}), " Hey");
}

TEST(DecodersTest, UnsupportedDecoderIsNamed) {
  try {
    MakeDecoder({{"type", "WordPiece"}});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("WordPiece"), std::string::npos);
  }
  EXPECT_THROW(MakeDecoder({{"type", "Strip"}, {"content", "ab"}}), Error);
}

}  // namespace
}  // namespace mkserve::tokenizer
