#include "common/utf8.h"
#include "tokenizer/unicode_properties.h"

#include <gtest/gtest.h>

namespace mkserve::tokenizer {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string Lossy(std::string_view bytes) {
  std::string out;
  AppendUtf8Lossy(out, bytes);
  return out;
}

TEST(Utf8Test, ValidPrefixStopsAtFirstBadByte) {
  EXPECT_EQ(ValidUtf8PrefixLength("abc"), 3u);
  EXPECT_EQ(ValidUtf8PrefixLength("ab\xE4\xB8"), 2u);        // truncated 3-byte sequence
  EXPECT_EQ(ValidUtf8PrefixLength("\xC0\x80"), 0u);          // overlong NUL
  EXPECT_EQ(ValidUtf8PrefixLength("x\xED\xA0\x80"), 1u);     // surrogate
  EXPECT_EQ(ValidUtf8PrefixLength("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_TRUE(IsValidUtf8("\xE4\xB8\xAD\xF0\x9F\x98\x80"));
}

TEST(Utf8Test, LossyReplacesEachMaximalInvalidSubpart) {
  EXPECT_EQ(Lossy("a\xE4\xB8"
                  "b"),
            "a" + kFffd + "b");                 // one U+FFFD for a truncated sequence
  EXPECT_EQ(Lossy("\xFF\xFE"), kFffd + kFffd);  // one per invalid byte
  EXPECT_EQ(Lossy("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(Lossy("\xE0\x80\x80"), kFffd + kFffd + kFffd);  // E0 80 is not a valid prefix
  EXPECT_EQ(Lossy("ok \xE4\xB8\xAD"), "ok \xE4\xB8\xAD");
}

TEST(Utf8Test, CodePointRoundTrip) {
  for (char32_t c : {U'a', U'\u00e9', U'\u4e2d', U'\U0001F600', U'\U0010FFFF'}) {
    std::string text;
    AppendUtf8(text, c);
    size_t pos = 0;
    EXPECT_EQ(NextCodePoint(text, pos), c);
    EXPECT_EQ(pos, text.size());
  }
}

TEST(Utf8Test, UnicodeProperties) {
  EXPECT_TRUE(IsWhitespace(U'\u3000'));
  EXPECT_TRUE(IsWhitespace(U'\u0085'));
  EXPECT_FALSE(IsWhitespace(U'\u200b'));  // zero width space is not White_Space
  EXPECT_TRUE(IsNumeric(U'\u0663'));      // Arabic-Indic three
  EXPECT_TRUE(IsNumeric(U'\u2153'));      // vulgar fraction one third (No)
  EXPECT_TRUE(IsWordChar(U'_'));
  EXPECT_TRUE(IsWordChar(U'\u0301'));  // combining mark
  EXPECT_FALSE(IsWordChar(U'-'));
  EXPECT_TRUE(IsPunctuation(U'$'));  // ASCII symbols count, as in Rust's is_ascii_punctuation
  EXPECT_TRUE(IsPunctuation(U'\u3002'));
  EXPECT_FALSE(IsPunctuation(U'a'));
}

}  // namespace
}  // namespace mkserve::tokenizer
