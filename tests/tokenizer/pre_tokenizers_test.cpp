#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/pre_tokenizer.h"

namespace mkserve::tokenizer {
namespace {

using nlohmann::json;

std::vector<std::string> PreTokenize(const json& spec, const std::string& text) {
  std::vector<PreToken> pieces = {{text, true}};
  MakePreTokenizer(spec)->PreTokenize(pieces);
  std::vector<std::string> out;
  for (const PreToken& piece : pieces) out.push_back(piece.text);
  return out;
}

json SplitDash(const std::string& behavior) {
  return {
      {"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", false}};
}

using Words = std::vector<std::string>;

TEST(PreTokenizersTest, SplitBehaviors) {
  const std::string text = "the-final--countdown";
  EXPECT_EQ(PreTokenize(SplitDash("Removed"), text), (Words{"the", "final", "countdown"}));
  EXPECT_EQ(PreTokenize(SplitDash("Isolated"), text),
            (Words{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(PreTokenize(SplitDash("MergedWithPrevious"), text),
            (Words{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(PreTokenize(SplitDash("MergedWithNext"), text),
            (Words{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(PreTokenize(SplitDash("Contiguous"), text),
            (Words{"the", "-", "final", "--", "countdown"}));
}

TEST(PreTokenizersTest, SplitInvertKeepsMatches) {
  json spec = {{"type", "Split"},
               {"pattern", {{"Regex", "\\w+|[^\\w\\s]+"}}},
               {"behavior", "Removed"},
               {"invert", true}};
  EXPECT_EQ(PreTokenize(spec, "Hey friend!  How?"), (Words{"Hey", "friend", "!", "How", "?"}));
}

TEST(PreTokenizersTest, RegexWithLookAheadAndUnicodeClasses) {
  json spec = {{"type", "Split"},
               {"pattern", {{"Regex", R"( ?\p{L}+|\p{N}{1,3}|\s+(?!\S)|\s+)"}}},
               {"behavior", "Isolated"}};
  EXPECT_EQ(PreTokenize(spec, "caf\xC3\xA9  12345"), (Words{"caf\xC3\xA9", " ", " ", "123", "45"}));
}

TEST(PreTokenizersTest, ByteLevelWithAndWithoutRegex) {
  json with_regex = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  EXPECT_EQ(PreTokenize(with_regex, "Hello world!\n"),
            (Words{"Hello", "\xC4\xA0world", "!", "\xC4\x8A"}));  // Ġworld, Ċ
  json no_regex = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}};
  EXPECT_EQ(PreTokenize(no_regex, "a b"), (Words{"\xC4\xA0"
                                                 "a\xC4\xA0"
                                                 "b"}));
  EXPECT_EQ(PreTokenize(no_regex, "\xC3\xA9"),
            (Words{"\xC4\xA0\xC3\x83\xC2\xA9"}));  // Ġ + é's bytes
}

TEST(PreTokenizersTest, Digits) {
  EXPECT_EQ(PreTokenize({{"type", "Digits"}, {"individual_digits", true}}, "a12b3"),
            (Words{"a", "1", "2", "b", "3"}));
  EXPECT_EQ(PreTokenize({{"type", "Digits"}, {"individual_digits", false}}, "a12b3"),
            (Words{"a", "12", "b", "3"}));
}

TEST(PreTokenizersTest, Metaspace) {
  const std::string m = "\xE2\x96\x81";
  json always = {
      {"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "always"}, {"split", true}};
  EXPECT_EQ(PreTokenize(always, "Hey  you"), (Words{m + "Hey", m, m + "you"}));
  json never = {
      {"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "never"}, {"split", false}};
  EXPECT_EQ(PreTokenize(never, "a b"), (Words{"a" + m + "b"}));
  json first = {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "first"}};
  std::vector<PreToken> pieces = {{"x", true}, {"y", false}};
  MakePreTokenizer(first)->PreTokenize(pieces);
  EXPECT_EQ(pieces[0].text, m + "x");
  EXPECT_EQ(pieces[1].text, "y");
}

TEST(PreTokenizersTest, SequenceAndWhitespace) {
  json sequence = {{"type", "Sequence"},
                   {"pretokenizers", {{{"type", "WhitespaceSplit"}}, {{"type", "Punctuation"}}}}};
  EXPECT_EQ(PreTokenize(sequence, "hi, you\tthere!"), (Words{"hi", ",", "you", "there", "!"}));
}

TEST(PreTokenizersTest, ErrorsNameTheProblem) {
  EXPECT_THROW(MakePreTokenizer({{"type", "BertPreTokenizer"}}), Error);
  EXPECT_THROW(MakePreTokenizer(SplitDash("Sideways")), Error);
  json bad_regex = {
      {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  try {
    MakePreTokenizer(bad_regex);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("(unclosed"), std::string::npos);
  }
}

}  // namespace
}  // namespace mkserve::tokenizer
