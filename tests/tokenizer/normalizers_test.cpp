#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/normalizer.h"

namespace mkserve::tokenizer {
namespace {

using nlohmann::json;

std::string Normalize(const json& spec, std::string_view text) {
  return MakeNormalizer(spec)->Normalize(text);
}

TEST(NormalizersTest, UnicodeForms) {
  const std::string decomposed = "e\xCC\x81";  // e + combining acute
  const std::string composed = "\xC3\xA9";     // é
  EXPECT_EQ(Normalize({{"type", "NFC"}}, decomposed), composed);
  EXPECT_EQ(Normalize({{"type", "NFD"}}, composed), decomposed);
  EXPECT_EQ(Normalize({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");  // ligature fi
  EXPECT_EQ(Normalize({{"type", "NFC"}}, "\xEF\xAC\x81"), "\xEF\xAC\x81");
  EXPECT_EQ(Normalize({{"type", "NFKD"}}, "\xC2\xB2"), "2");  // superscript two
}

TEST(NormalizersTest, Lowercase) {
  EXPECT_EQ(Normalize({{"type", "Lowercase"}}, "HeLLo \xC3\x84"), "hello \xC3\xA4");
  EXPECT_EQ(Normalize({{"type", "Lowercase"}}, "\xC4\xB0"), "i\xCC\x87");  // İ -> i + dot
}

TEST(NormalizersTest, ReplacePrependStripSequence) {
  json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}};
  EXPECT_EQ(Normalize(replace, "a b  c"),
            "a\xE2\x96\x81"
            "b\xE2\x96\x81\xE2\x96\x81"
            "c");
  json regex = {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}};
  EXPECT_EQ(Normalize(regex, "a \t\n b"), "a b");
  json prepend = {{"type", "Prepend"}, {"prepend", "_"}};
  EXPECT_EQ(Normalize(prepend, "x"), "_x");
  EXPECT_EQ(Normalize(prepend, ""), "");  // nothing is prepended to empty text
  json strip = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}};
  EXPECT_EQ(Normalize(strip, " \t x "), "x ");
  json sequence = {{"type", "Sequence"}, {"normalizers", {prepend, replace}}};
  EXPECT_EQ(Normalize(sequence, "a b"),
            "_a\xE2\x96\x81"
            "b");
}

TEST(NormalizersTest, NullIsNoNormalizer) { EXPECT_EQ(MakeNormalizer(json()), nullptr); }

TEST(NormalizersTest, UnsupportedTypeIsNamed) {
  try {
    MakeNormalizer({{"type", "BertNormalizer"}});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("BertNormalizer"), std::string::npos);
  }
}

}  // namespace
}  // namespace mkserve::tokenizer
